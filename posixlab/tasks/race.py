"""A prompt race in a POSIX run (``task.race_sets``, with ``task.psi=false`` on a template or format pool): the sets
in rounds, and which prompts each round asks. The decisions are ``posixlab.metrics.race.race_prompts`` on the
greedy answers of the rounds already recorded (``results.race_row``); the summary replays the same function on every
record (``results.race_summary``), so what a run asked and what its summary reports are one computation."""

from __future__ import annotations

from posixlab.metrics.race import race_prompts
from posixlab.results import race_row
from posixlab.variants import PromptSet


class PromptRace:
    """The rounds of a run's sets (consecutive slices of ``round_sets``) and the answers recorded so far, read by
    ``reading`` (options, greedy)."""

    def __init__(self, sets: list[PromptSet], round_sets: int, confidence: float, reading: str = "greedy"):
        self.round_sets, self.confidence, self.reading = round_sets, confidence, reading
        self.order = [s.set_id for s in sets]
        self.width = max((len(s.prompts) for s in sets), default=0)
        self.rounds = [list(range(start, min(start + round_sets, len(sets))))
                       for start in range(0, len(sets), round_sets)]
        self.round_of = {s.set_id: n // round_sets for n, s in enumerate(sets)}
        self.rows: dict[str, list] = {}
        self._racing: dict[int, list[int]] = {}

    def racing(self, number: int) -> list[int]:
        """The prompts round ``number`` asks: those left by the rounds before it. Before those are recorded (the
        check of every request before the first answer), every prompt."""
        if number not in self._racing:
            done = [self.rows.get(set_id) for set_id in self.order[:number * self.round_sets]]
            if not done or any(row is None for row in done):
                return list(range(self.width))
            self._racing[number] = sorted(race_prompts(done, self.round_sets, len(self.order),
                                                       self.confidence)["alive"])
        return self._racing[number]

    def asked(self, prompt_set: PromptSet) -> list[int]:
        return self.racing(self.round_of[prompt_set.set_id])

    def answered(self, prompt_set: PromptSet, record: dict) -> None:
        self.rows[prompt_set.set_id] = race_row(record, self.reading)
