"""The HTML report (``posixlab.report.build.build_report``) opened in a real browser: headless Chromium driven by Selenium
(the ``browser`` fixture, tests/browser_fixtures.py), from a file:// URL, with no server.

Every report is built from REAL runs: the tiny test model (tests/tiny_model.py: a 2-layer transformers model built in
memory) run by ``posixlab.runner.run`` on prompt sets of this file (POSIX, with spelling-like edits) and on a
three-sample classifier file (classification). What the tests hold the page to is its DOM contract:

- ``<body data-report="posixlab">``; ``<h1 id="headline">`` holding the run's headline as the command's result line
  begins ("POSIX = 1.2044": the task's headline name, its number from summary.json to 4 decimals);
- ``<table id="units" class="sortable">``: one ``<tr class="unit" data-index="I">`` per set (sample), headers
  ``<th data-sort="KEY">``: a click sorts the rows by that column (numerically), a second click reverses them;
- a click on a row shows its ``<section class="detail" id="unit-I">`` (hidden until then): ``.prompt`` elements and a
  ``.heatmap`` (POSIX), ``.answer`` cells (classification);
- several runs: ``<section id="compare">``, and ``<section id="grid">`` whose values link to ``<section id="run-N">``;
  a partial run (no summary.json): ``<div id="partial">``; a failed gate:
  ``<section id="gate">`` with ``.fail`` rows;
- the page loads with no network (every resource it fetches is file: or data:) and logs no console error.

The browser's console is read with ``driver.get_log("browser")``: an uncaught JavaScript exception, a failed load or a
``console.error`` is a SEVERE entry there (``test_a_javascript_error_is_caught`` checks that this check catches one).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest
from tiny_model import build_tiny_lm, classifier_config

pytestmark = pytest.mark.slow  # a browser starts (about 1 s), and real runs of the tiny model (about 2 s)

POSIX_SETS = [  # spelling-like edits (swapped and dropped letters), as the spelling variants make them
    {"id": "capital", "prompts": ["what is the capital of france?", "waht is the capital of france?",
                                  "what is the captial of frnace?"]},
    {"id": "color", "prompts": ["name a color.", "name a colour.", "nmae a color."]},
    {"id": "sum", "prompts": ["q: 2+2?\na:", "q: two plus two?\na:", "2+2="]},
    {"id": "author", "prompts": ["who wrote hamlet?", "who wrote hamelt?", "who wrtoe hamlet?"]},
    {"id": "river", "prompts": ["the longest river in europe is", "the longest rivre in europe is",
                                "the longst river in europe is", "teh longest river in europe is"]},
    {"id": "planet", "prompts": ["which planet is largest?", "which planet is lagrest?", "whcih planet is largest?"]},
    {"id": "water", "prompts": ["water boils at", "water bolis at", "watre boils at"]},
    {"id": "moon", "prompts": ["how far is the moon?", "how far is teh moon?", "how fra is the moon?"]},
    {"id": "legs", "prompts": ["how many legs has a spider?", "how many lges has a spider?",
                               "how mnay legs has a spider?"]},
    {"id": "ocean", "prompts": ["the largest ocean is", "the largets ocean is", "the lragest ocean is"]},
    {"id": "poem", "prompts": ["write a short poem.", "wirte a short poem.", "write a shrot poem."]},
    {"id": "week", "prompts": ["how many days in a week?", "how many dyas in a week?", "how mnay days in a week?"]},
]  # 12 sets: set numbers 0 to 11, whose text order (0, 1, 10, 11, 2, ...) is not their numeric order
WAIT = 10  # seconds the page may take to show what a click asks for


# --- real runs of the tiny model ----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny():
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)  # the tiny model's passes are too small to share between threads
    yield build_tiny_lm()
    torch.set_num_threads(before)


def posix_run(lm, root: Path, name: str, **overrides) -> Path:
    from posixlab.data import DatasetSpec
    from posixlab.models import ModelSpec
    from posixlab.runner import run
    from posixlab.tasks.posix import PosixConfig

    sets = root / "sets.jsonl"
    sets.write_text("".join(json.dumps(s) + "\n" for s in POSIX_SETS), encoding="utf-8")
    config = PosixConfig(model=ModelSpec("tiny-test-model", "local", "tiny-test-model"),
                         dataset=DatasetSpec("prompt_sets", source="path", path=str(sets)), variant="user",
                         num_sets=None, max_new_tokens=6, embedding=None, output_dir=str(root / name),
                         cache_dir=str(root / "cache"), score_cache_dir=str(root / "scores"), **overrides)
    run(config, lm=lm, progress=False)
    return root / name


@pytest.fixture(scope="module")
def posix_folder(tiny, tmp_path_factory) -> Path:
    return posix_run(tiny, tmp_path_factory.mktemp("posix"), "run")


@pytest.fixture(scope="module")
def chat_folder(tiny, posix_folder) -> Path:
    """The same sets through the chat template: another POSIX (a second run for the comparison)."""
    return posix_run(tiny, posix_folder.parent, "chat", chat_template=True)


@pytest.fixture(scope="module")
def classification_folder(tiny, tmp_path_factory) -> Path:
    from posixlab.runner import run

    root = tmp_path_factory.mktemp("classification")
    config = classifier_config(root, probability="label_probs")  # 3 samples × Q = 3, as test_tiny_model.py runs it
    run(config, lm=tiny, progress=False)
    return root / "run"


def summary_of(folder: Path) -> dict:
    return json.loads((folder / "summary.json").read_text(encoding="utf-8"))


def records_of(folder: Path, name: str) -> list[dict]:
    return [json.loads(line) for line in (folder / name).read_text(encoding="utf-8").splitlines()]


def result_line(summary: dict) -> str:
    """The run's headline as the command's result line begins ("POSIX = 1.2044", "sensitivity S = 0.0063"): the
    task's headline name and its number from summary.json, to 4 decimals."""
    from posixlab.tasks import task_of_summary

    task_type = task_of_summary(summary)
    value = task_type.headline(summary)
    assert value is not None, summary.get("task")
    return f"{task_type.headline_name} = {value:.4f}"


