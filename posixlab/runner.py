"""The one run skeleton: every task (``posixlab/tasks/``) runs through ``run``, top to bottom.

1. **Check** the task's settings and that the model can do what the task needs (``Task.needs``, the backend's
   capabilities): a config error before anything is loaded. A hub model is looked up last: a complete local snapshot,
   or the hub's answer for its files (gated, missing, down: one message before any input is built).
2. **Server first**: a model behind a server is connected before any input is built, so a dead one is reported at
   once.
3. **Inputs**: the task builds its units (prompt sets; samples with their rephrased prompts); ``shard=K/N`` keeps
   every N-th unit, each record keeping its index in the whole cell.
4. **Model**: loaded (in process) unless given; the task prepares what needs it (label tokens, files about inputs)
   and turns every unit into requests, encoded and checked to fit the context, before the first forward pass.
5. **Work**: one engine per response length runs the requests, reading and filling the score cache (so a rerun, or
   a run restarted after a kill, recomputes nothing it finished); the cache is closed however the run ends.
6. **Records**: each unit's record is written and flushed the moment its last request finishes, with a progress
   bar (or, without one, one plain line per unit).
7. **Summary**: the task summarises the records with what every run records (model identity, seed, config and its
   fingerprint, shard, compute), and writes ``summary.json``/``summary.md``.

A **dry run** (``dry_run=true``) stops after step 4's requests: the model is opened for a plan only (its tokenizer and
context length: no weights load, no server starts; a chat API is asked nothing and needs no key), and it returns the
units, requests and prompts, with what a chat API would send after cache hits; nothing is sent or cached.
"""

from __future__ import annotations

import platform
import sys
import time
from contextlib import ExitStack, closing, contextmanager
from dataclasses import asdict
from pathlib import Path

from tqdm.auto import tqdm

from posixlab.backends import (backend_of, capabilities_of, check_capabilities, check_model, engine_for, load,
                               open_cache, open_for_plan)
from posixlab.errors import check_flag, check_progress
from posixlab.models.capabilities import check_chat_template
from posixlab.models.loading import check_hub_model
from posixlab.plugins import loaded_plugins
from posixlab.results import SetWriter
from posixlab.seeding import check_seed
from posixlab.shards import config_fingerprint, parse_shard, shard_indices
from posixlab.tasks import make_task
from posixlab.tasks.base import Task
from posixlab.version import __version__


def run_environment() -> dict:
    """What the numbers depend on beyond the config and the model's identity: the machine's architecture and, where a
    model ran in this process, torch's thread count (another count splits a CPU run's sums differently: its numbers
    move in their last bits, docs/choices.md). ``posixlab compare`` names a difference."""
    torch = sys.modules.get("torch")  # not imported by a run whose model is behind a server
    return {"machine": platform.machine(), "torch_threads": torch.get_num_threads() if torch is not None else None}


def check(task: Task, lm=None) -> None:
    """Everything that can be checked before any input is built or any model loaded."""
    check_seed(getattr(task.cfg, "seed", 0))  # a plug-in task's config may have none
    for flag in ("chat_template", "score_cache", "dry_run"):  # the Python API's too: "yes" would count as true
        check_flag(flag, getattr(task.cfg, flag, False))
    task.check()
    if lm is None:
        backend = check_model(task.cfg.model)
        if backend.credentials is not None and not getattr(task.cfg, "dry_run", False):
            backend.credentials(task.cfg.model)
    check_capabilities(task.needs(), task.cfg.model, lm)
    if lm is None and task.cfg.model.source == "hub":  # last: the one check that may ask the network
        # gated without a token, a wrong id, a hub down: said before any work
        (backend_of(task.cfg.model).hub_check or check_hub_model)(task.cfg.model)


def check_tokenizer(task: Task, lm=None) -> None:
    """What the task asks of the model's tokenizer (a chat template), before inputs are built, weights load or a
    server starts: the tokenizer alone is opened (seconds; a 7B model's weights take minutes)."""
    cfg = task.cfg
    if not getattr(cfg, "chat_template", False):  # a plug-in task's config may have none
        return
    if lm is not None:
        tokenizer = getattr(lm, "tokenizer", None)
    else:
        opener = backend_of(cfg.model).tokenizer
        tokenizer = opener(cfg.model, cfg.cache_dir) if opener is not None else None
    if tokenizer is not None:  # None: the model tokenises elsewhere and applies its own template (a chat API)
        check_chat_template(tokenizer, cfg.model.name)


