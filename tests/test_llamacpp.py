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
    assert "dry run · mine · posix" in proc.stdout  # named by its file's folder (conf/model/gguf.yaml), not "gguf"


@pytest.mark.slow
def test_the_gguf_tokenizer_is_read_from_the_file_once_then_from_its_saved_copy(tmp_path):
    import json

    from posixlab.llamacpp.model import gguf_file, gguf_tokenizer
    from posixlab.models.causal_lm import TOKENIZER_PROBES

    path, identity = gguf_file(PACKAGED)
    first = gguf_tokenizer(path, identity, tmp_path)
    saved = list((tmp_path / "gguf-tokenizers").iterdir())
    assert len(saved) == 1 and (saved[0] / "tokenizer.json").is_file()
    config = json.loads((saved[0] / "tokenizer_config.json").read_text())
    (saved[0] / "tokenizer_config.json").write_text(json.dumps({**config, "model_max_length": 4321}))  # a mark
    again = gguf_tokenizer(path, identity, tmp_path)
    assert again.model_max_length == 4321  # read from the saved copy, not the file
    chat = [{"role": "user", "content": "What is 2+2?"}]
    for special in (True, False):
        assert [again.encode(p, add_special_tokens=special) for p in TOKENIZER_PROBES] == \
               [first.encode(p, add_special_tokens=special) for p in TOKENIZER_PROBES]
    assert again.apply_chat_template(chat, tokenize=False) == first.apply_chat_template(chat, tokenize=False)
    assert again.all_special_tokens == first.all_special_tokens and again.eos_token_id == first.eos_token_id
    (saved[0] / "tokenizer.json").write_text("{cut sho")  # a damaged copy: read from the file again, saved anew
    third = gguf_tokenizer(path, identity, tmp_path)
    assert third.encode(TOKENIZER_PROBES[0]) == first.encode(TOKENIZER_PROBES[0]) and third.model_max_length != 4321
    assert json.loads((saved[0] / "tokenizer.json").read_text())["model"]
    assert gguf_tokenizer(path, {**identity, "size": 1}, tmp_path) is not None  # another file: a copy of its own
    assert len(list((tmp_path / "gguf-tokenizers").iterdir())) == 2


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
    with pytest.raises(ModelUnavailableError, match="a file on the Hugging Face Hub also needs model.source=hub"):
        gguf_file(spec("TheBloke/Llama-2-7B-GGUF:Q4_K_M"))


def test_a_gguf_file_split_in_parts_goes_by_its_first_part_with_every_part_beside_it(tmp_path):
    from posixlab.api import resolve_model
    from posixlab.llamacpp.model import gguf_file

    folder = tmp_path / "70b"
    folder.mkdir()
    spec = lambda path: ModelSpec("mine", "local", str(path), backend="llamacpp")  # noqa: E731
    parts = [folder / f"m.Q8_0-0000{n}-of-00003.gguf" for n in (1, 2, 3)]
    for n, part in enumerate(parts):
        part.write_bytes(b"GGUF" + bytes(10 * n))
    path, identity = gguf_file(spec(folder))  # one file, in three parts
    assert path == parts[0] and identity["file"] == parts[0].name and identity["parts"] == 3
    assert identity["size"] == 4 * 3 + 30 and identity["mtime_ns"] == max(p.stat().st_mtime_ns for p in parts)
    assert gguf_file(spec(parts[2])) == (path, {**identity, "path": str(parts[2])})  # any part names the file
    assert resolve_model(str(parts[1]), None)[0].name == "m.Q8_0"  # named as the file, not as a part of it
    parts[1].unlink()
    with pytest.raises(ModelUnavailableError, match="lacks m.Q8_0-00002-of-00003.gguf of the 3 parts of m.Q8_0-0000"):
        gguf_file(spec(parts[0]))
    (folder / "m.Q4_0.gguf").write_bytes(b"GGUF")
    with pytest.raises(ModelUnavailableError, match="holds 2 .gguf files"):
        gguf_file(spec(folder))


