"""An on-disk cache of generations and scores, keyed by content, so reruns and restarted runs recompute nothing.

One SQLite file per model fingerprint (the model's identity: source, path, revision or weights hash, dtype, device,
library versions). Inside it:

- ``generations``: key = sha256(max_new_tokens, prompt token ids) -> greedy response ids and their log-probabilities;
- ``scores``: key = sha256(prompt token ids, response token ids) -> log P(response | prompt).

Every row carries a checksum of its key and value, and the file records its format and fingerprint. A file that is
not a posixlab cache, belongs to another model, or holds a row whose checksum fails is reported with a
``CacheError`` that says how to proceed; it is never silently used. Writes happen in one transaction per batch of
finished sets, so a run killed at any moment leaves every earlier batch intact and nothing half-written.
"""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
import struct
from pathlib import Path

from posixlab.errors import CacheError

FORMAT = "posixlab-score-cache"
VERSION = "1"


def _ids_bytes(ids) -> bytes:
    return struct.pack(f"<{len(ids)}q", *ids)


def generation_key(prompt_ids, max_new_tokens: int) -> bytes:
    return hashlib.sha256(b"gen\0" + _ids_bytes([max_new_tokens]) + _ids_bytes(prompt_ids)).digest()


def score_key(prompt_ids, response_ids) -> bytes:
    prompt = _ids_bytes(prompt_ids)
    return hashlib.sha256(b"score\0" + _ids_bytes([len(prompt_ids)]) + prompt + _ids_bytes(response_ids)).digest()


def _checksum(key: bytes, payload: str) -> str:
    return hashlib.sha256(key + payload.encode()).hexdigest()[:16]


def fingerprint_of(identity: dict) -> dict:
    """What a cached number depends on: the model's identity without its display name."""
    return {k: v for k, v in sorted(identity.items()) if k != "name"}


class ScoreCache:
    def __init__(self, folder: str | Path, identity: dict):
        self.fingerprint = json.dumps(fingerprint_of(identity), sort_keys=True)
        digest = hashlib.sha256(self.fingerprint.encode()).hexdigest()[:16]
        label = re.sub(r"[^A-Za-z0-9_.-]+", "_", str(identity.get("name", "model")))
        self.path = Path(folder) / f"{label}-{digest}.sqlite"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.hits = 0
        self._db = self._open()

    # --- opening and checking --------------------------------------------------------------------------------------
    def _error(self, problem: str) -> CacheError:
        return CacheError(f"score cache {self.path} {problem}. It holds only numbers that can be recomputed: delete it "
                          f"(rm '{self.path}') and run again, or run with score_cache=false")

    def _open(self) -> sqlite3.Connection:
        existed = self.path.exists() and self.path.stat().st_size > 0
        try:
            db = sqlite3.connect(self.path, timeout=60, isolation_level=None)
            if existed:
                status = db.execute("PRAGMA quick_check").fetchone()[0]
                if status != "ok":
                    raise self._error(f"is corrupted (SQLite check: {status})")
                tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
                if "meta" not in tables:
                    raise self._error("is not a posixlab score cache (no meta table)")
                meta = dict(db.execute("SELECT key, value FROM meta"))
                if meta.get("format") != FORMAT:
                    raise self._error("is not a posixlab score cache")
                if meta.get("version") != VERSION:
                    raise self._error(f"has format version {meta.get('version')}, this posixlab writes {VERSION}")
                if meta.get("fingerprint") != self.fingerprint:
                    raise self._error(f"belongs to another model or setting ({meta.get('fingerprint')}), "
                                      f"not to this one ({self.fingerprint})")
            else:
                db.execute("PRAGMA journal_mode=WAL")
                db.execute("BEGIN")
                db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
                db.execute("CREATE TABLE IF NOT EXISTS generations (key BLOB PRIMARY KEY, payload TEXT, checksum TEXT)")
                db.execute("CREATE TABLE IF NOT EXISTS scores (key BLOB PRIMARY KEY, payload TEXT, checksum TEXT)")
                db.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)",
                               [("format", FORMAT), ("version", VERSION), ("fingerprint", self.fingerprint)])
                db.execute("COMMIT")
            return db
        except sqlite3.DatabaseError as exc:
            raise self._error(f"cannot be read as a cache ({exc})") from None

    def _get(self, table: str, key: bytes):
        try:
            row = self._db.execute(f"SELECT payload, checksum FROM {table} WHERE key = ?", (key,)).fetchone()
        except sqlite3.DatabaseError as exc:
            raise self._error(f"cannot be read ({exc})") from None
        if row is None:
            return None
        payload, checksum = row
        if checksum != _checksum(key, payload):
            raise self._error(f"is corrupted: a row of table {table} fails its checksum")
        return json.loads(payload)

    # --- the interface the engine uses -----------------------------------------------------------------------------
    def generation(self, prompt_ids, max_new_tokens: int):
        """``(response ids, per-token log-probabilities)`` or None."""
        found = self._get("generations", generation_key(prompt_ids, max_new_tokens))
        return None if found is None else (found["tokens"], found["logprobs"])

    def score(self, prompt_ids, response_ids):
        found = self._get("scores", score_key(prompt_ids, response_ids))
        return None if found is None else found["logprob"]

    def store(self, generations, scores, max_new_tokens: int) -> None:
        """Write a batch of finished work in one transaction.

        ``generations``: {prompt ids: (response ids, logprobs)}; ``scores``: {(prompt ids, response ids): logprob}.
        """
        rows_g, rows_s = [], []
        for prompt, (tokens, logprobs) in generations.items():
            key = generation_key(prompt, max_new_tokens)
            payload = json.dumps({"tokens": list(tokens), "logprobs": list(logprobs)})
            rows_g.append((key, payload, _checksum(key, payload)))
        for (prompt, response), logprob in scores.items():
            key = score_key(prompt, response)
            payload = json.dumps({"logprob": logprob})
            rows_s.append((key, payload, _checksum(key, payload)))
        try:
            self._db.execute("BEGIN IMMEDIATE")
            self._db.executemany("INSERT OR REPLACE INTO generations VALUES (?, ?, ?)", rows_g)
            self._db.executemany("INSERT OR REPLACE INTO scores VALUES (?, ?, ?)", rows_s)
            self._db.execute("COMMIT")
        except sqlite3.DatabaseError as exc:
            raise self._error(f"cannot be written ({exc})") from None

    def close(self) -> None:
        self._db.close()
