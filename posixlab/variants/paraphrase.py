"""Paraphrase variants (paper §4): 20 rewrites of the question by a rephraser model; everything else stays.

For multiple-choice items only the question is rewritten: options, subject line and template are those of the
original. The paraphrases come from a ``ParaphraseSource``: a paraphrase file, and the rephraser that writes the
originals missing from it (none for a user's own file). ``prepare`` fetches every paraphrase before the first set
is built, so a missing key or a weak rephraser fails before any model is loaded for scoring.
"""

from __future__ import annotations

import sys

from tqdm.auto import tqdm

from posixlab.errors import ConfigError, RephraserError
from posixlab.prompts import PromptItem
from posixlab.rephrase import Instruction, ParaphraseFile, Rephraser, collect_paraphrases, record_key
from posixlab.variants.base import Edit, VariantGenerator


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


class ParaphraseVariants(VariantGenerator):
    kind = "paraphrase"
    uses_paraphrases = True

    def __init__(self, source: ParaphraseSource | None = None):
        if source is None:
            raise ConfigError("variant=paraphrase needs paraphrases: configure a rephraser (rephraser=hf, openai or "
                              "file)")
        self.source = source
        self._ready: dict[str, tuple[list[str], dict]] = {}

    def prepare(self, items: list[PromptItem], num_variants: int, progress: bool = True) -> None:
        """Fetch (or write) every question's paraphrases. A question the rephraser cannot paraphrase does not stop
        the others: every question is tried, what was obtained is kept, and one error then names all that failed."""
        texts = list(dict.fromkeys(item.question for item in items))
        missing = [t for t in texts if (r := self.source.lookup(t)) is None or len(r["paraphrases"]) < num_variants]
        if missing:
            print(f"posixlab: {len(texts) - len(missing)} of {len(texts)} questions already paraphrased in "
                  f"{self.source.store.path}; writing {len(missing)}", file=sys.stderr)
        failed: dict[str, str] = {}
        for text in tqdm(texts, desc="paraphrases", unit="question", disable=not progress or not missing,
                         file=sys.stderr):
            try:
                self._ready[text] = self.source.paraphrases(text, num_variants)
            except RephraserError as error:
                if self.source.rephraser is None:  # a user's file: nothing to wait for, say it at once
                    raise
                failed[text] = str(error)
                print(f"posixlab: {error}", file=sys.stderr)
        if failed:
            ids = [item.item_id for item in items if item.question in failed]
            raise RephraserError(
                f"the rephraser could not write {num_variants} valid paraphrases for {len(failed)} of {len(texts)} "
                f"questions (item ids {', '.join(ids)}); the others are done and kept. Raise rephraser.max_requests, "
                f"use a stronger rephraser, supply a paraphrase file, or leave these items out as the paper left out "
                f"the items GPT-3.5 would not paraphrase: dataset.exclude_items=[{','.join(ids)}]. First failure: "
                f"{next(iter(failed.values()))}")

    def edit(self, item: PromptItem, index: int, seed: int) -> Edit:
        if item.question not in self._ready:
            raise RuntimeError("ParaphraseVariants.prepare(items, num_variants) must run before building sets")
        paraphrases, record = self._ready[item.question]
        if index >= len(paraphrases):
            raise ConfigError(f"{len(paraphrases)} paraphrases were prepared, variant {index} was asked for")
        return Edit(question=paraphrases[index], record={
            "paraphrase_index": index, "rephraser": record.get("rephraser_name", "user-supplied"),
            "paraphrase_key": record.get("key")})

    def describe(self) -> dict:
        return self.source.describe()
