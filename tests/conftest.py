"""Shared fixtures. One packaged model (SmolLM2) is loaded once per test session and shared by every test."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent  # posixlab is installed (requirements.txt: -e .), experiments/ is
# reached as a package from the repository root, where `python -m pytest` runs
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# runs log to W&B offline unless a test says otherwise: WANDB_MODE sets logger.mode, and the machine's own (a
# developer's WANDB_MODE=disabled or online) must not change what the tests see
os.environ["WANDB_MODE"] = "offline"

from hub_fixtures import healthy_hub, hub  # noqa: E402,F401 - the hub stand-in's fixtures (tests/hub_fixtures.py)
from slurm_fixtures import slurm_cluster  # noqa: E402,F401 - a one-node SLURM cluster (tests/slurm_fixtures.py)
from browser_fixtures import browser  # noqa: E402,F401 - headless Chromium via Selenium (tests/browser_fixtures.py)


@pytest.fixture(scope="session")
def lm():
    from posixlab.models import ModelSpec, load_model

    return load_model(ModelSpec("smollm2-135m-instruct", "packaged", "smollm2-135m-instruct"))


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


# the test-only plug-ins register a backend, a task and a variant type when imported: only tests/test_plugins.py imports
# them (and unregisters them after), so that pytest's doctest collection leaves every other test the registries
collect_ignore = ["plugin_backend.py", "plugin_task.py", "plugin_variant.py"]

MODEL_FIXTURES = {"lm", "small_results", "llama_server", "hub"}  # a test using one of these (directly or through a fixture) loads a model


def pytest_collection_modifyitems(config, items):
    # Guard: the project's tests never read the ../shared folder that sits beside the developers' checkout.
    for item in items:
        assert "shared" not in Path(str(item.fspath)).relative_to(ROOT).parts[:1]
        # a test that loads the packaged model is slow, marked or not: it never runs in the fast lane (-m "not slow")
        if MODEL_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def small_results(lm, tmp_path_factory) -> Path:
    """A small saved sweep, written by real runs of the packaged model: MMLU (all four variant types at 0 shots,
    spelling at 1 shot), format variants at 0 shots, the Alpaca and BBH fixtures; 4 sets of N = 4 each (N = 6 for
    mixtures: 2 + 2 + 2). Paraphrases come from a user file, so no
    rephraser runs. Every table and figure can be drawn from it."""
    import json

    from posixlab.data import DatasetSpec, load_items, select_items
    from posixlab.runner import run
    from posixlab.tasks.posix import PosixConfig
    from posixlab.rephrase import RephraserConfig

    root = tmp_path_factory.mktemp("results")
    fixtures = ROOT / "tests" / "fixtures"
    mmlu = DatasetSpec("mmlu")
    alpaca = DatasetSpec("alpaca", source="path", path=str(fixtures / "alpaca_fixture.jsonl"))
    bbh = DatasetSpec("bbh", source="path", path=str(fixtures / "bbh_fixture.jsonl"), variants=["template"])
    paraphrases = root / "paraphrases.jsonl"
    with open(paraphrases, "w") as handle:
        for spec in (mmlu, alpaca):
            for item in select_items(load_items(spec), 4, 0):
                rewrites = [f"In other words ({i}): {item.question}" for i in range(20)]
                handle.write(json.dumps({"original": item.question, "paraphrases": rewrites}) + "\n")
    # synthetic rewrites ("In other words (3): ..."): the quality checks would rightly refuse their added numbers
    rephraser = RephraserConfig(backend="file", path=str(paraphrases), validate=False)
    cells = [(mmlu, v, 0) for v in ("spelling", "template", "paraphrase", "mixture", "format")] + \
            [(mmlu, "spelling", 1)] + \
            [(alpaca, v, 0) for v in ("template", "mixture")] + [(bbh, "template", 0)]
    for number, (spec, variant, shots) in enumerate(cells):
        out = root / "sweep" / f"{number}_{spec.name}_{variant}_{shots}shot"
        run(PosixConfig(model=lm_spec(), dataset=spec, variant=variant, num_sets=4, shots=shots,
                      num_variants=5 if variant == "mixture" else 3,
                      max_new_tokens=5, output_dir=str(out), score_cache=False, rephraser=rephraser), lm=lm,
            progress=False)
    return root / "sweep"


def lm_spec():
    from posixlab.models import ModelSpec

    return ModelSpec("smollm2-135m-instruct", "packaged", "smollm2-135m-instruct")


LLAMA_INSTALL = ('CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX512=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_TILE=OFF" '
                 'pip install "llama-cpp-python[server]==0.3.36"')
LLAMA_MODEL = "qwen2.5-coder-0.5b-instruct"  # the packaged GGUF the server runs, and the name it serves it under


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory):
    """A real OpenAI-compatible server on loopback: llama-cpp-python's, with the packaged Qwen2.5-Coder-0.5B GGUF,
    one for the whole session (the rephraser's and the chat backend's tests share it). It serves one request at a
    time, so its answers at temperature 0 are deterministic."""
    import subprocess
    import sys

    from posixlab.models.assets import PACKAGED_MODELS, assemble_gguf

    # the README's way to find the file: `posixlab gguf-path qwen2.5-coder-0.5b-instruct`
    found = subprocess.run([sys.executable, "-m", "posixlab", "gguf-path", LLAMA_MODEL],  # from any folder
                           capture_output=True, text=True, cwd=tmp_path_factory.mktemp("elsewhere"))
    assert found.returncode == 0, found.stderr
    gguf = Path(found.stdout.strip())
    assert gguf == assemble_gguf(PACKAGED_MODELS[LLAMA_MODEL]) and gguf.is_file()
    with llama_cpp_server(gguf, LLAMA_MODEL, tmp_path_factory.mktemp("llama")) as base_url:
        yield base_url


@contextlib.contextmanager
def llama_cpp_server(gguf: Path, alias: str, log_dir: Path, *extra: str):
    """llama-cpp-python's server for ``gguf`` (served as ``alias``; ``extra``: its own options) on a free port of
    loopback, until the block ends: its ``/v1`` URL."""
    import importlib.util
    import subprocess
    import sys
    import time
    import urllib.request

    from chat_server import free_port

    if importlib.util.find_spec("llama_cpp") is None:
        pytest.fail(f"llama-cpp-python is not installed; these tests need its server. Install it with: {LLAMA_INSTALL}")
    port = free_port()
    log = log_dir / "server.log"  # a file, not a pipe: a full pipe would block the server
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--model_alias",
                                 alias, "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "2048", *extra],
                                stdout=out, stderr=out)
    try:
        deadline = time.monotonic() + 180
        while True:
            if proc.poll() is not None:
                pytest.fail(f"llama_cpp.server exited with status {proc.returncode}:\n{log.read_text()[-3000:]}\n"
                            f"(if a module is missing: {LLAMA_INSTALL})")
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2).read()
                break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(f"llama_cpp.server did not answer /v1/models in 180 s:\n{log.read_text()[-3000:]}")
                time.sleep(0.5)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def rephrasings_file(tmp_path_factory):
    """Two rephrasings of the mmlu_letters task sentence, as a user's paraphrase file (rephraser=file)."""
    from posixlab.classification_prompts import TASKS

    path = tmp_path_factory.mktemp("reph") / "rephrasings.jsonl"
    path.write_text(json.dumps({"original": TASKS["mmlu_letters"], "paraphrases": [
        "Pick the right answer to this multiple-choice question.",
        "Select the correct option for the question below."]}) + "\n", encoding="utf-8")
    return path
