"""The noise floor (``posixlab/metrics/noise.py``): a hand-worked example, the issue's three behaviours on synthetic
labels, and brute-force cross-checks against loops over the definitions."""

import math

import numpy as np
import pytest

from posixlab.errors import ConfigError
from posixlab.metrics.classification import NA, class_distribution, consistency, sensitivity
from posixlab.metrics.noise import noise_floor, noise_floor_from_records, pairwise_disagreement

CLASSES = ["a", "b", NA]
H = math.log(2) / math.log(3)  # S_τ of two draws that differ, C = 3 classes (sensitivity divides the nats by ln C)

# The worked example: 2 samples, both gold "a"; Q = 4 prompts, R = 2 repeats; y[n][q] = [repeat 0, repeat 1].
WORKED = [[["a", "a"], ["a", "b"], ["b", "b"], ["a", "a"]],
          [["b", "b"], ["b", "b"], ["a", NA], ["b", "a"]]]
#
# Floor (one group per (n, q), its 2 draws; a group is worth h if its draws differ, else 0):
#   sample 0: q1 differs          -> S = h/4, flip = 1/4
#   sample 1: q2, q3 differ       -> S = 2h/4, flip = 2/4
#   S_floor = (1/4 + 2/4) / 2 · h = 3h/8 = 0.2366; flip_floor = 3/8 = 0.375
#   C_floor (class a, the ordered pairs (0, 1) and (1, 0), both 1 − TVD(p_0, p_1)):
#     q0: (1,0,0) vs (0,1,0) -> 0;  q1: (.5,.5,0) vs (0,1,0) -> .5;  q2: (0,1,0) vs (.5,0,.5) -> 0;
#     q3: (1,0,0) vs (.5,.5,0) -> .5;  mean over q: 0.25
# Rephrasings at equal count (blocks {q0, q1}, {q2, q3}; one group per (n, repeat, block)):
#   sample 0: r0: (a, a) same, (b, a) differ; r1: (a, b) differ, (b, a) differ -> S = 3h/4
#   sample 1: r0: (b, b) same, (a, b) differ; r1: (b, b) same, (NA, a) differ  -> S = 2h/4
#   S_reph@2 = 5h/8 = 0.3943
#   C_reph@2: (r0, b0): (1,0,0) vs (0,1,0) -> 0;  (r0, b1): (.5,.5,0) vs (.5,.5,0) -> 1;
#             (r1, b0): (.5,.5,0) vs (0,1,0) -> .5; (r1, b1): (.5,.5,0) vs (.5,0,.5) -> .5;  mean 0.5
#   flip_reph (all 4 prompts at one repeat, 12 ordered pairs, 1 − Σ c(c − 1) / 12):
#     sample 0: r0 [a,a,b,a] -> 1 − 6/12 = 1/2; r1 [a,b,b,a] -> 1 − 4/12 = 2/3; mean 7/12
#     sample 1: r0 [b,b,a,b] -> 1/2;            r1 [b,b,NA,a] -> 1 − 2/12 = 5/6; mean 8/12
#     flip_reph = 15/24 = 0.625
# Beyond noise: S 5h/8 − 3h/8 = h/4 = 0.1577; flip 0.625 − 0.375 = 0.25; C 0.25 − 0.5 = −0.25 (C_floor − C_reph);
#   share of changes from rephrasing = 0.25 / 0.625 = 0.4.
# The paper's (repeat 0, all Q = 4): both samples (3/4, 1/4, 0) -> S = 0.5119; C: TVD((.75,.25,0), (.25,.75,0)) = .5.


