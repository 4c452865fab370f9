"""ψ, label probabilities, constrained decoding and the scoring engine's batching in the fast lane: whole runs
(``posixlab.runner.run``) on the tiny test model (``tests/tiny_model.py``: random weights built in memory, no file),
each checked against an independent computation: one full forward pass per (prompt, continuation) pair
(``score_full``), one-sequence greedy decoding, the ψ formula written out here, ``json.loads``.

Tolerances: the engine reads every log-probability from batched, cached float32 passes, the reference from one full
float32 pass per pair; they differ by float32 rounding alone (about 7 significant digits of entries that reach 32
nats here: measured at most 4e-6 between engine and reference, 6e-6 between two batchings). We hold entries to 1e-4
(the engine's own contract, ``posixlab/scoring/engine.py``) and ψ, a mean of differences of two entries, to 2e-4. A
wrong, missing or extra token moves an entry by a whole token's log-probability: 0.5 nats or more here.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
import torch
from tiny_model import CLASSES, MAX_NEW, SPEC, build_tiny_lm, classifier_config, tiny_lm  # noqa: F401  (tiny_lm: the session fixture)

from posixlab.data import DatasetSpec
from posixlab.runner import run
from posixlab.scoring import EngineOptions, bruteforce_matrix
from posixlab.tasks import make_task
from posixlab.tasks.posix import PosixConfig

HEADER = "answer the question below in one word, in lowercase letters, with no punctuation at all.\n"  # 87 tokens
PROMPT_SETS = [
    {"id": "capital", "prompts": ["what is the capital of france?", "france's capital is?", "capital of france:"]},
    # a duplicate prompt (run once, the same answer twice)
    {"id": "color", "prompts": ["name a color.", "say a colour.", "name a color.", "pick one color!"]},
    {"id": "sum", "prompts": ["q: 2+2?\na:", "q: two plus two?\na:", "2+2="], "max_new_tokens": 3},
    # a long shared beginning (the engine runs it once for all three)
    {"id": "shared", "prompts": [HEADER + "who wrote hamlet?", HEADER + "hamlet's author?", HEADER + "hamlet: by?"]},
]


@pytest.fixture(autouse=True)
def one_thread():
    """Each test runs torch on one thread: the tiny model's passes are too small to share, and on a busy 2-core
    machine two threads wait for each other far longer than they compute (measured: a 120-token pass took 150 ms
    on two threads and 4 ms on one)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def eager():
    """torch.compile off: llguidance masks the logits with a kernel under ``torch.compile``, whose first call in a
    process compiles C++ (4 to 12 s measured on a busy 2-core machine); run eagerly, the same code takes
    microseconds, and the answers it lets through are the same."""
    with torch.compiler.set_stance("force_eager"):
        yield


def posix_config(tmp_path: Path, name: str, **overrides) -> PosixConfig:
    sets = tmp_path / "sets.jsonl"
    sets.write_text("".join(json.dumps(s) + "\n" for s in PROMPT_SETS), encoding="utf-8")
    return PosixConfig(model=SPEC, dataset=DatasetSpec("prompt_sets", source="path", path=str(sets)), variant="user",
                       num_sets=None, max_new_tokens=MAX_NEW, embedding=None, output_dir=str(tmp_path / name),
                       cache_dir=str(tmp_path / "cache"), **{"score_cache_dir": str(tmp_path / "scores"), **overrides})


def records(folder) -> list[dict]:
    lines = (Path(folder) / "sets.jsonl").read_text(encoding="utf-8").splitlines()
    return sorted((json.loads(line) for line in lines), key=lambda r: r["set_index"])


def paper_psi(matrix, lengths) -> float:
    """Chatterjee et al., Def. 3.3: the mean over ordered pairs i != j of |M[i, j] - M[j, j]| / L_j."""
    n = len(matrix)
    return sum(abs(matrix[i][j] - matrix[j][j]) / lengths[j] for i in range(n) for j in range(n)) / (n * (n - 1))