@pytest.mark.slow
def test_a_gguf_file_split_in_parts_scores_and_decodes_bit_for_bit_as_the_whole_file(gguf_lm, tmp_path):
    from gguf_parts import split_gguf
    from posixlab.llamacpp.engine import LlamaCppEngine
    from posixlab.llamacpp.model import gguf_file, open_gguf

    parts = split_gguf(gguf_file(PACKAGED)[0], tmp_path, "SmolLM2-135M-Instruct.Q4_1")
    assert len(parts) == 3 and sum(p.stat().st_size for p in parts) > gguf_file(PACKAGED)[0].stat().st_size * 0.99
    split = open_gguf(ModelSpec("parts", "local", str(parts[2]), backend="llamacpp"), tmp_path / "cache")
    try:
        assert split.identity["parts"] == 3 and split.identity["file"] == parts[0].name
        questions = ["What is 2 + 3? Answer:", "Compute 2 + 3. Answer:", "Say five:"]
        results = []
        for lm in (gguf_lm, split):
            sets = [[lm.encode(q) for q in questions]]
            labels = [[lm.encode(" 5", add_special_tokens=False), lm.encode(" six", add_special_tokens=False)]]
            results.append((sets, dict(LlamaCppEngine(lm, 6).score_sets(sets, labels))[0]))
        (whole_ids, whole), (split_ids, scores) = results
        assert split_ids == whole_ids and scores.responses == whole.responses
        assert scores.matrix.tolist() == whole.matrix.tolist()
        assert scores.candidates.tolist() == whole.candidates.tolist()
        assert scores.generation_logprobs == whole.generation_logprobs
    finally:
        split.close()