def test_worked_example_by_hand():
    r = noise_floor(WORKED, ["a", "a"], CLASSES, seed=0)
    assert (r["repeats"], r["num_prompts"], r["num_samples"], r["draws_per_group"]) == (2, 4, 2, 2)
    floor, eq, beyond = r["fixed_prompt"], r["rephrasings_at_equal_count"], r["beyond_noise"]
    assert floor["sensitivity"] == pytest.approx(3 * H / 8)
    assert floor["flip_rate"] == pytest.approx(0.375)
    assert floor["consistency"] == pytest.approx(0.25)
    assert eq["sensitivity"] == pytest.approx(5 * H / 8)
    assert eq["flip_rate"] == pytest.approx(0.625)
    assert eq["consistency"] == pytest.approx(0.5)
    assert (eq["blocks"], eq["prompts_used"], eq["note"]) == (2, 4, None)
    assert beyond["sensitivity"]["value"] == pytest.approx(H / 4)
    assert beyond["flip_rate"]["value"] == pytest.approx(0.25)
    assert beyond["consistency"]["value"] == pytest.approx(-0.25)
    assert beyond["share_of_changes_from_rephrasing"] == pytest.approx(0.4)
    assert r["rephrasings"]["sensitivity"] == pytest.approx(0.5119, abs=1e-4)
    assert r["rephrasings"]["consistency"] == pytest.approx(0.5)
    assert r["deterministic"] is False
    # Two samples: no resample is rare enough for a 2.5 % tail (the percentile interval was the range, 0 to h/2), so
    # the t interval of the per-sample differences. Flip: 7/12 − 1/4 = 1/3 and 8/12 − 1/2 = 1/6, mean 1/4,
    # s = (1/6)/√2, half = t(0.975, 1) · s/√2 = 12.706205/12 = 1.058850, held at 1. S: h/2 and 0, mean h/4,
    # half 12.706205 · h/4 = 2.004 on either side: the whole range [−1, 1]. C, a mean over pairs: no interval.
    assert beyond["flip_rate"]["ci95"] == pytest.approx([0.25 - 1.058850, 1.0], abs=1e-6)
    assert beyond["sensitivity"]["ci95"] == [-1.0, 1.0]
    assert beyond["consistency"]["ci95"] is None
    assert r == noise_floor(WORKED, ["a", "a"], CLASSES, seed=0)  # seeded: the same intervals


def test_three_samples_take_the_t_interval_and_four_the_bootstrap():
    # a third sample, a copy of sample 1: S differences h/2, 0, 0 (mean h/6, s = h/(2√3)); flip differences 1/3, 1/6,
    # 1/6 (mean 2/9, s = 1/√108); t(0.975, 2) = 4.302653 and half = t · s/√3: S h/6 ± 0.717109 h, flip
    # 2/9 ± 0.239036
    r = noise_floor(WORKED + WORKED[1:], ["a"] * 3, CLASSES, seed=0)["beyond_noise"]
    assert r["sensitivity"]["ci95"] == pytest.approx([H / 6 - 0.717109 * H, H / 6 + 0.717109 * H], abs=1e-6)
    assert r["flip_rate"]["ci95"] == pytest.approx([2 / 9 - 0.239036, 2 / 9 + 0.239036], abs=1e-6)
    assert r["consistency"]["ci95"] is None
    assert r["bootstrap"]["method"].endswith("; on 2 or 3 samples the t interval (S, flip rate), none for C")
    # four samples: the bootstrap reaches a 2.5 % tail (4⁻⁴ = 0.4 %), and its means stay within the differences' range
    r = noise_floor(WORKED * 2, ["a"] * 4, CLASSES, seed=0)["beyond_noise"]
    lo, hi = r["sensitivity"]["ci95"]
    assert 0 <= lo < hi <= H / 2 + 1e-12
    assert r["consistency"]["ci95"] is not None and "t interval" not in r["bootstrap"]["method"]


def test_leftover_prompts_and_q_below_r():
    y = [[["a", "b", "a"]] * 4 + [["b", "b", "b"]]]  # Q = 5, R = 3: one block of 3, 2 prompts left over
    r = noise_floor(y, None, CLASSES)
    eq = r["rephrasings_at_equal_count"]
    assert (eq["blocks"], eq["prompts_used"]) == (1, 3)
    assert "last 2" in eq["note"]
    assert r["fixed_prompt"]["consistency"] is None and eq["consistency"] is None
    assert r["beyond_noise"]["consistency"] is None
    r = noise_floor([[["a", "b", "a"], ["a", "a", "a"]]], None, CLASSES)  # Q = 2 < R = 3
    assert r["rephrasings_at_equal_count"] is None and r["beyond_noise"] is None
    assert "Q = 2" in r["note"]
    assert r["fixed_prompt"]["flip_rate"] == pytest.approx((2 / 3 + 0) / 2)


def test_one_repeat_gives_none_and_bad_labels_are_refused():
    assert noise_floor([[["a"], ["b"]], [["b"], ["b"]]], ["a", "b"], CLASSES) is None
    with pytest.raises(ConfigError, match="not one of the classes"):
        noise_floor([[["a", "c"]]], None, CLASSES)
    with pytest.raises(ConfigError, match="same Q and R"):
        noise_floor([[["a", "a"]], [["a", "a"], ["b", "b"]]], None, CLASSES)
    with pytest.raises(ConfigError, match="at least 2"):
        pairwise_disagreement(["a"])


# --- the three behaviours --------------------------------------------------------------------------------

