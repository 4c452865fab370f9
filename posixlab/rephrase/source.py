"""Where a paraphrase or mixture run gets its paraphrases: a ``ParaphraseSource`` reads them from the paraphrase
file and, for originals missing there, has the rephraser write them (and stores them).

``make_paraphrase_source`` builds the source a ``RephraserConfig`` describes. Nothing here knows about prompt
variants: ``posixlab.variants.paraphrase`` uses a source, this package never imports the variants.
"""

from __future__ import annotations

from pathlib import Path

from posixlab.errors import ConfigError, RephraserError
from posixlab.rephrase.base import Instruction, Rephraser, collect_paraphrases
from posixlab.rephrase.config import RephraserConfig, default_paraphrase_path, make_rephraser
from posixlab.rephrase.store import ParaphraseFile, record_key


class ParaphraseSource:
    """Paraphrases of original texts: read from ``store``, written by ``rephraser`` when missing (and then stored)."""

    def __init__(self, store: ParaphraseFile, rephraser: Rephraser | None = None,
                 instruction: Instruction | None = None, **collect_options):
        if rephraser is not None and instruction is None:
            raise ConfigError("a rephraser needs an instruction (rephraser.instruction)")
        self.store = store
        self.rephraser = rephraser
        self.instruction = instruction
        self.collect_options = collect_options  # seed, per_request, samples, max_requests, length_ratio

    def key(self, text: str) -> str | None:
        if self.rephraser is None:
            return None
        return record_key(self.rephraser.identity, self.instruction.sha256, text)

    def lookup(self, text: str) -> dict | None:
        key = self.key(text)
        return self.store.get(key) if key else self.store.find_original(text)

    def paraphrases(self, text: str, n: int) -> tuple[list[str], dict]:
        """The first ``n`` paraphrases of ``text`` and the record they come from; writes them if missing."""
        record = self.lookup(text)
        if record is not None and len(record["paraphrases"]) >= n:
            return record["paraphrases"][:n], record
        if self.rephraser is None:
            have = 0 if record is None else len(record["paraphrases"])
            raise RephraserError(f"the paraphrase file {self.store.path} has {have} paraphrases of {text[:80]!r}, "
                                 f"{n} are needed; add them to the file or use a rephraser (rephraser=hf or openai)")
        try:
            found = collect_paraphrases(self.rephraser, self.instruction, text, n,
                                        existing=record["paraphrases"] if record else (), **self.collect_options)
        except RephraserError as error:
            partial = getattr(error, "collected", None)
            if partial is not None and len(partial.paraphrases) > len((record or {}).get("paraphrases", ())):
                self._put(text, partial, record)  # nothing obtained is lost: a rerun asks only for the rest
                raise RephraserError(f"{error} The {len(partial.paraphrases)} obtained are kept in "
                                     f"{self.store.path}.") from None
            raise
        record = self._put(text, found, record)
        return record["paraphrases"][:n], record

    def _put(self, text: str, found, previous: dict | None) -> dict:
        return self.store.put({
            "key": self.key(text), "original": text, "paraphrases": found.paraphrases,
            "rephraser": self.rephraser.identity, "rephraser_name": self.rephraser.name,
            "instruction_sha256": self.instruction.sha256,
            "requests": found.requests + (previous or {}).get("requests", 0), "rejected": dict(found.rejected),
        })

    def describe(self) -> dict:
        if self.rephraser is None:
            return {"rephraser": "user-supplied paraphrase file", "paraphrase_file": str(self.store.path)}
        return {"rephraser": self.rephraser.name, "rephraser_identity": self.rephraser.identity,
                "instruction": self.instruction.to_dict(), "instruction_sha256": self.instruction.sha256,
                "paraphrase_file": str(self.store.path), **{k: v for k, v in self.collect_options.items()}}


def make_paraphrase_source(cfg: RephraserConfig, cache_dir: str | Path) -> ParaphraseSource:
    """The ``ParaphraseSource`` a paraphrase or mixture run reads from (and writes to)."""
    if cfg.backend == "file":
        if not cfg.path:
            raise ConfigError("rephraser=file needs rephraser.path=<your paraphrase JSONL file>")
        return ParaphraseSource(ParaphraseFile(cfg.path, user_supplied=True))
    rephraser = make_rephraser(cfg, str(cache_dir))
    store = ParaphraseFile(cfg.path or default_paraphrase_path(cfg, cache_dir))
    return ParaphraseSource(store, rephraser, Instruction.from_dict(cfg.instruction), seed=cfg.seed,
                            per_request=cfg.per_request, samples=cfg.samples, max_requests=cfg.max_requests,
                            length_ratio=(cfg.min_length_ratio, cfg.max_length_ratio))
