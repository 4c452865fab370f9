"""A prompt race (task.race_sets with task.psi=false, posixlab.metrics.race): the sets in rounds, and after each round
the prompts a racing prompt beats beyond noise are asked no more. Checked: the replay against best_prompt_set looked
at by hand, the guarantee on simulated grids, what it saves, the settings refused before any work, and a run whose
later rounds send a chat API only the prompts left racing (a scripted server: a model right under some templates
and wrong under the others, on cue)."""

import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from chat_server import ChatServer, completion, prompt_of
from posixlab.data import DatasetSpec
from posixlab.errors import ConfigError, PromptSetError
from posixlab.metrics.race import race_on_grid, race_prompts
from posixlab.metrics.selection import best_prompt_set
from posixlab.models import ModelSpec
from posixlab.models.loading import ServerSettings
from posixlab.report.build import build_report, read_run
from posixlab.results import race_row, race_summary, race_words, read_sets
from posixlab.runner import run
from posixlab.tasks.posix import PosixConfig, PosixTask, build_prompt_sets


def rasch(rng, items, effects):
    theta = rng.normal(0, 1.5, items)[:, None]
    return (rng.random((items, len(effects))) < 1 / (1 + np.exp(-(theta + effects[None, :])))).astype(int).tolist()


def test_each_look_is_best_prompt_set_on_the_racing_prompts_at_the_race_s_level():
    rng = np.random.default_rng(3)
    full = rasch(rng, 60, np.array([1.0, 0.8, -1.5, -2.0, 0.0]))
    result, rows = race_on_grid(full, 15)
    assert result["looks"] == 4 and result["asked"]["of"] == 300 and result["asked"]["cells"] < 300
    alive, expected = [0, 1, 2, 3, 4], []
    for look in range(1, 5):
        # by hand: McNemar's p on the racing prompts, times K − 1 = 4 rivals and 4 looks, against 0.05
        s = best_prompt_set([[row[j] for j in alive] for row in rows[:15 * look]], confidence=0.5)
        out = [alive[i] for i, a in enumerate(s["adjusted_p"]) if a / (len(alive) - 1) * 4 * 4 < 0.05]
        expected += [(j, look) for j in sorted(out)]
        alive = [j for j in alive if j not in out]
    assert sorted(result["alive"]) == alive and [(e["prompt"], e["look"]) for e in result["eliminated"]] == expected
    assert expected and all(e["adjusted_p"] < 0.05 and e["beaten_by"] in alive + [x for x, _ in expected]
                            for e in result["eliminated"])
    # a prompt dropped at a look is asked nothing after it
    for e in result["eliminated"]:
        after, at = rows[e["sets"]:], rows[e["sets"] - 1]
        assert all(row[e["prompt"]] is None for row in after) and at[e["prompt"]] is not None


def test_the_best_prompt_stays_and_a_spread_pool_costs_less():
    rng = np.random.default_rng(0)
    equal = np.zeros(6)
    kept = [0] * 6
    for _ in range(100):   # six equal prompts: each should stay with probability ≥ 0.95
        result, _ = race_on_grid(rasch(rng, 120, equal), 20)
        for j in result["alive"]:
            kept[j] += 1
    assert min(kept) >= 95
    # a 7B-like spread (accuracies about 0.25 to 0.6 over 21 prompts, HF's MMLU formats): far fewer cells
    spread = np.linspace(-1.2, 0.45, 21)
    asked, best = [], 0
    for _ in range(10):
        result, _ = race_on_grid(rasch(rng, 200, spread), 25)
        asked.append(result["asked"]["cells"] / result["asked"]["of"])
        best += 20 in result["alive"]
    assert best == 10 and np.mean(asked) < 0.8  # measured: 0.72 over 60 grids (docs/choices.md)


def test_the_racing_set_is_never_empty_and_bad_input_is_refused():
    assert race_prompts([], 5, 10)["alive"] == [] and race_prompts([[None, None]], 1)["alive"] == [0, 1]
    for rows in ([[1, 0, 0]] * 30, [[0, 0, 0]] * 30, [[1, 1, 1]] * 30):
        assert race_prompts(rows, 10)["alive"]
    with pytest.raises(PromptSetError, match="rounds of at least 1 set"):
        race_prompts([[1, 0]], 0)
    with pytest.raises(PromptSetError, match="at most the 1 sets planned"):
        race_prompts([[1, 0], [0, 1]], 1, num_sets=1)
    with pytest.raises(PromptSetError, match="between 0 and 1"):
        race_prompts([[1, 0]], 1, confidence=1.0)
    record = {"prompts": [{}, {}, {}], "answers": [{"by_greedy": {"correct": True}}, {"by_greedy": None},
                                                   {"by_greedy": {"correct": False}}]}
    assert race_row(record) == [1, None, 0] and race_row({"prompts": [{}, {}], "answers": None}) == [None, None]