def synthetic(kind: str, n: int = 400, q: int = 8, r: int = 2, seed: int = 0):
    rng = np.random.default_rng(seed)
    classes = ["w", "x", "z", NA]  # 4 classes, N/A included
    gold = [classes[i % 3] for i in range(n)]
    if kind == "gold":
        labels = np.array(gold, dtype=object)[:, None, None].repeat(q, 1).repeat(r, 2)
    elif kind == "prompt":  # the answer depends on the wording only: one label per (n, q), the same for every repeat
        labels = rng.choice(classes, size=(n, q, 1)).repeat(r, axis=2)
    else:  # at random whatever the prompt
        labels = rng.choice(classes, size=(n, q, r))
    return labels.tolist(), gold, classes


def test_always_gold_has_no_sensitivity_and_no_floor():
    labels, gold, classes = synthetic("gold")
    r = noise_floor(labels, gold, classes, seed=1)
    for side in ("fixed_prompt", "rephrasings_at_equal_count"):
        assert r[side]["sensitivity"] == 0.0 and r[side]["flip_rate"] == 0.0 and r[side]["consistency"] == 1.0
    assert r["rephrasings"]["sensitivity"] == 0.0 and r["rephrasings"]["consistency"] == 1.0
    assert r["beyond_noise"]["sensitivity"] == {"value": 0.0, "ci95": [0.0, 0.0]}
    assert r["beyond_noise"]["consistency"]["value"] == 0.0
    assert r["beyond_noise"]["share_of_changes_from_rephrasing"] is None  # nothing changes at all
    assert r["deterministic"] is True and "exactly 0" in r["stack_note"]


def test_wording_only_has_a_zero_floor_and_positive_sensitivity():
    labels, gold, classes = synthetic("prompt")
    r = noise_floor(labels, gold, classes, seed=1)
    assert r["fixed_prompt"]["sensitivity"] == 0.0 and r["fixed_prompt"]["flip_rate"] == 0.0
    assert r["deterministic"] is True and "exactly 0" in r["stack_note"]
    eq = r["rephrasings_at_equal_count"]
    assert eq["sensitivity"] > 0.3 and eq["flip_rate"] > 0.6  # uniform over 4: P(2 draws differ) = 3/4
    lo, hi = r["beyond_noise"]["sensitivity"]["ci95"]
    assert lo > 0.3
    assert r["beyond_noise"]["share_of_changes_from_rephrasing"] == 1.0
    # C is not a measure of spread: at one prompt each sample's p(y | x) is a point mass on a random class (pairs
    # of samples agree 1/4 of the time), over a block of 2 prompts it is spread and overlaps more with others', so
    # here the rephrasings *raise* C over the floor although every change comes from them (docs/choices.md)
    assert r["fixed_prompt"]["consistency"] == pytest.approx(0.25, abs=0.02)
    assert r["beyond_noise"]["consistency"]["ci95"][1] < 0


def test_random_answers_match_the_floor_within_sampling_error():
    labels, gold, classes = synthetic("random")
    r = noise_floor(labels, gold, classes, seed=2)
    floor, eq, beyond = r["fixed_prompt"], r["rephrasings_at_equal_count"], r["beyond_noise"]
    lo, hi = beyond["sensitivity"]["ci95"]
    assert lo <= 0 <= hi
    assert abs(eq["sensitivity"] - floor["sensitivity"]) < 0.03
    assert abs(eq["flip_rate"] - floor["flip_rate"]) < 0.05
    assert floor["flip_rate"] == pytest.approx(0.75, abs=0.03)  # 4 classes uniform: P(differ) = 3/4
    lo, hi = beyond["flip_rate"]["ci95"]
    assert lo <= 0 <= hi
    lo, hi = beyond["consistency"]["ci95"]
    assert lo <= 0 <= hi
    assert beyond["consistency"]["resamples_used"] == 1000
    # the unequal comparison the equal counts avoid: S over all Q = 8 prompts is far above S over R = 2 draws
    assert r["rephrasings"]["sensitivity"] > floor["sensitivity"] + 0.2
    assert r["deterministic"] is False


# --- brute force -------------------------------------------------------------------------------------------------

def floor_sensitivity_by_loops(labels, classes):
    """S_floor written out: entropy in nats of each (n, q) group's draws over ln C, mean over q, mean over n."""
    per_sample = []
    for prompts in labels:
        values = []
        for draws in prompts:
            h = 0.0
            for c in classes:
                p = sum(d == c for d in draws) / len(draws)
                if p > 0:
                    h -= p * math.log(p)
            values.append(h / math.log(len(classes)))
        per_sample.append(sum(values) / len(values))
    return sum(per_sample) / len(per_sample)