@pytest.mark.parametrize("chat_template", [False, True])
def test_psi_and_posix_equal_one_forward_pass_per_pair(tiny_lm, tmp_path, chat_template):  # noqa: F811
    """Every set's responses are the one-prompt greedy decodes, its matrix is one full pass per (prompt, response)
    pair, and its ψ and the run's POSIX are the paper's formula on that matrix; among the responses some end at the
    end-of-sequence token and some run to their set's limit (both paths of the engine's decoding); the long shared
    beginning of the last set runs once (the set's engine work is less than its prompts' tokens)."""
    summary = run(posix_config(tmp_path, "run", chat_template=chat_template), lm=tiny_lm, progress=False)
    tok = tiny_lm.tokenizer
    got = records(tmp_path / "run")
    assert [r["item_id"] for r in got] == [s["id"] for s in PROMPT_SETS]
    psis, ended, at_limit = [], 0, 0
    for given, record in zip(PROMPT_SETS, got):
        limit = given.get("max_new_tokens", MAX_NEW)
        if chat_template:
            texts = [tok.apply_chat_template([{"role": "user", "content": p}], tokenize=False,
                                             add_generation_prompt=True) for p in given["prompts"]]
            prompts = [tok(t, add_special_tokens=False).input_ids for t in texts]
        else:
            prompts = [tok(p).input_ids for p in given["prompts"]]
        assert [p["num_tokens"] for p in record["prompts"]] == [len(p) for p in prompts]
        responses = [r["token_ids"] for r in record["responses"]]
        for prompt, response in zip(prompts, responses):
            assert response == tiny_lm.greedy(tiny_lm.prefill(prompt), limit)[0]
            ended += response[-1] == tok.eos_token_id and len(response) < limit
            at_limit += len(response) == limit
        lengths = [len(r) for r in responses]
        assert record["lengths"] == lengths
        reference = bruteforce_matrix(tiny_lm, prompts, responses)
        entries = [(a, b) for row, ref in zip(record["logprob_matrix"], reference) for a, b in zip(row, ref)]
        assert all(abs(a - b) < 1e-4 for a, b in entries)
        psis.append(paper_psi(reference, lengths))
        assert abs(record["psi"] - psis[-1]) < 2e-4
    assert ended and at_limit, (ended, at_limit)
    assert got[-1]["stats"]["engine_tokens"] < sum(p["num_tokens"] for p in got[-1]["prompts"])
    assert abs(summary["psi"]["posix"] - sum(psis) / len(psis)) < 2e-4
    assert summary["model"] == tiny_lm.identity and summary["psi"]["num_sets"] == len(PROMPT_SETS)


def test_every_build_is_the_same_tiny_model(tiny_lm):  # noqa: F811
    """The identity that keys the score cache is the same on every build (it holds the weights' hash) and says it
    is the tiny test model; the tokenizer writes JSON one character a token and adds <s> unless told not to."""
    assert build_tiny_lm().identity == tiny_lm.identity
    assert tiny_lm.identity["name"] == "tiny-test-model" and "tiny test model" in tiny_lm.identity["note"]
    text = '{"label": "mixed"}'
    plain = tiny_lm.encode(text, add_special_tokens=False)
    assert len(plain) == len(text) and tiny_lm.decode(plain) == text
    assert tiny_lm.encode(text) == [tiny_lm.tokenizer.bos_token_id, *plain]


def counting_passes(monkeypatch, lm) -> list[int]:
    """The rows of every forward pass the engine runs on ``lm`` from now on (until the test ends)."""
    rows, forward = [], lm.forward_masked

    def counted(input_ids, *args, **kwargs):
        rows.append(int(input_ids.shape[0]))
        return forward(input_ids, *args, **kwargs)

    monkeypatch.setattr(lm, "forward_masked", counted)
    return rows


def without_stats(record: dict) -> dict:
    return {k: v for k, v in record.items() if k != "stats"}  # stats say how the numbers were computed


