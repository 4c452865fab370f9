"""The ``openai`` rephraser backend: any OpenAI-compatible chat endpoint (OpenAI itself, vLLM, llama.cpp, Ollama).

The paper wrote its paraphrases with GPT-3.5-Turbo through this API; pointing ``base_url`` at a local server gives
the same code path offline. The model that writes them is the ``chat`` backend's (``ChatModel``), opened through the
backend registry for the rephraser (nothing is sent until the first request); this module only configures it. One
reply is one ``chat.completions`` call with its own seed (``ChatModel.generate``): local servers ignore the API's
``n`` parameter, and separate calls make the seeds explicit. At most ``max_concurrency`` requests are in flight: a
request's replies go together, and several originals at once (``ParaphraseSource.paraphrases_of``).

Retrying, the key and the errors are the shared OpenAI-compatible client's (``posixlab/openai_client.py``), the
chat model's too: the ``openai`` client's own retries (``max_retries = max_attempts - 1``) on connection errors,
timeouts, 408, 409, 429 and 5xx, with exponential backoff and jitter (0.5 s doubling to 8 s), honouring the server's
``Retry-After``. Other 4xx answers fail at once: asking again cannot fix a wrong key or model name. A request whose
retries are all spent on a connection error raises ``EndpointUnreachableError``, which stops the whole run at once
(``variants/paraphrase.py``): a dead server is reported once, not retried question by question; every other failure
is a ``RephraserError``. The API key is read from the environment variable named by ``api_key_env`` and is kept out of
the identity, the name and the repr.
"""

from __future__ import annotations

from posixlab.backends import open_to_generate
from posixlab.chat.model import chat_model
from posixlab.errors import EndpointUnreachableError, RephraserError
from posixlab.openai_client import Role
from posixlab.rephrase.base import Rephraser

# how the shared client's messages name the rephraser's endpoint and its settings, and the errors a paraphrase run
# stops on
REPHRASER = Role(server="rephraser endpoint", settings="rephraser", who="the openai rephraser",
                 model_setting="rephraser.model", kept="the paraphrases written so far are kept",
                 unreachable=EndpointUnreachableError, refused=RephraserError, missing_key=RephraserError)


class OpenAIRephraser(Rephraser):
    """The ``openai`` rephraser: ``model`` behind the OpenAI-compatible endpoint at ``base_url``, and its sampling."""

    def __init__(self, model: str, base_url: str | None = None, api_key_env: str = "OPENAI_API_KEY",
                 temperature: float = 0.8, top_p: float = 0.95, timeout: float = 60, max_attempts: int = 6,
                 name: str | None = None, offline: bool = False, max_concurrency: int = 8):
        for setting, value in (("max_attempts", max_attempts), ("max_concurrency", max_concurrency)):
            if value < 1:
                raise RephraserError(f"rephraser.{setting} must be at least 1, got {value}")
        self.model = model
        self.base_url = base_url
        self.api_key_env = api_key_env
        self.max_attempts = max_attempts
        self.concurrency = max_concurrency  # not in the identity: how fast, never what, it writes
        spec = chat_model(model, base_url, api_key_env=api_key_env, request_timeout=timeout, max_attempts=max_attempts,
                          max_concurrency=max_concurrency)
        # opened now, sending nothing: a missing key is a RephraserError before any paraphrase is asked for (unless
        # offline: a dry run's, never asked). hosted_url=None: without a base_url the openai client's own default,
        # $OPENAI_BASE_URL or OpenAI itself
        lm = open_to_generate(spec, role=REPHRASER, hosted_url=None, offline=offline)
        super().__init__(name or f"openai:{model}",
                         {"backend": "openai", "model": model, "base_url": base_url, "temperature": temperature,
                          "top_p": top_p}, lm=lm, temperature=temperature, top_p=top_p)

    def __repr__(self) -> str:
        return (f"OpenAIRephraser(model={self.model!r}, base_url={self.base_url!r}, "
                f"api_key_env={self.api_key_env!r}, temperature={self.temperature}, top_p={self.top_p})")

    @property
    def endpoint(self) -> str:
        return self.lm.client.base_url
