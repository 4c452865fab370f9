"""One large cell over many machines: ``shard=K/N`` runs a deterministic slice of the cell's prompt sets, and
``merge_shards`` joins the N shard folders into one results folder like a single run's.

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
from pathlib import Path

from posixlab.errors import ConfigError
from posixlab.models.loading import TRANSPORT_KEYS
from posixlab.results import SETS_FILE, SUMMARY_FILE, SetWriter, build_summary, read_sets, write_summary

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
    >>> a = config_fingerprint({"model": {"name": "m", "base_url": "http://node-1:8000/v1"}})
    >>> a == config_fingerprint({"model": {"name": "m", "base_url": "http://node-2:8000/v1"}})
    True
    """
    kept = {k: v for k, v in config.items() if k not in ("shard", "output_dir")}
    if isinstance(kept.get("model"), dict):
        kept["model"] = {k: v for k, v in kept["model"].items() if k not in TRANSPORT_KEYS}
    return hashlib.sha256(json.dumps(kept, sort_keys=True, default=str).encode()).hexdigest()[:16]


def merge_shards(folders: list[str | Path], out: str | Path) -> dict:
    """Join shard folders into ``out`` (``sets.jsonl``, ``summary.json``/``.md``, ``config.yaml``); returns the
    merged summary. Refuses shards of different cells, missing shards and duplicates, naming them."""
    if not folders:
        raise ConfigError("give the shard folders to merge")
    shards = []
    for folder in map(Path, folders):
        path = folder / SUMMARY_FILE
        if not path.is_file() or not (folder / SETS_FILE).is_file():
            raise ConfigError(f"{folder} is not a finished run folder (no {SUMMARY_FILE} or {SETS_FILE})")
        summary = json.loads(path.read_text(encoding="utf-8"))
        if not summary.get("shard"):
            raise ConfigError(f"{folder} is not a shard (it was run without shard=K/N)")
        shards.append((folder, summary))
    fingerprints = {s["config_fingerprint"] for _, s in shards}
    if len(fingerprints) > 1:
        by = {}
        for folder, s in shards:
            by.setdefault(s["config_fingerprint"], []).append(str(folder))
        raise ConfigError("these shards come from different configurations and cannot be merged: " +
                          "; ".join(f"{fp}: {', '.join(names)}" for fp, names in by.items()))
    counts = {s["shard"]["count"] for _, s in shards}
    if len(counts) > 1:
        raise ConfigError(f"the shards were cut in different numbers of pieces ({sorted(counts)}); merge the shards "
                          f"of one shard=K/N sweep")
    count = counts.pop()
    seen: dict[int, Path] = {}
    for folder, s in shards:
        k = s["shard"]["index"]
        if k in seen:
            raise ConfigError(f"shard {k}/{count} is given twice: {seen[k]} and {folder}")
        seen[k] = folder
    missing = sorted(set(range(1, count + 1)) - set(seen))
    if missing:
        raise ConfigError(f"missing shard(s) {', '.join(f'{k}/{count}' for k in missing)}; run them (shard=K/{count}) "
                          f"or give their folders")
    records = [r for folder, _ in sorted(shards, key=lambda fs: fs[1]["shard"]["index"]) for r in read_sets(folder)]
    records.sort(key=lambda r: r["set_index"])
    total = shards[0][1]["shard"]["num_sets_total"]
    if [r["set_index"] for r in records] != list(range(total)):
        raise ConfigError(f"the shards hold {len(records)} sets, not the cell's {total} (a shard run stopped early?)")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    with SetWriter(out) as writer:
        for record in records:
            writer.write(record)
    first = shards[0][1]
    computed = ("schema_version", "psi", "factors", "psi_reference_compat", "compute", "accuracy", "prompt_choice",
                "shard", "engine")
    meta = {k: v for k, v in first.items() if k not in computed}
    meta["config"] = {**first.get("config", {}), "shard": None}
    engines = [s.get("engine", {}) for _, s in shards]
    meta["engine"] = {key: sum(e.get(key) or 0 for e in engines) for key in ("forward_tokens", "processed_tokens")}
    meta["merged_from"] = [str(folder) for folder, _ in sorted(shards, key=lambda fs: fs[1]["shard"]["index"])]
    summary = build_summary(records, meta)
    write_summary(out, summary)
    config = shards[0][0] / "config.yaml"
    if config.is_file():  # the first shard's resolved config, as one run of the whole cell would have it
        import yaml

        resolved = yaml.safe_load(config.read_text(encoding="utf-8")) or {}
        resolved["shard"] = None
        (out / "config.yaml").write_text(yaml.safe_dump(resolved, sort_keys=False, allow_unicode=True))
    return summary
