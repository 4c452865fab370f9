"""Benchmark: posixlab's scoring engine against the authors' library and a vLLM server, on the same model and sets.

Each contender runs in a fresh Python process of its own (the model loaded, the workload built, then the contender
timed), so its time and peak memory do not depend on what ran before it:
  (a) prompt-sensitivity-index 0.0.1, batched (its default batch_size=4),
  (b) prompt-sensitivity-index 0.0.1, unbatched,
  (c) posixlab's engine, cold (no score cache),
  (d) posixlab's vLLM backend against a vLLM server on loopback (vLLM's CPU build here, float32, started by this
      script from the venv ``python -m posixlab.serving.install`` builds; ``--no-vllm`` leaves it out),
  (e) with ``--llamacpp``: posixlab's llamacpp backend on the same model's GGUF file, quantized (llama-cpp-python),
  and a brute-force computation (one full forward pass per pair).
It reports wall times, the speed-ups of (c), the largest |Δψ| between (c) in ``reference_compat`` mode and (b), the
largest |Δψ| and |Δ log P| between (c) in paper mode and the brute force and between (d) and (c), the peak memory of
each process above its level once the model is loaded (for (d) also the server's resident memory, model included),
and how close (c) comes to the machine's limit:

    limit = irreducible token work / best forward throughput measured in (c)'s process
    irreducible work = every distinct prompt's tokens once + every generated token once
                       + every distinct response's tokens once per distinct prompt it is scored under (other than
                         the prompt that generated it)

A scaling table (engine time per set against N and against response length) follows, to plan a full grid.

    python -m experiments.benchmark_scoring                  # both workloads, 1 set each (~12 min on 2 CPU cores)
    python -m experiments.benchmark_scoring --sets 3 --out bench.json
    python -m experiments.benchmark_scoring --no-authors --no-vllm   # the engine, brute force and scaling only
    python -m experiments.benchmark_scoring --no-authors --no-vllm --no-scaling --llamacpp --sets 3   # (c) vs (e)

Workloads (N = 21 prompts a set: the original and 20 spelling variants):
  mmlu: the paper's MMLU prompt (header, question, options), 5 new tokens;
  open: the same questions in the open-ended format ``Q:{question}\\nA:`` (Table 5's original), 30 new tokens.
Both use the bundled MMLU sample, so the benchmark needs no download.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

from experiments.gpu_phases import PeakMemory, forward_ceiling, timed
from posixlab.backends import engine_for, load
from posixlab.data import DatasetSpec, load_items, select_items
from posixlab.metrics import REFERENCE_COMPAT, psi
from posixlab.models import ModelSpec, ServerSettings
from posixlab.scoring import ScoringEngine, bruteforce_matrix
from posixlab.serving.launch import LocalServer
from posixlab.variants import get_variant_generator

# the batch shapes of plain forward passes whose best rate is the CPU's ceiling
THROUGHPUT_SHAPES = [(1, 512), (4, 256), (8, 128), (16, 64), (32, 32), (64, 16)]
WORKLOADS = {"mmlu": {"max_new_tokens": 5, "open": False}, "open": {"max_new_tokens": 30, "open": True}}


# --- measuring ---------------------------------------------------------------------------------------------------------
def irreducible_tokens(prompts, responses) -> int:
    unique_prompts = {}
    for p, r in zip(prompts, responses):
        unique_prompts.setdefault(tuple(p), tuple(r))
    unique_responses = {tuple(r) for r in responses}
    total = 0
    for p, own in unique_prompts.items():
        total += len(p) + len(own) + sum(len(r) for r in unique_responses if r != own)
    return total


# --- the three contenders ----------------------------------------------------------------------------------------------
def authors_model(lm):
    """The authors' HFModel around our already-loaded model and tokenizer (same weights, same tokenizer)."""
    from prompt_sensitivity_index.models.hf_model import HFModel

    model = HFModel.__new__(HFModel)
    model.model_name_or_path, model.model, model.tokenizer = lm.name, lm.model, lm.tokenizer
    if not model.tokenizer.pad_token:  # what HFModel.__init__ does
        model.tokenizer.pad_token = model.tokenizer.unk_token or model.tokenizer.eos_token
    return model


def run_authors(lm, texts, max_new_tokens: int, batched: bool):
    from prompt_sensitivity_index.posix import PosixConfig, get_prompt_sensitivity

    _, trace = get_prompt_sensitivity(authors_model(lm), texts, PosixConfig(max_new_tokens=max_new_tokens,
                                                                            batched=batched))
    return trace