@pytest.mark.parametrize("spec, message", [
    (ModelSpec("m", "hub", "TheBloke/Llama-2-7B-GGUF:Q4:K", backend="llamacpp"), "is not a GGUF file on the Hugging"),
    (ModelSpec("m", "hub", "TheBloke/Llama-2-7B-GGUF/model.bin", backend="llamacpp"), "give OWNER/REPO:TAG"),
    (ModelSpec("m", "api", "gpt-4o", backend="llamacpp"), "a GGUF repository's file on the Hugging Face Hub"),
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
    with pytest.raises(ConfigError, match=f"missing.gguf: no file at {tmp_path / 'missing.gguf'} "
                                          f"\\({tmp_path} holds tiny-q4.gguf\\); give a model folder"):
        resolve_model(str(tmp_path / "missing.gguf"), None)  # a typo in a file's name: what is there instead
    with pytest.raises(ConfigError, match="a local folder, a .gguf file, a Hugging Face Hub id"):
        resolve_model("no-such-model", None)
    # a GGUF repository's file on the hub: by tag or by name
    spec, _ = resolve_model("me/SmolLM2-GGUF:Q4_1", None)
    assert spec == ModelSpec("SmolLM2-GGUF-Q4_1", "hub", "me/SmolLM2-GGUF:Q4_1", backend="llamacpp")
    spec, _ = resolve_model("me/SmolLM2-GGUF/q/smol.Q4_1.gguf", None)
    assert (spec.name, spec.source, spec.backend) == ("smol.Q4_1", "hub", "llamacpp")


# --- GGUF repositories on the Hugging Face Hub (the hub stand-in on loopback, the real huggingface_hub) -------------
GGUF_REPO, GATED_REPO, PARTS_REPO, PLAIN_REPO = ("posixlab-test/SmolLM2-135M-Instruct-GGUF", "posixlab-test/gated-GGUF",
                                                 "posixlab-test/parts-GGUF", "posixlab-test/plain")
SPLIT_REPO, SPLIT_STEM = "posixlab-test/SmolLM2-135M-Instruct-split-GGUF", "SmolLM2-135M-Instruct.Q4_1"


@pytest.fixture(scope="module")
def gguf_hub(tmp_path_factory):
    """A hub stand-in serving the packaged SmolLM2 file as a GGUF repository's (open, and gated), and split in three
    parts; a repository of a file with a part missing and two quantizations, and one of a transformers checkpoint
    without GGUF files."""
    from gguf_parts import split_gguf
    from hub_fixtures import TOKEN
    from hub_server import HubServer
    from posixlab.llamacpp.model import gguf_file

    root, file = tmp_path_factory.mktemp("gguf_hub"), gguf_file(PACKAGED)[0]
    folders = {repo: root / repo.split("/")[1] for repo in (GGUF_REPO, GATED_REPO, PARTS_REPO, PLAIN_REPO, SPLIT_REPO)}
    for repo in (GGUF_REPO, GATED_REPO):
        folders[repo].mkdir()
        (folders[repo] / file.name).symlink_to(file)
        (folders[repo] / "README.md").write_text("# SmolLM2-135M-Instruct, GGUF (test stand-in)\n")
    folders[SPLIT_REPO].mkdir()
    split_gguf(file, folders[SPLIT_REPO], SPLIT_STEM)
    folders[PARTS_REPO].mkdir()
    for name in ("m.Q4_K_M-00001-of-00003.gguf", "m.Q4_K_M-00003-of-00003.gguf", "m.Q8_0.gguf", "m.Q8_K.gguf"):
        (folders[PARTS_REPO] / name).write_bytes(b"GGUF" + bytes(28))
    folders[PLAIN_REPO].mkdir()
    (folders[PLAIN_REPO] / "config.json").write_text("{}")
    server = HubServer(token=TOKEN)
    for repo, folder in folders.items():
        server.add("model", repo, folder, gated=repo == GATED_REPO)
    yield server
    server.close()


def _run_hub_gguf(tmp_path, env, path: str, name: str):
    return subprocess.run([sys.executable, str(ROOT / "run.py"), "model=gguf", "model.source=hub", f"model.path={path}",
                           "task.num_sets=1", "logger=none", "report=false", "embedding=none", "progress=false",
                           f"hydra.run.dir={tmp_path / name}"], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)


@pytest.mark.slow
def test_a_gguf_file_from_the_hub_downloads_once_and_later_runs_read_it_offline(gguf_hub, tmp_path):
    import json

    from hub_fixtures import closed_port, hub_env
    from posixlab.models.assets import PACKAGED_MODELS

    env = hub_env(tmp_path / "hf", gguf_hub.url, POSIXLAB_CACHE=str(tmp_path / "posixlab"))
    gguf_hub.requests.clear()
    first = _run_hub_gguf(tmp_path, env, f"{GGUF_REPO}:q4_1", "first")  # the tag, in any case
    assert first.returncode == 0, first.stderr[-3000:]
    posix = [line for line in first.stdout.splitlines() if line.startswith("POSIX = ")]
    assert len(posix) == 1 and "downloaded from" in first.stderr
    got = [(method, path) for method, path, status in gguf_hub.requests if path.endswith(".gguf")]
    file_url = f"/{GGUF_REPO}/resolve/main/SmolLM2-135M-Instruct.Q4_1.gguf"
    assert got[-1] == ("GET", file_url) and got.count(("GET", file_url)) == 1  # downloaded once
    assert got.count(("HEAD", file_url)) == 2  # asked once before any work (the download's own HEAD is the other)
    assert sum(path.startswith(f"/api/models/{GGUF_REPO}") for _, path, _ in gguf_hub.requests) == 1  # its files, once
    model = json.loads((tmp_path / "first" / "summary.json").read_text())["model"]
    assert model["commit"] == gguf_hub.repos[("model", GGUF_REPO)].sha and model["backend"] == "llamacpp"
    assert model["file"] == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert model["name"] == "SmolLM2-135M-Instruct-GGUF-q4_1"  # named by its path (conf/model/gguf.yaml), not "gguf"
    assert model["gguf_sha256"] == PACKAGED_MODELS["smollm2-135m-instruct"].sha256  # the Hub's name for its bytes

    # no hub at all (nothing listens there), no token: the cached file, the same scores from the score cache
    offline = hub_env(tmp_path / "hf", f"http://127.0.0.1:{closed_port()}", token=None,
                      POSIXLAB_CACHE=str(tmp_path / "posixlab"))
    second = _run_hub_gguf(tmp_path, offline, f"{GGUF_REPO}:q4_1", "second")
    assert second.returncode == 0, second.stderr[-3000:]
    assert [line for line in second.stdout.splitlines() if line.startswith("POSIX = ")] == posix
    summary = json.loads((tmp_path / "second" / "summary.json").read_text())
    assert summary["model"] == model and summary["compute"]["sets_from_cache"] == 1
    found = subprocess.run([sys.executable, "-m", "posixlab", "gguf-path", f"{GGUF_REPO}:Q4_1"], env=offline,
                           capture_output=True, text=True, timeout=120, cwd=tmp_path)  # for llama.cpp's server
    assert found.returncode == 0, found.stderr[-2000:]
    file = __import__("pathlib").Path(found.stdout.strip())
    assert file.name == model["file"] and file.resolve().name == model["gguf_sha256"]
    assert (tmp_path / "hf") in file.parents


@pytest.mark.slow
def test_a_gguf_file_split_in_parts_on_the_hub_downloads_every_part_once_and_runs(gguf_hub, tmp_path):
    import hashlib
    import json

    from hub_fixtures import closed_port, hub_env

    env = hub_env(tmp_path / "hf", gguf_hub.url, POSIXLAB_CACHE=str(tmp_path / "posixlab"))
    names = [f"{SPLIT_STEM}-0000{n}-of-00003.gguf" for n in (1, 2, 3)]
    gguf_hub.requests.clear()
    run = _run_hub_gguf(tmp_path, env, f"{SPLIT_REPO}:Q4_1", "run")
    assert run.returncode == 0, run.stderr[-3000:]
    assert f"{names[0]} and its other 2 parts downloaded from" in run.stderr
    assert len([line for line in run.stdout.splitlines() if line.startswith("POSIX = ")]) == 1
    got = sorted(path for method, path, _ in gguf_hub.requests if method == "GET" and path.endswith(".gguf"))
    commit = gguf_hub.repos[("model", SPLIT_REPO)].sha  # the parts of one commit, downloaded side by side
    assert got == [f"/{SPLIT_REPO}/resolve/{commit}/{name}" for name in names]  # every part, once
    model = json.loads((tmp_path / "run" / "summary.json").read_text())["model"]
    served = [gguf_hub.repos[("model", SPLIT_REPO)].folder / name for name in names]
    assert model["file"] == names[0] and model["parts"] == 3
    assert model["name"] == "SmolLM2-135M-Instruct-split-GGUF-Q4_1"
    assert model["size"] == sum(part.stat().st_size for part in served)
    assert model["gguf_sha256"] == [hashlib.sha256(part.read_bytes()).hexdigest() for part in served]

    offline = hub_env(tmp_path / "hf", f"http://127.0.0.1:{closed_port()}", token=None)  # the cache alone
    found = subprocess.run([sys.executable, "-m", "posixlab", "gguf-path", f"{SPLIT_REPO}/{names[1]}"], env=offline,
                           capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert found.returncode == 0, found.stderr[-2000:]
    first = __import__("pathlib").Path(found.stdout.strip())
    assert first.name == names[0] and all((first.parent / name).is_file() for name in names)


@pytest.mark.slow
def test_a_hub_gguf_path_that_picks_no_one_servable_file_stops_before_any_work_with_what_to_do(gguf_hub, tmp_path):
    import json

    from hub_fixtures import hub_env

    env = hub_env(tmp_path / "hf", gguf_hub.url, token=None, POSIXLAB_CACHE=str(tmp_path / "posixlab"))
    paths = {"quant": f"{GGUF_REPO}:Q8_0", "two": f"{PARTS_REPO}:Q8", "parts": f"{PARTS_REPO}:Q4_K_M",
             "plain": PLAIN_REPO, "typo": "posixlab-test/nope:Q4_K_M", "gated": f"{GATED_REPO}:Q4_1",
             "name": f"{PARTS_REPO}/m.Q8_0.gguf", "split": f"{SPLIT_REPO}:q4_1",
             "a part": f"{SPLIT_REPO}/{SPLIT_STEM}-00003-of-00003.gguf",
             "pinned": [f"{PARTS_REPO}:Q8_0", gguf_hub.repos[("model", PARTS_REPO)].sha],
             "unknown revision": [f"{PARTS_REPO}:Q8_0", "v9"],
             "offline": f"{GGUF_REPO}:Q4_1"}  # offline: the last asked
    code = ("import json, os, sys\nfrom posixlab.llamacpp.hub import check_hub_gguf\nfrom posixlab.models.loading "
            "import ModelSpec\nout = {}\nfor key, path in json.loads(sys.argv[1]).items():\n    if key == 'offline':\n"
            "        os.environ['HF_HUB_OFFLINE'] = '1'\n"
            "    path, revision = path if isinstance(path, list) else (path, None)\n"
            "    try:\n        out[key] = check_hub_gguf(ModelSpec('m', 'hub', path, revision, backend='llamacpp'))\n"
            "    except Exception as exc:\n        "
            "out[key] = type(exc).__name__ + ': ' + str(exc)\nprint(json.dumps(out))")
    proc = subprocess.run([sys.executable, "-c", code, json.dumps(paths)], env=env, capture_output=True, text=True,
                          timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    said = json.loads(proc.stdout.splitlines()[-1])
    assert said["quant"].startswith(f"ModelUnavailableError: {GGUF_REPO} holds no .gguf file whose names hold 'Q8_0'. "
                                    f"Its .gguf files: SmolLM2-135M-Instruct.Q4_1.gguf")
    assert said["two"].endswith("holds 2 .gguf files whose names hold 'Q8': m.Q8_0.gguf, m.Q8_K.gguf. Name one: "
                                f"model.path={PARTS_REPO}/FILE.gguf")
    assert said["parts"] == (f"ModelUnavailableError: {PARTS_REPO} holds m.Q4_K_M-00001-of-00003.gguf, the first of 3 "
                             f"parts of a GGUF file, but not m.Q4_K_M-00002-of-00003.gguf: llama.cpp needs every part. "
                             f"Pick another file, or another revision (model.revision)")
    assert said["split"] == said["a part"] == f"{SPLIT_STEM}-00001-of-00003.gguf"  # a file split in parts: its first
    assert f"{PLAIN_REPO} holds no .gguf file: give a repository of GGUF files" in said["plain"]
    assert "has no repository posixlab-test/nope (HTTP 404). Check model.path" in said["typo"]
    assert "it is a gated model and no token was sent (HF_TOKEN is not set)" in said["gated"]
    assert said["name"] == said["pinned"] == "m.Q8_0.gguf"  # the hub would serve it (at that commit)
    assert "it has no revision 'v9'. Set model.revision to a branch, tag or commit" in said["unknown revision"]
    assert "is not in the local cache and HF_HUB_OFFLINE is set" in said["offline"]

    gguf_hub.requests.clear()  # a hub that answers 500: asked once, not retried (huggingface_hub's backoff: 23 s)
    gguf_hub.fault("500", match="/api/models/")
    try:
        one = {"failing": f"{PARTS_REPO}:Q4_1"}
        proc = subprocess.run([sys.executable, "-c", code, json.dumps(one)], env=env, capture_output=True, text=True,
                              timeout=120, cwd=ROOT)
    finally:
        gguf_hub.clear()
    assert "ModelUnavailableError" in json.loads(proc.stdout.splitlines()[-1])["failing"], proc.stderr[-2000:]
    assert sum(path.startswith("/api/") for _, path, _ in gguf_hub.requests) == 1 and "Retry" not in proc.stderr

    gguf_hub.requests.clear()  # a whole run: one message, exit status 2, before any input is built or weights load
    proc = _run_hub_gguf(tmp_path, env, paths["quant"], "run")
    errors = [line for line in proc.stderr.splitlines() if line.startswith("posixlab error:")]
    assert proc.returncode == 2 and len(errors) == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert "holds no .gguf file whose names hold 'Q8_0'" in errors[0] and "in llama.cpp" not in proc.stderr
    assert not (tmp_path / "run" / "sets.jsonl").exists()
    assert not any(method == "GET" and path.endswith(".gguf") for method, path, _ in gguf_hub.requests)


@pytest.mark.slow
def test_a_rephraser_s_gguf_file_comes_from_the_hub_when_a_paraphrase_is_asked_for(gguf_hub, tmp_path):
    """rephraser=llamacpp rephraser.model=OWNER/REPO:TAG: made with no network (a rerun that finds every paraphrase
    never asks the hub), the file downloaded into the Hugging Face cache when the first reply is asked for."""
    import json

    from hub_fixtures import hub_env

    env = hub_env(tmp_path / "hf", gguf_hub.url, POSIXLAB_CACHE=str(tmp_path / "posixlab"))
    script = (f"import json; from posixlab.rephrase.config import RephraserConfig, make_rephraser\n"
              f"r = make_rephraser(RephraserConfig(backend='llamacpp', model='{GGUF_REPO}:q4_1'))\n"
              f"before = r._lm is None\n"
              f"replies = r.chat([{{'role': 'user', 'content': 'Rewrite: which planet is red?'}}], seed=3, n=2, "
              f"max_tokens=6)\n"
              f"print(json.dumps({{'name': r.name, 'identity': r.identity, 'before': before, 'replies': replies, "
              f"'file': r.lm.identity['file']}}))")
    gguf_hub.requests.clear()
    made = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300,
                          cwd=tmp_path)
    assert made.returncode == 0, made.stderr[-3000:]
    out = json.loads(made.stdout.strip().splitlines()[-1])
    assert out["name"] == "llamacpp:SmolLM2-135M-Instruct-GGUF-q4_1" and out["before"]  # nothing loaded when made
    assert out["identity"]["model"] == f"{GGUF_REPO}:q4_1" and out["identity"]["source"] == "hub"
    assert out["file"] == "SmolLM2-135M-Instruct.Q4_1.gguf" and len(out["replies"]) == 2
    assert [p for m, p, _ in gguf_hub.requests if m == "GET" and p.endswith(".gguf")] == \
        [f"/{GGUF_REPO}/resolve/main/SmolLM2-135M-Instruct.Q4_1.gguf"]  # downloaded once, into the HF cache
    assert list((tmp_path / "hf").rglob("SmolLM2-135M-Instruct.Q4_1.gguf"))


@pytest.mark.slow
def test_a_gguf_download_cut_off_part_way_is_one_message_and_the_next_try_completes(gguf_hub, tmp_path):
    from hub_fixtures import hub_env
    from posixlab.llamacpp.model import gguf_file

    env = hub_env(tmp_path / "hf", gguf_hub.url, POSIXLAB_CACHE=str(tmp_path / "posixlab"))
    size = gguf_file(PACKAGED)[0].stat().st_size
    gguf_path = [sys.executable, "-m", "posixlab", "gguf-path", f"{GGUF_REPO}:Q4_1"]
    gguf_hub.fault("stop", match=".gguf", method="GET", after_bytes=size // 3)  # a third of the file, then down
    try:
        cut = subprocess.run(gguf_path, env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path)
        assert cut.returncode == 2 and "Traceback" not in cut.stderr, cut.stderr[-3000:]
        assert "could not be downloaded from the Hugging Face Hub" in cut.stderr and "run again" in cut.stderr
        assert gguf_hub.down and not list((tmp_path / "hf").rglob("*.gguf"))  # no half file where a whole one is read
    finally:
        gguf_hub.clear()
    again = subprocess.run(gguf_path, env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    assert __import__("pathlib").Path(again.stdout.strip()).stat().st_size == size


@pytest.mark.slow
def test_a_split_gguf_download_cut_off_in_one_part_is_one_message_and_the_next_try_fetches_only_what_is_missing(
        gguf_hub, tmp_path):
    from hub_fixtures import hub_env

    env = hub_env(tmp_path / "hf", gguf_hub.url, POSIXLAB_CACHE=str(tmp_path / "posixlab"))
    names = [f"{SPLIT_STEM}-0000{n}-of-00003.gguf" for n in (1, 2, 3)]
    size = (gguf_hub.repos[("model", SPLIT_REPO)].folder / names[1]).stat().st_size
    gguf_path = [sys.executable, "-m", "posixlab", "gguf-path", f"{SPLIT_REPO}:Q4_1"]
    gguf_hub.fault("stop", match=names[1], method="GET", after_bytes=size // 2)  # the second part dies half way
    try:
        cut = subprocess.run(gguf_path, env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path)
        assert cut.returncode == 2 and "Traceback" not in cut.stderr, cut.stderr[-3000:]
        assert "could not be downloaded from the Hugging Face Hub" in cut.stderr and "run again" in cut.stderr
        assert not list((tmp_path / "hf").rglob(names[1]))  # no half part where a whole one is read
    finally:
        gguf_hub.clear()
    whole = {path.name for path in (tmp_path / "hf").rglob("*.gguf")}  # parts that finished before it died
    gguf_hub.requests.clear()
    again = subprocess.run(gguf_path, env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    first = __import__("pathlib").Path(again.stdout.strip())
    assert first.name == names[0] and all((first.parent / name).is_file() for name in names)
    fetched = sorted(path.rsplit("/", 1)[1] for method, path, _ in gguf_hub.requests
                     if method == "GET" and path.endswith(".gguf"))
    assert names[1] in fetched and fetched == sorted(set(names) - whole)  # what was missing, once each


# --- replies to chats: a rephraser's and a judge's ---------------------------------------------------------------
JUDGE_CHATS = [[{"role": "system", "content": "Answer yes or no."}, {"role": "user", "content": question}]
               for question in ("Is Paris in France?", "Is 7 an even number?")]


@pytest.mark.slow
def test_replies_to_chats_are_llama_cpp_s_own_and_a_seeded_sample_repeats(gguf_lm, reference):
    import torch

    from posixlab.backends import generate, replies_and_first_tokens
    from posixlab.openai_client import Generation

    for messages, (reply, tokens) in zip(JUDGE_CHATS, replies_and_first_tokens(gguf_lm, JUDGE_CHATS, Generation(8), 5)):
        ids = gguf_lm.encode(gguf_lm.apply_chat_template(messages), add_special_tokens=False)
        reference.reset()
        reference.eval(ids)  # a public pass of the whole chat from an empty cache
        first = torch.log_softmax(torch.from_numpy(np.array(reference.scores[len(ids) - 1])), dim=-1)
        values, indices = first.topk(5)
        assert tokens == [(gguf_lm.tokenizer.decode([i]), float(v)) for v, i in zip(values.tolist(), indices.tolist())]
        theirs = []
        for token in reference.generate(ids, temp=0.0, reset=True):  # llama-cpp-python's own greedy decoding
            theirs.append(token)
            if token in gguf_lm.eos_ids or len(theirs) == 8:
                break
        assert reply == gguf_lm.decode(theirs) and reply
        assert generate(gguf_lm, messages, Generation(8, n=2)) == [reply, reply]  # n greedy replies: the one reply
    sampled = Generation(12, temperature=1.0, n=3, seed=7)
    drawn = generate(gguf_lm, JUDGE_CHATS[0], sampled)
    assert len(drawn) == 3 and len(set(drawn)) > 1  # each reply from its own generator
    assert generate(gguf_lm, JUDGE_CHATS[0], sampled) == drawn  # a seeded request repeats
    assert generate(gguf_lm, JUDGE_CHATS[0], Generation(12, temperature=1.0, n=3, seed=8)) != drawn


@pytest.mark.slow
def test_a_run_is_judged_by_a_gguf_model_in_llama_cpp(small_results, tmp_path):
    import json
    import shutil

    from posixlab.judge import judge_run

    run = shutil.copytree(next(small_results.glob("*_alpaca_template_0shot")), tmp_path / "run")
    summary = judge_run(run, PACKAGED, sets=2, progress=False)  # opened through the backend, as --judge does
    assert summary["judge"]["identity"]["backend"] == "llamacpp" and summary["sets"] == 2
    rows = [json.loads(line) for line in (run / "judge.jsonl").read_text().splitlines()]
    asked = [v for r in rows for v in r["verdicts"] if not v["identical"]]
    assert asked and all(0 <= v["p_same"] <= 1 for v in asked)  # P(yes) from llama.cpp's first tokens
