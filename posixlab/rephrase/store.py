"""The paraphrase file: paraphrases are written once per original text and read by every later run.

One JSON object a line, appended as each original is paraphrased (a killed run keeps what it finished):

    {"key": ..., "original": ..., "paraphrases": [...], "rephraser": {...}, "instruction_sha256": ...,
     "requests": 2, "rejected": {"duplicate": 3}, "system_folded": false, "checksum": ...}

``key`` is the SHA-256 of (rephraser identity, instruction, original), so every model of a sweep sees the same
paraphrases, as in the paper, and a changed instruction or rephraser never reuses stale ones. ``system_folded``
(where the instruction has a system message): the model read that message at the head of the first user turn, its
chat template refusing a system turn. ``checksum`` covers the rest of the record; a line that does not parse or whose
checksum disagrees makes the whole file refused, with its line number, never silently skipped. When a key appears
twice the later line wins (a top-up to more paraphrases appends a longer record).

A user's own paraphrase file (``rephraser=file``) needs only ``original`` and ``paraphrases`` per line; it is looked
up by original text, and a ``checksum``, when present, is checked too.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from posixlab.errors import CacheError


def record_key(rephraser_identity: dict, instruction_sha256: str, original: str) -> str:
    payload = json.dumps({"rephraser": rephraser_identity, "instruction": instruction_sha256, "original": original},
                         sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(payload.encode()).hexdigest()


def _checksum(record: dict) -> str:
    body = {k: v for k, v in record.items() if k != "checksum"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


class ParaphraseFile:
    """Paraphrase records in one JSONL file, indexed by key and by original text."""

    def __init__(self, path: str | Path, user_supplied: bool = False, read_only: bool = False):
        self.path = Path(path).expanduser()
        self.user_supplied = user_supplied
        self.read_only = read_only  # a file shipped inside the package: read, never appended to
        self.by_key: dict[str, dict] = {}
        self.by_original: dict[str, dict] = {}
        if self.path.exists():
            self._read()
        elif user_supplied:
            raise CacheError(f"no paraphrase file at {self.path}; give an existing JSONL file with one "
                             f'{{"original": ..., "paraphrases": [...]}} object a line')

    def _read(self) -> None:
        fix = ("Delete the file to regenerate its paraphrases, or repair that line" if not self.user_supplied
               else "Fix that line (one JSON object with 'original' and a list 'paraphrases')")
        for number, line in enumerate(self.path.read_text(encoding="utf-8-sig").split("\n"), 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise CacheError(f"paraphrase file {self.path}, line {number}, is not valid JSON ({exc.msg}); "
                                 f"the file was not used. {fix}.") from None
            if (not isinstance(record, dict) or not isinstance(record.get("original"), str)
                    or not isinstance(record.get("paraphrases"), list)
                    or not all(isinstance(p, str) for p in record["paraphrases"])):
                raise CacheError(f"paraphrase file {self.path}, line {number}, lacks a text 'original' or a list of "
                                 f"texts 'paraphrases'; the file was not used. {fix}.")
            if ("checksum" in record or not self.user_supplied) and record.get("checksum") != _checksum(record):
                raise CacheError(f"paraphrase file {self.path}, line {number}: checksum mismatch (the record was "
                                 f"changed or truncated); the file was not used. {fix}.")
            if "key" in record:
                self.by_key[record["key"]] = record
            self.by_original[record["original"].strip()] = record

    def get(self, key: str) -> dict | None:
        return self.by_key.get(key)

    def find_original(self, original: str) -> dict | None:
        return self.by_original.get(original.strip())

    def put(self, record: dict) -> dict:
        """Append ``record`` (with its checksum) and flush it to disk at once."""
        if self.read_only:
            raise CacheError(f"{self.path} ships with posixlab and is never written; paraphrases go to the run's "
                             f"paraphrase file")
        record = {**record, "checksum": None}
        record["checksum"] = _checksum(record)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        line = json.dumps(record, ensure_ascii=False) + "\n"
        # one write call in append mode: parallel jobs of a sweep appending to the same file never interleave lines
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode("utf-8"))
        finally:
            os.close(fd)
        self.by_key[record["key"]] = record
        self.by_original[record["original"].strip()] = record
        return record