def build_workload(lm, name: str, num_sets: int, seed: int):
    spec = WORKLOADS[name]
    items = select_items(load_items(DatasetSpec("mmlu")), num_sets, seed)
    if spec["open"]:
        items = [dataclasses.replace(i, options=(), subject=None) for i in items]
    generator = get_variant_generator("spelling")
    texts = [generator.build_set(item, 20, seed).texts() for item in items]
    return texts, [[lm.encode(t) for t in s] for s in texts]


CONTENDERS = ("c_engine", "bruteforce", "a_authors_batched", "b_authors_unbatched", "d_vllm", "e_llamacpp")


def run_contender(contender: str, model: str, workload: str, num_sets: int, seed: int,
                  base_url: str | None, dtype: str = "auto") -> dict:
    """In this (fresh) process: load the model, build the workload, time the contender. The sets' responses and
    matrices (or the library's ψ values) go back to the parent, which compares the contenders."""
    spec = ModelSpec(model, "packaged", model, dtype=dtype)
    if contender == "d_vllm":
        spec = dataclasses.replace(spec, backend="vllm", server=ServerSettings(base_url=base_url, served_name=model))
    elif contender == "e_llamacpp":
        spec = dataclasses.replace(spec, backend="llamacpp")
    lm = load(spec)
    max_new = WORKLOADS[workload]["max_new_tokens"]
    texts, ids = build_workload(lm, workload, num_sets, seed)
    out = {"N": len(ids[0]), "mean_prompt_tokens": round(float(np.mean([len(p) for s in ids for p in s])), 1)}
    if contender == "bruteforce":  # on the engine's responses, so the two matrices hold the same pairs
        responses = [s.responses for _, s in sorted(ScoringEngine(lm, max_new).score_sets(ids))]
    device = getattr(lm, "device", torch.device("cpu"))
    with PeakMemory(device) as mem:
        if contender in ("c_engine", "d_vllm", "e_llamacpp"):
            engine = engine_for(lm, max_new)  # the backend's own engine (in process, vLLM, llama.cpp), no score cache
            results, seconds = timed(lambda: dict(engine.score_sets(ids)))
        elif contender == "bruteforce":
            brute, seconds = timed(lambda: [bruteforce_matrix(lm, p, r) for p, r in zip(ids, responses)])
        else:
            trace, seconds = timed(lambda: run_authors(lm, texts, max_new, batched=contender == "a_authors_batched"))
    out.update({"seconds": round(seconds, 2), "s_per_set": round(seconds / num_sets, 2), "peak_mib": mem.mib})
    if contender in ("c_engine", "d_vllm", "e_llamacpp"):
        sets = [results[k] for k in range(len(ids))]
        out["responses"] = [s.responses for s in sets]
        out["matrices"] = [s.matrix.tolist() for s in sets]
        out["unique_responses_per_set"] = [s.stats["unique_responses"] for s in sets]
        out["forward_tokens"] = sum(s.stats["forward_tokens"] for s in sets)
        if contender == "c_engine":
            print(f"[{workload}] measuring forward throughput ...", file=sys.stderr)
            out["throughput"] = forward_ceiling(lm, THROUGHPUT_SHAPES)
            out["irreducible_tokens"] = sum(irreducible_tokens(p, s.responses) for p, s in zip(ids, sets))
            out["machine"] = (torch.cuda.get_device_name(lm.device) if lm.device.type == "cuda" else
                              f"{platform.machine()}, {os.cpu_count()} CPU cores, torch {torch.__version__} "
                              f"({torch.get_num_threads()} threads)")
    elif contender == "bruteforce":
        out["responses"] = responses
        out["matrices"] = [b.tolist() for b in brute]
    else:
        out["psi_compat"] = [float(v) for v in trace.prompt_sensitivities]
        out["responses_text"] = [list(r) for r in trace.responses]
    lm.close()
    return out


