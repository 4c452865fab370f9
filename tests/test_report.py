"""``posixlab report``: one HTML page per run folder (posixlab/report/), for POSIX, classification and a task from
outside the package, built from run folders that the tiny model (tests/tiny_model.py) and the rule backend
(tests/plugin_backend.py) write in milliseconds. The page's DOM contract (ids and classes a browser test clicks) is
checked on the HTML text here; tests/test_report_browser.py clicks it."""

from __future__ import annotations

import csv
import importlib
import json
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
from tiny_model import tiny_lm  # noqa: F401  (the session fixture)

from posixlab.backends import BACKENDS
from posixlab.classification_prompts import TASKS as TASK_SENTENCES
from posixlab.commands import merge_command, report_command
from posixlab.data import DatasetSpec
from posixlab.errors import ConfigError
from posixlab.models import ModelSpec
from posixlab.rephrase import RephraserConfig
from posixlab.report.build import build_report
from posixlab.compare import interval_words
from posixlab.report import html as h
from posixlab.status import STATE_FILE
from posixlab.report.html import highlight_edit
from posixlab.runner import run
from posixlab.tasks import TASK_TYPES
from posixlab.tasks.classification import ClassificationConfig, ClassificationData
from posixlab.tasks.posix import PosixConfig
from posixlab.tasks.posix_report import CONTEXT

TINY = ModelSpec("tiny-test-model", "local", "tiny-test-model")  # never loaded: the runs are given the model
RULE = ModelSpec("rule", "api", "rule", backend="rule-test")
PARAPHRASES = [f"Choose the right option for this question, version {k}." for k in range(1, 30)]  # 29: Q = 30
plugin_task = None


@pytest.fixture(scope="module", autouse=True)
def plugins():
    """The rule backend and the agreement task, registered for this module only (as tests/test_plugins.py does)."""
    global plugin_task
    backend = importlib.reload(importlib.import_module("plugin_backend"))
    plugin_task = importlib.reload(importlib.import_module("plugin_task"))
    yield
    BACKENDS.pop(backend.NAME)
    TASK_TYPES.pop(plugin_task.AgreementTask.name)


