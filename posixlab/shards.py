"""One large cell over many machines: ``shard=K/N`` runs a deterministic slice of the cell's units (prompt sets,
classification samples), and ``posixlab.merge.merge_shards`` joins the N shard folders into one results folder like a
single run's.

A shard keeps every K-th set of the whole cell, round-robin over the cell's set order (``i % N == K - 1``), so
shards get sets of every length and finish at about the same time; each record keeps its index in the whole cell.
Every run records a fingerprint of its configuration without the shard and the output folder: shards whose
fingerprints differ were not made from the same cell, and the merge refuses them, as it refuses missing and
duplicate shards.

The merged ``sets.jsonl`` and ``summary.json`` hold the same sets, responses and metrics as one run of the cell.
Responses are greedy and the scores are within float32 rounding of a single run's: each shard batches its own
sets, and the scoring engine's batches change a log-probability by rounding only (measured: 2e-5 on SmolLM2; the
tests hold them within 1e-4, the engine's tolerance against one full pass per pair).
"""

from __future__ import annotations

import hashlib
import json
import re

from posixlab.errors import ConfigError
from posixlab.models.loading import TRANSPORT_KEYS

SHARD_FORM = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


def parse_shard(shard: str | None) -> tuple[int, int] | None:
    """``"3/16"`` -> ``(3, 16)`` (shard 3 of 16, counted from 1); None -> None.

    >>> parse_shard("3/16"), parse_shard(None)
    ((3, 16), None)
    >>> parse_shard("0/4")
    Traceback (most recent call last):
    ...
    posixlab.errors.ConfigError: shard='0/4': write K/N with 1 <= K <= N, e.g. shard=3/16 (the third of 16 shards)
    """
    if shard is None:
        return None
    match = SHARD_FORM.match(str(shard))
    k, n = (int(match.group(1)), int(match.group(2))) if match else (0, 0)
    if not match or not 1 <= k <= n:
        raise ConfigError(f"shard={shard!r}: write K/N with 1 <= K <= N, e.g. shard=3/16 (the third of 16 shards)")
    return k, n


def shard_label(shard) -> str:
    """What a shard's job folder (and W&B run) adds to its name, so that a cell's shards and a whole run of it are
    told apart at a glance (``${posixlab.shard:${shard}}`` in conf/config.yaml); a shard written wrongly keeps its
    text, for the error its run stops with.

    >>> shard_label("2/16"), shard_label(None), shard_label(" 3 / 4")
    ('_shard2of16', '', '_shard3of4')
    """
    if shard is None:
        return ""
    return "_shard" + re.sub(r"[^0-9A-Za-z]+", "", str(shard).replace("/", "of"))


def shard_lines(summary: dict, unit: str = "unit") -> list[str]:
    """A shard run's result line: which slice of the cell it holds, and how the shards join (none for a whole run).

    >>> shard_lines({"shard": {"index": 1, "count": 2, "num_units_total": 5, "unit_indices": [0, 2, 4]}}, "set")
    ["shard 1/2: 3 of the cell's 5 sets (join the shards: posixlab merge OUT_DIR SHARD_DIR ...)"]
    """
    shard = summary.get("shard")
    if not shard:
        return []
    return [f"shard {shard['index']}/{shard['count']}: {len(shard['unit_indices'])} of the cell's "
            f"{shard['num_units_total']} {unit}s (join the shards: posixlab merge OUT_DIR SHARD_DIR ...)"]


def shard_indices(num_sets: int, shard: str | None) -> list[int]:
    """The indices of the cell's sets that a shard runs.

    >>> shard_indices(7, "2/3"), shard_indices(3, None)
    ([1, 4], [0, 1, 2])
    """
    parsed = parse_shard(shard)
    if parsed is None:
        return list(range(num_sets))
    k, n = parsed
    return [i for i in range(num_sets) if i % n == k - 1]


def config_fingerprint(config: dict) -> str:
    """A hash of a run's configuration without what may differ between the shards of one cell.

    How a model is reached (a server's URL, concurrency, timeouts: ``TRANSPORT_KEYS``) may differ too: the shards of
    one cell may run against different servers of the same model.

    >>> config_fingerprint({"seed": 0, "shard": "1/2", "output_dir": "a"}) == config_fingerprint({"seed": 0})
    True
    >>> a = config_fingerprint({"model": {"name": "m", "server": {"base_url": "http://node-1:8000/v1"}}})
    >>> a == config_fingerprint({"model": {"name": "m", "server": {"base_url": "http://node-2:8000/v1"}}})
    True
    """
    kept = {k: v for k, v in config.items() if k not in ("shard", "output_dir")}
    if isinstance(kept.get("model"), dict) and isinstance(kept["model"].get("server"), dict):
        server = {k: v for k, v in kept["model"]["server"].items() if k not in TRANSPORT_KEYS}
        kept["model"] = {**kept["model"], "server": server}
    return hashlib.sha256(json.dumps(kept, sort_keys=True, default=str).encode()).hexdigest()[:16]