def in_fresh_process(contender: str, args, workload: str, base_url: str | None = None,
                     server: LocalServer | None = None) -> dict:
    """``run_contender`` in a new Python process; with ``server``, its process group's resident memory is sampled."""
    with tempfile.TemporaryDirectory() as folder:
        result = Path(folder) / "result.json"
        command = [sys.executable, "-m", "experiments.benchmark_scoring", "--child", contender, "--model", args.model,
                   "--workloads", workload, "--sets", str(args.sets), "--seed", str(args.seed),
                   "--dtype", args.dtype, "--child-out", str(result)] + (["--base-url", base_url] if base_url else [])
        print(f"[{workload}] {contender} (fresh process) ...", file=sys.stderr)
        sampler = GroupMemory(server.process.pid) if server is not None else None
        with sampler or contextlib.nullcontext():
            subprocess.run(command, check=True, cwd=Path(__file__).resolve().parent.parent)
        row = json.loads(result.read_text())
    if sampler is not None:
        row["server_peak_rss_mib"] = round(sampler.peak / 2**20, 1)
    return row


class GroupMemory(PeakMemory):
    """Peak resident memory of a process group (a vLLM server and its engine process), sampled like ``PeakMemory``;
    ``peak`` is absolute (the server's model included), not above the level at entry."""

    interval = 0.05  # a sample reads every /proc/PID/stat: rarer, so the sampler does not compete with the server

    def __init__(self, pgid: int):
        self.cuda, self.tensors, self.pgid = False, False, pgid

    def _rss(self) -> int:
        total = 0
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == self.pgid:  # field 5 of /proc/PID/stat: the process group
                total += int(fields[21]) * os.sysconf("SC_PAGE_SIZE")  # field 24: resident pages
        return total


def max_abs(a: list, b: list) -> float:
    return float(max(np.max(np.abs(np.array(x) - np.array(y))) for x, y in zip(a, b)))


def bench_workload(args, name: str, server: LocalServer | None) -> dict:
    max_new = WORKLOADS[name]["max_new_tokens"]
    c = in_fresh_process("c_engine", args, name)
    row = {"workload": name, "sets": args.sets, "N": c["N"], "max_new_tokens": max_new,
           "mean_prompt_tokens": c["mean_prompt_tokens"], "machine": c["machine"], "throughput": c["throughput"]}
    row["c_engine"] = {k: c[k] for k in ("seconds", "s_per_set", "peak_mib", "forward_tokens")}
    limit = c["irreducible_tokens"] / c["throughput"]["best_tokens_per_s"]
    row["limit"] = {"irreducible_tokens": c["irreducible_tokens"], "seconds": round(limit, 2),
                    "engine_over_limit": round(c["seconds"] / limit, 2)}
    row["unique_responses_per_set"] = c["unique_responses_per_set"]
    lengths = [[len(r) for r in responses] for responses in c["responses"]]
    paper = [psi(np.array(m), n) for m, n in zip(c["matrices"], lengths)]

    brute = in_fresh_process("bruteforce", args, name)
    row["bruteforce"] = {k: brute[k] for k in ("seconds", "peak_mib")}
    row["max_abs_dpsi_paper_vs_bruteforce"] = max(abs(p - psi(np.array(m), n))
                                                  for p, m, n in zip(paper, brute["matrices"], lengths))
    row["max_abs_dlogprob_vs_bruteforce"] = max_abs(c["matrices"], brute["matrices"])
    if not args.no_authors:
        for key in ("a_authors_batched", "b_authors_unbatched"):
            result = in_fresh_process(key, args, name)
            row[key] = {k: result[k] for k in ("seconds", "s_per_set", "peak_mib")}
            row[f"speedup_over_{key[0]}"] = round(result["seconds"] / c["seconds"], 1)
            if key == "b_authors_unbatched":
                compat = [psi(np.array(m), n, mode=REFERENCE_COMPAT, max_new_tokens=max_new)
                          for m, n in zip(c["matrices"], lengths)]
                row["max_abs_dpsi_compat_vs_b"] = max(abs(x - y) for x, y in zip(compat, result["psi_compat"]))
                tokenizer = load_tokenizer(args.model)
                decode = lambda r: tokenizer.decode(r, skip_special_tokens=False)  # noqa: E731 - as the library
                row["responses_equal_b"] = all([decode(r) for r in ours] == theirs
                                               for ours, theirs in zip(c["responses"], result["responses_text"]))
    if server is not None:
        d = in_fresh_process("d_vllm", args, name, server.base_url, server)
        row["d_vllm"] = {k: d[k] for k in ("seconds", "s_per_set", "peak_mib", "server_peak_rss_mib")}
        row["speedup_over_d"] = round(d["seconds"] / c["seconds"], 1)
        row["responses_equal_d"] = d["responses"] == c["responses"]
        row["max_abs_dlogprob_d_vs_c"] = max_abs(d["matrices"], c["matrices"])
        row["max_abs_dpsi_d_vs_c"] = max(abs(p - psi(np.array(m), n))
                                         for p, m, n in zip(paper, d["matrices"], lengths))
    if args.llamacpp:  # the quantized model: its own responses and ψ, compared with (c)'s (not equal: other numbers)
        e = in_fresh_process("e_llamacpp", args, name)
        row["e_llamacpp"] = {k: e[k] for k in ("seconds", "s_per_set", "peak_mib", "forward_tokens")}
        row["slowdown_e_over_c"] = round(e["seconds"] / c["seconds"], 1)
        e_psi = [psi(np.array(m), [len(x) for x in r]) for m, r in zip(e["matrices"], e["responses"])]
        row["mean_psi_c_e"] = [round(float(np.mean(paper)), 4), round(float(np.mean(e_psi)), 4)]
        row["responses_agree_e"] = round(float(np.mean([x == y for ours, theirs in zip(c["responses"], e["responses"])
                                                         for x, y in zip(ours, theirs)])), 3)
    return row


