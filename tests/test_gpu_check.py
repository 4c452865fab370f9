"""The GPU check script (experiments/gpu_check.py) and the fixed GPU batch budget it relies on.

The budget, the grid's cost and the seeded weights are tested without a model; the script's tiny configuration runs
end to end on the CPU (slow), so that the script a GPU run needs cannot rot unnoticed."""

from __future__ import annotations

import doctest
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from experiments import gpu_check
from posixlab.errors import ConfigError
from posixlab.scoring import EngineOptions, ScoringEngine, SetScores

ROOT = Path(__file__).resolve().parent.parent
GIB = 2**30


# --- the fixed GPU batch budget ----------------------------------------------------------------------------------------
def free_memory(monkeypatch, free_bytes: int) -> None:
    """Pretend a GPU has ``free_bytes`` free (no GPU is needed: the budget only reads this function)."""
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (free_bytes, 80 * GIB))


def test_the_gpu_budget_is_a_fixed_default_that_never_reads_free_memory(monkeypatch):
    def refuse(device=None):
        raise AssertionError("the default budget must not depend on the memory free at run time")

    monkeypatch.setattr(torch.cuda, "mem_get_info", refuse)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: SimpleNamespace(total_memory=80 * GIB))
    cuda = torch.device("cuda")
    assert EngineOptions().gpu_memory_gb == "auto"
    # 75% of an 80 GB card less 13.5 GB of weights, in whole GB: a property of the card and the model
    assert EngineOptions().resolve(cuda, int(13.5 * GIB)) == (32768, 49 * GIB)
    assert EngineOptions().resolve(cuda, 0) == (32768, 60 * GIB)
    with pytest.raises(ConfigError, match="leave no room on this GPU"):
        EngineOptions().resolve(cuda, 81 * GIB)
    with pytest.raises(ConfigError, match="gpu_memory_gb takes a number of GB above 0, auto or null, not 'lots'"):
        EngineOptions(gpu_memory_gb="lots")
    assert EngineOptions(gpu_memory_gb=20).resolve(cuda) == (32768, 20 * GIB)
    assert EngineOptions(memory_gb=3, gpu_memory_gb=20).resolve(cuda) == (32768, 3 * GIB)  # memory_gb wins
    assert EngineOptions().resolve(torch.device("cpu")) == (4096, 4 * GIB)  # the CPU's: a 3-shot set's caches fit


def test_gpu_memory_gb_none_keeps_the_old_sizing_from_free_memory(monkeypatch):
    free_memory(monkeypatch, 40 * GIB)
    assert EngineOptions(gpu_memory_gb=None).resolve(torch.device("cuda")) == (32768, 20 * GIB)


def llama7b_stub(device: str = "cuda"):
    """What the engine reads of a model to plan its batches, for Llama-2-7B in bfloat16 (no weights)."""
    from transformers import LlamaConfig

    config = LlamaConfig(hidden_size=4096, intermediate_size=11008, num_hidden_layers=32, num_attention_heads=32,
                         num_key_value_heads=32, vocab_size=32000)
    return SimpleNamespace(device=torch.device(device), name="llama-2-7b", kv_bytes_per_token=2**19,
                           vocab_size=32000, model=SimpleNamespace(config=config, dtype=torch.bfloat16))


def plan(monkeypatch, free_gib: float, options: EngineOptions) -> list[list[int]]:
    """The waves the engine cuts 12 sets of 21 prompts into, for a 7B-like model on a GPU with ``free_gib`` free."""
    free_memory(monkeypatch, int(free_gib * GIB))
    lm = llama7b_stub()  # 0.5 MiB of keys and values a token
    sets = [[[1000 * i + j] * (90 + 5 * i + j) for j in range(21)] for i in range(12)]  # prompts that share nothing
    return ScoringEngine(lm, 5, options)._plan_waves(sets, list(range(12)))


def test_the_same_config_batches_the_same_whatever_memory_is_free(monkeypatch):
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: SimpleNamespace(total_memory=24 * GIB))
    waves = {free: plan(monkeypatch, free, EngineOptions()) for free in (10, 40, 75)}
    assert waves[10] == waves[40] == waves[75]
    assert len(waves[10]) > 1  # the budget binds: 8 GiB cuts the 12 sets into several waves
    old = {free: plan(monkeypatch, free, EngineOptions(gpu_memory_gb=None)) for free in (10, 75)}
    assert old[10] != old[75]  # what the fixed default removes: the old sizing followed the free memory


# --- the script's pure parts -------------------------------------------------------------------------------------------
def test_the_script_s_doctests():
    assert doctest.testmod(gpu_check).failed == 0


