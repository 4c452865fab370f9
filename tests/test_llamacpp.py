"""The ``llamacpp`` backend: a GGUF file scored and decoded by llama.cpp in this process, held to llama-cpp-python's
own public passes (a new context, the whole sequence at once) and its own greedy decoding."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest

from posixlab.backends import check_model
from posixlab.errors import ConfigError, ModelUnavailableError
from posixlab.models.loading import ModelSpec, ServerSettings

ROOT = __import__("pathlib").Path(__file__).resolve().parent.parent
PACKAGED = ModelSpec("smollm2-135m-instruct", "packaged", "smollm2-135m-instruct", backend="llamacpp")


@pytest.fixture(scope="module")
def gguf_lm():
    from posixlab.llamacpp.model import open_gguf

    lm = open_gguf(PACKAGED)
    yield lm
    lm.close()


@pytest.fixture(scope="module")
def reference(gguf_lm):
    """A second llama.cpp model of the same file, used only through llama-cpp-python's public API."""
    from llama_cpp import Llama

    from posixlab.llamacpp.model import gguf_file

    llm = Llama(model_path=str(gguf_file(PACKAGED)[0]), n_ctx=512, logits_all=True, verbose=False)
    yield llm
    llm.close()


def one_pass_logprobs(llm, prompt: list[int], continuation: list[int]) -> list[float]:
    """log P(continuation | prompt) token by token from one public ``eval`` of the whole sequence, from empty."""
    import torch

    llm.reset()
    llm.eval(prompt + continuation[:-1])
    logits = torch.from_numpy(np.array(llm.scores[len(prompt) - 1:len(prompt) + len(continuation) - 1]))
    return torch.log_softmax(logits, dim=-1)[torch.arange(len(continuation)), torch.tensor(continuation)].tolist()


@pytest.mark.slow
def test_the_engine_equals_a_pass_per_pair_and_llama_cpp_s_own_greedy_decoding(gguf_lm, reference):
    from posixlab.llamacpp.engine import LlamaCppEngine

    questions = ["What is 2 + 3? Answer:", "What's 2+3? Answer:", "Compute 2 + 3. Answer:", "2 plus 3 is"]
    sets = [[gguf_lm.encode(q) for q in questions], [gguf_lm.encode(q) for q in questions[2:] + ["Say five:"]]]
    labels = [[gguf_lm.encode(" 5", add_special_tokens=False), gguf_lm.encode(" six", add_special_tokens=False)]] * 2
    engine = LlamaCppEngine(gguf_lm, 6)
    results = dict(engine.score_sets(sets, labels))
    assert sorted(results) == [0, 1] and engine.processed_tokens > 0
    for index, prompts in enumerate(sets):
        scores = results[index]
        for i, prompt in enumerate(prompts):
            # the greedy response: llama-cpp-python's own generation at temperature 0 (whole prompt, then a token a
            # pass), ending after the end-of-sequence token (kept) or at the budget
            theirs = []
            for token in reference.generate(prompt, temp=0.0, reset=True):
                theirs.append(token)
                if token in gguf_lm.eos_ids or len(theirs) == 6:
                    break
            assert scores.responses[i] == theirs, (index, i)
            assert scores.generation_logprobs[i] == one_pass_logprobs(reference, prompt, theirs)
            for j, response in enumerate(scores.responses):  # every entry: a pass of its own from an empty cache
                assert scores.matrix[i, j] == sum(one_pass_logprobs(reference, prompt, response)), (index, i, j)
            for k, label in enumerate(labels[index]):
                assert scores.candidates[i, k] == sum(one_pass_logprobs(reference, prompt, label))
    assert len({tuple(r) for s in results.values() for r in s.responses}) > 1  # not one answer for every prompt


@pytest.mark.slow
def test_a_user_s_sets_under_llama_cpp_repeat_bit_for_bit_from_the_cache_and_afresh(tmp_path):
    import posixlab

    sets = [["What is the capital of France?", "What's the capital of France?", "Name France's capital."],
            ["Is 7 a prime number?", "Is seven prime?", "7: prime or not?"]]
    run = lambda cache: posixlab.evaluate(sets, model=PACKAGED, max_new_tokens=4, score_cache=cache,  # noqa: E731
                                          score_cache_dir=str(tmp_path / "scores"), embedding=None, progress=False)
    first, cached, fresh = run(True), run(True), run(False)
    assert math.isfinite(first.posix) and first.posix > 0
    assert first.psi == cached.psi == fresh.psi and first.responses == fresh.responses
    assert [m.tolist() for m in first.matrices] == [m.tolist() for m in fresh.matrices]
    identity = first.summary["model"]
    assert identity["backend"] == "llamacpp" and identity["n_ctx"] == 8192 and identity["gguf_sha256"]


