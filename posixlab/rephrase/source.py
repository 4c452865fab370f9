"""Where a paraphrase or mixture run gets its paraphrases: a ``ParaphraseSource`` reads them from the paraphrase
file and, for originals missing there, has the rephraser write them (and stores them).

With quality checks on (``rephraser.validate``, the default), every paraphrase a run uses has its quality measures
(``posixlab.rephrase.quality``) in its record and passes the quality rules. A record read from the file is checked
again: one written before the measures existed, or measured with another embedding model, is re-scored; paraphrases
that fail the current rules are dropped (and, with a rephraser, replaced by new ones), never silently trusted.

``make_paraphrase_source`` builds the source a ``RephraserConfig`` describes. Nothing here knows about prompt
variants: ``posixlab.variants.paraphrase`` uses a source, this package never imports the variants.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict
from pathlib import Path

from posixlab.errors import ConfigError, RephraserError
from posixlab.rephrase.base import Instruction, Rephraser, collect_paraphrases
from posixlab.rephrase.config import RephraserConfig, default_paraphrase_path, make_rephraser
from posixlab.rephrase.quality import QualityRules, QualityScorer, summarize
from posixlab.rephrase.store import ParaphraseFile, record_key


class ParaphraseSource:
    """Paraphrases of original texts: read from ``store``, written by ``rephraser`` when missing (and then stored)."""

    def __init__(self, store: ParaphraseFile, rephraser: Rephraser | None = None,
                 instruction: Instruction | None = None, *, scorer=None, rules: QualityRules | None = None,
                 **collect_options):
        if rephraser is not None and instruction is None:
            raise ConfigError("a rephraser needs an instruction (rephraser.instruction)")
        self.store = store
        self.rephraser = rephraser
        self.instruction = instruction
        self._scorer = scorer  # a QualityScorer, a function that builds one on first use, or None: no checks
        self.rules = rules or QualityRules()
        self.collect_options = collect_options  # seed, per_request, samples, max_requests, length_ratio

    @property
    def scorer(self) -> QualityScorer | None:
        if callable(self._scorer) and not isinstance(self._scorer, QualityScorer):
            self._scorer = self._scorer()  # the embedding model loads only when a paraphrase is checked
        return self._scorer

    def key(self, text: str) -> str | None:
        if self.rephraser is None:
            return None
        return record_key(self.rephraser.identity, self.instruction.sha256, text)

    def lookup(self, text: str) -> dict | None:
        key = self.key(text)
        return self.store.get(key) if key else self.store.find_original(text)

    def paraphrases(self, text: str, n: int) -> tuple[list[str], dict]:
        """The first ``n`` paraphrases of ``text`` and the record they come from; writes them if missing."""
        record = self._checked(text, self.lookup(text))
        if record is not None and len(record["paraphrases"]) >= n:
            return record["paraphrases"][:n], record
        if self.rephraser is None:
            have = 0 if record is None else len(record["paraphrases"])
            dropped = (record or {}).get("dropped") or {}
            why = (f" that pass the quality checks ({', '.join(f'{c} {r}' for r, c in dropped.items())} dropped; "
                   f"relax the rule in question, e.g. rephraser.min_similarity, or rephraser.validate=false)"
                   if dropped else "")
            raise RephraserError(f"the paraphrase file {self.store.path} has {have} paraphrases of {text[:80]!r}"
                                 f"{why}, {n} are needed; add them to the file or use a rephraser (rephraser=hf or "
                                 f"openai)")
        try:
            found = collect_paraphrases(self.rephraser, self.instruction, text, n,
                                        existing=record["paraphrases"] if record else (),
                                        existing_quality=(record.get("quality") or {}).get("scores", ()) if record
                                        else (), first_request=(record or {}).get("requests", 0),
                                        scorer=self.scorer, rules=self.rules, **self.collect_options)
        except RephraserError as error:
            partial = getattr(error, "collected", None)
            if partial is not None and len(partial.paraphrases) > len((record or {}).get("paraphrases", ())):
                self._put(text, partial, record)  # nothing obtained is lost: a rerun asks only for the rest
                raise RephraserError(f"{error} The {len(partial.paraphrases)} obtained are kept in "
                                     f"{self.store.path}.") from None
            raise
        record = self._put(text, found, record)
        return record["paraphrases"][:n], record

    def _checked(self, text: str, record: dict | None) -> dict | None:
        """``record`` with every paraphrase measured (re-scored where the measures are missing or were made with
        another scorer) and those failing the rules dropped; a changed record of ours is written back."""
        scorer = self.scorer
        if scorer is None or record is None:
            return record
        quality = record.get("quality") or {}
        scores = quality.get("scores")
        rescored = (quality.get("scorer") != scorer.identity or not isinstance(scores, list)
                    or len(scores) != len(record["paraphrases"]))
        if rescored:
            scores = scorer.score(text, record["paraphrases"])
        verdicts = [self.rules.verdict(s) for s in scores]
        if not rescored and not any(verdicts):
            return record
        dropped = Counter(record.get("dropped") or {})
        dropped.update(v for v in verdicts if v)
        checked = {**record, "paraphrases": [p for p, v in zip(record["paraphrases"], verdicts) if not v],
                   "quality": {"scorer": scorer.identity, "scores": [s for s, v in zip(scores, verdicts) if not v]},
                   "dropped": dict(dropped)}
        if self.rephraser is not None and not self.store.user_supplied and checked.get("key"):
            checked = self.store.put(checked)  # a user's own file is never rewritten; ours records the check
        return checked

    def _put(self, text: str, found, previous: dict | None) -> dict:
        previous = previous or {}
        rejected = Counter(previous.get("rejected") or {})
        rejected.update(found.rejected)
        record = {
            "key": self.key(text), "original": text, "paraphrases": found.paraphrases,
            "rephraser": self.rephraser.identity, "rephraser_name": self.rephraser.name,
            "instruction_sha256": self.instruction.sha256,
            "requests": found.requests + previous.get("requests", 0),
            "candidates": found.candidates + previous.get("candidates", 0), "rejected": dict(rejected),
        }
        if self.scorer is not None:
            record["quality"] = {"scorer": self.scorer.identity, "scores": found.quality}
            if previous.get("dropped"):
                record["dropped"] = previous["dropped"]
        return self.store.put(record)

    def quality_summary(self, records: list[tuple[int, dict]]) -> dict:
        """The distribution of the measures of the paraphrases a run uses: ``(n used, record)`` pairs."""
        if self.scorer is None:
            return {"checked": False}
        scores = [s for n, record in records for s in (record.get("quality") or {}).get("scores", [])[:n]]
        return {"checked": True, "rules": asdict(self.rules), **summarize(scores)}

    def describe(self) -> dict:
        if self.rephraser is None:
            return {"rephraser": "user-supplied paraphrase file", "paraphrase_file": str(self.store.path)}
        return {"rephraser": self.rephraser.name, "rephraser_identity": self.rephraser.identity,
                "quality_scorer": self.scorer.identity if self.scorer else None,
                "instruction": self.instruction.to_dict(), "instruction_sha256": self.instruction.sha256,
                "paraphrase_file": str(self.store.path), **{k: v for k, v in self.collect_options.items()}}


def make_paraphrase_source(cfg: RephraserConfig, cache_dir: str | Path) -> ParaphraseSource:
    """The ``ParaphraseSource`` a paraphrase or mixture run reads from (and writes to)."""
    instruction = Instruction.from_dict(cfg.instruction) if cfg.backend != "file" else None
    rules = QualityRules(min_similarity=cfg.min_similarity, min_length_ratio=cfg.min_length_ratio,
                         max_length_ratio=cfg.max_length_ratio, keep_numbers=cfg.keep_numbers,
                         keep_entities=cfg.keep_entities, reject_borrowed=cfg.reject_borrowed)
    examples = instruction.examples if instruction is not None else ()

    def scorer() -> QualityScorer:
        from posixlab.embeddings import EmbeddingSpec, SentenceEmbedder

        return QualityScorer(SentenceEmbedder(EmbeddingSpec(name=cfg.quality_embedding)), examples)

    checks = {"scorer": scorer if cfg.validate else None, "rules": rules}
    if cfg.backend == "file":
        if not cfg.path:
            raise ConfigError("rephraser=file needs rephraser.path=<your paraphrase JSONL file>")
        return ParaphraseSource(ParaphraseFile(cfg.path, user_supplied=True), **checks)
    rephraser = make_rephraser(cfg, str(cache_dir))
    store = ParaphraseFile(cfg.path or default_paraphrase_path(cfg, cache_dir))
    return ParaphraseSource(store, rephraser, instruction, seed=cfg.seed, per_request=cfg.per_request,
                            samples=cfg.samples, max_requests=cfg.max_requests,
                            length_ratio=(cfg.min_length_ratio, cfg.max_length_ratio), **checks)
