"""Every chat response on disk (SQLite), so that a rerun sends nothing and a killed run sends only what was in flight.

The key is a SHA-256 of everything the answer can depend on: the endpoint's base URL, the whole request body as sent
(the model, the messages, every generation parameter: temperature, seed, max_tokens, response format, tools ...)
and the repeat index (``task.repeats``: repeats are distinct requests on purpose). Evaluation tools' caches have keyed
on less (not the model, not the sampling parameters, not the seed) and served wrong answers; here changing any byte of
the body misses. The API key is not in the key (it does not change the answer) and never in the file.

Only answers are stored, never errors, and each one is committed the moment it arrives: a run killed with
``kill -9`` loses at most the requests that were in flight.

>>> import tempfile
>>> cache = ResponseCache(tempfile.mkdtemp())
>>> body = {"model": "m", "messages": [{"role": "user", "content": "Hi"}], "temperature": 0, "seed": 42}
>>> cache.get("http://h/v1", body, 0) is None
True
>>> cache.put("http://h/v1", body, 0, ChatAnswer("Hello"))
>>> cache.get("http://h/v1", body, 0).text, cache.get("http://h/v1", body, 1)
('Hello', None)
>>> cache.get("http://h/v1", {**body, "seed": 43}, 0) is None
True
>>> cache.close()
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from pathlib import Path

from posixlab.chat.client import ChatAnswer
from posixlab.errors import CacheError

FILE = "responses.sqlite"


def request_key(base_url: str, body: dict, repeat: int) -> str:
    text = json.dumps({"base_url": base_url.rstrip("/"), "body": body, "repeat": repeat}, sort_keys=True,
                      ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class ResponseCache:
    def __init__(self, folder: str | Path):
        self.path = Path(folder) / FILE
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        try:
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, request TEXT NOT NULL, "
                             "response TEXT NOT NULL, created REAL NOT NULL)")
        except sqlite3.DatabaseError as exc:
            raise CacheError(f"the response cache {self.path} cannot be opened ({exc}); delete it (it only saves "
                             f"requests) or set score_cache=false") from None

    def get(self, base_url: str, body: dict, repeat: int) -> ChatAnswer | None:
        with self._lock:
            row = self._db.execute("SELECT response FROM responses WHERE key = ?",
                                   (request_key(base_url, body, repeat),)).fetchone()
        if row is None:
            return None
        try:
            return ChatAnswer.from_dict(json.loads(row[0]), cached=True)
        except (ValueError, TypeError) as exc:
            raise CacheError(f"the response cache {self.path} holds an unreadable entry ({exc}); delete the file "
                             f"(it only saves requests)") from None

    def put(self, base_url: str, body: dict, repeat: int, answer: ChatAnswer) -> None:
        request = json.dumps({"base_url": base_url, "body": body, "repeat": repeat}, ensure_ascii=False)
        with self._lock:  # autocommit: on disk before the next request is counted done
            self._db.execute("INSERT OR REPLACE INTO responses VALUES (?, ?, ?, ?)",
                             (request_key(base_url, body, repeat), request,
                              json.dumps(answer.to_dict(), ensure_ascii=False), time.time()))

    def __len__(self) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0]

    def close(self) -> None:
        with self._lock:
            self._db.close()