@pytest.fixture(scope="module")
def rephrasings(tmp_path_factory):
    path = tmp_path_factory.mktemp("reph") / "rephrasings.jsonl"
    path.write_text(json.dumps({"original": TASK_SENTENCES["mmlu_letters"], "paraphrases": PARAPHRASES}) + "\n",
                    encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def posix_run(tiny_lm, tmp_path_factory):  # noqa: F811
    """3 MMLU sets of N = 4 spelling variants, scored by the tiny model."""
    import torch

    out = tmp_path_factory.mktemp("posix") / "run"
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the tiny model's passes are too small to share between threads
    try:
        run(PosixConfig(model=TINY, dataset=DatasetSpec("mmlu", source="sample"), num_sets=3, num_variants=3,
                        embedding=None, output_dir=str(out), score_cache=False,
                        cache_dir=str(out.parent / "cache")), lm=tiny_lm, progress=False)
    finally:
        torch.set_num_threads(threads)
    return out


def classification(tmp_path, rephrasings_file, name: str, samples: int = 6, q: int = 4, **settings) -> dict:
    return run(ClassificationConfig(
        model=RULE, data=ClassificationData("mmlu_letters", num_samples=samples), num_rephrasings=q,
        rephraser=RephraserConfig(backend="file", path=str(rephrasings_file), validate=False),
        output_dir=str(tmp_path / name), cache_dir=str(tmp_path / "cache"), **settings), progress=False)


@pytest.fixture(scope="module")
def cls_run(tmp_path_factory, rephrasings):
    root = tmp_path_factory.mktemp("cls")
    classification(root, rephrasings, "run")
    return root / "run"


def records(folder, name) -> list[dict]:
    return [json.loads(line) for line in (folder / name).read_text(encoding="utf-8").splitlines() if line.strip()]


def page_of(folder, out=None, **kw) -> str:
    return build_report([folder], out or folder / "report.html", **kw).read_text(encoding="utf-8")


def h1(page: str) -> str:
    return re.search(r'<h1 id="headline">(.*?)</h1>', page).group(1)


def test_the_posix_page(posix_run):
    page = page_of(posix_run)
    summary = json.loads((posix_run / "summary.json").read_text())
    sets = records(posix_run, "sets.jsonl")
    assert '<body data-report="posixlab">' in page
    assert f"POSIX = {summary['psi']['posix']:.4f}" in h1(page)
    assert not re.search(r'(src|href)\s*=\s*"(https?:)?//', page), "the page loads nothing from outside"
    assert "<link" not in page and "<script src" not in page
    assert '<table id="units" class="sortable">' in page and '<th data-sort="psi">' in page
    assert page.count('<tr class="unit"') == len(sets) == 3
    for r in sets:
        i = r["set_index"]
        assert f'<tr class="unit" data-index="{i}" data-detail="unit-{i}">' in page
        detail = re.search(rf'<section class="detail" id="unit-{i}" hidden>(.*?)</section>', page, re.S).group(1)
        assert detail.count('class="prompt"') == len(r["prompts"]) == 4 and 'class="heatmap"' in detail
        original, variant = r["prompts"][0]["text"], r["prompts"][1]["text"]
        edit = highlight_edit(original, variant, CONTEXT)
        assert ("<mark>" in edit or "<del>" in edit) and edit in detail  # the spelling error, highlighted
        assert "log P(y_j | x_i)" in detail  # the pairs that contribute most to ψ
    factors = re.search(r"The four factors.*?</section>", page, re.S).group(0)
    assert "every prompt gave the same response" in factors  # why a log-prob factor can have no set
    assert 'id="compare"' not in page and 'id="partial"' not in page and 'id="gate"' not in page
    assert "older posixlab" not in page and "newer posixlab" not in page  # a new run's summary has every key


def test_a_large_run_s_page_carries_the_details_of_its_highest_units_only(posix_run, cls_run, monkeypatch):
    """Past ``DETAIL_UNITS`` units (500: a paper-sized cell of 14,042 sets was a 200 MB page) every unit stays in the
    table, but only the highest-ψ (highest-S) ones open, and those the page links to; the page says so."""
    import posixlab.report.html

    monkeypatch.setattr(posixlab.report.html, "DETAIL_UNITS", 2)
    most_sensitive = json.loads((posix_run / "summary.json").read_text())["most_sensitive"]
    for folder, records_file, key, unit, linked in (
            (posix_run, "sets.jsonl", "psi", "set", {t["set_index"] for t in most_sensitive}),  # "where ψ comes from"
            (cls_run, "samples.jsonl", "sensitivity", "sample", set())):
        units = records(folder, records_file)
        page = page_of(folder, folder / "capped.html")
        index = "set_index" if unit == "set" else "sample_index"
        expected = {r[index] for r in sorted(units, key=lambda r: (-r[key], r[index]))[:2]} | linked
        opened = [int(i) for i in re.findall(r'<section class="detail" id="unit-(\d+)"', page)]
        assert sorted(opened) == sorted(expected)
        assert page.count('<tr class="unit"') == len(expected) and page.count(" data-index=") == len(units)
        if len(expected) < len(units):
            assert f"the details of the 2 {unit}s with the highest" in page and records_file in page
            assert f"all {len(units)} are in the table" in page
    monkeypatch.undo()
    assert "the details of the" not in page_of(posix_run)  # under the cap: every set opens, nothing said


def test_the_edit_highlight_is_a_valid_diff_of_any_two_texts():
    """Matched between the common prefix and suffix only (for speed), and word by word where that stretch is long,
    the opcodes still rebuild both texts, their equal stretches are equal, and they tile both texts in order: 5,000
    random edits of short random texts, 1,000 of long ones (half of them against a text reversed)."""
    import random

    from posixlab.report.html import _edit_opcodes

    rng = random.Random(0)
    for n in range(6000):
        long = n >= 5000  # past 400 differing characters the texts are matched word by word, then by character
        original = "".join(rng.choice("ab c\n.") for _ in range(rng.randint(400, 900) if long else rng.randint(0, 25)))
        variant = list(original)
        for _ in range(rng.randint(0, 40 if long else 3)):
            k = rng.randint(0, len(variant))
            if rng.random() < 0.5 and variant:
                del variant[min(k, len(variant) - 1)]
            else:
                variant.insert(k, rng.choice("ab c"))
        variant = "".join(variant)
        if long and rng.random() < 0.5:
            variant = variant[::-1]  # a text of the same letters, unrelated
        ops, at = _edit_opcodes(original, variant), (0, 0)
        for op, i1, i2, j1, j2 in ops:
            assert (i1, j1) == at and (op != "equal" or original[i1:i2] == variant[j1:j2])
            at = (i2, j2)
        assert at == (len(original), len(variant))
        assert all(a[0] != "equal" or b[0] != "equal" for a, b in zip(ops, ops[1:]))


def test_the_classification_page(cls_run):
    page = page_of(cls_run)
    summary = json.loads((cls_run / "summary.json").read_text())
    samples = records(cls_run, "samples.jsonl")
    assert f"sensitivity S = {summary['sensitivity']['mean']:.4f}" in h1(page)
    assert page.count('<tr class="unit"') == len(samples) == 6
    assert "older posixlab" not in page and "newer posixlab" not in page
    assert page.count('<section class="detail"') == 6
    assert page.count('<td class="answer') == 6 * 4  # an answer cell per sample and rephrasing
    differs = sum(len({p["label"] for p in r["predictions"]}) > 1 for r in samples)
    assert (page.count("answer differs") > 0) == (differs > 0)
    assert PARAPHRASES[0] in page and 'data-ref="q1"' in page  # each rephrasing's text, written once
    writer = re.search(r"<h2>Who wrote the rephrasings</h2>(.*?)</section>", page, re.S).group(1)
    cells = [re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<td[^>]*>(.*?)</td>", writer, re.S)]
    about = json.loads((cls_run / "rephrasings.json").read_text())["rephraser"]
    assert dict(zip(cells[::2], cells[1::2])) == {"written by": "user-supplied paraphrase file",
                                                  "paraphrase file": about["paraphrase_file"]}


def test_a_partial_run_is_marked_and_a_bad_folder_is_refused(posix_run, tmp_path, capsys):
    killed = tmp_path / "killed"
    killed.mkdir()
    # no config.yaml (posixlab.runner.run writes none): the page reads what it needs from the records
    lines = (posix_run / "sets.jsonl").read_text(encoding="utf-8").splitlines()
    (killed / "sets.jsonl").write_text("\n".join(lines[:2]) + "\n" + lines[2][:500], encoding="utf-8")  # cut short
    page = page_of(killed)
    assert '<div id="partial"' in page and "2 sets are in" in page and h1(page).startswith("PARTIAL")
    assert page.count('<tr class="unit"') == 2

    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="is not a run folder"):
        build_report([tmp_path / "empty"], tmp_path / "x.html")
    assert report_command([str(tmp_path / "empty")]) == 2
    assert report_command([str(tmp_path / "missing")]) == 2
    for name, said in (("dry", "is a dry run's folder (dry_run=true): it planned, nothing was computed"),
                       ("stopped", "holds a run that stopped before its first unit: no results to show (posixlab "
                                   "status")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.yaml").write_text(f"dry_run: {str(name == 'dry').lower()}\n", encoding="utf-8")
        with pytest.raises(ConfigError, match=re.escape(said)):
            build_report([tmp_path / name], tmp_path / "x.html")
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "summary.json").write_text("{not json", encoding="utf-8")
    assert report_command([str(tmp_path / "broken")]) == 2
    err = capsys.readouterr().err
    assert "is not a run folder" in err and "is not a folder" in err and "cannot be read as JSON" in err
    assert "Traceback" not in err and not (tmp_path / "x.html").exists()
    with pytest.raises(SystemExit) as exit_help:
        report_command(["--help"])
    assert exit_help.value.code == 0 and "posixlab report" in capsys.readouterr().out


def test_a_folder_of_runs_reports_every_run_below_it_and_names_those_it_cannot_read(posix_run, tmp_path):
    """``outputs/`` (``outputs/<date>/<time>_<run name>``): each run below it on one page; a run stopped before its
    first set is named in the page's banner, not an error that loses the others' page."""
    day = tmp_path / "outputs" / "2026-12-07"
    for name in ("09-00-00_a", "09-10-00_b"):
        shutil.copytree(posix_run, day / name)
    (day / "09-20-00_stopped").mkdir()
    (day / "09-20-00_stopped" / "sets.jsonl").write_text("")  # stopped before its first set
    failed = day / "09-30-00_failed"  # a bad setting: its folder holds no results, only the job's state
    failed.mkdir()
    (failed / STATE_FILE).write_text(json.dumps({"state": "failed", "num": 0, "error": "posixlab error: model=chat "
                                                 "needs the API's model name", "exit_status": 2}), encoding="utf-8")
    page = page_of(tmp_path / "outputs", tmp_path / "page.html")
    assert h1(page) == "POSIX = {0} · POSIX = {0}".format(h.fmt(json.loads((posix_run / "summary.json").read_text())
                                                                 ["psi"]["posix"]))  # two runs, as two folders give
    assert re.search(r"Not on this page</strong>: 1 run folder without results: 09-20-00_stopped: .*stopped before "
                     r"its first set\S*; 1 folder below without results: 2026-12-07/09-30-00_failed: failed \(posixlab "
                     r"error: model=chat needs the API&#x27;s model name\)</div>", page)
    with pytest.raises(ConfigError, match="stopped before its first set"):  # given itself: its own error
        page_of(day / "09-20-00_stopped", tmp_path / "stopped.html")


def test_a_folder_as_out_gets_the_page_inside_and_a_run_given_twice_is_shown_once(posix_run, tmp_path, capsys):
    (tmp_path / "pages").mkdir()
    assert report_command([str(posix_run), "--out", str(tmp_path / "pages")]) == 0
    assert (tmp_path / "pages" / "report.html").is_file()
    assert report_command([str(posix_run), str(posix_run) + "/", "--out", str(tmp_path / "new") + "/"]) == 0
    assert f"{posix_run} is given twice: shown once" in capsys.readouterr().err
    page = (tmp_path / "new" / "report.html").read_text(encoding="utf-8")
    assert "2 runs compared" not in page and page == (tmp_path / "pages" / "report.html").read_text(encoding="utf-8")


def test_a_page_that_cannot_be_written_is_one_line_not_a_traceback(posix_run, tmp_path, capsys):
    (tmp_path / "a_file").write_text("")  # --out inside a file, as if it were a folder
    assert report_command([str(posix_run), "--out", str(tmp_path / "a_file" / "r.html")]) == 2
    assert capsys.readouterr().err == (f"posixlab error: {tmp_path / 'a_file'} is a file, not a folder: the page "
                                       f"r.html cannot go in {tmp_path / 'a_file'}; name a folder\n")
    # a folder the system will not make: the OS's reason, in one line (the console command in a process of its own:
    # importing posixlab.cli here would register the plug-in task another test loaded into this one's config store)
    said = subprocess.run([sys.executable, "-c", "from posixlab.cli import entry; entry()", "report", str(posix_run),
                           "--out", "/proc/posixlab-test/r.html"], capture_output=True, text=True, timeout=120)
    assert said.returncode == 2
    assert said.stderr == "posixlab error: posixlab report: /proc/posixlab-test: No such file or directory\n"


def test_an_older_summary_says_what_it_cannot_show(posix_run, tmp_path):
    old = tmp_path / "old"
    shutil.copytree(posix_run, old)
    summary = json.loads((old / "summary.json").read_text())
    for key in ("schema_version", "most_sensitive", "accuracy", "factors"):
        summary.pop(key)
    summary["psi"].pop("ci95")
    (old / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    page = page_of(old)
    assert "older posixlab" in page and "most_sensitive" in page
    assert page.count('<tr class="unit"') == 3 and "POSIX = " in h1(page)


def test_a_paraphrase_run_s_page_says_who_wrote_its_paraphrases(posix_run, tmp_path):
    """A paraphrase (or mixture) run's page names its rephraser, the instruction's hash, whether the model read the
    instruction's system message folded, where the paraphrases are and how they measured; a spelling run's has no
    such section. The run's summary is given a paraphrase run's ``variant_details`` (as ``python run.py
    variant=paraphrase`` writes them)."""
    assert "Who wrote the paraphrases" not in page_of(posix_run)
    para = tmp_path / "para"
    shutil.copytree(posix_run, para)
    summary = json.loads((para / "summary.json").read_text())
    summary["variant"] = "paraphrase"
    summary["variant_details"] = {
        "rephraser": "hf:gemma-2-9b-it", "instruction_sha256": "b16b1496da2c9744" + "0" * 48,
        "rephraser_identity": {"backend": "hf", "model": "gemma-2-9b-it", "source": "hub", "revision": None,
                               "temperature": 0.8, "top_p": 0.95},
        "paraphrase_file": "/cache/paraphrases/hf-gemma-2-9b-it.jsonl", "system_folded": True,
        "paraphrase_quality": {"checked": True, "paraphrases": 9, "similarity_q05_q50_q95": [0.71, 0.82, 0.97],
                               "length_ratio_q05_q50_q95": [0.67, 0.89, 1.59], "numbers_kept": 1.0,
                               "entities_kept": 1.0, "borrowing": 0.0, "rules": {"min_similarity": 0.7}}}
    (para / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    section = re.search(r"<h2>Who wrote the paraphrases</h2>(.*?)</section>", page_of(para), re.S).group(1)
    cells = [re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<td[^>]*>(.*?)</td>", section, re.S)]
    assert dict(zip(cells[::2], cells[1::2])) == {
        "written by": "hf:gemma-2-9b-it", "its settings": "source hub, temperature 0.8, top_p 0.95",
        "instruction": "SHA-256 b16b1496da2c… (the whole instruction: in the run&#x27;s summary.json)",
        "its system message": "read at the head of the first user turn (the model&#x27;s chat template refuses a "
                              "system turn)",
        "paraphrase file": "/cache/paraphrases/hf-gemma-2-9b-it.jsonl",
        "measured": "9 checked · similarity to the original 0.71 / 0.82 / 0.97 (5/50/95%) · length ratio 0.67 / 0.89 "
                    "/ 1.59 · numbers kept 100% · names kept 100% · example words borrowed 0%"}


def test_the_runs_of_one_page_share_its_room_for_tables_and_details(cls_run, tmp_path, monkeypatch):
    """A page of several runs splits ``TABLE_UNITS`` rows and ``DETAIL_UNITS`` details among them (a grid's page of
    64 paper-sized cells would otherwise be 700 MB): each run's table holds its highest units, and says so; a run's
    own page has the whole room."""
    import posixlab.report.html

    for name, value in (("TABLE_UNITS", 4), ("DETAIL_UNITS", 2), ("MIN_TABLE_UNITS", 1), ("MIN_DETAIL_UNITS", 1)):
        monkeypatch.setattr(posixlab.report.html, name, value)
    samples = records(cls_run, "samples.jsonl")
    highest = [r["sample_index"] for r in sorted(samples, key=lambda r: (-r["sensitivity"], r["sample_index"]))]
    assert len(samples) == 6
    shutil.copytree(cls_run, tmp_path / "rerun")  # a second run of the same cell: a page of two runs
    page = build_report([cls_run, tmp_path / "rerun"], tmp_path / "both.html").read_text(encoding="utf-8")
    for prefix in ("", "r2-"):
        table = re.search(rf'<table id="{prefix}units".*?</table>', page, re.S).group(0)
        assert sorted(map(int, re.findall(r' data-index="(\d+)"', table))) == sorted(highest[:2])
        assert re.findall(rf'<section class="detail" id="{prefix}unit-(\d+)"', page) == [str(highest[0])]
    assert page.count("the table holds the 2 highest of its 6 (a page of 2 runs") == 2
    alone = page_of(cls_run, tmp_path / "alone.html")
    table = re.search(r'<table id="units".*?</table>', alone, re.S).group(0)
    assert sorted(map(int, re.findall(r' data-index="(\d+)"', table))) == sorted(highest[:4])
    assert alone.count('<tr class="unit"') == 2 and "the table holds the 4 highest of its 6 (a page holds at most 4" \
        in alone


def test_a_unit_a_failed_gate_links_to_keeps_its_row_and_detail_on_a_capped_page(cls_run, tmp_path, monkeypatch):
    """The samples answered wrong most often (behind a failed consistency threshold) need not be the highest-S ones
    a capped page details: each link must still open its sample."""
    import posixlab.report.html
    from posixlab.gate import GateConfig

    for name, value in (("TABLE_UNITS", 1), ("DETAIL_UNITS", 1), ("MIN_TABLE_UNITS", 1), ("MIN_DETAIL_UNITS", 1)):
        monkeypatch.setattr(posixlab.report.html, name, value)
    page = build_report([cls_run], tmp_path / "gated.html", gate=GateConfig(min_consistency=1.0)).read_text(
        encoding="utf-8")
    gate = re.search(r'<section id="gate">(.*?)</section>', page, re.S).group(1)
    linked = re.findall(r'class="unit-link" data-detail="unit-(\d+)"', gate)
    assert len(linked) == 5 and "answered wrong most often" in gate
    table = re.search(r'<table id="units".*?</table>', page, re.S).group(0)
    for n in linked:
        assert f'<section class="detail" id="unit-{n}" hidden>' in page and f' data-index="{n}"' in table
    highest = max(records(cls_run, "samples.jsonl"), key=lambda r: (r["sensitivity"], -r["sample_index"]))
    assert f'<section class="detail" id="unit-{highest["sample_index"]}" hidden>' in page  # and its own share


def test_a_page_reads_each_run_s_records_once(posix_run, cls_run, tmp_path, monkeypatch):
    """A run's sections and its values (the comparison's dots) share one read of its records (a paper-sized cell's
    take seconds to parse); nothing is kept once the page is written. The page keeps a POSIX run's records without
    their texts, and one scan of the file (binary, parsing only the lines of the sets it opens) reads the details'
    records whole."""
    import builtins
    from pathlib import Path

    import posixlab.results as results
    from posixlab.report.html import esc
    from posixlab.tasks.posix import PosixTask

    opened = []

    def counted_open(path, mode="r", *args, **kwargs):
        opened.append((Path(path).name, mode))
        return builtins.open(path, mode, *args, **kwargs)

    monkeypatch.setattr(results, "open", counted_open, raising=False)  # where records files are read
    page = build_report([posix_run, cls_run], tmp_path / "both.html").read_text(encoding="utf-8")
    assert sorted(opened) == [("samples.jsonl", "r"), ("sets.jsonl", "r"), ("sets.jsonl", "rb")]
    first = results.read_sets(posix_run)[0]
    assert f"set 0: {first['set_id']}" in page and f'<td class="response">{esc(first["responses"][0]["text"])}' in page
    PosixTask.read_unit_records(posix_run)
    assert opened.count(("sets.jsonl", "r")) == 3  # outside a page: read again (and once by read_sets above)


def test_a_page_pairs_its_runs_with_run_1_from_the_records_it_read(posix_run, tmp_path, monkeypatch):
    """Each later run is paired with run 1 (``posixlab compare``) from the records the page read for its sections:
    one read of each run's records in all (a grid's page pairs 63 runs with run 1), and the same numbers as
    ``posixlab compare``, which reads units in their order, not the order they were written in."""
    import builtins
    from collections import Counter
    from pathlib import Path

    import posixlab.results as results
    from posixlab.compare import compare_runs

    copies = [shutil.copytree(posix_run, tmp_path / f"copy{k}") for k in (1, 2, 3)]
    lines = (posix_run / "sets.jsonl").read_text(encoding="utf-8").splitlines()
    moved = [json.loads(line) for line in lines]
    for record in moved:
        record["psi"] += 0.01 * (record["set_index"] + 1)  # each set's ψ up a little: a change to pair
    ordered = "".join(json.dumps(r) + "\n" for r in moved)
    (copies[1] / "sets.jsonl").write_text(ordered, encoding="utf-8")
    (copies[2] / "sets.jsonl").write_text("".join(json.dumps(r) + "\n" for r in moved[::-1]), encoding="utf-8")
    opened = Counter()

    def counted_open(path, mode="r", *args, **kwargs):
        if mode == "r":
            opened[Path(path).parent] += 1
        return builtins.open(path, mode, *args, **kwargs)

    monkeypatch.setattr(results, "open", counted_open, raising=False)
    page = build_report([posix_run, *copies], tmp_path / "four.html").read_text(encoding="utf-8")
    assert opened == {posix_run: 1, **{copy: 1 for copy in copies}}
    monkeypatch.undo()
    paired = re.search(r'<table id="paired-table"[^>]*>(.*?)</table>', page, re.S).group(1)
    rows = [[re.sub(r"<[^>]+>", "", cell) for cell in re.findall(r"<td(?: [^>]*)?>(.*?)</td>", row)]
            for row in re.findall(r"<tr>(.*?)</tr>", paired)[1:]]
    assert [row[:3] for row in rows] == [[n, "1", "no setting"] for n in "234" for _ in range(3)]  # 3 metrics a run
    for n, copy in ((3, copies[1]), (4, copies[2])):  # written in the sets' order, and in reverse
        result = compare_runs(posix_run, copy)
        psi = next(m for m in result["metrics"] if m["metric"] == "psi")
        assert psi["verdict"] != "identical" and psi["interval"][0] is not None
        assert re.search(rf'<tr><td data-v="{n}"><a href="#run-{n}">{n}</a></td><td data-v="1"><a href="#run-1">1</a>'
                         rf'</td><td>no setting</td><td>psi</td>.*?<td>{re.escape(interval_words(psi["interval"]))}'
                         rf"</td>", paired), n
    reversed_result, ordered_result = compare_runs(posix_run, copies[2]), compare_runs(posix_run, copies[1])
    assert reversed_result["metrics"] == ordered_result["metrics"]  # the order written in changes nothing


def test_a_sweep_with_a_failed_job_pairs_its_line_with_the_first_value_that_has_a_run(posix_run, tmp_path):
    """A variant × shots sweep (copies of one run, their settings rewritten) whose template 0-shot job failed (no
    summary): the template runs are paired along shots with the template run at the first shot count that has one
    (1 → 2), not left unpaired because the 0-shot one is missing; the killed run is paired with nothing."""
    sweep = tmp_path / "sweep"
    summary = json.loads((posix_run / "summary.json").read_text(encoding="utf-8"))
    cells = [("spelling", 0), ("spelling", 1), ("spelling", 2), ("template", 0), ("template", 1), ("template", 2)]
    for n, (variant, shots) in enumerate(cells):
        folder = shutil.copytree(posix_run, sweep / f"{n}_{variant}_{shots}shot")
        config = {**summary["config"], "variant": variant, "shots": shots}
        (folder / "summary.json").write_text(json.dumps({**summary, "config": config}), encoding="utf-8")
    (sweep / "3_template_0shot" / "summary.json").unlink()  # the failed job: records, no summary
    assert report_command([str(sweep)]) == 0
    page = (sweep / "report.html").read_text(encoding="utf-8")
    paired = re.search(r'<table id="paired-table"[^>]*>(.*?)</table>', page, re.S).group(1)
    pairs = [tuple(re.sub(r"<[^>]+>", "", cell) for cell in re.findall(r"<td(?: [^>]*)?>(.*?)</td>", row)[:3])
             for row in re.findall(r"<tr>(.*?)</tr>", paired)[1:]]
    assert list(dict.fromkeys(pairs)) == [("2", "1", "shots 0 → 1"), ("3", "1", "shots 0 → 2"),
                                          ("5", "2", "variant spelling → template"),
                                          ("6", "3", "variant spelling → template"), ("6", "5", "shots 1 → 2")]


def test_a_grid_tables_the_judge_s_shares_where_its_runs_were_judged(posix_run, tmp_path):
    """Two runs of a sweep judged (``posixlab judge`` through a scripted chat server: judge.json in each folder): the
    grid's folded tables carry "judged the same" and "judged away" by variant, each value judge.json's; a sweep
    without a judge has no such table."""
    from chat_server import ChatServer, completion

    from posixlab.commands import judge_command

    sweep = tmp_path / "sweep"
    summary = json.loads((posix_run / "summary.json").read_text(encoding="utf-8"))
    for n, variant in enumerate(("spelling", "template")):
        folder = shutil.copytree(posix_run, sweep / f"{n}_{variant}")
        (folder / "summary.json").write_text(json.dumps({**summary, "config": {**summary["config"],
                                                                              "variant": variant}}), encoding="utf-8")
    assert report_command([str(sweep)]) == 0
    assert "judged the same" not in (sweep / "report.html").read_text(encoding="utf-8")

    def answer(body, n):  # the first run's judge says yes to all, the second's no
        return 200, {}, completion("Yes" if "spelling" in body["model"] else "No")

    judged = []
    with ChatServer(answer) as server:
        for n, variant in enumerate(("spelling", "template")):
            assert judge_command([str(sweep / f"{n}_{variant}"), "--judge", f"judge-{variant}", "--base-url",
                                  server.base_url, "--api-key-env", "POSIXLAB_TEST_NO_KEY", "--json"]) == 0
            judged.append(json.loads((sweep / f"{n}_{variant}" / "judge.json").read_text(encoding="utf-8")))
    assert judged[0]["judged_share"] == 1 and judged[1]["judged_share"] == judged[1]["identical_share"] < 1
    assert report_command([str(sweep)]) == 0
    page = (sweep / "report.html").read_text(encoding="utf-8")
    for name, key in (("judged the same (judge)", "judged_share"), ("judged away (judge)", "judged_away")):
        table = re.search(rf"<summary>{re.escape(h.esc(name))} by variant</summary>(.*?)</details>", page, re.S)
        cells = [re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<td(?: [^>]*)?>(.*?)</td>", table.group(1))]
        assert cells == ["spelling", h.fmt(judged[0][key]), "template", h.fmt(judged[1][key])], (name, cells)
    assert judged[0]["run_fingerprint"] == summary["config_fingerprint"]
    # the template cell run again in its folder with another configuration, no judge: its judge.json is an earlier
    # run's, not shown (a warning says so), and its grid cells read —
    rerun = sweep / "1_template"
    (rerun / "summary.json").write_text(json.dumps({**summary, "config_fingerprint": "another", "config": {
        **summary["config"], "variant": "template"}}), encoding="utf-8")
    assert report_command([str(sweep)]) == 0
    page = (sweep / "report.html").read_text(encoding="utf-8")
    table = re.search(r"<summary>judged the same \(judge\) by variant</summary>(.*?)</details>", page, re.S)
    cells = [re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<td(?: [^>]*)?>(.*?)</td>", table.group(1))]
    assert cells == ["spelling", h.fmt(judged[0]["judged_share"]), "template", "—"]
    assert page.count("judge.json was written for an earlier run in this folder") == 1


def test_an_empty_or_whitespace_response_is_said_so_not_left_a_blank_cell(posix_run, tmp_path):
    run_dir = shutil.copytree(posix_run, tmp_path / "run")
    sets = records(run_dir, "sets.jsonl")
    sets[0]["responses"][1]["text"], sets[0]["responses"][2]["text"] = "", "\n\n "  # EOS first; line breaks
    (run_dir / "sets.jsonl").write_text("".join(json.dumps(r) + "\n" for r in sets), encoding="utf-8")
    page = page_of(run_dir)
    assert '<td class="response"><span class="blank">(empty: the first token ended it)</span></td>' in page
    assert '<td class="response"><span class="blank">(whitespace only: ⏎⏎␣)</span></td>' in page


def judged_copy(posix_run, folder, variants=lambda i: ("agree", "disagree")):
    """A copy of the run whose set i answers its original prompt "original i", its first two variants
    ``variants(i)`` and its last the original's response again, judged (``posixlab judge``, through a scripted chat
    server) by a judge that calls "agree" the same and anything else not; the page before the judge, for a look."""
    from chat_server import ChatServer, completion

    from posixlab.commands import judge_command

    run_dir = shutil.copytree(posix_run, folder)
    sets = records(run_dir, "sets.jsonl")
    for r in sets:
        i = r["set_index"]
        texts = [(f"original {i}", [100 + i]), *[(t, [1 + (t == "agree")]) for t in variants(i)],
                 (f"original {i}", [100 + i])]
        r["responses"] = [{**r["responses"][k], "text": t, "token_ids": ids} for k, (t, ids) in enumerate(texts)]
    (run_dir / "sets.jsonl").write_text("".join(json.dumps(r) + "\n" for r in sets), encoding="utf-8")
    before = page_of(run_dir)

    def answer(body, n):  # the response shown second decides: "agree" is the same, anything else is not
        second = body["messages"][-1]["content"].split("Response B:\n", 1)[1].split("\n", 1)[0]
        return 200, {}, completion("Yes" if second == "agree" else "No")

    with ChatServer(answer) as server:
        assert judge_command([str(run_dir), "--judge", "judge-model", "--base-url", server.base_url,
                              "--api-key-env", "POSIXLAB_TEST_NO_KEY", "--json"]) == 0
    return run_dir, sets, before


def test_a_judged_run_s_page_shows_each_set_s_share_and_each_variant_s_verdict(posix_run, tmp_path):
    """A run judged (through a scripted chat server): its sets table gains each set's judged share, each set's
    prompts the judge's verdict on each variant's response (identical ones never asked) and the set's control, and
    its figures ψ against judged inconsistency, a point a set."""
    run_dir, sets, before = judged_copy(posix_run, tmp_path / "run")
    assert "judged the same" not in before
    rows = {r["set_id"]: r for r in records(run_dir, "judge.jsonl")}
    assert {r["judged_share"] for r in rows.values()} == {round(2 / 3, 6)}  # agree and the identical one, of 3
    # its figure: a point a set, at (ψ, 1 − judged share), drawn into the run's figures/ beside its own
    from posixlab.analysis.judged import judged_figure

    assert (run_dir / "figures" / "psi_vs_judged.png").is_file()
    judged = json.loads((run_dir / "judge.json").read_text(encoding="utf-8"))
    points = judged_figure(list(rows.values()), judged).axes[0].collections[0].get_offsets()
    expected = sorted((r["psi"], 1 - r["judged_share"]) for r in rows.values())
    assert len(points) == 3 and all(tuple(p) == pytest.approx(e) for p, e in zip(sorted(map(tuple, points)), expected))
    page = page_of(run_dir)
    assert "ψ against judged inconsistency (1 − judged share), a point a set" in page
    assert "<th data-sort=\"judged\">judged the same</th>" in page and "judged the same: the share of its" in page
    for r in sets:
        row = re.search(rf'<tr[^>]*data-index="{r["set_index"]}"[^>]*>(.*?)</tr>', page, re.S).group(1)
        assert f">{h.fmt(rows[r['set_id']]['judged_share'])}</td>" in row
        detail = page.split(f'id="unit-{r["set_index"]}"', 1)[1].split("</section>", 1)[0]
        verdicts = re.findall(r'<td class="small">(the original|the same|different|identical \(not asked\)|'
                              r'not judged)</td>', detail)
        assert verdicts == ["the original", "the same", "different", "identical (not asked)"]
        control = rows[r["set_id"]]["control"]  # the next set's original response: the last set has none
        assert ("The judge's control: another question's response, shown as a response to this prompt: different"
                in detail) == (control is not None)


@pytest.mark.filterwarnings("ignore::posixlab.analysis.collect.GridWarning")  # a grid of one tiny cell
def test_a_judged_run_s_sets_carry_their_judged_share_into_the_grid_s_tables(posix_run, tmp_path):
    """``python -m posixlab.analysis`` on a judged run: each per-set row carries the set's judged share and the
    judge (per_set.csv keeps them, so the table redraws from it), and judged.md tables the cell: the judge's own
    judged share, interval and Spearman ρ (judge.json), POSIX over the sets judged."""
    from posixlab.analysis.collect import load_rows
    from posixlab.analysis.regenerate import regenerate

    shares = {0: ("agree", "disagree"), 1: ("agree", "agree"), 2: ("disagree", "disagree")}
    run_dir, sets, _ = judged_copy(posix_run, tmp_path / "run", lambda i: shares[i])
    judge = {r["set_id"]: r for r in records(run_dir, "judge.jsonl")}
    rows = load_rows(run_dir)
    in_order = sorted(sets, key=lambda s: s["set_index"])  # rows come in set order; the file, as sets finished
    assert [r["judged_share"] for r in rows] == [judge[s["set_id"]]["judged_share"] for s in in_order] == \
        [round(2 / 3, 6), 1.0, round(1 / 3, 6)]
    assert {r["judge"] for r in rows} == {"judge-model"}
    regenerate([str(run_dir)], tmp_path / "tables")
    summary = json.loads((run_dir / "judge.json").read_text(encoding="utf-8"))
    (cell,) = list(csv.DictReader(open(tmp_path / "tables" / "judged.csv", encoding="utf-8")))
    assert float(cell["judged_share"]) == pytest.approx(summary["judged_share"], abs=1e-6)
    assert json.loads(cell["judged_share_ci95"]) == summary["judged_share_ci95"]
    assert float(cell["spearman"]) == summary["spearman"]["rho"] and int(cell["sets"]) == 3
    assert float(cell["posix"]) == pytest.approx(np.mean([s["psi"] for s in sets]), abs=1e-6)
    assert "| judge-model | 3 |" in (tmp_path / "tables" / "judged.md").read_text(encoding="utf-8")
    assert (tmp_path / "tables" / "figure_psi_judged.png").is_file()
    again = tmp_path / "again"   # from per_set.csv alone: the same table, and the figure
    regenerate([str(tmp_path / "tables" / "per_set.csv")], again)
    assert (again / "judged.md").read_text() == (tmp_path / "tables" / "judged.md").read_text()
    assert (again / "figure_psi_judged.png").is_file()


def test_the_grid_s_judged_figure_has_a_panel_a_judged_cell_and_a_point_a_judged_set():
    """``figure_psi_judged``: the cells no judge read, and the sets without a judged share, are left out; each
    panel's points are its sets' (ψ, 1 − judged share), its title the cell, the judge and ρ."""
    import matplotlib.pyplot as plt

    from posixlab.analysis.judged import judged_grid_figure

    def row(model, variant, psi, share, judge="J"):
        return {"model": model, "dataset": "mmlu", "variant": variant, "shots": 0, "psi": psi,
                "judged_share": share, "judge": judge if share is not None else None}

    rows = [row("m1", "spelling", 0.1, 1.0), row("m1", "spelling", 0.3, 0.5), row("m1", "spelling", 0.2, None),
            row("m1", "spelling", 0.5, 0.25), row("m2", "template", 0.9, 0.75), row("m2", "template", 0.5, 0.25),
            row("m2", "template", 0.7, 0.5),
            row("m3", "spelling", 0.4, None)]  # never judged: no panel
    fig = judged_grid_figure([*rows[:-1], row("m2", "template", 0.1, 1.0, judge="K")], "title")
    shown = [ax for ax in fig.axes if ax.get_visible()]
    assert len(shown) == 2
    assert shown[0].collections[0].get_offsets().tolist() == [[0.1, 0.0], [0.3, 0.5], [0.5, 0.75]]
    assert shown[1].collections[0].get_offsets().tolist() == [[0.9, 0.25], [0.5, 0.75], [0.7, 0.5], [0.1, 0.0]]
    assert "judge J; 3 sets, ρ = +1.00" in shown[0].get_title().replace("\n", " ")
    # ranks of ψ 4, 2, 3, 1 and of inconsistency 2, 4, 3, 1: ρ = 1 - 6 * (4 + 4) / (4 * 15) = 0.2
    assert "judge J; K; 4 sets, ρ = +0.20" in shown[1].get_title().replace("\n", " ")
    plt.close(fig)
    fig = judged_grid_figure(rows, "title\ndata")  # one judge: named once, in the figure's title
    assert fig._suptitle.get_text() == "title (judge J)\ndata" and "judge" not in fig.axes[0].get_title()
    plt.close(fig)
    assert judged_grid_figure([row("m3", "spelling", 0.4, None)], "title") is None


def test_two_runs_are_compared_and_the_gate_is_shown(posix_run, cls_run, tmp_path):
    page = build_report([posix_run, cls_run], tmp_path / "both.html").read_text(encoding="utf-8")
    assert '<section id="compare">' in page and "POSIX = " in h1(page) and "sensitivity S = " in h1(page)
    assert 'id="units"' in page and 'id="r2-units"' in page and 'data-detail="r2-unit-0"' in page
    assert "ψ per set" in page and "S per sample" in page and page.count("<svg") == 2
    assert "paired-table" not in page  # runs of two tasks share no item to pair
    shutil.copytree(posix_run, tmp_path / "rerun")  # a rerun of the cell, in a folder of its own
    rerun = build_report([posix_run, tmp_path / "rerun"], tmp_path / "again.html").read_text(encoding="utf-8")
    paired = re.search(r'<table id="paired-table"[^>]*>(.*?)</table>', rerun, re.S).group(1)
    assert "psi" in paired and paired.count("identical") == paired.count("<tr") - 1  # the same run: nothing moved
    assert "ran differently" not in paired
    summary = json.loads((tmp_path / "rerun" / "summary.json").read_text())  # a rerun on another thread count
    summary["environment"]["torch_threads"] = summary["environment"]["torch_threads"] + 1
    (tmp_path / "rerun" / "summary.json").write_text(json.dumps(summary))
    rerun = build_report([posix_run, tmp_path / "rerun"], tmp_path / "again.html").read_text(encoding="utf-8")
    paired = re.search(r'<table id="paired-table"[^>]*>(.*?)</table>', rerun, re.S).group(1)
    threads = summary["environment"]["torch_threads"]
    assert f"no setting; ran differently: torch threads {threads - 1} → {threads} (another thread count" in paired

    out = tmp_path / "gated.html"
    assert report_command([str(posix_run), "gate.max_posix=0.0", "--out", str(out)]) == 0
    page = out.read_text(encoding="utf-8")
    gate = re.search(r'<section id="gate">(.*?)</section>', page, re.S).group(1)
    assert '<tr class="fail">' in gate and "max_posix" in gate and 'class="unit-link"' in gate
    assert report_command([str(cls_run), "gate.max_posix=0.5"]) == 2  # not this task's metric


def test_a_sweep_folder_reports_each_of_its_runs_in_the_sweep_s_order(posix_run, cls_run, tmp_path):
    """``posixlab report SWEEP_DIR`` is its runs compared, in job order (2 before 10), as if each were named; a
    folder of no run inside is left out, and a folder of no run at all is refused as before."""
    import shutil

    sweep = tmp_path / "sweep"
    shutil.copytree(cls_run, sweep / "10_cls")
    shutil.copytree(posix_run, sweep / "2_posix")
    (sweep / ".submitit").mkdir()
    (sweep / "multirun.yaml").write_text("hydra: {}\n")
    named = build_report([sweep / "2_posix", sweep / "10_cls"], tmp_path / "named.html").read_text(encoding="utf-8")
    assert report_command([str(sweep)]) == 0
    assert (sweep / "report.html").read_text(encoding="utf-8") == named
    assert "POSIX = " in h1(named) and 'id="r2-units"' in named
    assert 'id="grid"' not in named and 'href="#grid"' not in named  # one run of each task: no grid to draw
    assert named.count('<a href="#compare">↑ runs compared</a>') == 2
    with pytest.raises(ConfigError, match="is not a run folder"):
        build_report([tmp_path / "sweep" / ".submitit"], tmp_path / "none.html")


def test_a_grid_s_page_tables_its_headline_by_the_settings_that_differ(tiny_lm, tmp_path):  # noqa: F811
    """A sweep of variant × seed, a rerun of its first cell with another engine option (no setting: it changes no
    number), and a run killed before its summary with no config.yaml: the Grid section has POSIX by variant (rows:
    the model does not differ) and seed (columns), each value a link to its run's section, the rerun beside its
    cell, the killed run starred in a row of its own; the runs table gains a column per setting that differs; the
    title of a page of more than four runs is their count and range."""
    import torch

    from posixlab.scoring import EngineOptions

    sweep, summaries = tmp_path / "sweep", []
    cells = [("spelling", 0, None), ("spelling", 1, None), ("template", 0, None), ("template", 1, None),
             ("spelling", 0, 512)]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for n, (variant, seed, batch_tokens) in enumerate(cells):
            summaries.append(run(PosixConfig(
                model=TINY, dataset=DatasetSpec("mmlu", source="sample"), num_sets=2, num_variants=3,
                variant=variant, seed=seed, engine=EngineOptions(batch_tokens=batch_tokens), embedding=None,
                output_dir=str(sweep / f"{n}_{variant}_seed{seed}"), score_cache=False,
                cache_dir=str(tmp_path / "cache")), lm=tiny_lm, progress=False))
    finally:
        torch.set_num_threads(threads)
    killed = sweep / "5_killed"
    shutil.copytree(sweep / "3_template_seed1", killed)
    (killed / "summary.json").unlink()
    assert report_command([str(sweep)]) == 0
    page = (sweep / "report.html").read_text(encoding="utf-8")

    whole = re.search(r'<section id="grid">(.*?)</section>', page, re.S).group(1)
    grid, *measures = whole.split('<details class="measure">')  # the headline's tables, then each other measure's
    assert "<h3>POSIX by variant and seed</h3>" in grid
    heads = re.findall(r"<th(?: [^>]*)?>(.*?)</th>", grid)
    assert heads == ["variant", "seed = 0", "seed = 1", "seed = —"]
    lines = [re.findall(r"<td(?: [^>]*)?>(.*?)</td>", row) for row in re.findall(r"<tr>(.*?)</tr>", grid)[1:]]
    posix = [f"{s['psi']['posix']:.4f}" for s in summaries]

    def link(n: int, star: str = "") -> str:
        folder = sorted(sweep.iterdir())[n - 1] if n <= 5 else killed
        return f'<a href="#run-{n}" title="run {n}: {folder}">{posix[3 if n == 6 else n - 1]}{star}</a>'  # 6: 4's copy

    def alone(n: int, star: str = "") -> str:  # a cell of one run: its value, and under it its 95% interval
        low, high = summaries[3 if n == 6 else n - 1]["psi"]["ci95"]  # the killed run's: over the same sets as 4's
        return link(n, star) + f'<div class="small">[{low:.4f}, {high:.4f}]</div>'

    assert lines == [["spelling", f"{link(1)} / {link(5)}", alone(2), ""],  # two runs of a cell: no interval
                     ["template", alone(3), alone(4), ""],
                     ["—", "", "", alone(6, "*")]], lines
    # folded under ψ: each measure the runs' answers have, as ψ is tabled, with an accuracy's two-way interval
    def measured(name: str, reading: str) -> list:  # the killed run's: over the same sets as 4's
        key = {"accuracy": "accuracy", "consistency rate": "consistency_rate"}.get(name)
        return [s["accuracy"][f"by_{reading}"][key] if key else s["accuracy"][f"by_{reading}"]["spread"]["range"]
                for s in (*summaries, summaries[3])]

    titles = [re.match(r"<summary>(.*?)</summary>", m).group(1) for m in measures]
    assert titles == [f"{name} ({reading}) by variant and seed" for name in (
        "accuracy", "accuracy range over prompts", "consistency rate") for reading in ("options", "greedy")
        if set(measured(name, reading)) != {None}]  # the tiny model's greedy answers: too few parse for a rate
    assert len(titles) >= 5
    for title, measure in zip(titles, measures):
        name, reading = title.split(" (")[0], title.split("(")[1].split(")")[0]
        values = [h.fmt(v) for v in measured(name, reading)]
        rows = [re.findall(r"<td(?: [^>]*)?>(.*?)</td>", row) for row in re.findall(r"<tr>(.*?)</tr>", measure)[1:]]
        shown = [re.sub(r"<div.*", "", re.sub(r"<a [^>]*>(.*?)</a>", r"\1", cell)) for row in rows for cell in row[1:]]
        assert shown == [f"{values[0]} / {values[4]}", values[1], "", values[2], values[3], "", "", "",
                         f"{values[5]}*"], (title, shown)
        interval = summaries[1]["accuracy"][f"by_{reading}"]["ci95"]
        under = f'<div class="small">[{interval[0]:.4f}, {interval[1]:.4f}]</div>'
        assert (under in rows[0][2]) == (name == "accuracy"), title  # a range or a rate has no interval
    # paired item by item as the grid is read, one setting at a time, each against its first value (the variant
    # types' sets by their question); the rerun (5) against its cell's first run; the killed run (6) not at all;
    # another seed drew other questions: named, not paired
    compare = re.search(r'<section id="compare">(.*?)</section>', page, re.S).group(1)
    paired = re.search(r'<table id="paired-table"[^>]*>(.*?)</table>', compare, re.S).group(1)
    pairs = [tuple(re.sub(r"<[^>]+>", "", cell) for cell in re.findall(r"<td(?: [^>]*)?>(.*?)</td>", row)[:4])
             for row in re.findall(r"<tr>(.*?)</tr>", paired)[1:]]
    by_item = "variant spelling → template (paired by item)"
    assert pairs == [(n, base, changed, metric) for n, base, changed in (
        ("3", "1", by_item), ("4", "2", by_item), ("5", "1", "no setting"))
        for metric in ("psi", "accuracy_options", "accuracy_greedy")]
    assert "Not paired, sharing no unit or item (another seed, data set or sample): 2 against 1 (seed 0 → 1); 4 " \
        "against 3 (seed 0 → 1).</p>" in compare
    from posixlab.compare import compare_runs  # each pair's numbers are posixlab compare's of the two folders
    result = compare_runs(sweep / "1_spelling_seed1", sweep / "3_template_seed1")
    psi = next(m for m in result["metrics"] if m["metric"] == "psi")
    assert result["paired_by"] == "item" and result["units"] == {"shared": 2, "base_only": 0, "new_only": 0}
    row = next(r for r in re.findall(r"<tr>(.*?)</tr>", paired) if by_item in r and "#run-4" in r)
    assert f'<td data-v="{psi["difference"]!r}">' in row and interval_words(psi["interval"]) in row
    cells = [re.findall(r'<td(?: data-v="([^"]*)")?[^>]*>', r) for r in re.findall(r"<tr>(.*?)</tr>", paired)[1:]]
    for k, metric in enumerate(("psi", "accuracy_options", "accuracy_greedy")):  # Holm over each metric's pairs
        p = {i: float(row[10]) for i, row in enumerate(cells[k::3]) if row[10]}  # the rerun's: no p (identical)
        order, m = sorted(p, key=p.get), len(p)  # by hand: the step-down maxima of (m − rank)·p, capped at 1
        steps = [min(1.0, (m - rank) * p[i]) for rank, i in enumerate(order)]
        holm = {i: max(steps[:rank + 1]) for rank, i in enumerate(order)}
        shown = {i: float(row[11]) for i, row in enumerate(cells[k::3]) if row[11]}
        assert shown == pytest.approx(holm) and (m >= 2 or metric != "psi"), (metric, p, shown)  # ψ: a family
    for n in range(1, 7):  # each run's section, and its way back to the grid
        assert re.search(rf'<section id="run-{n}" class="run"><h2>Run {n}: [^<]*</h2><p class="small">'
                         r'<a href="#grid">↑ grid</a> · <a href="#compare">↑ runs compared</a></p>', page), n
    compare = re.search(r'<table id="compare-table"[^>]*>(.*?)</table>', page, re.S).group(1)
    heads = re.findall(r"<th(?: [^>]*)?>(.*?)</th>", compare)
    assert heads[heads.index("data set") + 1:] == ["variant", "seed", "state"], heads  # no engine, no output_dir
    values = [float(p) for p in posix]
    assert h1(page) == f"PARTIAL · 6 runs · POSIX {min(values):.4f} to {max(values):.4f}"


def test_a_sweep_s_end_prints_and_writes_its_grid_and_writes_its_page(posix_run, tmp_path):
    """What ``SweepEndCallback`` prints at a sweep's end (``sweep_summary``): the headline grid as Markdown, each value
    with its interval and the paper's where it has one, also in ``grid.md``; the sweep's page beside it."""
    from posixlab.analysis.paper import PAPER
    from posixlab.report.build import sweep_summary

    assert sweep_summary(tmp_path / "empty") == []  # a dry run's sweep: no run, nothing written
    for name in ("llama2-7b", "my-model"):
        shutil.copytree(posix_run, tmp_path / "sweep" / name)
        summary = json.loads((tmp_path / "sweep" / name / "summary.json").read_text(encoding="utf-8"))
        summary["model"]["name"] = name
        (tmp_path / "sweep" / name / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    lines = sweep_summary(tmp_path / "sweep")
    value = "{:.4f} [{:.4f}, {:.4f}]".format(summary["psi"]["posix"], *summary["psi"]["ci95"])
    grid = ["POSIX by model", "", "| model | POSIX |", "|---|---|",
            "| llama2-7b | {} paper {:.3f} ± {:.3f} |".format(value, *PAPER[("llama2-7b", "mmlu", "spelling", 0)]),
            f"| my-model | {value} |"]
    sweep = tmp_path / "sweep"
    assert lines == [f"posixlab: the sweep's grid (2 runs; {sweep / 'grid.md'}):", *grid,
                     f"posixlab: the sweep's page: {sweep / 'report.html'}"]
    assert (sweep / "grid.md").read_text(encoding="utf-8") == "\n".join(grid) + "\n"
    assert "<h3>POSIX by model</h3>" in (sweep / "report.html").read_text(encoding="utf-8")
    (sweep / "report.html").unlink()
    assert sweep_summary(sweep, page=False) == lines[:-1] and not (sweep / "report.html").exists()  # report=false


def test_a_grid_cell_carries_the_paper_s_value_for_its_model_and_setting(posix_run, tmp_path):
    """A run named as one of the paper's models (its summary's model renamed: the tiny model stands in) gets, under
    its value in the grid and its 95% interval, the paper's POSIX for that model, data set, variant type and shots; a
    model the paper has not, its interval only."""
    from posixlab.analysis.paper import PAPER

    for name in ("llama2-7b", "mistral-7b-instruct", "my-model"):
        shutil.copytree(posix_run, tmp_path / "sweep" / name)
        summary = json.loads((tmp_path / "sweep" / name / "summary.json").read_text(encoding="utf-8"))
        summary["model"]["name"] = name
        (tmp_path / "sweep" / name / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    page = build_report([tmp_path / "sweep"], tmp_path / "paper.html").read_text(encoding="utf-8")
    grid = re.search(r'<section id="grid">(.*?)</section>', page, re.S).group(1)
    interval = re.escape("[{:.4f}, {:.4f}]".format(*summary["psi"]["ci95"]))  # the run's own, under its value
    assert "<h3>POSIX by model</h3>" in grid and summary["variant"] == "spelling" and summary["shots"] == 0
    for name in ("llama2-7b", "mistral-7b-instruct"):
        mean, sd = PAPER[(name, "mmlu", "spelling", 0)]
        assert re.search(rf'<td>{name}</td><td data-v="[^"]+"><a [^>]+>[0-9.]+</a><div class="small">{interval}</div>'
                         rf'<div class="small">paper {mean:.3f} ± {sd:.3f}</div></td>', grid), name
    assert re.search(rf'<td>my-model</td><td data-v="[^"]+"><a [^>]+>[0-9.]+</a>'
                     rf'<div class="small">{interval}</div></td>', grid)
    by = summary["accuracy"]  # ψ's other measures, folded, each the runs have: the tiny model's greedy answers
    have = [v is not None for b in (by["by_options"], by["by_greedy"])  # never parse, so they have no consistency rate
            for v in (b["accuracy"], b["spread"]["range"], b["consistency_rate"])]
    assert grid.count('<details class="measure">') == sum(have) == 5
    for name in ("llama2-7b", "mistral-7b-instruct", "my-model"):  # as open-ended runs: no accuracy, so no table
        summary = json.loads((tmp_path / "sweep" / name / "summary.json").read_text(encoding="utf-8"))
        (tmp_path / "sweep" / name / "summary.json").write_text(json.dumps({**summary, "accuracy": None}))
    page = build_report([tmp_path / "sweep"], tmp_path / "open.html").read_text(encoding="utf-8")
    assert "<h3>POSIX by model</h3>" in page and '<details class="measure">' not in page


def test_an_interval_written_before_its_method_was_recorded_is_marked_not_read_as_today_s(posix_run, cls_run,
                                                                                         tmp_path):
    """A summary records its interval's method (``ci_method``: the expanded bootstrap, or the t interval on 2-4
    values; since 2026-12-07). An older run's interval (the plain percentile bootstrap, narrower on few sets) shown
    beside a new one's is marked: † under its grid value, with the footnote, in the page and the sweep's Markdown
    grid; its own page's headline says so. Runs that all record it show no mark."""
    from posixlab.metrics.stats import interval_method
    from posixlab.report.build import sweep_summary
    from posixlab.tasks.base import UNRECORDED_METHOD

    summary = json.loads((posix_run / "summary.json").read_text(encoding="utf-8"))
    assert summary["psi"]["ci_method"] == interval_method(summary["psi"]["num_sets"]) == "t interval"  # 3 sets
    assert "| {:.4f} to {:.4f} (t interval) |".format(*summary["psi"]["ci95"]) in \
        (posix_run / "summary.md").read_text(encoding="utf-8")
    for name in ("new-run", "old-run"):
        shutil.copytree(posix_run, tmp_path / "sweep" / name)
        copy = json.loads(json.dumps(summary))
        copy["model"]["name"] = name
        if name == "old-run":
            del copy["psi"]["ci_method"]
        (tmp_path / "sweep" / name / "summary.json").write_text(json.dumps(copy), encoding="utf-8")
    interval = "[{:.4f}, {:.4f}]".format(*summary["psi"]["ci95"])
    grid = re.search(r'<section id="grid">(.*?)</section>', page_of(tmp_path / "sweep"), re.S).group(1)
    headline = grid.split('<details class="measure">')[0]
    assert re.search(rf'<td>new-run</td><td [^>]+><a [^>]+>[0-9.]+</a><div class="small">{re.escape(interval)}'
                     r'</div></td>', headline)
    assert re.search(rf'<td>old-run</td><td [^>]+><a [^>]+>[0-9.]+</a><div class="small">{re.escape(interval)}†'
                     r'</div></td>', headline)
    assert f"† {UNRECORDED_METHOD}." in grid and grid.count("†") == 2  # the mark and its footnote, not accuracy's
    lines = sweep_summary(tmp_path / "sweep", page=False)
    assert [line for line in lines if "old-run" in line][0].endswith(f"{interval}† |")
    assert f"{interval} |" in [line for line in lines if "new-run" in line][0]
    assert lines[-1] == f"† {UNRECORDED_METHOD}."
    old_card = "(plain percentile: a run before 2026-12-07)"
    assert old_card in page_of(tmp_path / "sweep" / "old-run", tmp_path / "old.html")
    assert old_card not in page_of(tmp_path / "sweep" / "new-run", tmp_path / "new.html")
    shutil.rmtree(tmp_path / "sweep" / "old-run")  # every run records its method: no mark
    shutil.copytree(tmp_path / "sweep" / "new-run", tmp_path / "sweep" / "other-run")
    assert "†" not in page_of(tmp_path / "sweep") and "†" not in "".join(sweep_summary(tmp_path / "sweep", page=False))
    cls = json.loads((cls_run / "summary.json").read_text(encoding="utf-8"))  # S's, and C's (the plain percentile)
    assert cls["sensitivity"]["ci_method"] == interval_method(cls["num_samples"])
    assert cls["consistency"]["ci_method"] == ("percentile bootstrap" if cls["consistency"]["ci95"] else None)
    shutil.copytree(cls_run, tmp_path / "cls-old")
    del cls["sensitivity"]["ci_method"]
    (tmp_path / "cls-old" / "summary.json").write_text(json.dumps(cls), encoding="utf-8")
    assert old_card in page_of(tmp_path / "cls-old", tmp_path / "cls-old.html")
    assert old_card not in page_of(cls_run, tmp_path / "cls-new.html")


def test_a_classification_run_s_sensitivity_carries_its_interval_to_the_grid(cls_run, tmp_path):
    """S's 95% interval: the percentile bootstrap of the samples' S, seeded by the run's seed (by hand: two samples
    of S 0 and 1, no resampling reaches a 2.5 % tail: the t interval, 0.5 ± 6.353102, held to S's range [0, 1]; and
    S 0.1 and 0.15: 0.125 ± 0.317655, held at 0 below); the result
    line, summary.md and the run's page print it, W&B logs it; in a grid of two classification runs each value
    carries it."""
    from posixlab.metrics.stats import bootstrap_ci
    from posixlab.tasks.classification import ClassificationTask, build_classification_summary

    summary = json.loads((cls_run / "summary.json").read_text(encoding="utf-8"))
    samples = sorted(records(cls_run, "samples.jsonl"), key=lambda r: r["sample_index"])
    s = [r["sensitivity"] for r in samples]
    low, high = summary["sensitivity"]["ci95"]
    assert [low, high] == list(bootstrap_ci(s, seed=summary["seed"])) and len(set(s)) > 1
    assert min(s) <= low < summary["sensitivity"]["mean"] < high <= max(s)
    two = [{**samples[0], "sensitivity": 0.0}, {**samples[1], "sensitivity": 1.0}]
    by_hand = build_classification_summary(two, summary["classes"], summary["num_rephrasings"], {"seed": 3})
    assert by_hand["sensitivity"]["ci95"] == [0.0, 1.0] and by_hand["sensitivity"]["mean"] == 0.5
    close = [{**samples[0], "sensitivity": 0.1}, {**samples[1], "sensitivity": 0.15}]
    close_ci = build_classification_summary(close, summary["classes"], summary["num_rephrasings"], {"seed": 3})
    assert close_ci["sensitivity"]["ci95"] == pytest.approx([0.0, 0.442655], abs=1e-6)  # was [0.1, 0.15]
    assert f"sensitivity S = {summary['sensitivity']['mean']:.4f} (95% CI {low:.4f} to {high:.4f}) · " in \
        ClassificationTask.report_lines(summary)[0]
    assert f"| sensitivity S_τ, 95% interval (bootstrap over samples) | {low:.3f} to {high:.3f} |" in \
        (cls_run / "summary.md").read_text(encoding="utf-8")
    assert f"95% CI {low:.4f} to {high:.4f}, sd " in page_of(cls_run, tmp_path / "one.html")
    logged = ClassificationTask.tracked(summary, cls_run).scalars  # what W&B logs
    assert [logged["sensitivity_ci95_low"], logged["sensitivity_ci95_high"]] == [low, high]
    for name in ("model-a", "model-b"):
        shutil.copytree(cls_run, tmp_path / "sweep" / name)
        renamed = {**summary, "model": {**summary["model"], "name": name}}
        (tmp_path / "sweep" / name / "summary.json").write_text(json.dumps(renamed), encoding="utf-8")
    grid = re.search(r'<section id="grid">(.*?)</section>', page_of(tmp_path / "sweep"), re.S).group(1)
    assert "<h3>sensitivity S by model</h3>" in grid
    for name in ("model-a", "model-b"):
        assert re.search(rf'<td>{name}</td><td data-v="[^"]+"><a [^>]+>{summary["sensitivity"]["mean"]:.4f}</a>'
                         rf'<div class="small">\[{low:.4f}, {high:.4f}\]</div></td>', grid), name
    # with S, Errica et al.'s Table 1: C (with its interval: over the same resampled samples, pairs of different
    # samples only) and micro-F1, folded under it
    from posixlab.metrics.classification import consistency_interval

    c_low, c_high = summary["consistency"]["ci95"]
    assert [c_low, c_high] == list(consistency_interval([r["distribution"] for r in samples],
                                                        [r["gold"] for r in samples], seed=summary["seed"]))
    assert c_low <= summary["consistency"]["mean"] <= c_high
    assert f"consistency C = {summary['consistency']['mean']:.4f} (95% CI {c_low:.4f} to {c_high:.4f}) · " in \
        ClassificationTask.report_lines(summary)[0]
    assert f"| consistency C_y, 95% interval (bootstrap over samples) | {c_low:.3f} to {c_high:.3f} |" in \
        (cls_run / "summary.md").read_text(encoding="utf-8")
    assert [logged["consistency_ci95_low"], logged["consistency_ci95_high"]] == [c_low, c_high]
    c, f1 = grid.split('<details class="measure">')[1:]
    assert c.startswith("<summary>consistency C by model</summary>") and f1.startswith("<summary>micro-F1 by")
    for measure, value, under in ((c, summary["consistency"]["mean"], rf'<div class="small">\[{c_low:.4f}, '
                                   rf'{c_high:.4f}\]</div>'), (f1, summary["micro_f1"]["mean"], "")):
        for name in ("model-a", "model-b"):
            assert re.search(rf'<td>{name}</td><td data-v="[^"]+"><a [^>]+>{value:.4f}</a>{under}</td>', measure), name


def test_any_task_gets_the_generic_page_and_merge_writes_one(tmp_path, rephrasings):
    questions = [["What is 2 + 2?", "What is 2+2?"], ["Name a prime.", "Give a prime."]]
    run(plugin_task.AgreementConfig(model=RULE, questions=questions, output_dir=str(tmp_path / "agree"),
                                    cache_dir=str(tmp_path / "cache")), progress=False)
    page = page_of(tmp_path / "agree")
    assert "agreement = " in h1(page) and page.count('<tr class="unit"') == 2 and 'id="unit-1"' in page

    shards = [tmp_path / f"shard{k}" for k in (1, 2)]
    for k in (1, 2):
        classification(tmp_path, rephrasings, f"shard{k}", shard=f"{k}/2")
    assert merge_command([str(tmp_path / "merged"), *map(str, shards)]) == 0
    assert (tmp_path / "merged" / "report.html").read_text(encoding="utf-8").count('<tr class="unit"') == 6


def test_a_100_sample_q30_classification_page_stays_small(tmp_path, rephrasings):
    classification(tmp_path, rephrasings, "big", samples=100, q=30)
    page = build_report([tmp_path / "big"], tmp_path / "big" / "report.html")
    assert page.stat().st_size < 1_000_000
    assert page.read_text(encoding="utf-8").count('<td class="answer') == 100 * 30


@pytest.mark.slow
def test_a_cli_run_writes_its_report(tmp_path, root):
    out = tmp_path / "job"
    done = subprocess.run([sys.executable, "run.py", "logger=none", "progress=false", "task.num_sets=2",
                           "task.num_variants=2", "embedding=none", "report=true", f"hydra.run.dir={out}"],
                          cwd=root, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    page = (out / "report.html").read_text(encoding="utf-8")
    assert f"report: {out / 'report.html'}" in done.stdout and page.count('<tr class="unit"') == 2