def test_grid_cost_by_hand():
    cost = gpu_check.grid_cost({"mmlu": {0: 2.0, 3: 5.0}, "alpaca": {0: 9.0}})
    # MMLU: 14,042 questions × 4 variant types at 0, 1, 2, 3 shots: 2 + 3 + 4 + 5 = 14 s per question and type
    assert cost["mmlu"]["sets"] == 14042 * 4 * 4 and cost["mmlu"]["cells"] == 16
    assert cost["mmlu"]["gpu_hours"] == round(14042 * 4 * 14 / 3600, 2) == 218.43
    # Alpaca: 5,000 instructions × 4 variant types, 0 shots, 9 s a set
    assert cost["alpaca"]["sets"] == 20000 and cost["alpaca"]["gpu_hours"] == 50.0
    assert cost["total_gpu_hours"] == round(14042 * 4 * 14 / 3600 + 50, 2)
    # one measured shot count: every shot count costs the same
    assert gpu_check.grid_cost({"mmlu": {0: 1.0}, "alpaca": {0: 1.0}})["mmlu"]["gpu_hours"] == round(
        14042 * 16 / 3600, 2)


class FakeTokenizer:
    bos_token_id, eos_token_id = 1, 2

    def __len__(self):
        return 97


def test_seeded_weights_depend_on_the_seed_and_names_only():
    shape = gpu_check.ModelShape("t", hidden=16, layers=1, heads=2, kv_heads=1, intermediate=32, init_std=0.05)
    build = lambda seed, dtype=torch.float32: gpu_check.build_model(  # noqa: E731
        shape, FakeTokenizer(), seed=seed, dtype=dtype, device=torch.device("cpu"))
    torch.manual_seed(123)  # the global generator plays no part
    a = dict(build(0).named_parameters())
    torch.manual_seed(456)
    b, c = dict(build(0).named_parameters()), dict(build(1).named_parameters())
    assert all(torch.equal(a[n], b[n]) for n in a)
    assert not torch.equal(a["lm_head.weight"], c["lm_head.weight"])
    assert torch.equal(a["model.norm.weight"], torch.ones(16))
    assert sum(p.numel() for p in a.values()) == shape.parameters(97)
    # bfloat16 holds the float32 draws, rounded: the same weights in another dtype
    half = dict(build(0, torch.bfloat16).named_parameters())
    assert all(torch.equal(half[n], a[n].to(torch.bfloat16)) for n in a)


def scores(responses) -> SetScores:
    n = len(responses)
    return SetScores([list(r) for r in responses], [[-1.0] * len(r) for r in responses],
                     -np.ones((n, n)) * 3.0, {"unique_responses": len(set(map(tuple, responses)))})


def test_parity_fails_on_a_response_that_differs_and_not_at_a_near_tie(monkeypatch):
    reference = [scores([[5, 6], [5, 7]])]
    monkeypatch.setattr(gpu_check, "near_tie_margin", lambda lm, prompt, a, b: 0.5)
    result = gpu_check.compare(reference, [scores([[5, 6], [5, 8]])], ids=[[[1], [2]]], reference_lm=object())
    assert not result["responses_identical"] and result["differences_not_ties"] == [
        {"set": 0, "prompt": 1, "top2_logit_gap": 0.5}]
    monkeypatch.setattr(gpu_check, "near_tie_margin", lambda lm, prompt, a, b: 1e-6)
    result = gpu_check.compare(reference, [scores([[5, 6], [5, 8]])], ids=[[[1], [2]]], reference_lm=object())
    assert result["near_ties"] and not result["differences_not_ties"]
    same = gpu_check.compare(reference, [scores([[5, 6], [5, 7]])])
    assert same["responses_identical"] and same["max_abs_dpsi"] == 0.0 and same["max_abs_dlogprob"] == 0.0


def test_asking_for_cuda_without_one_is_a_clear_error(tmp_path, capsys):
    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA device")
    assert gpu_check.main(["--config", "tiny", "--device", "cuda", "--out", str(tmp_path)]) == 2
    assert "sees no CUDA device" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


