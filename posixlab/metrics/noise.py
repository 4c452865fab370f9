"""The endpoint's noise floor for sensitivity S_τ and consistency C_y (``task.repeats``).

A hosted model is not deterministic at temperature 0: the same prompt sent twice can get two different answers. With
``task.repeats = R`` every prompt (each of the Q rephrasings of the task sentence, for every sample) is sent R times,
which gives labels ``y[n][q][r]`` (sample n, prompt q, q = 0 the original sentence, repeat r, r = 0 the answer the
paper's metrics use). This module puts the paper's metrics, computed from the rephrasings, beside the same metrics
computed from the repeats alone (the prompt held fixed: the noise floor), **on equal numbers of draws**, and says how
much of the prediction changes the rephrasings add beyond the noise.

- ``fixed_prompt`` (the floor): one group per (n, q), its R draws. S = the mean over samples of the mean over q of
  S_τ of the group's empirical class distribution (``classification.sensitivity``: entropy / ln C, N/A counted);
  C = the mean over q of C_y (``classification.consistency``'s definition: pairs of distinct samples, mean over gold
  classes; computed through one matrix product, checked against it in the tests) of the distributions p_q(y | x_n)
  over the R repeats; flip rate = the mean over (n, q) of the share of ordered pairs
  of draws (r ≠ r') that disagree.
- ``rephrasings_at_equal_count``: for each repeat r, the Q prompts cut into ⌊Q/R⌋ consecutive blocks of R (the last
  Q mod R left out); one group per (n, r, block), its R labels. S and C exactly as above over these groups; the flip
  rate is the share of disagreeing ordered pairs among all Q prompts at repeat r (count-free: no blocks needed).
- ``beyond_noise``: rephrasings − floor for S and the flip rate, floor − rephrasings for C (positive: the
  rephrasings cost consistency), each with a 95% percentile bootstrap interval over samples (paired: one resample of
  the samples serves both sides; on 2 or 3 samples, whose resamples cannot reach a 2.5 % tail, the t interval for S
  and the flip rate and none for C), and the share of the changes that the rephrasings add.

Why equal counts: the plug-in entropy of R draws is biased downward, more so for fewer draws (two draws from a fair
coin have entropy 0 half the time), so S over Q = 30 rephrasings and S over R = 2 repeats are not comparable; here
both sides are entropies of R draws. The pairwise disagreement is an unbiased estimate of P(two draws differ) at any
group size, so the rephrasings' flip rate uses all Q prompts.

The worked example of ``tests/test_noise_floor.py``: 2 samples (both gold "a"), Q = 4, R = 2, h = ln 2 / ln 3.

>>> y = [[["a", "a"], ["a", "b"], ["b", "b"], ["a", "a"]],
...      [["b", "b"], ["b", "b"], ["a", NA], ["b", "a"]]]
>>> r = noise_floor(y, ["a", "a"], ["a", "b", NA], seed=0)
>>> h = math.log(2) / math.log(3)
>>> round(r["fixed_prompt"]["sensitivity"] / h, 6), r["fixed_prompt"]["flip_rate"], r["fixed_prompt"]["consistency"]
(0.375, 0.375, 0.25)
>>> eq = r["rephrasings_at_equal_count"]
>>> round(eq["sensitivity"] / h, 6), eq["flip_rate"], eq["consistency"]
(0.625, 0.625, 0.5)
>>> b = r["beyond_noise"]
>>> round(b["sensitivity"]["value"] / h, 6), round(b["flip_rate"]["value"], 6), b["consistency"]["value"]
(0.25, 0.25, -0.25)
>>> b["share_of_changes_from_rephrasing"], r["deterministic"]
(0.4, False)

A deterministic stack (every repeat of a prompt gives the same answer) has a floor of exactly 0:

>>> r = noise_floor([[["a", "a"], ["b", "b"]], [["a", "a"], ["a", "a"]]], None, ["a", "b", NA])
>>> r["fixed_prompt"]["sensitivity"], r["fixed_prompt"]["flip_rate"], r["deterministic"]
(0.0, 0.0, True)
>>> noise_floor([[["a"], ["b"]]], None, ["a", "b", NA]) is None            # R = 1: no repeats, no floor
True
"""

