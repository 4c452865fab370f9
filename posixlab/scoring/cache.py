"""An on-disk cache of generations and scores, keyed by content, so reruns and restarted runs recompute nothing.

One cache per model fingerprint (the model's identity: source, path, revision or weights hash, dtype, device,
library versions): SQLite files ``<model>-<digest>.<host>.<slot>.sqlite``, one per writing process, which every run
reads together, so that the jobs of a cluster can share one cache folder, on a network filesystem too
(``posixlab/cachefiles.py`` says how and why; no WAL, no lock between machines). Inside each file:

- ``generations``: key = sha256(max_new_tokens, prompt token ids) -> greedy response ids and their log-probabilities;
- ``scores``: key = sha256(prompt token ids, response token ids) -> log P(response | prompt).

Every row carries a checksum of its key and value, and the file records its format and fingerprint. A file that is
not a posixlab cache, belongs to another model, or holds a row whose checksum fails is reported with a
``CacheError`` that says how to proceed; it is never silently used (a row of another job's file that fails its
checksum is computed again, with a warning: its copy may have been taken during a commit). Writes happen in one
transaction per batch of finished sets, so a run killed at any moment leaves every earlier batch intact and nothing
half-written.
"""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
import struct
import sys
from pathlib import Path

from posixlab.cachefiles import Segments
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


TABLES = {"meta": "key TEXT PRIMARY KEY, value TEXT",
          "generations": "key BLOB PRIMARY KEY, payload TEXT, checksum TEXT",
          "scores": "key BLOB PRIMARY KEY, payload TEXT, checksum TEXT"}


class ScoreCache:
    """The score cache of one model in ``folder``: this process's file (``path``) and the other jobs' files of the
    same model, read together (``posixlab/cachefiles.py``)."""

    def __init__(self, folder: str | Path, identity: dict):
        self.fingerprint = json.dumps(fingerprint_of(identity), sort_keys=True)
        digest = hashlib.sha256(self.fingerprint.encode()).hexdigest()[:16]
        label = re.sub(r"[^A-Za-z0-9_.-]+", "_", str(identity.get("name", "model")))
        self.stem = f"{label}-{digest}"
        self.path = Path(folder) / f"{self.stem}.sqlite"  # named for the error of a file that cannot be leased
        self.hits = 0
        self._segments = Segments(folder, self.stem, TABLES, create=self._create, check=self._check_meta,
                                  error=self._file_error)
        self.path = self._segments.path
        self._db = self._segments.db
        self._warned: set[int] = set()

    # --- opening and checking --------------------------------------------------------------------------------------
    def _file_error(self, problem: str, path: Path) -> CacheError:
        return CacheError(f"score cache {path} {problem}. It holds only numbers that can be recomputed: delete it "
                          f"(rm '{path}') and run again, or run with score_cache=false")

    def _error(self, problem: str) -> CacheError:
        return self._file_error(problem, self.path)

    def _create(self, db: sqlite3.Connection) -> None:
        db.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)",
                       [("format", FORMAT), ("version", VERSION), ("fingerprint", self.fingerprint)])

    def _check_meta(self, db: sqlite3.Connection, schema: str, path: Path) -> None:
        tables = {r[0] for r in db.execute(f"SELECT name FROM {schema}.sqlite_master WHERE type='table'")}
        if "meta" not in tables:
            raise self._file_error("is not a posixlab score cache (no meta table)", path)
        meta = dict(db.execute(f"SELECT key, value FROM {schema}.meta"))
        if meta.get("format") != FORMAT:
            raise self._file_error("is not a posixlab score cache", path)
        if meta.get("version") != VERSION:
            raise self._file_error(f"has format version {meta.get('version')}, this posixlab writes {VERSION}", path)
        if meta.get("fingerprint") != self.fingerprint:
            raise self._file_error(f"belongs to another model or setting ({meta.get('fingerprint')}), "
                                   f"not to this one ({self.fingerprint})", path)

    def _get(self, table: str, key: bytes):
        try:
            row = self._db.execute(f"SELECT payload, checksum FROM main.{table} WHERE key = ?", (key,)).fetchone()
            if row is None:
                return self._get_peer(table, key)
        except sqlite3.DatabaseError as exc:
            raise self._error(f"cannot be read ({exc})") from None
        payload, checksum = row
        if checksum != _checksum(key, payload):
            raise self._error(f"is corrupted: a row of table {table} fails its checksum")
        return json.loads(payload)

    def _get_peer(self, table: str, key: bytes):
        """A row of another job's file, read when this cache opened; one that fails its checksum is a miss (a copy
        taken while its writer committed), with a warning naming the file."""
        row = self._db.execute(f"SELECT payload, checksum, source FROM peers.{table} WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        payload, checksum, source = row
        if checksum != _checksum(key, payload):
            if source not in self._warned:
                self._warned.add(source)
                print(f"posixlab: warning: score cache {self._segments.sources[source]} holds a row that fails its "
                      f"checksum; this run computes it again. If no job is writing that file, it is damaged: "
                      f"delete it", file=sys.stderr)
            return None
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
        """Write a batch of finished work in one transaction, to this process's file.

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
            self._db.executemany("INSERT OR REPLACE INTO main.generations VALUES (?, ?, ?)", rows_g)
            self._db.executemany("INSERT OR REPLACE INTO main.scores VALUES (?, ?, ?)", rows_s)
            self._db.execute("COMMIT")
        except sqlite3.DatabaseError as exc:
            raise self._error(f"cannot be written ({exc})") from None

    def close(self) -> None:
        self._segments.close()