def disagreement_by_loops(group):
    m = len(group)
    return sum(group[i] != group[j] for i in range(m) for j in range(m) if i != j) / (m * (m - 1))


@pytest.mark.parametrize("seed,n,q,r", [(0, 30, 7, 3), (1, 12, 6, 2), (2, 25, 10, 4)])
def test_vectorised_matches_brute_force(seed, n, q, r):
    rng = np.random.default_rng(seed)
    classes = ["a", "b", "c", NA]
    labels = rng.choice(classes, size=(n, q, r), p=[0.5, 0.25, 0.15, 0.1]).tolist()
    gold = [["a", "b", "c", None][i % 4] for i in range(n)]
    result = noise_floor(labels, gold, classes, seed=seed)
    assert result["fixed_prompt"]["sensitivity"] == pytest.approx(floor_sensitivity_by_loops(labels, classes),
                                                                  abs=1e-12)
    assert result["fixed_prompt"]["flip_rate"] == pytest.approx(
        np.mean([disagreement_by_loops(g) for prompts in labels for g in prompts]), abs=1e-12)
    blocks = q // r
    groups = [[labels[i][b * r + k][j] for k in range(r)] for i in range(n) for j in range(r) for b in range(blocks)]
    eq = result["rephrasings_at_equal_count"]
    assert eq["sensitivity"] == pytest.approx(np.mean([sensitivity(class_distribution(g, classes)) for g in groups]),
                                              abs=1e-12)
    assert eq["flip_rate"] == pytest.approx(
        np.mean([disagreement_by_loops([labels[i][k][j] for k in range(q)]) for i in range(n) for j in range(r)]),
        abs=1e-12)
    # C: the project's consistency (no self-pairs, mean over classes) per group, then the mean over groups
    real = ["a", "b", "c"]
    floor_c = np.mean([consistency([class_distribution(labels[i][k], classes) for i in range(n)], gold, real)["mean"]
                       for k in range(q)])
    reph_c = np.mean([consistency([class_distribution([labels[i][b * r + k][j] for k in range(r)], classes)
                                   for i in range(n)], gold, real)["mean"]
                      for j in range(r) for b in range(blocks)])
    assert result["fixed_prompt"]["consistency"] == pytest.approx(floor_c, abs=1e-12)
    assert eq["consistency"] == pytest.approx(reph_c, abs=1e-12)
    assert result["beyond_noise"]["consistency"]["value"] == pytest.approx(floor_c - reph_c, abs=1e-12)
    assert pairwise_disagreement(labels[0][0]) == pytest.approx(disagreement_by_loops(labels[0][0]))


def test_consistency_bootstrap_leaves_out_copies_of_the_same_sample():
    """A resample's C_y is the mean over pairs of copies of different samples: checked against a loop."""
    from posixlab.metrics.noise import _class_pair_means, _consistency_bootstrap

    rng = np.random.default_rng(3)
    n, groups = 9, 3
    counts = [rng.multinomial(2, [0.5, 0.3, 0.2], size=n) for _ in range(groups)]
    other = [rng.multinomial(2, [0.2, 0.3, 0.5], size=n) for _ in range(groups)]
    gold = ["a"] * 5 + ["b"] * 4
    fm, rm = _class_pair_means(counts, 2, gold, ["a", "b"]), _class_pair_means(other, 2, gold, ["a", "b"])
    samples = rng.integers(0, n, size=(20, n))
    values, used = _consistency_bootstrap(fm, rm, gold, samples)

    def c_of(groups_counts, idx, cls):
        members = [i for i in idx if gold[i] == cls]
        pairs = [(i, j) for a, i in enumerate(members) for b, j in enumerate(members) if a != b and i != j]
        if not pairs:
            return None
        return np.mean([np.mean([1 - 0.5 * np.abs(g[i] / 2 - g[j] / 2).sum() for g in groups_counts])
                        for i, j in pairs])

    for b in range(20):
        per = [(c_of(counts, samples[b], c), c_of(other, samples[b], c)) for c in ("a", "b")]
        per = [f - o for f, o in per if f is not None]
        expected = np.mean(per) if per else np.nan
        assert values[b] == pytest.approx(expected, abs=1e-12, nan_ok=True)
    assert used == int(np.isfinite(values).sum())


# --- records -----------------------------------------------------------------------------------------------------

def as_records(labels, gold):
    return [{"sample_id": i, "gold": g,
             "predictions": [{"rephrasing": q, "label": draws[0], "repeat_labels": list(draws)}
                             for q, draws in enumerate(prompts)]}
            for i, (prompts, g) in enumerate(zip(labels, gold))]