from __future__ import annotations

import math  # noqa: F401  (the module doctest uses it)
from collections.abc import Sequence

import numpy as np

from posixlab.errors import ConfigError
from posixlab.metrics.classification import NA, class_distribution, consistency, consistency_matrix, sensitivity  # noqa: F401,E501  (consistency_matrix: a doctest)
from posixlab.metrics.classification import resampled_pair_means
from posixlab.metrics.stats import beyond_resampling_reach, t_interval

RESAMPLES = 1000


def pairwise_disagreement(group: Sequence[str]) -> float:
    """The share of ordered pairs (r ≠ r') of ``group``'s labels that differ: 1 − Σ_k c_k (c_k − 1) / (m (m − 1)) for
    m labels with c_k in class k. An unbiased estimate of the probability that two draws differ, whatever m.

    >>> pairwise_disagreement(["a", "a", "b"])        # 6 ordered pairs, 2 agree (a, a both ways)
    0.6666666666666667
    >>> pairwise_disagreement(["a", "b"]), pairwise_disagreement(["a", "a"])
    (1.0, 0.0)
    """
    if len(group) < 2:
        raise ConfigError(f"pairwise disagreement needs at least 2 labels, got {len(group)}")
    counts = np.unique(np.asarray(list(group), dtype=object).astype(str), return_counts=True)[1]
    return float(_disagreement(counts[None, :], len(group))[0])


def _disagreement(counts: np.ndarray, m: int) -> np.ndarray:
    """Pairwise disagreement of groups of m labels from their class counts (last axis)."""
    agree = (counts * (counts - 1)).sum(axis=-1)
    return 1.0 - agree / (m * (m - 1))


def _group_sensitivity(counts: np.ndarray) -> np.ndarray:
    """S_τ of every group from its class counts (last axis): ``sensitivity(class_distribution(group))``, computed once
    per distinct count vector (a group of R draws has few possible ones).

    >>> _group_sensitivity(np.array([[2, 0, 0], [1, 1, 0], [0, 1, 1]])).round(4).tolist()
    [0.0, 0.6309, 0.6309]
    """
    flat = counts.reshape(-1, counts.shape[-1])
    rows, inverse = np.unique(flat, axis=0, return_inverse=True)
    values = np.array([sensitivity(row / row.sum()) for row in rows])
    return values[inverse.reshape(-1)].reshape(counts.shape[:-1])


def _codes(labels, classes: Sequence[str]) -> np.ndarray:
    """Labels y[n][q][r] as an (N, Q, R) array of class indices; a label outside ``classes`` is an error."""
    index = {c: k for k, c in enumerate(classes)}
    try:
        array = np.asarray(labels, dtype=object)
    except ValueError as e:  # ragged lists
        raise ConfigError(f"labels must be y[n][q][r] with the same Q and R for every sample ({e})") from None
    if array.ndim != 3:
        raise ConfigError(f"labels must be y[n][q][r] (samples × prompts × repeats) with the same Q and R for every "
                          f"sample, got an array of shape {array.shape}")
    codes = np.empty(array.shape, dtype=np.int64)
    for pos, label in np.ndenumerate(array):
        if label not in index:
            class_distribution([label], classes)  # raises the project's error for a label outside the classes
        codes[pos] = index[label]
    return codes


def _counts(codes: np.ndarray, num_classes: int, axis: int) -> np.ndarray:
    """Class counts of the groups formed by ``axis`` of ``codes``; the class axis comes last."""
    return (np.moveaxis(codes, axis, -1)[..., None] == np.arange(num_classes)).sum(axis=-2)