@pytest.mark.slow
def test_a_dry_run_plans_with_the_gguf_tokenizer_alone(tmp_path):
    proc = subprocess.run([sys.executable, str(ROOT / "run.py"), "model=gguf", f"model.path={_gguf_folder(tmp_path)}",
                           "dry_run=true", "task.num_sets=2", "logger=none", f"hydra.run.dir={tmp_path / 'run'}"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "dry run" in proc.stdout.lower() and "in llama.cpp" not in proc.stderr  # no weights were loaded


def _gguf_folder(tmp_path):
    from posixlab.llamacpp.model import gguf_file

    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "model.gguf").symlink_to(gguf_file(PACKAGED)[0])
    return folder


def test_a_local_gguf_file_is_found_named_and_fingerprinted(tmp_path):
    from posixlab.llamacpp.model import gguf_file

    folder = tmp_path / "models"
    folder.mkdir()
    spec = lambda path: ModelSpec("mine", "local", str(path), backend="llamacpp")  # noqa: E731
    with pytest.raises(ModelUnavailableError, match="holds 0 .gguf files"):
        gguf_file(spec(folder))
    (folder / "a.gguf").write_bytes(b"GGUF" + bytes(60))
    path, identity = gguf_file(spec(folder))  # a folder with one file: that file
    assert path == folder / "a.gguf" and identity["file"] == "a.gguf" and identity["size"] == 64
    assert gguf_file(spec(path))[0] == path and gguf_file(spec(path))[1]["size"] == 64
    (folder / "b.gguf").write_bytes(b"GGUF")
    with pytest.raises(ModelUnavailableError, match="holds 2 .gguf files; give the file itself"):
        gguf_file(spec(folder))
    (folder / "weights.bin").write_bytes(b"")
    with pytest.raises(ModelUnavailableError, match="is not a .gguf file"):
        gguf_file(spec(folder / "weights.bin"))


@pytest.mark.parametrize("spec, message", [
    (ModelSpec("llama2-7b", "hub", "meta-llama/Llama-2-7b-hf", backend="llamacpp"), "download the file and give"),
    (ModelSpec("gguf", "local", None, backend="llamacpp"), "model=gguf needs the file: model.path=FILE.gguf"),
    (ModelSpec("m", "packaged", "smollm2-135m-instruct", backend="llamacpp", adapter="some/lora"),
     "not on a llamacpp backend: merge .* converted to GGUF"),
    (ModelSpec("m", "packaged", "smollm2-135m-instruct", backend="llamacpp",
               server=ServerSettings(base_url="http://127.0.0.1:8000/v1")), "belong to a server backend"),
])
def test_settings_llama_cpp_cannot_honour_are_refused_before_anything_loads(spec, message):
    with pytest.raises(ConfigError, match=message):
        check_model(spec)


@pytest.mark.slow
def test_the_scoring_benchmark_s_llama_cpp_contender_runs_the_backend_s_engine():
    from experiments.benchmark_scoring import run_contender

    row = run_contender("e_llamacpp", "smollm2-135m-instruct", "mmlu", 1, 0, None)
    assert row["N"] == 21 and len(row["responses"][0]) == 21 and len(row["matrices"][0]) == 21
    assert row["seconds"] > 0 and row["forward_tokens"] > 0
    matrix = np.array(row["matrices"][0])
    assert np.isfinite(matrix).all() and (matrix <= 0).all()


def test_a_gguf_file_given_to_evaluate_by_path_runs_in_llama_cpp(tmp_path):
    from posixlab.api import resolve_model

    file = tmp_path / "tiny-q4.gguf"
    file.write_bytes(b"GGUF")
    spec, loaded = resolve_model(str(file), None)
    assert loaded is None and spec == ModelSpec("tiny-q4", "local", str(file.resolve()), backend="llamacpp")
    with pytest.raises(ConfigError, match="a local folder, a .gguf file or a Hugging Face Hub id"):
        resolve_model(str(tmp_path / "missing.gguf"), None)