def test_from_records_equals_the_pure_function():
    records = as_records(WORKED, ["a", "a"])
    assert noise_floor_from_records(records, CLASSES, seed=0) == noise_floor(WORKED, ["a", "a"], CLASSES, seed=0)
    no_gold = as_records(WORKED, [None, None])
    assert noise_floor_from_records(no_gold, CLASSES)["fixed_prompt"]["consistency"] is None
    for rec in records:
        for p in rec["predictions"]:
            del p["repeat_labels"]
    assert noise_floor_from_records(records, CLASSES) is None
    partial = as_records(WORKED, ["a", "a"])
    del partial[1]["predictions"][2]["repeat_labels"]
    with pytest.raises(ConfigError, match="no repeat_labels"):
        noise_floor_from_records(partial, CLASSES)
    uneven = as_records(WORKED, ["a", "a"])
    uneven[0]["predictions"][0]["repeat_labels"].append("a")
    with pytest.raises(ConfigError, match="different numbers of repeats"):
        noise_floor_from_records(uneven, CLASSES)


def test_stack_note_names_the_stack():
    """The note reads the stack's determinism as a capability (``deterministic``), not as a backend's name."""
    labels, gold, classes = synthetic("random", n=20)
    records = as_records(labels, gold)
    note = noise_floor_from_records(records, classes, backend="vllm", deterministic_stack=True)["stack_note"]
    assert "nondeterminism of the stack" in note
    assert "endpoint" in noise_floor_from_records(records, classes, backend="openai")["stack_note"]
    assert "the my-model endpoint" in noise_floor_from_records(records, classes, backend="my-model")["stack_note"]
    assert "for a hosted endpoint" in noise_floor_from_records(records, classes)["stack_note"]


def test_classification_summary_and_markdown_carry_the_block():
    from posixlab.tasks.classification import classification_summary_markdown
    from posixlab.tasks.classification import build_classification_summary

    records = as_records(WORKED, ["a", "a"])
    for rec in records:
        rec["distribution"] = class_distribution([p["label"] for p in rec["predictions"]], CLASSES).tolist()
        rec["sensitivity"] = sensitivity(rec["distribution"])
    meta = {"model": {"name": "m", "backend": "vllm"}, "dataset": "d", "strategy": "simple", "probability": "greedy",
            "seed": 0}
    summary = build_classification_summary(records, CLASSES, 4, meta)  # saved before meta["capabilities"]: the name
    assert summary["noise_floor"] == noise_floor(WORKED, ["a", "a"], CLASSES, seed=0, backend="vllm",
                                                 deterministic_stack=True)
    assert summary["noise_floor"]["rephrasings"]["sensitivity"] == pytest.approx(summary["sensitivity"]["mean"])
    text = classification_summary_markdown(summary)
    assert "## Noise floor (R = 2 repeats)" in text
    assert "| repeats alone (the prompt fixed: the floor) | 0.237 | 0.250 | 0.375 |" in text
    assert "40.0%" in text and "nondeterminism of the stack" in text
    for rec in records:
        for p in rec["predictions"]:
            del p["repeat_labels"]
    summary = build_classification_summary(records, CLASSES, 4, meta)
    assert summary["noise_floor"] is None
    assert "Noise floor" not in classification_summary_markdown(summary)


def test_the_summary_reads_the_stack_s_determinism_from_the_run_s_capabilities():
    """A run records its model's capabilities (meta["capabilities"]); the summary's stack note reads DETERMINISTIC
    there, whatever the backend is called; a summary saved without them falls back to the backend's name."""
    from posixlab.tasks.classification import build_classification_summary

    records = as_records(WORKED, ["a", "a"])
    for rec in records:
        rec["distribution"] = class_distribution([p["label"] for p in rec["predictions"]], CLASSES).tolist()
        rec["sensitivity"] = sensitivity(rec["distribution"])
    base = {"dataset": "d", "strategy": "simple", "probability": "greedy", "seed": 0}

    def note(model, **meta):
        return build_classification_summary(records, CLASSES, 4, {**base, "model": model, **meta})["noise_floor"][
            "stack_note"]

    in_process = note({"name": "m"}, capabilities=["deterministic", "generate", "score"])  # no identity backend
    assert "for an in-process or vLLM model (greedy at temperature 0) this is nondeterminism of the stack" in in_process
    assert "the sglang endpoint's" in note({"name": "m", "backend": "sglang"}, capabilities=["generate"])
    assert note({"name": "m", "backend": "vllm"}, capabilities=["generate"]) != note({"name": "m", "backend": "vllm"})
    assert note({"name": "m", "backend": "vllm"}) == in_process  # an old summary: the backend's name