SMOL = ModelSpec("smollm2-135m-instruct", "packaged", "smollm2-135m-instruct")
RACE = dict(model=SMOL, dataset=DatasetSpec("mmlu"), variant="template", num_sets=16, num_variants=3, embedding=None,
            psi=False, race_sets=4)


@pytest.mark.parametrize("change, message", [
    (dict(race_sets=0), "race_sets is the number of sets in each round of a prompt race, at least 1, not 0"),
    (dict(race_sets=True), "at least 1, not True"),
    (dict(psi=True), "ψ scores every response under every prompt of its set: add task.psi=false"),
    (dict(variant="spelling"), "races a pool of prompts every item shares: variant=template or variant=format"),
    (dict(prompt_share=0.5), "race_sets and prompt_share=0.5 both choose which prompts a set asks"),
    (dict(shard="1/2"), "cannot be split into shards"),
    (dict(race_confidence=95), "race_confidence is the probability that the best prompt stays racing"),
])
def test_bad_race_settings_fail_before_any_work(change, message):
    with pytest.raises(ConfigError, match=message):
        run(PosixConfig(**{**RACE, **change}), progress=False)


def test_later_rounds_send_a_chat_api_only_the_prompts_left_racing(tmp_path):
    """Templates 0 and 1 answer with the gold letter, 2 and 3 with nothing a parser reads: at the second look (8
    sets, every one discordant: p = 2⁻⁸ = 0.0039 < 0.05 / (3 rivals · 4 looks)) 2 and 3 are dropped, so sets 9-16
    send two prompts instead of four."""
    model = ModelSpec("scripted", "api", "scripted", backend="chat",
                      server=ServerSettings(base_url=None, api_key_env="POSIXLAB_TEST_KEY", max_attempts=3,
                                            request_timeout=30))
    cfg = PosixConfig(**{**RACE, "model": model}, output_dir=str(tmp_path / "race"), cache_dir=str(tmp_path / "c"))
    sets, _ = build_prompt_sets(cfg, progress=False)
    answer = {}
    for s in sets:
        for j, p in enumerate(s.prompts):
            said = f"({s.item.gold})" if j < 2 else "I am not sure"
            assert answer.setdefault(p.text, said) == said  # no text is both a right and a wrong template's
    with ChatServer(lambda body, n: (200, {}, completion(answer[prompt_of(body)]))) as server:
        cfg = replace(cfg, model=replace(model, server=replace(model.server, base_url=server.base_url)))
        summary = run(cfg, progress=False)
    assert server.requests == 8 * 4 + 8 * 2
    records = read_sets(tmp_path / "race")  # in the cell's order (the file's is the order they finished)
    assert ["asked" in r for r in records] == [False] * 8 + [True] * 8
    assert all(r["asked"] == [0, 1] for r in records[8:])
    race = summary["race"]
    assert race["alive"] == [0, 1] and race["looks"] == 4 and race["asked"] == {"cells": 48, "of": 64}
    assert [(e["prompt"], e["look"], e["sets"], e["beaten_by"]) for e in race["eliminated"]] == [(2, 2, 8, 0),
                                                                                                (3, 2, 8, 0)]
    assert race == race_summary(records, summary["config"])  # the summary replays what the run decided
    assert summary["accuracy"]["asked"] == {"cells": 48, "of": 64}
    assert summary["accuracy"]["by_greedy"]["estimated"]["scored"] == 0.75
    assert summary["accuracy"]["by_greedy"]["best_prompts"] is None  # the race's set, not a test blind to its looks
    said = ("prompt race (greedy, rounds of 4 sets, 95%): prompts 0, 1 left (2 of 4); dropped 2 after 8 sets, 3 after "
            "8 sets")
    assert said in (tmp_path / "race" / "summary.md").read_text()
    assert any(line.startswith(said) for line in PosixTask.report_lines(summary))
    page = build_report([tmp_path / "race"], tmp_path / "race.html").read_text(encoding="utf-8")
    assert f'<p id="race">{said}' in page
    tracked = PosixTask.tracked(summary, tmp_path / "race").scalars
    assert tracked["race/prompts_left"] == 2 and tracked["race/asked_share"] == 0.75
    # a request budget that stops the run in its third round (9 sets recorded, 3 rounds' worth): the summary replays
    # the 4 looks the run planned
    with ChatServer(lambda body, n: (200, {}, completion(answer[prompt_of(body)]))) as server:
        cfg = replace(cfg, output_dir=str(tmp_path / "capped"), score_cache=False,
                      model=replace(cfg.model, server=replace(cfg.model.server, base_url=server.base_url,
                                                              max_requests=35)))
        capped = run(cfg, progress=False)
    assert server.requests == 35 and "max_requests=35" in capped["stopped"] and capped["num_sets"] == 9
    assert capped["race"]["looks"] == 4 and capped["race"]["eliminated"] == race["eliminated"]
    # killed there instead (no summary): the report page replays the same race from config.yaml and the records
    killed = Path(cfg.output_dir)
    (killed / "summary.json").unlink()
    (killed / "config.yaml").write_text(hydra_yaml("model=chat", "model.name=scripted", "variant=template",
                                                   "task.num_sets=16", "task.num_variants=3", "task.psi=false",
                                                   "task.race_sets=4", "embedding=none"))
    assert read_run(killed).summary["race"] == capped["race"]
    page = build_report([killed], tmp_path / "killed.html").read_text(encoding="utf-8")
    assert 'id="partial"' in page and f'<p id="race">{race_words(capped["race"])}</p>' in page