def test_batching_never_changes_a_record_and_a_rerun_is_served_by_the_cache(tiny_lm, tmp_path,  # noqa: F811
                                                                             monkeypatch):
    """The same sets run with every set in one wave and many rows per pass, and with one set per wave and one row
    per pass (the smallest budgets), give the same records: responses, lengths, matrices and ψ (to float32
    rounding). A rerun of the first run computes nothing (no forward pass, 0 tokens processed, every set from the
    score cache) and writes the first run's records bit for bit."""
    largest_set = max(len(s["prompts"]) for s in PROMPT_SETS)
    rows = counting_passes(monkeypatch, tiny_lm)
    wide = run(posix_config(tmp_path, "wide"), lm=tiny_lm, progress=False)
    wide_rows, rows[:] = list(rows), []
    small = EngineOptions(batch_tokens=1, memory_gb=0.002, max_wave_rows=1)
    narrow = run(posix_config(tmp_path, "narrow", engine=small, score_cache_dir=str(tmp_path / "other-scores")),
                 lm=tiny_lm, progress=False)
    narrow_rows, rows[:] = list(rows), []
    assert max(wide_rows) > largest_set  # several sets' prompts in one pass: one wave
    assert set(narrow_rows) == {1} and len(narrow_rows) > 2 * len(wide_rows)
    assert wide["compute"]["processed_tokens"] > 0 and narrow["compute"]["processed_tokens"] > 0
    for a, b in zip(records(tmp_path / "wide"), records(tmp_path / "narrow"), strict=True):
        assert [r["token_ids"] for r in a["responses"]] == [r["token_ids"] for r in b["responses"]]
        assert a["lengths"] == b["lengths"] and a["prompts"] == b["prompts"]
        assert a["psi"] == pytest.approx(b["psi"], abs=2e-4)
        for row_a, row_b in zip(a["logprob_matrix"], b["logprob_matrix"]):
            assert row_a == pytest.approx(row_b, abs=1e-4)

    again = run(posix_config(tmp_path, "again"), lm=tiny_lm, progress=False)
    assert rows == [] and again["engine"]["forward_tokens"] == 0
    assert again["compute"]["processed_tokens"] == 0 and again["compute"]["sets_from_cache"] == len(PROMPT_SETS)
    assert [without_stats(r) for r in records(tmp_path / "again")] == \
        [without_stats(r) for r in records(tmp_path / "wide")]
    assert again["psi"]["posix"] == wide["psi"]["posix"]


def run_recording_requests(cfg, lm) -> tuple[dict, list[dict], dict]:
    """Run ``cfg``; return its summary, its sample records and the requests the run built for each sample."""
    task = make_task(cfg)
    built, requests = {}, task.requests

    def recorded(sample, model):
        built[sample.sample_id] = requests(sample, model)
        return built[sample.sample_id]

    task.requests = recorded
    summary = run(task, lm=lm, progress=False)
    lines = (Path(cfg.output_dir) / "samples.jsonl").read_text(encoding="utf-8").splitlines()
    return summary, sorted((json.loads(line) for line in lines), key=lambda r: r["sample_index"]), built


def softmax(values: list[float]) -> list[float]:
    top = max(values)
    weights = [math.exp(v - top) for v in values]
    return [w / sum(weights) for w in weights]


def test_label_probs_are_the_softmax_of_one_forward_pass_per_label(tiny_lm, tmp_path):  # noqa: F811
    """probability=label_probs: each rephrasing's class probabilities are the softmax over the classes of
    log P(" <class>" | prompt), one full forward pass per class; a sample's distribution is their mean (N/A gets
    nothing), sums to 1, and each prediction is the most probable class."""
    summary, got, built = run_recording_requests(classifier_config(tmp_path, probability="label_probs"), tiny_lm)
    assert summary["num_samples"] == 3 and summary["classes"] == [*CLASSES, "N/A"]
    labels = [tiny_lm.tokenizer(f" {c}", add_special_tokens=False).input_ids for c in CLASSES]
    for record in got:
        requests = built[record["sample_id"]]
        assert len(requests) == 3 == len(record["label_logprobs"])
        expected = []
        for request, logprobs, prediction in zip(requests, record["label_logprobs"], record["predictions"],
                                                 strict=True):
            assert request.candidates == labels
            reference = [tiny_lm.score_full(request.ids[0], label) for label in labels]
            assert logprobs == pytest.approx(reference, abs=1e-4)
            expected.append(softmax(reference))
            assert prediction["label"] == CLASSES[max(range(3), key=reference.__getitem__)]
        mean = [sum(p[k] for p in expected) / len(expected) for k in range(3)]
        assert record["distribution"] == pytest.approx([*mean, 0.0], abs=1e-6)
        assert sum(record["distribution"]) == pytest.approx(1.0, abs=1e-12)


def test_structured_answers_are_objects_of_the_schema_though_free_answers_are_gibberish(tiny_lm,  # noqa: F811
                                                                                        tmp_path, eager):
    """strategy=structured in process: every answer held to the schema by llguidance is a JSON object with just the
    label field and one of the classes as its value, while the same prompt's free greedy answer is no JSON at all;
    each answer is recorded under the class it names, with no failure."""
    summary, got, built = run_recording_requests(
        classifier_config(tmp_path, num_samples=2, num_rephrasings=2, strategy="structured"), tiny_lm)
    assert summary["structured"]["failures"]["rate"] == 0.0
    for record in got:
        for request, prediction in zip(built[record["sample_id"]], record["predictions"], strict=True):
            answer = json.loads(prediction["answer"])
            assert list(answer) == ["label"] and answer["label"] in CLASSES
            assert prediction["label"] == answer["label"] and prediction["parse"]["failure"] is None
            free, _ = tiny_lm.greedy(tiny_lm.prefill(request.ids[0]), request.max_new_tokens)
            with pytest.raises(ValueError):
                json.loads(tiny_lm.decode(free))


