"""Models behind an OpenAI-compatible chat API (``model=chat``): text in, text out.

- ``client.py``: one request and its answer (the served model, ``system_fingerprint``, token usage); the errors.
- ``cache.py``: every answer on disk, keyed by the endpoint, the whole request body and the repeat index.
- ``model.py``: ``ChatModel`` (capability: generate) and ``open_chat``, which asks the endpoint once before any work.
- ``engine.py``: ``ChatEngine``, the runner's engine for it: concurrency, the cache, a request budget, usage and cost.
"""

from posixlab.chat.cache import ResponseCache
from posixlab.chat.client import ChatAnswer, ChatClient
from posixlab.chat.engine import ChatEngine, TextAnswers, api_report
from posixlab.chat.model import ChatModel, check_chat, open_chat

__all__ = ["ChatAnswer", "ChatClient", "ChatEngine", "ChatModel", "ResponseCache", "TextAnswers", "api_report",
           "check_chat", "open_chat"]
