"""Where a scoring engine's time goes (issue 43): seconds per phase, the model's share of each, and what a profile
of the device's kernels says. Used by ``experiments/gpu_check.py``; works on any engine with the methods
``_prefill``, ``_decode`` and ``_score`` (this repository's, and earlier versions of it loaded from a file).

A phase's seconds run from its method's entry to its exit with the device synchronised at both ends; its model
seconds sum the forward calls inside it, each synchronised too. "Other" is the rest of the run: planning, stacking
caches, tries, assembly and the cache. The synchronisations cost a little overlap of host and device, so an
instrumented run is slower than a plain one: gpu_check times both and reports each.
"""

from __future__ import annotations

import importlib.util
import os
import statistics
import sys
import threading
import time
from pathlib import Path

import torch

PHASES = {"_prefill": "prefill", "_decode": "decode", "_score": "scoring"}
# The work outside the model, each part timed on its own within the phase it runs in (where an engine has the
# method; earlier engines loaded with ``--before`` may not): the caches a pass runs on, stacked from the segments or
# copied; a pass's inputs and mask built; scoring's targets selected and added up (one transfer). A part inside
# another counts as the outer one.
PARTS = {"_stack_kv": "caches", "_chunk_cache": "caches", "_segment_inputs": "inputs", "_chunk_inputs": "inputs",
         "_add_targets": "targets"}


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(fn):
    """``fn()`` and the seconds it took."""
    start = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - start


@torch.inference_mode()
def forward_ceiling(lm, shapes, repeats: int = 3) -> dict:
    """Tokens per second of plain batched forward passes of ``lm`` over ``shapes`` (batch, length) of random token
    ids, each the median of ``repeats`` synchronised passes, with every position's logits (what scoring needs) and
    with the last position's only (what a prefill needs): the best is the ceiling an engine's rate is compared with
    (``benchmark_scoring`` on the CPU, ``gpu_check`` on a card)."""
    generator = torch.Generator().manual_seed(0)
    results = {}
    for batch, length in shapes:
        ids = torch.randint(100, lm.vocab_size - 100, (batch, length), generator=generator).to(lm.device)
        for keep in (0, 1):
            lm.model(input_ids=ids, logits_to_keep=keep)  # warm-up
            times = []
            for _ in range(repeats):
                sync(lm.device)
                times.append(timed(lambda: (lm.model(input_ids=ids, logits_to_keep=keep), sync(lm.device)))[1])
            name = f"{batch}x{length}{'' if keep == 0 else ' last-logits'}"
            results[name] = batch * length / statistics.median(times)
    best = max(results, key=results.get)
    return {"best_tokens_per_s": round(results[best], 1), "best_shape": best,
            "by_shape": {k: round(v, 1) for k, v in results.items()}}


class PhaseTimer:
    """Instruments one engine and its model while in a ``with`` block (instance attributes shadow the methods;
    leaving the block removes them)."""

    def __init__(self, engine, lm):
        self.engine, self.lm = engine, lm
        self.phases = {name: {"seconds": 0.0, "model_seconds": 0.0, "forward_calls": 0, "forward_tokens": 0,
                              "processed_tokens": 0} for name in PHASES.values()}
        self.current: str | None = None
        self.timed_parts = [method for method in PARTS if hasattr(engine, method)]
        self.parts: dict[str, dict[str, float]] = {}  # phase -> part -> seconds
        self.in_part = False

    def __enter__(self):
        for method, name in PHASES.items():
            setattr(self.engine, method, self._phase(getattr(self.engine, method), name))
        for method in self.timed_parts:
            setattr(self.engine, method, self._part(getattr(self.engine, method), PARTS[method]))
        self.lm.forward_masked = self._forward(self.lm.forward_masked)
        return self

    def __exit__(self, *exc):
        for method in [*PHASES, *self.timed_parts]:
            delattr(self.engine, method)
        del self.lm.forward_masked

    def _part(self, method, name):
        def run(*args, **kwargs):
            if self.in_part or self.current is None:  # inside another part, or outside the phases: not timed
                return method(*args, **kwargs)
            sync(self.lm.device)
            self.in_part, start = True, time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                sync(self.lm.device)
                parts = self.parts.setdefault(self.current, {})
                parts[name] = parts.get(name, 0.0) + time.perf_counter() - start
                self.in_part = False
        return run

    def _phase(self, method, name):
        def run(*args, **kwargs):
            if self.current is not None:  # a phase inside another counts as the outer one
                return method(*args, **kwargs)
            sync(self.lm.device)
            self.current, start = name, time.perf_counter()
            tokens, processed = self.lm.forward_tokens, self.engine.processed_tokens
            try:
                return method(*args, **kwargs)
            finally:
                sync(self.lm.device)
                phase = self.phases[name]
                phase["seconds"] += time.perf_counter() - start
                phase["forward_tokens"] += self.lm.forward_tokens - tokens
                phase["processed_tokens"] += self.engine.processed_tokens - processed
                self.current = None
        return run

    def _forward(self, forward):
        def run(*args, **kwargs):
            sync(self.lm.device)
            start = time.perf_counter()
            try:
                return forward(*args, **kwargs)
            finally:
                sync(self.lm.device)
                phase = self.phases.get(self.current)
                if phase is not None:
                    phase["model_seconds"] += time.perf_counter() - start
                    phase["forward_calls"] += 1
        return run

    def report(self, total_seconds: float, sets: int, ceiling: float) -> dict:
        """Per phase: seconds (and per set), model seconds, calls, ms per call, tokens, fraction of the ceiling."""
        out = {}
        for name, p in self.phases.items():
            seconds = p["seconds"]
            out[name] = {"seconds": round(seconds, 3), "s_per_set": round(seconds / sets, 4),
                         "model_seconds": round(p["model_seconds"], 3),
                         "model_s_per_set": round(p["model_seconds"] / sets, 4), "forward_calls": p["forward_calls"],
                         "ms_per_call": round(1000 * p["model_seconds"] / max(1, p["forward_calls"]), 2),
                         "forward_tokens": p["forward_tokens"], "processed_tokens": p["processed_tokens"],
                         "tokens_per_call": round(p["processed_tokens"] / max(1, p["forward_calls"]), 1),
                         "fraction_of_ceiling": round(p["forward_tokens"] / seconds / ceiling, 3) if seconds else None}
        for phase, parts in self.parts.items():  # the phase's time outside the model, part by part
            out[phase]["parts_s_per_set"] = {name: round(seconds / sets, 4) for name, seconds in parts.items()}
        other = total_seconds - sum(p["seconds"] for p in self.phases.values())
        out["other (host)"] = {"seconds": round(other, 3), "s_per_set": round(other / sets, 4)}
        return out