def build(folders: list[Path], out: Path, gate_rows=None) -> Path:
    from posixlab.report.build import build_report

    path = Path(build_report([str(f) for f in folders], out, gate_rows))
    assert path.is_file(), path
    return path


# --- the browser --------------------------------------------------------------------------------------------------
def open_page(driver, path: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get_log("browser")  # empties the console log of an earlier page
    driver.get(path.resolve().as_uri())
    WebDriverWait(driver, WAIT).until(lambda d: d.execute_script("return document.readyState") == "complete")
    assert driver.find_element(By.TAG_NAME, "body").get_attribute("data-report") == "posixlab"


def console_problems(driver) -> list[dict]:
    """The SEVERE console entries since the last read: uncaught exceptions, failed loads, console.error."""
    return [entry for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]


def fetched_elsewhere(driver) -> list[str]:
    """Every resource the page fetched that is not in the file itself or beside it (no network: file: and data:)."""
    urls = driver.execute_script("return performance.getEntriesByType('resource').map(function (e) { return e.name; })")
    return [u for u in urls if not u.startswith(("file:", "data:", "blob:"))]


def text_of(element) -> str:
    """An element's text as rendered, with white space collapsed (a prompt's new lines may render as spaces)."""
    return " ".join((element.get_attribute("textContent") or "").split())


def prompt_text(driver, element) -> str:
    """A .prompt element's prompt: its text less what it shows as removed (``<del>``: the page marks a variant's edit
    against the original, added letters in ``<mark>``, removed ones in ``<del>``), white space collapsed."""
    text = driver.execute_script("var c = arguments[0].cloneNode(true); c.querySelectorAll('del').forEach("
                                 "function (d) { d.remove(); }); return c.textContent;", element)
    return " ".join(text.split())


def rows(driver) -> list:
    from selenium.webdriver.common.by import By

    return driver.find_elements(By.CSS_SELECTOR, "table#units tr.unit")


def column_cells(driver, key: str) -> list[str]:
    """The text of the cells in the column headed ``th[data-sort=KEY]`` of the units table, top row first."""
    from selenium.webdriver.common.by import By

    header = driver.find_element(By.CSS_SELECTOR, f'table#units th[data-sort="{key}"]')
    column = driver.execute_script(
        "var th = arguments[0], n = 0; for (var c = th.parentNode.firstElementChild; c !== th; "
        "c = c.nextElementSibling) n += c.colSpan || 1; return n;", header)
    return [text_of(row.find_elements(By.CSS_SELECTOR, ":scope > td, :scope > th")[column]) for row in rows(driver)]


NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:e-?\d+)?")


def all_numbers(driver, key: str) -> bool:
    return all(NUMBER.fullmatch(cell) for cell in column_cells(driver, key))


