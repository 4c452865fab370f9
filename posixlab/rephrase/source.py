"""Where a paraphrase or mixture run gets its paraphrases: a ``ParaphraseSource`` reads them from the paraphrase
file and, for originals missing there, has the rephraser write them (and stores them).

With quality checks on (``rephraser.validate``, the default), every paraphrase a run uses has its quality measures
(``posixlab.rephrase.quality``) in its record and passes the quality rules. A record read from the file is checked
again: one written before the measures existed, or measured with another embedding model, is re-scored; paraphrases
that fail the current rules are dropped (and, with a rephraser, replaced by new ones), never silently trusted.

Paraphrases that ship with posixlab (``posixlab/data/paraphrases/``: every bundled MMLU question of the offline cells
and the built-in classifiers' task sentences, written by the packaged Qwen2.5-Coder-1.5B-Instruct and checked) are
read when the paraphrase file lacks a text and the rephraser is that same model with the same instruction, so the
offline paraphrase runs write nothing. ``plan`` says, before any work, how many texts are ready and what the
rephraser still has to write (requests, and minutes when it runs in this process).

``make_paraphrase_source`` builds the source a ``RephraserConfig`` describes. Nothing here knows about prompt
variants: ``posixlab.variants.paraphrase`` uses a source, this package never imports the variants.
"""

from __future__ import annotations

import math
import sys
from collections import Counter
from dataclasses import asdict
from pathlib import Path

from tqdm.auto import tqdm

from posixlab.errors import ConfigError, EndpointUnreachableError, RephraserError
from posixlab.rephrase.base import Instruction, ParaphraseCollector, Rephraser
from posixlab.rephrase.config import RephraserConfig, default_paraphrase_path, make_rephraser, resolve_rephraser
from posixlab.rephrase.quality import QualityRules, QualityScorer, describe_summary, summarize
from posixlab.rephrase.store import ParaphraseFile, record_key

SHIPPED = Path(__file__).resolve().parents[1] / "data" / "paraphrases"  # read-only, inside the package
# the accepted paraphrases per request of the packaged 1.5B rephraser, from its records (posixlab/data/paraphrases/);
# what a batch of requests costs in this process is the rephraser's ``seconds_per_batch``, and opening its model its
# ``load_seconds`` (posixlab/rephrase/hf_backend.py)
ACCEPTED_PER_REQUEST = 5.3


def shipped_files() -> list[ParaphraseFile]:
    """The paraphrase files that ship with posixlab, read-only."""
    return [ParaphraseFile(path, read_only=True) for path in sorted(SHIPPED.glob("*.jsonl"))]