@contextmanager
def library_bars(shown: bool):
    """The libraries' own bars (transformers' "Loading weights", the hub's downloads) as the run's: off when it shows
    none (``progress=false``, or ``lines`` for the logs of sweeps and cluster jobs, where a bar is a line of carriage
    returns); restored afterwards."""
    if shown:
        yield
        return
    from huggingface_hub.utils import are_progress_bars_disabled, disable_progress_bars, enable_progress_bars

    were_on = not are_progress_bars_disabled()
    transformers_logging = sys.modules.get("transformers.utils.logging")  # imported later, it reads the hub's state
    disable_progress_bars()
    if transformers_logging is not None:
        transformers_logging.disable_progress_bar()
    try:
        yield
    finally:
        if were_on:
            enable_progress_bars()
            if (transformers_logging := sys.modules.get("transformers.utils.logging")) is not None:
                transformers_logging.enable_progress_bar()


def run(config_or_task, lm=None, progress: bool = True, given=None) -> dict:
    """Run a task (or the task of a config: ``PosixConfig``, ``ClassificationConfig``) and write its results to its
    ``output_dir``; returns the summary. ``lm`` reuses a loaded model (the caller keeps it; a model loaded here is
    closed at the end, which stops a server it started); ``given``: the user's own POSIX prompt sets. ``progress``:
    True, bars; ``"lines"``, one plain line per finished unit (for logs: sweeps, cluster jobs); False, quiet."""
    check_progress(progress)  # "yes" ran quiet, without a word
    lines = progress == "lines"
    progress = progress is True or (isinstance(progress, str) and progress.lower() == "true")
    task = config_or_task if isinstance(config_or_task, Task) else make_task(config_or_task, given=given)
    cfg = task.cfg
    check(task, lm)
    check_tokenizer(task, lm)
    dry = getattr(cfg, "dry_run", False)
    opener = open_for_plan if dry else load  # a dry run: the tokenizer, or a chat API that is asked nothing
    with ExitStack() as owned:
        owned.enter_context(library_bars(progress))
        if lm is None and backend_of(cfg.model).remote:
            lm = owned.enter_context(closing(opener(cfg.model, cfg.cache_dir)))
        units = task.build_units(progress)
        cell_size = len(units)
        positions = shard_indices(cell_size, cfg.shard)  # every unit, or one shard's slice
        units = [units[i] for i in positions]
        if lm is None:
            lm = owned.enter_context(closing(opener(cfg.model, cfg.cache_dir)))
        out = Path(cfg.output_dir)
        out.mkdir(parents=True, exist_ok=True)
        task.prepare(lm, units, out)
        requests = [task.requests(unit, lm) for unit in units]  # encoded and checked before any forward pass
        # the backend's answer cache: scores by token ids, or a chat API's answers by request (a rerun, or a run
        # restarted after a kill, recomputes and resends nothing it finished)
        # (a dry run opens it only for a plan that counts its hits: it writes nothing, a new cache file included)
        counted = not dry or backend_of(lm).plan is not None
        cache = owned.enter_context(closing(opened)) if cfg.score_cache and counted and (
            opened := open_cache(lm, cfg.score_cache_dir, cfg.cache_dir)) is not None else None
        if dry:
            return dry_run(task, lm, units, requests, cache)
        tokens_before = lm.forward_tokens
        engines = _work(task, lm, units, positions, requests, cache, out, progress, lines)
        meta = {
            "task": task.name,
            "model": lm.identity,
            "capabilities": sorted(capabilities_of(lm)),  # what the summary may rely on (a deterministic stack, ...)
            "seed": cfg.seed,
            **task.meta(lm),
            "posixlab": __version__,
            "python": platform.python_version(),
            "environment": run_environment(),
            "config": asdict(cfg),
            "config_fingerprint": config_fingerprint(asdict(cfg)),
            "shard": None if cfg.shard is None else {
                "index": parse_shard(cfg.shard)[0], "count": parse_shard(cfg.shard)[1],
                "num_units_total": cell_size, "unit_indices": positions},
            "score_cache": str(cache.path) if cache is not None else None,
            # what this run's engines ran: in process, the tokens through the model; on a server, the tokens of
            # the requests sent (the server recomputes each request's prompt)
            "engine": {"kind": backend_of(lm).kind,
                       "forward_tokens": lm.forward_tokens - tokens_before,
                       "processed_tokens": sum(engine.processed_tokens for engine in engines)},
        }
        if loaded_plugins():  # the code outside posixlab this result depends on (posixlab/plugins.py)
            meta["plugins"] = loaded_plugins()
        if backend_of(lm).report is not None:  # a chat API: what was sent, its usage and cost, where it stopped
            meta.update(backend_of(lm).report(engines, lm.spec))
    summary = task.summarize(task.summary_records(out), meta)
    task.write_summary(out, summary)
    return summary