class PeakMemory:
    """Peak memory above the level at entry, in MiB (``mib``; ``peak`` in bytes, the level at entry included): on CUDA
    the allocator's peak of allocated tensors; on a CPU the peak of allocated tensors from torch's profiler
    (``tensors=True``: exact, and slower) or else of resident memory, sampled (what the process costs the machine)."""

    interval = 0.005  # seconds between samples of resident memory

    def __init__(self, device: torch.device, tensors: bool = False):
        self.cuda = device.type == "cuda"
        self.tensors = tensors and not self.cuda

    @staticmethod
    def _rss() -> int:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    def __enter__(self):
        if self.cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            self.base = torch.cuda.memory_allocated()
        elif self.tensors:
            from torch.profiler import ProfilerActivity, profile

            self.base = 0
            self._profile = profile(activities=[ProfilerActivity.CPU], profile_memory=True)
            self._profile.__enter__()
        else:
            self.base = self.peak = self._rss()
            self._stop = threading.Event()
            self._thread = threading.Thread(target=self._sample, daemon=True)
            self._thread.start()
        return self

    def _sample(self):
        while not self._stop.wait(self.interval):
            self.peak = max(self.peak, self._rss())

    def __exit__(self, *exc):
        if self.cuda:
            torch.cuda.synchronize()
            self.peak = torch.cuda.max_memory_allocated()
        elif self.tensors:
            self._profile.__exit__(*exc)
            self.peak = tensor_peak(self._profile)
        else:
            self._stop.set()
            self._thread.join()
            self.peak = max(self.peak, self._rss())
        self.mib = round((self.peak - self.base) / 2**20, 1)


def tensor_peak(profile) -> int:
    """The most bytes of tensors held at once, counted from zero at the profile's start: the running sum of the
    allocations (positive) and frees (negative) in time order of the blocks allocated inside the profile. torch
    remembers the size of every block allocated while any profile ran, so a free of a block from an earlier profile
    (a tensor of an earlier run, collected now) is reported too: counted, it would lower this run's peak by what an
    earlier one held, as the garbage collector's timing decides (seen on CI: 0.43 of a budget, where 0.53 here)."""
    from torch._C._profiler import _EventType

    def allocations(events):
        for event in events:
            if event.tag == _EventType.Allocation:
                yield event
            yield from allocations(event.children)

    held = peak = 0
    inside: set[int] = set()  # the addresses of blocks allocated in the profile and not yet freed
    for event in sorted(allocations(profile.profiler.kineto_results.experimental_event_tree()),
                        key=lambda e: e.start_time_ns):
        fields = event.extra_fields
        if fields.alloc_size > 0:
            inside.add(fields.ptr)
        elif fields.ptr in inside:
            inside.discard(fields.ptr)
        else:
            continue  # a block from before the profile
        held += fields.alloc_size
        peak = max(peak, held)
    return peak


def profile_table(run, device: torch.device, rows: int = 20) -> str:
    """The ``torch.profiler`` table of ``run()``'s operators, the most device time first (host time on a CPU)."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities) as prof:
        run()
        sync(device)
    key = "self_cuda_time_total" if device.type == "cuda" else "self_cpu_time_total"
    return prof.key_averages().table(sort_by=key, row_limit=rows, max_name_column_width=70)


def load_engine(path: str):
    """An engine module from a file (an earlier version of ``posixlab/scoring/engine.py``, written out with
    ``git show COMMIT:posixlab/scoring/engine.py > FILE``), to measure it beside today's in one process."""
    spec = importlib.util.spec_from_file_location(f"engine_{Path(path).stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module
