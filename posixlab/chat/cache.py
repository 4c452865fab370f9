"""Every chat response on disk (SQLite), so that a rerun sends nothing and a killed run sends only what was in flight.

The key is a SHA-256 of everything the answer can depend on: the endpoint's base URL (``endpoint_key``: ``localhost`` and
``127.0.0.1`` are one endpoint), the whole request body as sent
(the model, the messages, every generation parameter: temperature, seed, max_tokens, response format, tools ...)
and the repeat index (``task.repeats``: repeats are distinct requests on purpose). Evaluation tools' caches have keyed
on less (not the model, not the sampling parameters, not the seed) and served wrong answers; here changing any byte of
the body misses. The API key is not in the key (it does not change the answer) and never in the file.

Only answers are stored, never errors, and each one is committed the moment it arrives: a run killed with
``kill -9`` loses at most the requests that were in flight. Each process writes a file of its own and reads the
others' (``posixlab/cachefiles.py``), so the jobs of a cluster can share the folder, on a network filesystem too.

>>> import shutil, tempfile
>>> folder = tempfile.mkdtemp()
>>> cache = ResponseCache(folder)
>>> body = {"model": "m", "messages": [{"role": "user", "content": "Hi"}], "temperature": 0, "seed": 42}
>>> cache.get("http://h/v1", body, 0) is None
True
>>> cache.put("http://h/v1", body, 0, ChatAnswer("Hello"))
>>> cache.get("http://h/v1", body, 0).text, cache.get("http://h/v1", body, 1)
('Hello', None)
>>> cache.get("http://h/v1", {**body, "seed": 43}, 0) is None
True
>>> cache.close(); shutil.rmtree(folder)
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from pathlib import Path

from posixlab.cachefiles import Segments
from posixlab.chat.client import ChatAnswer
from posixlab.errors import CacheError

STEM = "responses"
FILE = f"{STEM}.sqlite"  # the single file of earlier versions (read, never written); each process now writes
# responses.<host>.<slot>.sqlite, and every run reads them all (posixlab/cachefiles.py: why, on a cluster)


LOOPBACK = {"localhost", "127.0.0.1", "::1", "0.0.0.0", "::"}  # names of this machine a local server answers on


def endpoint_key(base_url: str) -> str:
    """The endpoint as the cache keys it: scheme and host in lower case, this machine's names folded into 127.0.0.1,
    a default port dropped, no trailing slash; so ``http://localhost:8765/v1/`` and ``http://127.0.0.1:8765/v1`` (one
    server) share their answers. Other host names are kept as written: two names of one remote host are not told
    apart without a DNS look-up, which would make the key depend on the network.

    >>> endpoint_key("http://LocalHost:8765/v1/")
    'http://127.0.0.1:8765/v1'
    >>> endpoint_key("https://api.openai.com:443/v1")
    'https://api.openai.com/v1'
    """
    from urllib.parse import urlsplit

    parts = urlsplit(base_url.strip())
    host = (parts.hostname or "").lower()
    host = "127.0.0.1" if host in LOOPBACK else f"[{host}]" if ":" in host else host
    scheme = parts.scheme.lower()
    port = "" if parts.port is None or (scheme, parts.port) in (("http", 80), ("https", 443)) else f":{parts.port}"
    return f"{scheme}://{host}{port}{parts.path.rstrip('/')}"


def request_key(base_url: str, body: dict, repeat: int) -> str:
    text = json.dumps({"base_url": endpoint_key(base_url), "body": body, "repeat": repeat}, sort_keys=True,
                      ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


TABLES = {"responses": "key TEXT PRIMARY KEY, request TEXT NOT NULL, response TEXT NOT NULL, created REAL NOT NULL"}


class ResponseCache:
    """The response cache in ``folder``: this process's file (``path``, ``responses.<host>.<slot>.sqlite``) and the
    other jobs' files, read together (``posixlab/cachefiles.py``)."""

    def __init__(self, folder: str | Path):
        self.path = Path(folder) / FILE
        self._lock = threading.Lock()
        self._segments = Segments(folder, STEM, TABLES, create=lambda db: None, check=self._check,
                                  error=self._file_error, check_same_thread=False)
        self.path = self._segments.path
        self._db = self._segments.db

    @staticmethod
    def _file_error(problem: str, path: Path) -> CacheError:
        return CacheError(f"the response cache {path} {problem}; delete it (it only saves requests) or set "
                          f"score_cache=false")

    def _check(self, db: sqlite3.Connection, schema: str, path: Path) -> None:
        tables = {r[0] for r in db.execute(f"SELECT name FROM {schema}.sqlite_master WHERE type='table'")}
        if "responses" not in tables:
            raise self._file_error("is not a posixlab response cache (no responses table)", path)

    def get(self, base_url: str, body: dict, repeat: int) -> ChatAnswer | None:
        key = request_key(base_url, body, repeat)
        with self._lock:
            row = self._db.execute("SELECT response FROM main.responses WHERE key = ?", (key,)).fetchone()
            if row is None:  # another job's answer, read when this cache opened
                row = self._db.execute("SELECT response FROM peers.responses WHERE key = ?", (key,)).fetchone()
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
            self._db.execute("INSERT OR REPLACE INTO main.responses VALUES (?, ?, ?, ?)",
                             (request_key(base_url, body, repeat), request,
                              json.dumps(answer.to_dict(), ensure_ascii=False), time.time()))

    def __len__(self) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM (SELECT key FROM main.responses UNION "
                                    "SELECT key FROM peers.responses)").fetchone()[0]

    def close(self) -> None:
        with self._lock:
            self._segments.close()