class ParaphraseSource:
    """Paraphrases of original texts: read from ``store``, written by ``rephraser`` when missing (and then stored)."""

    def __init__(self, store: ParaphraseFile, rephraser: Rephraser | None = None,
                 instruction: Instruction | None = None, *, scorer=None, rules: QualityRules | None = None,
                 shipped: list[ParaphraseFile] = (), **collect_options):
        if rephraser is not None and instruction is None:
            raise ConfigError("a rephraser needs an instruction (rephraser.instruction)")
        self.store = store
        self.shipped = list(shipped)  # read-only files consulted after the store (posixlab/data/paraphrases/)
        self.from_shipped: set[str] = set()  # the texts whose paraphrases came from a shipped file
        self.rephraser = rephraser
        self.instruction = instruction
        self._scorer = scorer  # a QualityScorer, a function that builds one on first use, or None: no checks
        self.rules = rules or QualityRules()
        self.collect_options = collect_options  # seed, per_request, samples, max_requests, length_*
        self.dry_run = False  # True: a missing paraphrase is a placeholder, nothing is written or sent
        self.progress = True  # a bar while the rephraser writes

    def release(self) -> None:
        """Close the rephraser's model once the paraphrases are in (``Rephraser.release``)."""
        if self.rephraser is not None:
            self.rephraser.release()

    @property
    def scorer(self) -> QualityScorer | None:
        if self.dry_run:  # a dry run plans with the paraphrases as they are (the run checks them): no model loads
            return None
        if callable(self._scorer) and not isinstance(self._scorer, QualityScorer):
            self._scorer = self._scorer()  # the embedding model loads only when a paraphrase is checked
        return self._scorer

    def key(self, text: str) -> str | None:
        if self.rephraser is None:
            return None
        return record_key(self.rephraser.identity, self.instruction.sha256, text)

    def lookup(self, text: str) -> dict | None:
        key = self.key(text)
        record = self.store.get(key) if key else self.store.find_original(text)
        return record if record is not None else self._shipped(text, key)

    def _shipped(self, text: str, key: str | None) -> dict | None:
        """A shipped record of ``text`` this rephraser would have written: the same key, or the same model (any
        backend serving it) with the same instruction."""
        if self.rephraser is None:
            return None
        model = self.rephraser.identity.get("model")
        for shipped in self.shipped:
            record = shipped.get(key) or shipped.find_original(text)
            if record is not None and (record.get("key") == key or (
                    (record.get("rephraser") or {}).get("model") == model
                    and record.get("instruction_sha256") == self.instruction.sha256)):
                return record
        return None

    def _is_shipped(self, record: dict | None) -> bool:
        return record is not None and not (record.get("key") and self.store.get(record["key"]) is record) \
            and any(f.get(record.get("key")) is record or f.find_original(record["original"]) is record
                    for f in self.shipped)

    def plan(self, texts: list[str], n: int) -> dict:
        """What getting ``n`` paraphrases of each of ``texts`` will take, before any is written: how many are ready
        (in the paraphrase file or shipped), how many the rephraser must write, and roughly what that costs."""
        texts = list(dict.fromkeys(texts))
        records = {t: self.lookup(t) for t in texts}
        have = {t: len((r or {}).get("paraphrases", ())) for t, r in records.items()}
        shipped = sum(1 for t, r in records.items() if have[t] >= n and self._is_shipped(r))
        missing = {t: n - h for t, h in have.items() if h < n}
        per_text = [math.ceil(m / ACCEPTED_PER_REQUEST) for m in missing.values()]
        requests = sum(per_text)
        seconds = getattr(self.rephraser, "seconds_per_batch", None)  # a model in this process: on these cores
        local = seconds is not None
        if local and missing:  # the texts in step share a batch; one text's requests follow each other
            batches = max(max(per_text), math.ceil(requests / self._in_step()))
            seconds = batches * seconds + getattr(self.rephraser, "load_seconds", 0)
        plan = {"texts": len(texts), "ready": len(texts) - len(missing), "shipped": shipped,
                "to_write": len(missing), "paraphrases_to_write": sum(missing.values()),
                "rephraser": None if self.rephraser is None else self.rephraser.name,
                "estimated_requests": requests if missing else 0, "local": local,
                "estimated_minutes": round(seconds / 60, 1) if local and missing else None}
        return plan

    def announce(self, plan: dict, what: str = "question") -> str:
        """One line for the console: where a run's paraphrases come from and what writing the rest costs."""
        ready = (f"{plan['ready']} of {plan['texts']} {what}s' paraphrases ready"
                 + (f" ({plan['shipped']} shipped with posixlab)" if plan["shipped"] else "")
                 + (f" in {self.store.path}" if plan["ready"] > plan["shipped"] else ""))
        if not plan["to_write"]:
            return f"posixlab: {ready}; nothing to write"
        if self.rephraser is None:
            return f"posixlab: {ready}; {plan['to_write']} missing from the paraphrase file"
        in_step = self._in_step()
        cost = (f"about {plan['estimated_requests']} requests, ~{plan['estimated_minutes']:g} min of local "
                f"generation on 2 CPU cores{f', {in_step} questions in step' if in_step > 1 else ''} "
                f"({'rephraser=llamacpp shortens it; ' if self.rephraser.identity.get('backend') == 'hf' else ''}"
                f"rephraser=openai or rephraser=file avoid it; docs/replication.md)"
                if plan["local"] else f"about {plan['estimated_requests']} request(s) of "
                f"{self.collect_options.get('samples', 4)} replies to "
                f"{getattr(self.rephraser, 'endpoint', None) or 'its endpoint'}, "
                f"at most {getattr(self.rephraser, 'concurrency', 1)} in flight")
        verb = "would write" if self.dry_run else "writes"
        return (f"posixlab: {ready}; {self.rephraser.name} {verb} {plan['paraphrases_to_write']} paraphrases of "
                f"{plan['to_write']} {what}(s): {cost}")

    def _in_step(self) -> int:
        """How many texts the rephraser writes at once: its ``concurrency`` (requests in flight, or rows of a batch)
        over the replies of a request."""
        return max(1, getattr(self.rephraser, "concurrency", 1) // self.collect_options.get("samples", 1))

    def paraphrases(self, text: str, n: int) -> tuple[list[str], dict]:
        """The first ``n`` paraphrases of ``text`` and the record they come from; writes them if missing."""
        ready, record = self._ready(text, n)
        if ready is not None:
            return ready
        collector = self._collector(text, n, record)
        bar = tqdm(total=n, initial=len(collector.found.paraphrases), desc=f"paraphrases by {self.rephraser.name}",
                   unit="paraphrase", disable=not self.progress, file=sys.stderr, leave=False)
        try:
            while (request := collector.request()) is not None:
                try:
                    replies = self.rephraser.chat(**request)
                except RephraserError as error:
                    raise self._kept(text, collector, record, error) from None
                collector.take(replies)
                bar.update(len(collector.found.paraphrases) - bar.n)
        finally:
            bar.close()
        return self._finish(text, collector, record)

    def _ready(self, text: str, n: int) -> tuple[tuple | None, dict | None]:
        """``(paraphrases, record)`` when ``text`` needs nothing written (enough in a file; a dry run's
        placeholders), else None and the record to top up (None: none yet). A user's file short of paraphrases is
        a ``RephraserError``."""
        found = self.lookup(text)
        record = self._checked(text, found)
        if record is not None and len(record["paraphrases"]) >= n:
            if self._is_shipped(found):
                self.from_shipped.add(text)
            return (record["paraphrases"][:n], record), record
        if self.dry_run:  # what the run would use: the paraphrases there are, then placeholders of the rest
            have = [] if record is None else record["paraphrases"][:n]
            return (have + [f"{text} [paraphrase {i + 1}, not yet written]" for i in range(len(have), n)],
                    {"original": text, "paraphrases": [], "dry_run": True}), record
        if self.rephraser is None:
            have = 0 if record is None else len(record["paraphrases"])
            dropped = (record or {}).get("dropped") or {}
            why = (f" that pass the quality checks ({', '.join(f'{c} {r}' for r, c in dropped.items())} dropped; "
                   f"relax the rule in question, e.g. rephraser.min_similarity, or rephraser.validate=false)"
                   if dropped else "")
            raise RephraserError(f"the paraphrase file {self.store.path} has {have} paraphrases of {text[:80]!r}"
                                 f"{why}, {n} are needed; add them to the file or use a rephraser (rephraser=hf or "
                                 f"openai)")
        return None, record

    def _collector(self, text: str, n: int, record: dict | None) -> ParaphraseCollector:
        """What collects the paraphrases ``text`` still lacks, starting from ``record``'s."""
        return ParaphraseCollector(self.rephraser.name, self.instruction, text, n,
                                   existing=record["paraphrases"] if record else (),
                                   existing_quality=(record.get("quality") or {}).get("scores", ()) if record
                                   else (), first_request=(record or {}).get("requests", 0),
                                   scorer=self.scorer, rules=self.rules, **self.collect_options)

    def _finish(self, text: str, collector: ParaphraseCollector, record: dict | None) -> tuple[list[str], dict]:
        """A collector with no request left: its paraphrases stored and returned, or (too few) its error raised."""
        found = collector.result()
        if isinstance(found, RephraserError):
            raise self._kept(text, collector, record, found)
        record = self._put(text, found, record)
        return record["paraphrases"][:collector.n], record

    def _keep(self, text: str, collector: ParaphraseCollector, record: dict | None) -> bool:
        """Stores the paraphrases ``collector`` obtained when it has more than ``record``; whether it did."""
        if len(collector.found.paraphrases) <= len((record or {}).get("paraphrases", ())):
            return False
        self._put(text, collector.found, record)
        return True

    def _kept(self, text: str, collector: ParaphraseCollector, record: dict | None, error: RephraserError):
        """``error``, once the paraphrases ``collector`` obtained beyond ``record``'s are stored (nothing obtained
        is lost: a rerun asks only for the rest); its message says so, its class stays (a dead endpoint's stops the
        run)."""
        if not self._keep(text, collector, record):
            return error
        partial = collector.found
        kept = type(error)(f"{error} The {len(partial.paraphrases)} obtained are kept in {self.store.path}.")
        kept.collected = partial
        return kept

    def paraphrases_of(self, texts: list[str], n: int, done=None) -> dict[str, tuple | RephraserError]:
        """Each of ``texts``' first ``n`` paraphrases and record (as ``paraphrases``), or the ``RephraserError`` that
        stopped that text: a text the rephraser cannot paraphrase does not stop the others. A dead endpoint
        (``EndpointUnreachableError``) and a user's file that lacks paraphrases raise at once (every other text would
        fail the same way). ``done(text, result)`` is called as each text is finished (a progress bar).

        A rephraser behind a server (``concurrency`` requests in flight) writes several texts at once, each request's
        replies together: ``concurrency // samples`` texts, after the first text to write has gone alone (a dead or
        misconfigured endpoint fails there, once). What each text gets is the same at any concurrency: its requests
        carry their own seeds, and each record is stored the moment its text is done.

        A model in this process that decodes several requests in one batch (``Rephraser.batches``: the ``hf``
        rephraser) writes ``concurrency // samples`` texts in step instead (``_write_together``)."""
        texts = list(dict.fromkeys(texts))
        results = {}

        def one(text: str):
            try:
                return self.paraphrases(text, n)
            except RephraserError as error:
                if self.rephraser is None or isinstance(error, EndpointUnreachableError):
                    raise
                return error

        at_once = 1 if self.rephraser is None or self.dry_run else self._in_step()
        if at_once > 1 and getattr(self.rephraser, "batches", False):
            return self._write_together(texts, n, at_once, done)
        to_write = [t for t in texts if len((self.lookup(t) or {}).get("paraphrases", ())) < n] if at_once > 1 else []
        alone = set(texts) - set(to_write[1:])  # the texts that are ready (nothing to wait for), and the first to write
        for text in texts:
            if text in alone:
                results[text] = one(text)
                if done is not None:
                    done(text, results[text])
        if to_write[1:]:
            from posixlab.openai_client import run_bounded  # here: the openai client loads only to talk to a server

            self.scorer  # the embedding model loads here, once, not in every thread at once
            progress, self.progress = self.progress, False  # one bar a text would interleave: the caller's counts
            try:
                for text, result in run_bounded(one, to_write[1:], at_once):
                    results[text] = result
                    if done is not None:
                        done(text, result)
            finally:
                self.progress = progress
        return {text: results[text] for text in texts}

    def _write_together(self, texts: list[str], n: int, at_once: int, done=None) -> dict[str, tuple | RephraserError]:
        """``paraphrases_of`` for a rephraser that decodes requests in batches: up to ``at_once`` texts are written
        in step, each round one batch of every such text's next request (``Rephraser.chat_batch``); a text that is
        done (or out of requests) is stored and the next text to write takes its place in the next round. Which
        requests share a batch depends only on the texts' order and ``at_once``, so a run is the same every time;
        a reply is the same in any batch (each draws from its own seeded generator, ``posixlab.models.sampling``).
        If a batch fails, every text in step keeps the paraphrases obtained so far before the error is raised."""
        results: dict[str, tuple | RephraserError] = {}
        waiting = list(texts)
        in_step: list[tuple[str, ParaphraseCollector, dict | None]] = []

        def settle(text: str, outcome) -> None:
            results[text] = outcome
            if done is not None:
                done(text, outcome)

        def finish(text: str, collector: ParaphraseCollector, record: dict | None) -> None:
            try:
                outcome = self._finish(text, collector, record)
            except RephraserError as error:
                outcome = error
            settle(text, outcome)

        self.scorer  # the embedding model loads before the rephraser's first batch, not inside it
        while waiting or in_step:
            while waiting and len(in_step) < at_once:
                text = waiting.pop(0)
                ready, record = self._ready(text, n)
                if ready is not None:
                    settle(text, ready)
                    continue
                collector = self._collector(text, n, record)
                if collector.done:  # out of requests from earlier runs: its error, nothing sent
                    finish(text, collector, record)
                else:
                    in_step.append((text, collector, record))
            if not in_step:
                break
            try:
                replies = self.rephraser.chat_batch([collector.request() for _, collector, _ in in_step])
            except BaseException:
                for text, collector, record in in_step:
                    self._keep(text, collector, record)  # what each has obtained
                raise
            for (_, collector, _), request_replies in zip(in_step, replies):
                collector.take(request_replies)
            for entry in [entry for entry in in_step if entry[1].done]:
                in_step.remove(entry)
                finish(*entry)
        return {text: results[text] for text in texts}

    def _checked(self, text: str, record: dict | None) -> dict | None:
        """``record`` with every paraphrase measured (re-scored where the measures are missing or were made with
        another scorer) and those failing the rules dropped; a changed record of ours is written back."""
        if record is None:
            return record
        scorer = self.scorer  # loads the embedding model: only when there is a record to check
        if scorer is None:
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
        ours = checked.get("key") and self.store.get(checked["key"]) is record  # not a shipped file's
        if self.rephraser is not None and not self.store.user_supplied and ours:
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
        record.update(self._folded())
        if self.scorer is not None:
            record["quality"] = {"scorer": self.scorer.identity, "scores": found.quality}
            if previous.get("dropped"):
                record["dropped"] = previous["dropped"]
        return self.store.put(record)

    def quality_summary(self, records: list[tuple[int | list[int], dict]]) -> dict:
        """The distribution of the measures of the paraphrases a run uses: ``(used, record)`` pairs, ``used`` the
        number of paraphrases taken from the record's first, or the indices of those taken (a mixture draws a few of
        a question's 20)."""
        if self.scorer is None:
            return {"checked": False}
        scores = [s for used, record in records
                  for scores in [(record.get("quality") or {}).get("scores", [])]
                  for s in (scores[:used] if isinstance(used, int) else [scores[i] for i in used if i < len(scores)])]
        return {"checked": True, "rules": asdict(self.rules), **summarize(scores)}

    def describe(self) -> dict:
        if self.rephraser is None:
            return {"rephraser": "user-supplied paraphrase file", "paraphrase_file": str(self.store.path)}
        shipped = {"shipped_paraphrases": {"texts": len(self.from_shipped),
                                           "files": [str(f.path.name) for f in self.shipped]}} \
            if self.from_shipped else {}
        return {"rephraser": self.rephraser.name, "rephraser_identity": self.rephraser.identity,
                "quality_scorer": self.scorer.identity if self.scorer else None,
                "instruction": self.instruction.to_dict(), "instruction_sha256": self.instruction.sha256,
                "paraphrase_file": str(self.store.path), **shipped, **self._folded(),
                **{k: v for k, v in self.collect_options.items()}}

    def _folded(self) -> dict:
        """``system_folded`` where the rephraser's model is open and its instruction has a system message: whether
        the model read that message at the head of the first user turn (its chat template refusing a system turn)."""
        folded = self.rephraser.system_folded() if self.instruction.system else None
        return {} if folded is None else {"system_folded": folded}


def provenance_rows(about: dict, quality: dict | None = None) -> list[tuple[str, str]]:
    """(label, text) rows a report shows of ``ParaphraseSource.describe()``'s dict (a POSIX run's
    ``variant_details``, a classification run's ``rephrasings.json``): who wrote the paraphrases and with what
    settings, the instruction's hash, whether its system message was read folded, where they are, and ``quality``'s
    measures (``quality_summary``). Empty where no rephraser is named (one prompt a sample, say)."""
    if not about.get("rephraser"):
        return []
    identity = about.get("rephraser_identity") or {}
    settings = ", ".join(f"{k} {v}" for k, v in identity.items() if k not in ("backend", "model") and v is not None)
    folded, shipped = about.get("system_folded"), about.get("shipped_paraphrases")
    measured = describe_summary(quality)
    rows = [("written by", about["rephraser"]), ("its settings", settings or None),
            ("instruction", f"SHA-256 {about['instruction_sha256'][:12]}… (the whole instruction: in the run's "
                            f"summary.json)" if about.get("instruction_sha256") else None),
            ("its system message", None if folded is None else "read at the head of the first user turn (the "
             "model's chat template refuses a system turn)" if folded else "sent as a system turn"),
            ("shipped with posixlab", f"{shipped['texts']} texts ({', '.join(shipped['files'])})" if shipped else None),
            ("paraphrase file", about.get("paraphrase_file")),
            ("measured", measured.removeprefix("paraphrases: ") if measured else None)]
    return [(label, str(text)) for label, text in rows if text is not None]


def make_paraphrase_source(cfg: RephraserConfig, cache_dir: str | Path, model=None,
                           instruction: str = "default", dry_run: bool = False) -> ParaphraseSource:
    """The ``ParaphraseSource`` a paraphrase or mixture run reads from (and writes to): ``cfg`` resolved for a run of
    ``model`` (``resolve_rephraser``: ``backend=auto``, the packaged ``instruction`` when none is given). ``dry_run``:
    a source that writes and sends nothing (a missing paraphrase is a placeholder; the rephraser needs no key)."""
    cfg = resolve_rephraser(cfg, model, instruction)
    instruction = Instruction.from_dict(cfg.instruction) if cfg.backend != "file" else None
    rules = QualityRules(min_similarity=cfg.min_similarity, min_length_ratio=cfg.min_length_ratio,
                         max_length_ratio=cfg.max_length_ratio, length_slack=cfg.length_slack,
                         keep_numbers=cfg.keep_numbers,
                         keep_entities=cfg.keep_entities, reject_borrowed=cfg.reject_borrowed)
    examples = instruction.examples if instruction is not None else ()

    def scorer() -> QualityScorer:
        from posixlab.embeddings import EmbeddingSpec, SentenceEmbedder

        return QualityScorer(SentenceEmbedder(EmbeddingSpec(name=cfg.quality_embedding)), examples)

    checks = {"scorer": scorer if cfg.validate else None, "rules": rules}
    if cfg.backend == "file":
        if not cfg.path:
            raise ConfigError("rephraser=file needs rephraser.path=<your paraphrase JSONL file>")
        source = ParaphraseSource(ParaphraseFile(cfg.path, user_supplied=True), **checks)
    else:
        rephraser = make_rephraser(cfg, str(cache_dir), offline=dry_run)
        store = ParaphraseFile(cfg.path or default_paraphrase_path(cfg, cache_dir))
        source = ParaphraseSource(store, rephraser, instruction, shipped=shipped_files() if cfg.shipped else (),
                                  seed=cfg.seed, per_request=cfg.per_request,
                                  samples=cfg.samples, max_requests=cfg.max_requests,
                                  length_ratio=(cfg.min_length_ratio, cfg.max_length_ratio),
                                  length_slack=cfg.length_slack, **checks)
    source.dry_run = dry_run
    return source
