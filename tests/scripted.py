"""A rephraser whose replies are given, shared by the paraphrase tests: for the file, retry and quality logic, where
a real model's text would only make the tests slow and their expectations loose."""

from posixlab.rephrase import Rephraser


class ScriptedRephraser(Rephraser):
    name = "scripted"
    identity = {"backend": "scripted"}

    def __init__(self, replies):
        self.replies, self.calls, self.sent = list(replies), 0, None

    def chat(self, messages, *, seed, n, max_tokens):
        self.calls += 1
        self.sent = messages[-1]["content"]  # the request the rephraser was given
        return [self.replies.pop(0) for _ in range(n)]