def column_values(driver, key: str) -> list[float]:
    """The numbers in the column headed ``th[data-sort=KEY]`` of the units table, top row first."""
    values = []
    for n, cell in enumerate(column_cells(driver, key)):
        found = NUMBER.search(cell)
        assert found, f"no number in the {key} cell of row {n}: {cell!r}"
        values.append(float(found.group()))
    return values


def click(driver, element) -> None:
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", element)
    element.click()


def open_detail(driver, row):
    """Click a units row; return its detail section once it shows."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    index = row.get_attribute("data-index")
    detail = driver.find_element(By.ID, f"unit-{index}")
    assert detail.tag_name == "section" and "detail" in detail.get_attribute("class").split()
    assert not detail.is_displayed(), f"#unit-{index} shows before its row is clicked"
    click(driver, row)
    WebDriverWait(driver, WAIT).until(lambda d: detail.is_displayed(), f"#unit-{index} did not show on a click")
    return detail


def screenshot(driver, tmp_path: Path, name: str) -> Path:
    """The window as a PNG in tmp_path (and in $POSIXLAB_REPORT_SCREENSHOTS when set, to look at after CI)."""
    path = tmp_path / f"{name}.png"
    assert driver.save_screenshot(str(path)), path
    if os.environ.get("POSIXLAB_REPORT_SCREENSHOTS"):
        keep = Path(os.environ["POSIXLAB_REPORT_SCREENSHOTS"])
        keep.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, keep / path.name)
    return path


def assert_not_blank(path: Path) -> None:
    """The screenshot is a real render: many distinct colours (text edges, the heat map) and a spread of pixel
    values, not one flat colour."""
    from PIL import Image, ImageStat

    with Image.open(path) as image:
        rgb = image.convert("RGB")
        colours = rgb.getcolors(maxcolors=1 << 24)
        spread = ImageStat.Stat(rgb.convert("L")).stddev[0]
        assert rgb.size[0] >= 1000 and rgb.size[1] >= 700, rgb.size
    assert len(colours) > 500 and spread > 10, (len(colours), spread)


# --- the tests ----------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def posix_report(posix_folder, tmp_path_factory) -> Path:
    return build([posix_folder], tmp_path_factory.mktemp("posix-report") / "report.html")


def test_posix_report_shows_the_runs_posix_and_one_row_per_set(browser, posix_folder, posix_report):
    """The headline is the run's own result line (its POSIX as the command prints it), the units table has one row
    per prompt set, indexed by the sets' own indices; the page fetched nothing from the network and logged no
    console error."""
    from selenium.webdriver.common.by import By

    summary = summary_of(posix_folder)
    open_page(browser, posix_report)
    headline = browser.find_element(By.CSS_SELECTOR, "h1#headline")
    assert result_line(summary) in text_of(headline), (result_line(summary), text_of(headline))
    assert summary["psi"]["num_sets"] == len(POSIX_SETS)
    indices = sorted(r.get_attribute("data-index") for r in rows(browser))
    assert indices == sorted(str(r["set_index"]) for r in records_of(posix_folder, "sets.jsonl"))
    assert "sortable" in browser.find_element(By.ID, "units").get_attribute("class").split()
    assert fetched_elsewhere(browser) == []
    assert console_problems(browser) == []


def test_a_click_on_the_psi_header_sorts_the_sets_by_psi_and_a_second_reverses(browser, posix_folder, posix_report):
    """A click on th[data-sort=psi] orders the rows by ψ (the numbers read from the column are monotonic, and the rows
    are the sets in the order of their saved ψ); a second click gives the reverse order."""
    from selenium.webdriver.common.by import By

    psi = {str(r["set_index"]): r["psi"] for r in records_of(posix_folder, "sets.jsonl")}
    assert len(set(psi.values())) == len(psi)  # no tie: one right order each way
    open_page(browser, posix_report)
    orders = []
    for _ in range(2):
        click(browser, browser.find_element(By.CSS_SELECTOR, 'table#units th[data-sort="psi"]'))
        values = column_values(browser, "psi")
        order = [r.get_attribute("data-index") for r in rows(browser)]
        ascending = values == sorted(values)
        assert ascending or values == sorted(values, reverse=True), values
        assert order == sorted(psi, key=psi.get, reverse=not ascending), (order, psi)
        assert values == pytest.approx([psi[i] for i in order], abs=0.06)  # the cells show the sets' own ψ
        orders.append(order)
    assert orders[1] == orders[0][::-1]
    assert console_problems(browser) == []


def test_every_numeric_column_sorts_as_numbers(browser, posix_report):
    """Every column of the units table whose cells are all numbers sorts numerically on a click on its header (the
    set numbers 0 to 11 come out 0, 1, 2, ..., not 0, 1, 10, 11, 2 as text) and the other way on a second click."""
    from selenium.webdriver.common.by import By

    open_page(browser, posix_report)
    keys = [th.get_attribute("data-sort") for th in
            browser.find_elements(By.CSS_SELECTOR, "table#units th[data-sort]")]
    numeric = [key for key in keys if all_numbers(browser, key)]
    assert "psi" in numeric and len(numeric) >= 2, (keys, numeric)
    text_order_differs = False
    for key in numeric:
        seen = []
        for _ in range(2):
            click(browser, browser.find_element(By.CSS_SELECTOR, f'table#units th[data-sort="{key}"]'))
            values = column_values(browser, key)
            assert values in (sorted(values), sorted(values, reverse=True)), (key, values)
            seen.append(values)
        assert seen[1] == seen[0][::-1] and (seen[0] != seen[1] or len(set(seen[0])) == 1), (key, seen)
        texts = [f"{v:g}" for v in seen[0]]
        text_order_differs |= texts not in (sorted(texts), sorted(texts, reverse=True))
    assert text_order_differs, "no column of numbers whose text order differs: the check proves nothing"
    assert console_problems(browser) == []


def test_a_click_on_a_set_shows_its_prompts_and_heat_map(browser, posix_folder, posix_report, tmp_path):
    """Each set's detail is hidden until its row is clicked; then it shows the set's prompts (.prompt, one per prompt,
    in order; a variant's spelling edits against the original highlighted: mark/del, the original's not) and its ψ
    heat map (.heatmap, drawn: not empty). A screenshot of the page with a set open is a real
    render (many colours), not a blank window."""
    from selenium.webdriver.common.by import By

    records = {str(r["set_index"]): r for r in records_of(posix_folder, "sets.jsonl")}
    open_page(browser, posix_report)
    for row in rows(browser):
        record = records[row.get_attribute("data-index")]
        detail = open_detail(browser, row)
        prompts = detail.find_elements(By.CSS_SELECTOR, ".prompt")
        assert [prompt_text(browser, p) for p in prompts] == [" ".join(p["text"].split()) for p in record["prompts"]], \
            record["item_id"]
        for prompt, given in zip(prompts, record["prompts"]):  # a variant's edits against the original are marked
            marked = prompt.find_elements(By.CSS_SELECTOR, "mark, del, ins")
            assert bool(marked) == (given["text"] != record["prompts"][0]["text"]), (given["text"], prompt.text)
        heatmap = detail.find_element(By.CSS_SELECTOR, ".heatmap")
        assert heatmap.is_displayed() and heatmap.size["width"] > 50 and heatmap.size["height"] > 20, heatmap.size
    open_page(browser, posix_report)  # afresh: one set open, the one with four spellings
    spelled = next(r for r in rows(browser) if records[r.get_attribute("data-index")]["item_id"] == "river")
    detail = open_detail(browser, spelled)
    browser.execute_script("arguments[0].scrollIntoView({block: 'start'})", detail)
    assert detail.is_displayed()
    assert_not_blank(screenshot(browser, tmp_path, "posix_report"))
    assert console_problems(browser) == []


def test_classification_report_has_a_row_per_sample_and_its_answers(browser, classification_folder, tmp_path):
    """The classification report's headline is the run's result line (sensitivity S); one row per sample; a click
    on a sample shows its detail with one .answer cell per rephrasing's answer."""
    from selenium.webdriver.common.by import By

    summary = summary_of(classification_folder)
    samples = {str(r["sample_index"]): r for r in records_of(classification_folder, "samples.jsonl")}
    report = build([classification_folder], tmp_path / "report.html")
    open_page(browser, report)
    headline = text_of(browser.find_element(By.CSS_SELECTOR, "h1#headline"))
    assert result_line(summary) in headline, (result_line(summary), headline)
    assert sorted(r.get_attribute("data-index") for r in rows(browser)) == sorted(samples)
    for row in rows(browser):
        sample = samples[row.get_attribute("data-index")]
        detail = open_detail(browser, row)
        answers = detail.find_elements(By.CSS_SELECTOR, ".answer")
        assert len(answers) == len(sample["predictions"]), ([text_of(a) for a in answers], sample["predictions"])
        assert all(a.is_displayed() for a in answers)
    assert_not_blank(screenshot(browser, tmp_path, "classification_report"))
    assert fetched_elsewhere(browser) == []
    assert console_problems(browser) == []


