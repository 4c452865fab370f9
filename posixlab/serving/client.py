"""A vLLM OpenAI-compatible server, spoken to in token ids: greedy generation and continuation scoring.

Two requests, both ``/v1/completions`` with the prompt given as token ids (never text, so the server scores exactly
the ids this process tokenised):

- **generate**: ``temperature=0``, ``logprobs=0``, ``return_tokens_as_token_ids=true``; the response's tokens come
  back as ``token_id:N`` with the log-probability of each, which is the diagonal ``log P(y_j | x_j)``, as the
  in-process engine keeps it while decoding. Generation stops at the model's end-of-sequence ids
  (``stop_token_ids``), which the response keeps, as in-process.
- **score**: prompt + continuation ids, ``max_tokens=1``, ``prompt_logprobs=0``; the server returns, per prompt
  position, the log-probability of the token that is there; the continuation's rows summed (float64, first token to
  last) are ``log P(continuation | prompt)``. Many sequences go in one request (a list of id lists).

Retrying, the key and the errors are the shared OpenAI-compatible client's (``posixlab/openai_client.py``): the
``openai`` client's own retries (connection errors, timeouts, 408/409/429/5xx; backoff with jitter and
``Retry-After``). When one request's retries are spent on a connection error the server is reported dead at once
(``ServerUnreachableError``); nothing else is tried against it.
"""

from __future__ import annotations

import httpx

from posixlab.errors import ServerResponseError
from posixlab.openai_client import Generation, OpenAIClient, Role

TOKEN_ID_PREFIX = "token_id:"
# how the shared client's messages name a vLLM server and its settings
VLLM = Role(server="vLLM server", settings="model.server", who="model.backend=vllm",
            model_setting="model.server.served_name", kept="results written so far are kept",
            remedy='Start it (README, "vLLM servers"), fix model.server.base_url, or let posixlab start one with '
                   'model.server.launch=true',
            concurrency="model.server.max_concurrency")


class VLLMClient:
    def __init__(self, base_url: str, *, api_key_env: str = "VLLM_API_KEY", timeout: float = 600,
                 max_attempts: int = 3):
        self.base_url = base_url.rstrip("/")
        self.root_url = self.base_url.removesuffix("/v1")  # /tokenize and /version live beside /v1
        self.max_attempts = max_attempts
        self._timeout = timeout
        self._api = OpenAIClient(self.base_url, role=VLLM, api_key_env=api_key_env, timeout=timeout,
                                 max_attempts=max_attempts)

    # --- what the server serves --------------------------------------------------------------------------------------
    def models(self) -> list[dict]:
        """The served models (``id``, ``root``, ``max_model_len``, ...), as ``/v1/models`` lists them."""
        return [m.model_dump() for m in self._api.models()]

    def version(self) -> str | None:
        try:
            answer = httpx.get(f"{self.root_url}/version", headers=self._api.auth_headers, timeout=30)
        except httpx.HTTPError:
            return None
        return answer.json().get("version") if answer.status_code == 200 else None

    def tokenize(self, model: str, text: str, add_special_tokens: bool = True) -> list[int]:
        """The server's own token ids for ``text`` (vLLM's ``/tokenize``)."""
        try:
            answer = httpx.post(f"{self.root_url}/tokenize", headers=self._api.auth_headers, timeout=self._timeout,
                                json={"model": model, "prompt": text, "add_special_tokens": add_special_tokens})
        except httpx.HTTPError as exc:  # one attempt: no retries on vLLM's own routes
            raise self._api.error(exc, expected="token list", attempts=1) from None
        if answer.status_code != 200:
            raise ServerResponseError(f"{self.root_url}/tokenize answered HTTP {answer.status_code} ({answer.text[:200]}); "
                                      f"posixlab checks the tokenizer against a vLLM server's /tokenize: is this vLLM?")
        return [int(t) for t in answer.json()["tokens"]]

    # --- the two requests --------------------------------------------------------------------------------------------
    def generate(self, model: str, prompt_ids: list[int], max_new_tokens: int, stop_ids: list[int],
                 json_schema: dict | None = None) -> tuple[list[int], list[float]]:
        """Greedy response token ids (ending with a stop id when one came) and each token's log-probability;
        ``json_schema``: held to that schema by the server's structured outputs (vLLM's ``structured_outputs``)."""
        extra = {"return_tokens_as_token_ids": True, "stop_token_ids": stop_ids, "skip_special_tokens": False,
                 "top_k": -1}
        if json_schema is not None:
            extra["structured_outputs"] = {"json": json_schema}
        reply = self._api.complete(model=model, prompt=list(prompt_ids), logprobs=0, extra_body=extra,
                                   **Generation(max_new_tokens, temperature=0).fields())
        logprobs = reply.choices[0].logprobs
        if logprobs is None or logprobs.tokens is None:
            raise ServerResponseError(f"the server at {self.base_url} returned no log-probabilities for a generation")
        tokens = [_token_id(t, self.base_url) for t in logprobs.tokens]
        return tokens, [float(v) for v in logprobs.token_logprobs]

    def score(self, model: str, pairs: list[tuple[list[int], list[int]]]) -> list[float]:
        """``log P(continuation | prompt)`` for each ``(prompt ids, continuation ids)`` pair, in one request."""
        sequences = [list(p) + list(c) for p, c in pairs]
        reply = self._api.complete(model=model, prompt=sequences, extra_body={"prompt_logprobs": 0},
                                   **Generation(1, temperature=0).fields())
        choices = sorted(reply.choices, key=lambda c: c.index)
        if len(choices) != len(pairs):
            raise ServerResponseError(f"the server at {self.base_url} answered {len(choices)} choices for "
                                      f"{len(pairs)} prompts")
        values = []
        for (prompt, continuation), choice in zip(pairs, choices):
            rows = (choice.model_extra or {}).get("prompt_logprobs")
            if rows is None or len(rows) != len(prompt) + len(continuation):
                raise ServerResponseError(f"the server at {self.base_url} returned no prompt log-probabilities (or "
                                          f"the wrong number); posixlab needs a vLLM server that supports "
                                          f"prompt_logprobs")
            total = 0.0
            for position, token in enumerate(continuation, start=len(prompt)):
                entry = rows[position].get(str(token))
                if entry is None:
                    raise ServerResponseError(f"the server's prompt log-probabilities miss token {token} at "
                                              f"position {position}")
                total += float(entry["logprob"])
            values.append(total)
        return values


def _token_id(token: str, where: str) -> int:
    if not token.startswith(TOKEN_ID_PREFIX):
        raise ServerResponseError(f"the server at {where} returned token {token!r}, not 'token_id:N'; it needs "
                                  f"return_tokens_as_token_ids (vLLM 0.6 or later)")
    return int(token.removeprefix(TOKEN_ID_PREFIX))