# --- the tiny configuration end to end ---------------------------------------------------------------------------------
@pytest.mark.slow  # random-weight models, the packaged tokenizer, the authors' library: ~25 s on 2 cores
def test_the_tiny_configuration_runs_on_the_cpu_and_passes_parity(tmp_path):
    out = tmp_path / "check"
    proc = subprocess.run([sys.executable, "-m", "experiments.gpu_check", "--config", "tiny", "--device", "cpu",
                           "--threads", "1", "--out", str(out)], capture_output=True, text=True, timeout=600,
                          cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads((out / "gpu_check.json").read_text())
    assert (out / "gpu_check.md").read_text().startswith("# GPU check (tiny)")
    parity = report["parity"]
    assert parity["passed"] and parity["responses_identical"]  # CPU against CPU: the same bits
    for name, w in parity["workloads"].items():
        assert w["parity"]["max_abs_dpsi"] == 0.0 and w["parity"]["max_abs_dlogprob"] == 0.0, name
        # bfloat16 on the CPU ran and was compared: finite, small, not zero
        b = w["bf16_vs_fp32"]
        assert 0 < b["max_abs_dlogprob_per_pair"] < 1 and b["pairs"] == w["prompts_per_set"] ** 2 * len(b["per_set"])
        assert 0 <= b["max_abs_dpsi"] < 0.1
        assert w["batch_invariance_fp32"]["max_abs_dpsi"] < 1e-4  # float32: budgets change rounding only
    speed = report["speed"]
    assert set(speed["workloads"]) == {"mmlu", "mmlu-3shot", "open"}
    for row in speed["workloads"].values():
        assert row["engine"]["s_per_set"] > 0 and row["authors"]["s_per_set"] > 0
        assert row["mean_response_tokens"] == row["workload"]["max_new_tokens"]  # random weights: never an EOS
        # the work outside the model, part by part: timed, and within its phase beside the model's time
        phases = row["engine"]["instrumented"]["phases"]
        assert set(phases["prefill"]["parts_s_per_set"]) == {"caches", "inputs"}
        assert set(phases["scoring"]["parts_s_per_set"]) == {"caches", "inputs", "targets"}
        for phase in phases.values():
            parts = phase.get("parts_s_per_set", {})
            assert all(v > 0 for v in parts.values())
            assert phase.get("model_s_per_set", 0) + sum(parts.values()) <= phase["s_per_set"] + 1e-3
    assert "Outside the model, part by part" in (out / "gpu_check.md").read_text()
    # the grid is costed from the speed rows' own per-set times
    times = {"mmlu": {r["workload"]["shots"]: r["engine"]["s_per_set"] for r in speed["workloads"].values()
                      if not r["workload"]["open"]},
             "alpaca": {0: speed["workloads"]["open"]["engine"]["s_per_set"]}}
    assert report["grid"]["engine"] == gpu_check.grid_cost(times)
    # 8 MB cannot hold a set; 12 MB holds it on its segments; 20 MB holds its buffers, and is used; 50 MB is ample
    budgets = list(speed["budgets"].values())
    assert "Raise engine.memory_gb to at least 0.02 (GB)" in budgets[0]["refused"]
    assert budgets[1]["sets_on_segments"] == 1 and 0.5 <= budgets[1]["peak_over_budget"] <= 1.1, budgets
    assert budgets[2]["sets_on_segments"] == 0 and 0.5 <= budgets[2]["peak_over_budget"] <= 1.1, budgets
    assert 0 < budgets[3]["peak_over_budget"] <= 1.1, budgets
    assert "worst case" in report["note"] and "worst case" in (out / "gpu_check.md").read_text()


@pytest.mark.slow  # two random-weight engines in one process: ~8 s on 2 cores
def test_the_next_lent_gpu_s_prepared_call_runs_on_the_cpu(tmp_path):
    """The call figures/gpu_check/README.md (section 7) prepares for the next lent card (today's engine beside the
    same engine with shared decoding and head folding off, the budgets first), on the tiny configuration: a device
    minute is never spent on a crash, and the engine beside it gives the same ψ."""
    out = tmp_path / "gqa"
    proc = subprocess.run([sys.executable, "-m", "experiments.gpu_check", "--config", "tiny", "--device", "cpu",
                           "--threads", "1", "--out", str(out), "--skip-parity", "--no-authors", "--budgets-first",
                           "--speed-workloads", "mmlu", "mmlu-3shot", "--budget-sets", "1",
                           "--before", "posixlab/scoring/engine.py", "--before-option", "shared_decoding=false",
                           "--before-option", "fold_heads=false", "--before-kernels", "today", "--before-sets", "1"],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    speed = json.loads((out / "gpu_check.json").read_text())["speed"]
    before = speed["before"]
    assert before["options"] == {"shared_decoding": False, "fold_heads": False} and before["kernels"] == "today"
    assert set(before["workloads"]) == set(speed["workloads"]) == {"mmlu", "mmlu-3shot"}
    assert all(0 <= w["max_abs_dpsi_against_today"] < 1e-4 for w in before["workloads"].values())
    assert speed["budgets"] and "shared_decoding=false" in (out / "gpu_check.md").read_text()