def test_two_runs_make_a_comparison(browser, posix_folder, chat_folder, tmp_path):
    """A report of two runs has a #compare section that shows, and it holds each run's POSIX."""
    from selenium.webdriver.common.by import By

    report = build([posix_folder, chat_folder], tmp_path / "report.html")
    open_page(browser, report)
    compare = browser.find_element(By.CSS_SELECTOR, "section#compare")
    browser.execute_script("arguments[0].scrollIntoView()", compare)
    assert compare.is_displayed()
    shown = text_of(compare)
    for folder in (posix_folder, chat_folder):
        assert f"{summary_of(folder)['psi']['posix']:.4f}" in shown, (folder.name, shown[:500])
    # the grid: the one setting the runs differ in (the chat template) as its rows; a value opens its run's section
    grid = browser.find_element(By.CSS_SELECTOR, "section#grid")
    assert "POSIX by chat_template" in text_of(grid)
    link = grid.find_element(By.CSS_SELECTOR, 'a[href="#run-2"]')
    assert text_of(link) == f"{summary_of(chat_folder)['psi']['posix']:.4f}"
    click(browser, link)
    assert browser.execute_script("return location.hash") == "#run-2"
    top = browser.execute_script("return document.getElementById('run-2').getBoundingClientRect().top")
    assert -1 < top < browser.execute_script("return window.innerHeight"), top  # at run 2's section (sub-pixel)
    assert console_problems(browser) == []


