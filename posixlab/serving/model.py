"""A model served by vLLM: the tokenizer here, the weights on the server.

``connect(spec)`` checks, before any work, that the server answers, that it serves the model asked for, and that
the tokenizer loaded here (from the same packaged model, hub id or folder) tokenises a few probe strings exactly as
the server does: prompts are tokenised once, here, and sent as ids, so a tokenizer that disagreed would score other
tokens than the ones generated, silently. With ``launch=true`` it first starts a local server (``launch.py``).

The identity that keys the score cache holds the server's answer about itself (served name, root path, context
length, vLLM version) beside the weights' identity and the declared dtype, so scores from two servers never mix,
and never mix with the in-process engine's.
"""

from __future__ import annotations

import sys

from posixlab.errors import ConfigError, TokenizerMismatchError
from posixlab.models.causal_lm import TokenizedModel, eos_ids_of, tokenizer_disagreement
from posixlab.models.loading import ModelSpec, model_folder
from posixlab.serving.client import VLLMClient


class ServedModel(TokenizedModel):
    """A model behind a vLLM server: text methods from ``TokenizedModel``, requests through ``client``."""

    backend = "vllm"  # its capabilities: posixlab/serving/backend.py

    def __init__(self, tokenizer, *, name: str, identity: dict, eos_ids, max_context, client: VLLMClient,
                 served_name: str, spec: ModelSpec, server=None):
        super().__init__(tokenizer, name=name, identity=identity, eos_ids=eos_ids, max_context=max_context)
        self.client = client
        self.served_name = served_name
        self.spec = spec
        self.server = server  # the LocalServer this model started, stopped by close()

    def close(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None


def connect(spec: ModelSpec, cache_dir=None) -> ServedModel:
    from transformers import AutoTokenizer, GenerationConfig

    folder, identity, kwargs = model_folder(spec, cache_dir)
    server = None
    base_url = spec.server.base_url
    if spec.server.launch:
        from posixlab.serving.launch import LocalServer

        server = LocalServer.for_spec(spec, folder, cache_dir)
        base_url = server.start()
    try:
        client = VLLMClient(base_url, api_key_env=spec.server.api_key_env, timeout=spec.server.request_timeout,
                            max_attempts=spec.server.max_attempts)
        served = client.models()
        names = [m["id"] for m in served]
        wanted = spec.server.served_name or (server.served_name if server else None)
        if wanted is None:
            if len(served) != 1:
                raise ConfigError(f"the vLLM server at {base_url} serves {len(served)} models ({', '.join(names)}); "
                                  f"choose one with model.server.served_name=NAME")
            wanted = names[0]
        if wanted not in names:
            raise ConfigError(f"the vLLM server at {base_url} does not serve {wanted!r}; it serves "
                              f"{', '.join(repr(n) for n in names)}. Set model.server.served_name to one of them.")
        about = served[names.index(wanted)]
        tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=spec.trust_remote_code, **kwargs)
        check_tokenizer(client, wanted, tokenizer, spec.name)
        try:
            generation_eos = GenerationConfig.from_pretrained(folder, **kwargs).eos_token_id
        except OSError:  # no generation_config.json: the tokenizer's end-of-sequence id alone
            generation_eos = None
        identity.update({"backend": "vllm", "served_model": wanted, "server_root": about.get("root"),
                         "max_model_len": about.get("max_model_len"), "vllm": client.version(),
                         "dtype": server.dtype if server else spec.dtype})
        print(f"posixlab: {spec.name} served by vLLM {identity['vllm']} at {base_url} as {wanted!r}", file=sys.stderr)
        return ServedModel(tokenizer, name=spec.name, identity=identity, eos_ids=eos_ids_of(generation_eos, tokenizer),
                           max_context=about.get("max_model_len"), client=client, served_name=wanted, spec=spec,
                           server=server)
    except BaseException:
        if server is not None:
            server.stop()
        raise


def check_tokenizer(client: VLLMClient, served_name: str, tokenizer, name: str) -> None:
    """Raise ``TokenizerMismatchError`` unless the local tokenizer gives the server's ids on every probe."""
    where = tokenizer_disagreement(tokenizer, lambda probe, special: client.tokenize(
        served_name, probe, add_special_tokens=special))
    if where is not None:
        raise TokenizerMismatchError(
            f"the tokenizer of {name} loaded here and the server's ({served_name!r}) disagree on {where}. Point "
            f"model.path at the model the server runs (or the server at this model), so that prompts tokenised here "
            f"mean the same to the server.")