def hydra_yaml(*overrides: str) -> str:
    """The ``config.yaml`` a ``python run.py`` with these overrides writes."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from posixlab.cli import CONF_DIR

    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        return OmegaConf.to_yaml(compose(config_name="config", overrides=list(overrides)), resolve=True)


@pytest.mark.slow
def test_a_race_in_process_answers_each_cell_as_a_run_that_asks_every_prompt(lm, tmp_path):
    """Three rounds on the packaged model: each set's answers (greedy, and the options' log-likelihoods, which a
    model that scores reads without ψ too, and which the race compares) are the full run's wherever it asked."""
    common = {**RACE, "num_sets": 9, "score_cache": False}
    run(PosixConfig(**{**common, "race_sets": None}, output_dir=str(tmp_path / "full")), lm=lm, progress=False)
    summary = run(PosixConfig(**{**common, "race_sets": 3}, output_dir=str(tmp_path / "race")), lm=lm,
                  progress=False)
    full, race = (read_sets(tmp_path / name) for name in ("full", "race"))
    assert [r["set_id"] for r in full] == [r["set_id"] for r in race]
    for f, r in zip(full, race):
        for j in r.get("asked", range(4)):
            assert r["responses"][j]["text"] == f["responses"][j]["text"]
            assert r["answers"][j]["by_greedy"] == f["answers"][j]["by_greedy"]
            options, whole = r["answers"][j]["by_options"], f["answers"][j]["by_options"]
            # the same pick; log-likelihoods within the engine's batch-shape rounding (other waves: README, ≤3.1e-5)
            assert options["pred"] == whole["pred"]
            assert options["logprobs"] == pytest.approx(whole["logprobs"], abs=1e-4)
    assert all(a["by_options"] is not None for f in full for a in f["answers"]) and summary["race"]["reading"] == \
        "options"
    assert summary["race"] == race_summary(race, summary["config"], reading="options")
    assert summary["race"]["looks"] == 3
    killed = Path(shutil.copytree(tmp_path / "race", tmp_path / "killed"))  # killed before its summary was written:
    (killed / "summary.json").unlink()  # the report page replays the race on the options too
    (killed / "config.yaml").write_text(hydra_yaml("variant=template", "task.num_sets=9", "task.num_variants=3",
                                                   "task.psi=false", "task.race_sets=3", "embedding=none"))
    assert read_run(killed).summary["race"] == summary["race"]
    # what the full grid says the race asks
    assert summary["race"] == {**race_on_grid([race_row(f, "options") for f in full], 3)[0], "reading": "options"}
    check = subprocess.run([sys.executable, "-m", "experiments.race_check", str(tmp_path / "full"), "--round-sets",
                            "3,9"], capture_output=True, text=True, check=True,
                           cwd=Path(__file__).resolve().parents[1]).stdout
    asked = summary["race"]["asked"]["cells"] / summary["race"]["asked"]["of"]
    assert "9 sets × 4 prompts" in check and f"| 3 | 3 | {asked:.0%} | {len(summary['race']['alive'])} |" in check