def test_a_failed_gate_shows_its_failing_rows_and_the_sets_behind_them(browser, posix_folder, tmp_path):
    """A report built with a checked gate that the run fails (max_posix below its POSIX) has a #gate section with a
    .fail row for max_posix; a click on the first set it names behind the failure opens that set's detail."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    from posixlab.gate import GateConfig, check_gate

    summary = summary_of(posix_folder)
    gate_rows = check_gate(summary, GateConfig(max_posix=summary["psi"]["posix"] / 2))
    assert [r.passed for r in gate_rows] == [False]
    report = build([posix_folder], tmp_path / "report.html", gate_rows)
    open_page(browser, report)
    gate = browser.find_element(By.CSS_SELECTOR, "section#gate")
    assert gate.is_displayed()
    failed = gate.find_elements(By.CSS_SELECTOR, "tr.fail")
    assert len(failed) == 1 and "max_posix" in text_of(failed[0]), [text_of(f) for f in failed]
    links = failed[0].find_elements(By.CSS_SELECTOR, 'a[href^="#unit-"]')
    if links:  # the page names the highest-ψ sets behind a failed max_posix
        detail = browser.find_element(By.ID, links[0].get_attribute("href").split("#")[1])
        assert not detail.is_displayed()
        click(browser, links[0])
        WebDriverWait(browser, WAIT).until(lambda d: detail.is_displayed(), "a gate's set link opened nothing")
    assert console_problems(browser) == []


def test_a_partial_run_is_flagged_and_shows_the_sets_written(browser, posix_folder, tmp_path):
    """A run folder without summary.json (a run stopped after 2 of its sets) gets the #partial banner, and its units
    table has the 2 sets written."""
    from selenium.webdriver.common.by import By

    folder = tmp_path / "stopped"
    folder.mkdir()
    written = (posix_folder / "sets.jsonl").read_text(encoding="utf-8").splitlines()[:2]
    (folder / "sets.jsonl").write_text("\n".join(written) + "\n", encoding="utf-8")
    report = build([folder], tmp_path / "report.html")
    open_page(browser, report)
    assert browser.find_element(By.CSS_SELECTOR, "#partial").is_displayed()
    assert sorted(r.get_attribute("data-index") for r in rows(browser)) == \
        sorted(str(json.loads(line)["set_index"]) for line in written)
    assert console_problems(browser) == []


def test_a_javascript_error_is_caught(browser, tmp_path):
    """The console check of these tests catches a page's uncaught exception and a failed load: a page that throws,
    and one that asks for a missing script, both leave SEVERE entries (so an empty list above means a clean page)."""
    page = tmp_path / "broken.html"
    page.write_text('<!doctype html><html><body data-report="posixlab"><script src="missing.js"></script>'
                    '<script>null.boom();</script></body></html>', encoding="utf-8")
    open_page(browser, page)
    messages = [entry["message"] for entry in console_problems(browser)]
    assert any("boom" in m for m in messages), messages
    assert any("missing.js" in m for m in messages), messages