def _pair_means(counts: list[np.ndarray], rows: list[int], draws: int) -> np.ndarray:
    """The mean over groups (``counts``: one N×C matrix of class counts of ``draws`` labels per group) of the
    consistency matrix C(x, x') = 1 − TVD(p_x, p_x') among the samples ``rows``.

    For p = c / m (m draws), 1 − ½‖p − p'‖₁ = Σ_k min(c_k, c'_k) / m, and min(a, b) = Σ_{t=1..m} [a ≥ t][b ≥ t]: the
    matrix is a product of 0/1 indicator matrices, one matrix product for all groups (no n × n × C array).

    >>> c = np.array([[2, 0, 0], [1, 1, 0], [0, 1, 1]])
    >>> np.allclose(_pair_means([c], [0, 1, 2], 2), consistency_matrix(c / 2))
    True
    """
    thresholds = np.arange(1, draws + 1)
    indicators = np.concatenate([(c[rows][:, :, None] >= thresholds).reshape(len(rows), -1) for c in counts],
                                axis=1).astype(np.float64)
    return indicators @ indicators.T / (draws * len(counts))


def _class_pair_means(counts: list[np.ndarray], draws: int, gold, real: list[str]) -> dict[str, np.ndarray]:
    """``_pair_means`` per gold class with at least 2 samples (C_y has no pair otherwise)."""
    out = {}
    for c in real:
        rows = [i for i, g in enumerate(gold) if g == c]
        if len(rows) >= 2:
            out[c] = _pair_means(counts, rows, draws)
    return out


def _mean_over_pairs(means: dict[str, np.ndarray]) -> float | None:
    """The mean over groups of C_y averaged over classes (``classification.consistency``'s ``mean``: pairs of
    distinct samples, every class with a pair counts once), from ``_class_pair_means``: C_y is linear in the pair
    values, so the mean over groups of C_y is C_y of the mean matrix."""
    values = [(m.sum() - np.trace(m)) / (len(m) * (len(m) - 1)) for m in means.values()]
    return float(np.mean(values)) if values else None


def _interval(values: np.ndarray) -> list[float] | None:
    values = values[np.isfinite(values)]
    if len(values) == 0:
        return None
    lo, hi = np.percentile(values, [2.5, 97.5])
    return [float(lo), float(hi)]


def _difference_interval(differences: np.ndarray, samples: np.ndarray) -> list[float] | None:
    """95% interval of the mean of per-sample differences (each in [−1, 1]): the paired percentile bootstrap over
    ``samples``, or, on 2 or 3 samples, whose resamples cannot reach a 2.5 % tail (their percentile interval would be
    the differences' range), the t interval (``stats.bootstrap_ci``'s rule)."""
    if beyond_resampling_reach(len(differences), 0.025):
        return list(t_interval(differences, bounds=(-1.0, 1.0)))
    return _interval(differences[samples].mean(axis=1))


def _consistency_bootstrap(floor_means: dict[str, np.ndarray], reph_means: dict[str, np.ndarray], gold,
                           samples: np.ndarray) -> tuple[np.ndarray, int]:
    """C_floor − C_reph for each bootstrap resample (rows of ``samples``: resampled sample indices), and how many
    resamples have a value. Per class y, D = the mean over floor groups of C(x, x') − the mean over rephrasing
    groups: C_floor,y − C_reph,y is the mean of D over the class's pairs of distinct samples, so the resampled
    difference is ``resampled_pair_means`` of D (its diagonal 0: self-pairs are not pairs)."""
    differences = {}
    for c in floor_means:
        differences[c] = floor_means[c] - reph_means[c]
        np.fill_diagonal(differences[c], 0.0)
    values = resampled_pair_means(differences, gold, samples)
    return values, int(np.isfinite(values).sum())


def stack_note(deterministic: bool, backend: str | None = None, deterministic_stack: bool = False) -> str:
    """What the floor says about the stack that answered (``backend``: the model identity's, None if unknown;
    ``deterministic_stack``: the model has the ``deterministic`` capability, greedy at temperature 0 repeating itself,
    as in process and on vLLM).

    >>> stack_note(False, "vllm", deterministic_stack=True).endswith("nondeterminism of the stack")
    True
    """
    if deterministic:
        return ("no two repeats of a prompt disagree: the floor is exactly 0, as for a deterministic stack "
                "(in-process, vLLM at temperature 0); every change across prompts is the rephrasings'")
    if deterministic_stack:
        return ("repeats of a prompt disagree: for an in-process or vLLM model (greedy at temperature 0) this is "
                "nondeterminism of the stack")
    if backend is not None:
        return (f"repeats of a prompt disagree: the {backend} endpoint's nondeterminism at temperature 0 (the noise "
                f"floor above)")
    return ("repeats of a prompt disagree: for a hosted endpoint, its nondeterminism at temperature 0; for an "
            "in-process or vLLM model, nondeterminism of the stack")