def load_tokenizer(model: str):
    from transformers import AutoTokenizer

    from posixlab.models.assets import prepare_packaged_model
    from posixlab.paths import default_cache_dir

    return AutoTokenizer.from_pretrained(prepare_packaged_model(model, default_cache_dir()))


def scaling(lm, seed: int) -> list[dict]:
    """Engine seconds per set against N (MMLU, 5 new tokens) and against response length (open, N = 21)."""
    rows = []
    grid = [("mmlu", n, 5) for n in (6, 11, 21)] + [("open", 21, L) for L in (5, 10, 20, 30)]
    cache = {}
    for name, n, max_new in grid:
        if name not in cache:
            cache[name] = build_workload(lm, name, 1, seed)[1][0]
        prompts = cache[name][:n]
        (result,), seconds = timed(lambda: list(ScoringEngine(lm, max_new).score_sets([prompts])))
        stats = result[1].stats
        rows.append({"workload": name, "N": n, "max_new_tokens": max_new, "s_per_set": round(seconds, 2),
                     "forward_tokens": stats["forward_tokens"], "unique_responses": stats["unique_responses"],
                     "mean_response_tokens": round(float(np.mean(result[1].lengths)), 1)})
        print(f"[scaling] {rows[-1]}", file=sys.stderr)
    return rows


