"""Shards: three shards of a cell merge into what one run of the cell gives; shards that do not belong together are
refused with a message."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from posixlab.data import DatasetSpec
from posixlab.errors import ConfigError
from posixlab.models import ModelSpec
from posixlab.runner import run
from posixlab.tasks.posix import PosixConfig
from posixlab.results import read_sets
from posixlab.merge import merge_shards
from posixlab.shards import shard_indices

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow  # every test runs the packaged model; the merge command runs in a subprocess
SPEC = ModelSpec("smollm2-135m-instruct", "packaged", "smollm2-135m-instruct")


def config(out: Path, shard=None, seed=0) -> PosixConfig:
    return PosixConfig(model=SPEC, dataset=DatasetSpec("mmlu"), variant="spelling", num_sets=7, num_variants=3,
                     max_new_tokens=3, seed=seed, output_dir=str(out), score_cache=False, embedding=None, shard=shard)


@pytest.fixture(scope="module")
def runs(lm, tmp_path_factory):
    root = tmp_path_factory.mktemp("shards")
    whole = run(config(root / "whole"), lm=lm, progress=False)
    for k in (1, 2, 3):
        run(config(root / f"shard{k}", f"{k}/3"), lm=lm, progress=False)
    return root, whole


def test_three_shards_merge_into_the_single_run(runs):
    root, whole = runs
    assert [r["set_index"] for r in read_sets(root / "shard2")] == shard_indices(7, "2/3") == [1, 4]
    merged = merge_shards([root / "shard3", root / "shard1", root / "shard2"], root / "merged")
    one, joined = read_sets(root / "whole"), read_sets(root / "merged")
    assert [r["item_id"] for r in joined] == [r["item_id"] for r in one]
    for a, b in zip(one, joined):
        assert [p["text"] for p in a["prompts"]] == [p["text"] for p in b["prompts"]]
        assert [r["token_ids"] for r in a["responses"]] == [r["token_ids"] for r in b["responses"]]
        # each shard batches its own sets: scores agree within float32 rounding (the engine's tested tolerance)
        assert np.abs(np.array(a["logprob_matrix"]) - np.array(b["logprob_matrix"])).max() < 1e-4
        assert a["psi"] == pytest.approx(b["psi"], abs=1e-4)
        assert [x["by_greedy"] for x in a["answers"]] == [x["by_greedy"] for x in b["answers"]]
    assert merged["psi"]["num_sets"] == 7 and merged["psi"]["posix"] == pytest.approx(whole["psi"]["posix"], abs=1e-4)
    assert merged["config_fingerprint"] == whole["config_fingerprint"]
    assert merged["accuracy"]["by_greedy"]["per_prompt"] == whole["accuracy"]["by_greedy"]["per_prompt"]
    assert "shard" not in merged and len(merged["merged_from"]) == 3
    assert (root / "merged" / "summary.md").is_file()


def test_shards_that_do_not_belong_together_are_refused(runs, lm, tmp_path):
    root, _ = runs
    with pytest.raises(ConfigError, match=r"missing shard\(s\) 3/3"):
        merge_shards([root / "shard1", root / "shard2"], tmp_path / "a")
    with pytest.raises(ConfigError, match="shard 2/3 is given twice"):
        merge_shards([root / "shard1", root / "shard2", root / "shard2", root / "shard3"], tmp_path / "b")
    run(config(tmp_path / "other", "3/3", seed=1), lm=lm, progress=False)  # another cell's shard
    with pytest.raises(ConfigError, match="different configurations"):
        merge_shards([root / "shard1", root / "shard2", tmp_path / "other"], tmp_path / "c")
    with pytest.raises(ConfigError, match="is not a shard"):
        merge_shards([root / "whole"], tmp_path / "d")
    # an OUT that would overwrite a run: a shard given as OUT too, or another run's folder (a merge's is rewritten)
    shards = [root / f"shard{k}" for k in (1, 2, 3)]
    before = (root / "shard1" / "summary.json").read_text()
    with pytest.raises(ConfigError, match="is one of the shards"):
        merge_shards(shards, root / "shard1")
    with pytest.raises(ConfigError, match="holds a run of its own"):
        merge_shards(shards, root / "whole")
    with pytest.raises(ConfigError, match="summary.json is a file, not a folder: the merged run cannot go in"):
        merge_shards(shards, root / "whole" / "summary.json")
    assert (root / "shard1" / "summary.json").read_text() == before
    merge_shards(shards, tmp_path / "again")
    assert merge_shards(shards, tmp_path / "again")["psi"]["num_sets"] == 7
    with pytest.raises(ConfigError, match="shard=3/16"):
        run(config(tmp_path / "bad", "4/3"), lm=lm, progress=False)
    # the command line says the same, with exit status 2
    proc = subprocess.run([sys.executable, str(ROOT / "run.py"), "merge", str(tmp_path / "e"), str(root / "shard1")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "missing shard(s) 2/3, 3/3" in proc.stderr
    from posixlab.commands import merge_command

    assert merge_command(["--json", str(tmp_path / "g"), str(root / "shard1")]) == 2  # not a folder named --json
    assert not (tmp_path / "g").exists()
    proc = subprocess.run([sys.executable, str(ROOT / "run.py"), "merge", str(tmp_path / "f"),
                           *(str(root / f"shard{k}") for k in (1, 2, 3))], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "7 sets from 3 shards" in proc.stdout, proc.stderr[-2000:]
    assert json.loads((tmp_path / "f" / "summary.json").read_text())["psi"]["num_sets"] == 7
    shutil.rmtree(tmp_path / "f")