def noise_floor(labels, gold: Sequence[str | None] | None, classes: Sequence[str], seed: int = 0,
                resamples: int = RESAMPLES, backend: str | None = None,
                deterministic_stack: bool = False) -> dict | None:
    """S, C and the flip rate from the rephrasings beside the same from the repeats alone, on equal counts.

    ``labels``: y[n][q][r] (N samples × Q prompts × R repeats, q = 0 the original sentence, r = 0 the answer the
    paper's metrics use); ``gold``: one gold class per sample (None, or all None: no consistency); ``classes``: the
    class names, ``NA`` included; ``seed``: the bootstrap's ``numpy`` Generator; ``backend`` and ``deterministic_stack``
    choose the stack note (``stack_note``). None when R < 2. The module's docstring has the definitions and a worked
    example.
    """
    classes = list(classes)
    codes = _codes(labels, classes)
    n, q, r = codes.shape
    if r < 2:
        return None
    if n == 0:
        raise ConfigError("the noise floor needs at least one sample")
    if gold is not None and len(gold) != n:
        raise ConfigError(f"the noise floor needs one gold label per sample: {len(gold)} for {n} samples")
    has_gold = gold is not None and any(g is not None and g != NA for g in gold)
    real = [c for c in classes if c != NA]
    k = len(classes)

    # the floor: one group per (n, q), its R draws
    floor_counts = _counts(codes, k, axis=2)  # (N, Q, k)
    floor_s = _group_sensitivity(floor_counts).mean(axis=1)  # per sample
    floor_flip = _disagreement(floor_counts, r).mean(axis=1)
    floor_means = _class_pair_means([floor_counts[:, j] for j in range(q)], r, gold, real) if has_gold else {}
    deterministic = bool((floor_counts.max(axis=-1) == r).all())

    # the paper's: every prompt at repeat 0
    paper_counts = _counts(codes[:, :, 0], k, axis=1)  # (N, k)
    paper = {"sensitivity": float(_group_sensitivity(paper_counts).mean()),
             "consistency": consistency(paper_counts / q, gold, real)["mean"] if has_gold else None,
             "draws_per_sample": q,
             "note": "the paper's S and C: every prompt's answer at repeat 0 (Q draws a sample), from the labels"}

    result = {"repeats": r, "num_prompts": q, "num_samples": n, "draws_per_group": r,
              "rephrasings": paper,
              "fixed_prompt": {"sensitivity": float(floor_s.mean()),
                               "consistency": _mean_over_pairs(floor_means) if has_gold else None,
                               "flip_rate": float(floor_flip.mean()), "groups_per_sample": q},
              "rephrasings_at_equal_count": None, "beyond_noise": None,
              "deterministic": deterministic, "stack_note": stack_note(deterministic, backend, deterministic_stack),
              "note": None}
    blocks = q // r
    if blocks == 0:
        result["note"] = (f"Q = {q} prompts < R = {r} repeats: no block of R prompts, so no rephrasing side at equal "
                          f"count")
        result["reading"] = noise_reading(result)
        return result

    result["rephrasings_at_equal_count"], reph_s, reph_flip, reph_means = _at_equal_count(codes, k, gold, real,
                                                                                           has_gold)
    c_floor, c_reph = result["fixed_prompt"]["consistency"], result["rephrasings_at_equal_count"]["consistency"]
    result["beyond_noise"] = _beyond_noise((floor_s, reph_s), (floor_flip, reph_flip), (c_floor, c_reph),
                                           (floor_means, reph_means), gold, seed, resamples)
    result["reading"] = noise_reading(result)
    return result


