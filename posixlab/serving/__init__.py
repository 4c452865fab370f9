"""Models behind a vLLM server: the client (token ids over HTTP), the engine that fills ``SetScores`` from it, and a
local server started for one run. ``posixlab.models.load_model`` returns a ``ServedModel`` for ``backend=vllm``;
``engine_for`` picks the engine that fits a loaded model."""

from posixlab.serving.client import VLLMClient
from posixlab.serving.engine import ServerEngine
from posixlab.serving.model import ServedModel, connect

__all__ = ["ServedModel", "ServerEngine", "VLLMClient", "connect"]