def test_structured_label_probs_read_each_class_in_the_answer_s_label_slot(tiny_lm, tmp_path, eager):  # noqa: F811
    """strategy=structured with probability=label_probs: each class's log-probability is log P('<class>"' | prompt,
    the answer up to its label's opening quote), one full forward pass per class; the prediction is the most probable
    class and the sample's distribution the mean of the softmax over the classes."""
    summary, got, built = run_recording_requests(
        classifier_config(tmp_path, num_samples=2, num_rephrasings=2, strategy="structured", probability="label_probs"),
        tiny_lm)
    assert summary["probability"] == "label_probs"
    tok = tiny_lm.tokenizer
    for record in got:
        expected = []
        for request, logprobs, prediction in zip(built[record["sample_id"]], record["label_logprobs"],
                                                 record["predictions"], strict=True):
            slot = re.match(r'\{\s*"label"\s*:\s*"', prediction["answer"]).end()  # one token per character
            context = request.ids[0] + tok(prediction["answer"][:slot], add_special_tokens=False).input_ids
            reference = [tiny_lm.score_full(context, tok(f'{c}"', add_special_tokens=False).input_ids)
                         for c in CLASSES]
            assert logprobs == pytest.approx(reference, abs=1e-4)
            assert prediction["label"] == CLASSES[max(range(3), key=reference.__getitem__)]
            expected.append(softmax(reference))
        mean = [sum(p[k] for p in expected) / len(expected) for k in range(3)]
        assert record["distribution"] == pytest.approx([*mean, 0.0], abs=1e-6)


def test_a_structured_prompt_must_leave_room_for_the_structured_answer(tiny_lm, tmp_path, monkeypatch):  # noqa: F811
    """A structured answer may run longer than max_new_tokens (the JSON around the label): a prompt is checked against
    the context with the structured answer's length, before any forward pass, not with max_new_tokens."""
    from posixlab.errors import ContextLengthError

    task = make_task(classifier_config(tmp_path, num_samples=1, num_rephrasings=2, strategy="structured"))
    (sample,) = task.build_units(progress=False)
    task.prepare(tiny_lm, [sample], tmp_path)
    (request, *_) = task.requests(sample, tiny_lm)
    assert request.max_new_tokens > MAX_NEW
    monkeypatch.setattr(tiny_lm, "max_context", len(request.ids[0]) + MAX_NEW)  # room for MAX_NEW tokens only
    with pytest.raises(ContextLengthError, match=f"with max_new_tokens={request.max_new_tokens}"):
        task.requests(sample, tiny_lm)


def test_a_model_without_a_chat_template_is_refused_before_its_weights_load(tmp_path):
    """``chat_template=true`` on a base model is a config error said from its tokenizer alone, before any input is
    built or a weight loads (a 7B model's weights take minutes): the folder here holds a tokenizer without a template
    and no weights at all, which a load would fail on instead, with transformers' own error (a local folder's missing
    weights were once reported as a failed download from the hub)."""
    import transformers
    from tiny_model import build_tokenizer

    from posixlab.errors import ConfigError
    from posixlab.models.loading import ModelSpec

    folder = tmp_path / "base-model"
    tokenizer = build_tokenizer()
    tokenizer.chat_template = None
    tokenizer.save_pretrained(folder)
    transformers.LlamaConfig(vocab_size=len(tokenizer), num_hidden_layers=1).save_pretrained(folder)
    spec = ModelSpec("base-model", "local", str(folder))
    cfg = posix_config(tmp_path, "run", chat_template=True)
    cfg.model = spec
    with pytest.raises(ConfigError, match="model base-model has no chat template .* chat_template=false"):
        run(cfg, progress=False)
    assert not (tmp_path / "run").exists()
    cfg.chat_template = False  # the same folder, without a template asked for: the load itself fails (no weights)
    with pytest.raises(OSError, match="no file named model.safetensors"):  # not "could not be downloaded"
        run(cfg, progress=False)