# --- reporting ---------------------------------------------------------------------------------------------------------
def markdown(report: dict) -> str:
    first = report["workloads"][0]
    lines = [f"# Scoring benchmark: {report['model']} on {first['machine']}", "",
             f"Best forward throughput measured: {first['throughput']['best_tokens_per_s']} tokens/s "
             f"({first['throughput']['best_shape']}). Every contender ran in a fresh process; peak memory is above "
             f"the process's level once the model was loaded.", "",
             "| workload | sets × N | (a) authors batched | (b) authors unbatched | (c) posixlab | (d) vLLM server | "
             "(c) vs (a) | (c) vs (b) | (c) vs (d) | (c) / limit | max abs Δψ compat (c)-(b) | "
             "max abs Δψ paper (c)-brute | max abs Δψ (d)-(c) | peak MiB a / b / c / d (server RSS) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in report["workloads"]:
        a, b, c, d = (r.get(k, {}) for k in ("a_authors_batched", "b_authors_unbatched", "c_engine", "d_vllm"))
        fmt = lambda x: f"{x['seconds']:.1f} s" if x else "n/a"  # noqa: E731
        ratio = lambda key: f"{r[key]}×" if key in r else "n/a"  # noqa: E731
        sci = lambda key: f"{r[key]:.2e}" if key in r else "n/a"  # noqa: E731
        server = f"{d['peak_mib']} ({d['server_peak_rss_mib']})" if d else "n/a"
        lines.append(
            f"| {r['workload']} ({r['max_new_tokens']} new tokens) | {r['sets']} × {r['N']} | {fmt(a)} | {fmt(b)} | "
            f"{fmt(c)} | {fmt(d)} | {ratio('speedup_over_a')} | {ratio('speedup_over_b')} | {ratio('speedup_over_d')} | "
            f"{r['limit']['engine_over_limit']}× | {sci('max_abs_dpsi_compat_vs_b')} | "
            f"{sci('max_abs_dpsi_paper_vs_bruteforce')} | {sci('max_abs_dpsi_d_vs_c')} | "
            f"{a.get('peak_mib', 'n/a')} / {b.get('peak_mib', 'n/a')} / {c['peak_mib']} / {server} |")
    for r in report["workloads"]:
        if "e_llamacpp" in r:
            lines += ["", f"(e) llama.cpp on the GGUF file, {r['workload']}: {r['e_llamacpp']['seconds']:.1f} s "
                          f"({r['slowdown_e_over_c']}× (c)'s), mean ψ {r['mean_psi_c_e'][1]} against (c)'s "
                          f"{r['mean_psi_c_e'][0]}, {r['responses_agree_e']:.0%} of the greedy responses as (c)'s"]
    if report["scaling"]:
        lines += ["", "Scaling (engine, cold, one set):", "",
                  "| workload | N | max new tokens | mean response tokens | unique responses | forward tokens | s per set |",
                  "|---|---|---|---|---|---|---|"]
        for s in report["scaling"]:
            lines.append(f"| {s['workload']} | {s['N']} | {s['max_new_tokens']} | {s['mean_response_tokens']} | "
                         f"{s['unique_responses']} | {s['forward_tokens']:,} | {s['s_per_set']} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m-instruct", help="a packaged model")
    parser.add_argument("--workloads", nargs="+", default=list(WORKLOADS), choices=list(WORKLOADS))
    parser.add_argument("--sets", type=int, default=1, help="prompt sets per workload")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-authors", action="store_true", help="skip the authors' library (a) and (b)")
    parser.add_argument("--no-vllm", action="store_true", help="skip the vLLM server (d)")
    parser.add_argument("--vllm-python", default=None, help="a Python with vLLM (default: build or reuse the "
                        "venv of python -m posixlab.serving.install)")
    parser.add_argument("--dtype", default="auto", help="model.dtype of every contender (auto: bfloat16 on a GPU, "
                        "float32 on CPU); the vLLM server computes in the same one")
    parser.add_argument("--no-scaling", action="store_true")
    parser.add_argument("--llamacpp", action="store_true", help="add (e): the llamacpp backend on the GGUF file")
    parser.add_argument("--out", default=None, help="write the JSON report here, and the Markdown beside it")
    parser.add_argument("--child", choices=CONTENDERS + ("scaling",), help=argparse.SUPPRESS)
    parser.add_argument("--child-out", help=argparse.SUPPRESS)
    parser.add_argument("--base-url", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.out and Path(args.out).is_dir():  # found now, not after the minutes of measuring
        parser.error(f"--out takes the JSON report's file (the Markdown goes beside it), not a folder: "
                     f"--out {Path(args.out) / 'benchmark.json'}")

    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    torch.manual_seed(0)
    if args.child:  # one contender, in this fresh process
        if args.child == "scaling":
            result = scaling(load(ModelSpec(args.model, "packaged", args.model, dtype=args.dtype)), args.seed)
        else:
            result = run_contender(args.child, args.model, args.workloads[0], args.sets, args.seed, args.base_url,
                                   args.dtype)
        Path(args.child_out).write_text(json.dumps(result))
        return result

    if args.out:  # its folder first: a report that cannot be written is found before the minutes of measuring
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    report = {"model": args.model, "workloads": [], "scaling": []}
    server = None
    if not args.no_vllm:
        from posixlab.models.assets import prepare_packaged_model
        from posixlab.paths import default_cache_dir
        from posixlab.serving.install import install

        python = args.vllm_python or str(install())
        folder = prepare_packaged_model(args.model, default_cache_dir())
        dtype = args.dtype if args.dtype != "auto" else ("bfloat16" if torch.cuda.is_available() else "float32")
        server = LocalServer(python, str(folder), args.model, dtype, None if torch.cuda.is_available() else 2048)
        server.start()
    try:
        for name in args.workloads:
            report["workloads"].append(bench_workload(args, name, server))
    finally:
        if server is not None:
            server.stop()
    if not args.no_scaling:
        report["scaling"] = in_fresh_process("scaling", args, args.workloads[0])
    text = markdown(report)
    print(json.dumps(report, indent=2))
    print(text)
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
        Path(args.out).with_suffix(".md").write_text(text)
    return report


if __name__ == "__main__":
    main()