def _at_equal_count(codes: np.ndarray, k: int, gold, real: list[str], has_gold: bool):
    """The rephrasings' side at the floor's count: per repeat, consecutive blocks of R prompts (R draws a group, as
    the floor's). Returns its result entry and, per sample, S and the flip rate, and the class-pair means."""
    n, q, r = codes.shape
    blocks = q // r
    used = blocks * r
    blocked = codes[:, :used, :].reshape(n, blocks, r, r)  # (N, block, prompt in block, repeat)
    reph_counts = _counts(blocked, k, axis=2)  # (N, block, repeat, k)
    reph_s = _group_sensitivity(reph_counts).mean(axis=(1, 2))
    reph_flip = _disagreement(_counts(codes, k, axis=1), q).mean(axis=1)  # (N, R) groups of all Q prompts
    reph_groups = [reph_counts[:, b, j] for b in range(blocks) for j in range(r)]
    reph_means = _class_pair_means(reph_groups, r, gold, real) if has_gold else {}
    dropped = q - used
    entry = {"sensitivity": float(reph_s.mean()),
             "consistency": _mean_over_pairs(reph_means) if has_gold else None,
             "flip_rate": float(reph_flip.mean()), "blocks": blocks, "prompts_used": used,
             "groups_per_sample": blocks * r,
             "note": (f"the last {dropped} of the Q = {q} prompts (Q mod R) are in no block: left out of S and C on "
                      f"this side (the flip rate uses all Q)" if dropped else None)}
    return entry, reph_s, reph_flip, reph_means


def noise_reading(result: dict) -> str:
    """The noise floor block in one line: how often the same prompt's answer changes, how often a rephrasing's does,
    and whether the rephrasings move answers beyond that noise (the interval of S's difference excludes 0).

    >>> noise_reading({"repeats": 2, "fixed_prompt": {"sensitivity": 0.0, "flip_rate": 0.0},
    ...                "rephrasings_at_equal_count": {"sensitivity": 0.2, "flip_rate": 0.25},
    ...                "beyond_noise": {"sensitivity": {"value": 0.2, "ci95": [0.1, 0.3]},
    ...                                 "share_of_changes_from_rephrasing": 1.0},
    ...                "stack_note": "the endpoint answered every repeat alike"})
    'noise floor (R = 2): the same prompt changes answer in 0.0% of pairs, a rephrasing in 25.0%; S beyond the noise 0.200 (95% CI 0.100 to 0.300): the rephrasings move answers beyond the noise · 100% of the changes come from rephrasing · the endpoint answered every repeat alike'
    """
    fixed, equal, beyond = result["fixed_prompt"], result.get("rephrasings_at_equal_count"), result.get("beyond_noise")
    line = f"noise floor (R = {result['repeats']}): the same prompt changes answer in {fixed['flip_rate']:.1%} of pairs"
    if equal:
        line += f", a rephrasing in {equal['flip_rate']:.1%}"
    if beyond:
        d = beyond["sensitivity"]
        low, high = d["ci95"] if d.get("ci95") else (None, None)
        verdict = ("" if low is None else ": the rephrasings move answers beyond the noise" if low > 0 else
                   ": not distinguishable from the noise" if low <= 0 <= high else ": less than the noise")
        line += (f"; S beyond the noise {d['value']:.3f}"
                 + ("" if low is None else f" (95% CI {low:.3f} to {high:.3f})") + verdict)
        share = beyond.get("share_of_changes_from_rephrasing")
        if share is not None:
            line += f" · {share:.0%} of the changes come from rephrasing"
    return f"{line} · {result['stack_note']}"


