"""Paraphrase variants (paper §4): 20 rewrites of the question by a rephraser model; everything else stays.

For multiple-choice items only the question is rewritten: options, subject line and template are those of the
original. The paraphrases come from a ``ParaphraseSource`` (``posixlab.rephrase.source``): a paraphrase file, and
the rephraser that writes the originals missing from it (none for a user's own file). ``prepare`` fetches every
paraphrase before the first set is built, so a missing key or a weak rephraser fails before any model is loaded for
scoring.
"""

from __future__ import annotations

import sys

from tqdm.auto import tqdm

from posixlab.errors import ConfigError, RephraserError
from posixlab.prompts import PromptItem
from posixlab.rephrase.source import ParaphraseSource
from posixlab.variants.base import Edit, VariantGenerator


class ParaphraseVariants(VariantGenerator):
    kind = "paraphrase"
    uses_paraphrases = True

    def __init__(self, source: ParaphraseSource | None = None):
        if source is None:
            raise ConfigError("variant=paraphrase needs paraphrases: configure a rephraser (rephraser=hf, openai or "
                              "file)")
        self.source = source
        self._ready: dict[str, tuple[list[str], dict]] = {}
        self._used: dict[str, set[int]] = {}  # the paraphrases the sets took (a mixture takes a few of 20)

    def prepare(self, items: list[PromptItem], num_variants: int, progress: bool = True) -> None:
        """Fetch (or write) every question's paraphrases (a rephraser behind a server writes several at once:
        ``ParaphraseSource.paraphrases_of``). A question the rephraser cannot paraphrase does not stop the others:
        every question is tried, what was obtained is kept, and one error then names all that failed."""
        texts = list(dict.fromkeys(item.question for item in items))
        plan = self.source.plan(texts, num_variants)
        dry_run = self.source.dry_run
        print(self.source.announce(plan), file=sys.stderr)
        self.source.progress = progress
        failed: dict[str, str] = {}
        # a user's file that lacks paraphrases, or a dead endpoint, raises at once (every other question would fail
        # the same way, each after its own retries); the paraphrases written so far stay in the file
        with tqdm(total=len(texts), desc="paraphrases", unit="question",
                  disable=not progress or not plan["to_write"] or dry_run, file=sys.stderr) as bar:
            def done(text: str, result) -> None:
                if isinstance(result, RephraserError):
                    failed[text] = str(result)
                    bar.write(f"posixlab: {result}", file=sys.stderr)  # as it happens, not after every question
                bar.update()

            found = self.source.paraphrases_of(texts, num_variants, done=done)
        self._ready.update((t, r) for t, r in found.items() if not isinstance(r, RephraserError))
        failed = {t: failed[t] for t in texts if t in failed}  # in the questions' order, whatever finished first
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
        self._used.setdefault(item.question, set()).add(index)
        return Edit(question=paraphrases[index], record={
            "paraphrase_index": index, "rephraser": record.get("rephraser_name", "user-supplied"),
            "paraphrase_key": record.get("key")})

    def release(self) -> None:
        self.source.release()

    def describe(self) -> dict:
        used = [(sorted(self._used[text]), record) for text, (_, record) in self._ready.items() if text in self._used]
        return {**self.source.describe(), "paraphrase_quality": self.source.quality_summary(used)}


# ParaphraseSource is re-exported: it lived here before it moved to posixlab.rephrase.source
__all__ = ["ParaphraseSource", "ParaphraseVariants"]
