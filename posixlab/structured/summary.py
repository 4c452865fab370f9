"""What a structured run adds to the classification summary: the schema failures (counted, never hidden) per prompt
and per dimension, and, with schema variants, S and C per dimension (which part of a schema moves predictions).

An answer that is not a valid object of its schema (invalid JSON, a missing label field, a label outside the enum)
is N/A in S and C, as the paper treats an unparsable answer; here it is also counted, by kind. With
probability=label_probs, an answer that reached its label slot is read from the slot's class probabilities even when
the rest of it fails the schema (``FAILURE_NOTES``).

>>> recs = [{"gold": "a", "predictions": [
...     {"label": "a", "parse": {"failure": None}}, {"label": "b", "parse": {"failure": None}},
...     {"label": "N/A", "parse": {"failure": "out_of_enum"}}]}]
>>> out = structured_summary(recs, ["a", "b", "N/A"], ["original", "order", "names"], ["none", "b, a", "x"])
>>> out["failures"]["counts"], out["failures"]["rate"]
({'invalid_json': 0, 'missing_field': 0, 'out_of_enum': 1}, 0.3333333333333333)
>>> [(d["dimension"], round(d["sensitivity"], 3), d["failure_rate"]) for d in out["per_dimension"]]
[('order', 0.631, 0.0), ('names', 0.631, 1.0)]
"""

from __future__ import annotations

import numpy as np

from posixlab.metrics.classification import NA, class_distribution, consistency, sensitivity
from posixlab.structured.schema import FAILURES


# what a failed answer counts as in S and C, by how p(y|x) was read
FAILURE_NOTES = {
    "greedy": "an answer that is no valid object of its schema is N/A in S and C",
    # the label slot's class probabilities exist whenever the answer reached its label slot, whatever follows it
    "label_probs": "an answer that never reaches its label slot is N/A in S and C; one that reaches it but is no "
                   "valid object of its schema (cut off after the label, say) is read from the slot's class "
                   "probabilities, as every other answer is",
}


def structured_summary(records: list[dict], classes: list[str], dimensions: list[str] | None,
                       changes: list[str] | None = None, probability: str = "greedy") -> dict | None:
    """None unless the run's answers were checked against a schema (strategy=structured)."""
    if not records or "failure" not in (records[0]["predictions"][0].get("parse") or {}):
        return None
    q_count = len(records[0]["predictions"])
    dimensions = dimensions or ["original"] * q_count
    failures = [[p["parse"]["failure"] for p in r["predictions"]] for r in records]

    def counts(qs: list[int]) -> dict:
        return {kind: sum(f[q] == kind for f in failures for q in qs) for kind in FAILURES}

    def rate(qs: list[int]) -> float:
        return sum(f[q] is not None for f in failures for q in qs) / (len(records) * len(qs))

    every = list(range(q_count))
    out = {"failures": {"counts": counts(every), "rate": rate(every),
                        "note": FAILURE_NOTES.get(probability, FAILURE_NOTES["greedy"])},
           "per_prompt": [{"prompt": q, "dimension": dimensions[q], "change": (changes or [None] * q_count)[q],
                           "failures": counts([q]), "failure_rate": rate([q])} for q in every],
           "per_dimension": []}
    real = [c for c in classes if c != NA]
    gold = [r["gold"] for r in records]
    for dimension in dict.fromkeys(d for d in dimensions if d != "original"):
        qs = [0] + [q for q in every if dimensions[q] == dimension]  # the original beside this dimension's variants
        distributions = np.array([class_distribution([r["predictions"][q]["label"] for q in qs], classes)
                                  for r in records])
        c = consistency(distributions, gold, real)["mean"] if all(g is not None for g in gold) else None
        out["per_dimension"].append({
            "dimension": dimension, "prompts": qs, "num_variants": len(qs) - 1,
            "sensitivity": float(np.mean([sensitivity(d) for d in distributions])), "consistency": c,
            "failure_rate": rate(qs[1:]), "failures": counts(qs[1:])})
    return out