def _beyond_noise(s_sides, flip_sides, c_sides, pair_means, gold, seed: int, resamples: int) -> dict:
    """What the rephrasings add beyond the floor (rephrasing side minus floor side, per sample), with paired
    bootstrap intervals over samples; each argument pair is (floor, rephrasings)."""
    (floor_s, reph_s), (floor_flip, reph_flip), (c_floor, c_reph) = s_sides, flip_sides, c_sides
    floor_means, reph_means = pair_means
    n = len(floor_s)
    rng = np.random.default_rng(seed)
    samples = rng.integers(0, n, size=(resamples, n))
    d_s, d_flip = reph_s - floor_s, reph_flip - floor_flip
    flip_reph, flip_floor = float(reph_flip.mean()), float(floor_flip.mean())
    beyond = {"sensitivity": {"value": float(d_s.mean()), "ci95": _difference_interval(d_s, samples)},
              "flip_rate": {"value": float(d_flip.mean()), "ci95": _difference_interval(d_flip, samples)},
              "consistency": None,
              "share_of_changes_from_rephrasing": (max(0.0, flip_reph - flip_floor) / flip_reph
                                                   if flip_reph > 0 else None),
              "bootstrap": {"resamples": resamples, "seed": seed, "unit": "samples", "level": 0.95,
                            "method": "percentile, paired (one resample of the samples for both sides)"
                                      + ("; on 2 or 3 samples the t interval (S, flip rate), none for C"
                                         if beyond_resampling_reach(n, 0.025) else "")}}
    if c_floor is not None and c_reph is not None:
        values, used_resamples = _consistency_bootstrap(floor_means, reph_means, list(gold), samples)
        # on 2 or 3 samples the resamples cannot reach a 2.5 % tail, and C, a mean over pairs, has no per-sample
        # values for a t interval: no interval
        beyond["consistency"] = {"value": c_floor - c_reph,
                                 "ci95": None if beyond_resampling_reach(n, 0.025) else _interval(values),
                                 "resamples_used": used_resamples}
    return beyond


def noise_floor_from_records(records: list[dict], classes: Sequence[str], seed: int = 0,
                             backend: str | None = None, deterministic_stack: bool = False) -> dict | None:
    """``noise_floor`` of a classification run's records (``tasks/classification/records.py``'s ``read_record``):
    y[n][q] = ``predictions[q]["repeat_labels"]`` (R labels, repeat 0 first), gold = ``record["gold"]``. None when no
    prediction has ``repeat_labels`` (a run without ``task.repeats``) or R = 1.

    >>> recs = [{"gold": "a", "predictions": [{"label": "a", "repeat_labels": ["a", "a"]},
    ...                                        {"label": "b", "repeat_labels": ["b", "a"]}]},
    ...         {"gold": "b", "predictions": [{"label": "b", "repeat_labels": ["b", "b"]},
    ...                                        {"label": "b", "repeat_labels": ["b", "b"]}]}]
    >>> r = noise_floor_from_records(recs, ["a", "b", NA])
    >>> r["repeats"], r["fixed_prompt"]["flip_rate"], r["deterministic"]    # 1 of 4 groups disagrees
    (2, 0.25, False)
    >>> noise_floor_from_records([{"gold": "a", "predictions": [{"label": "a"}]}], ["a", "b", NA]) is None
    True
    """
    if not any("repeat_labels" in p for rec in records for p in rec["predictions"]):
        return None
    missing = [(rec.get("sample_id", i), q) for i, rec in enumerate(records)
               for q, p in enumerate(rec["predictions"]) if not p.get("repeat_labels")]
    if missing:
        raise ConfigError(f"{len(missing)} prediction(s) have no repeat_labels while others do (first: sample "
                          f"{missing[0][0]}, prompt {missing[0][1]}); the noise floor needs R labels for every prompt")
    labels = [[list(p["repeat_labels"]) for p in rec["predictions"]] for rec in records]
    sizes = {len(rl) for rec in labels for rl in rec}
    if len(sizes) > 1:
        raise ConfigError(f"repeat_labels hold different numbers of repeats ({sorted(sizes)}); the noise floor needs "
                          f"the same R for every prompt")
    gold = [rec.get("gold") for rec in records]
    return noise_floor(labels, None if all(g is None for g in gold) else gold, classes, seed=seed, backend=backend,
                       deterministic_stack=deterministic_stack)