def dry_run(task: Task, lm, units: list, requests: list, cache) -> dict:
    """What the run would do, without doing it: the units, requests and prompts, and what the backend adds (a chat
    API: the requests it would send after cache hits, an estimate of their tokens, and their cost with prices);
    nothing is sent or written."""
    flat = [request for unit_requests in requests for request in unit_requests]
    plan = {"task": task.name, "model": lm.name, "units": len(units), "requests": len(flat),
            "prompts": sum(len(r.texts) for r in flat)}
    backend = backend_of(lm)
    if backend.plan is not None:
        plan.update(backend.plan(lm, flat, task.cfg.engine, cache))
    return {"dry_run": plan}


def _work(task: Task, lm, units: list, positions: list[int], requests: list, cache, out: Path,
          progress: bool, lines: bool = False) -> list:
    """Run every request, one engine per response length (and repeat); write each unit's record when its last one is
    done. A task that works in rounds (``Task.rounds``: a prompt race) has each later round's requests made again
    once the rounds before it are recorded."""
    results = [None] * len(units)
    remaining = [0] * len(units)
    desc = f"{lm.name} · {task.describe()}"
    engines = []
    bar = tqdm(total=len(units), desc=desc, unit=task.unit_name, disable=not progress, file=sys.stderr)
    started, done = time.monotonic(), 0
    with SetWriter(out, task.records_file) as writer:
        for number, members in enumerate(task.rounds(units)):
            if number:  # what the finished rounds decided (the prompts still racing)
                for u in members:
                    requests[u] = task.requests(units[u], lm)
            for u in members:
                results[u], remaining[u] = [None] * len(requests[u]), len(requests[u])
            flat = [(u, k, request) for u in members for k, request in enumerate(requests[u])]
            for u, k, scores in _answers(task, lm, flat, cache, engines):
                results[u][k] = scores
                remaining[u] -= 1
                if remaining[u]:
                    continue
                record = {task.index_key: positions[u], **task.record(units[u], requests[u], results[u], lm)}
                results[u] = None  # a unit's matrices are in its record now
                writer.write(record)
                done += 1
                bar.update(1)
                note = task.progress_note(record)
                if progress:
                    bar.set_postfix_str(note, refresh=False)
                elif lines:  # no bar (sweeps, logs): one plain line per finished unit, so a log shows how far it got
                    print(f"posixlab: {desc}: {done}/{len(units)} {task.unit_name}s, "
                          f"{time.monotonic() - started:.0f} s, {task.unit_name} {positions[u]} {note}",
                          file=sys.stderr, flush=True)
    bar.close()
    return engines


def _answers(task: Task, lm, flat: list, cache, engines: list):
    """``(unit, request, scores)`` for each of ``flat``'s ``(unit, request, Request)`` as the engines finish them:
    one engine per response length; where the cache does not key on the repeat (a model that computes here or on a
    vLLM server), also one per repeat (task.repeats): a repeat runs again, in waves of its own and past the score
    cache, so the noise floor of such a model is a measurement of the stack, not a cache hit. Each engine is added
    to ``engines`` (what the run's summary counts)."""
    shared = backend_of(lm).repeats_in_cache_key
    for length, repeat in sorted({(r.max_new_tokens, 0 if shared else r.repeat) for _, _, r in flat}):
        group = [(u, k, request) for u, k, request in flat
                 if request.max_new_tokens == length and (shared or request.repeat == repeat)]
        group_requests = [request for _, _, request in group]
        engine = engine_for(lm, length, task.cfg.engine, cache if repeat == 0 else None, group_requests)
        engines.append(engine)
        for local, scores in engine.run(group_requests, in_order=task.in_order):
            u, k, _ = group[local]
            yield u, k, scores
