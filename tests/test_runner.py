"""The one run skeleton (posixlab/runner.py) and its seams: tasks, model capabilities, shards and merge for every
task, the classification API, the checks that stop a run before any work, and the defects it fixed."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from posixlab.backends import BACKENDS, Backend, check_capabilities, register
from posixlab.data import DatasetSpec
from posixlab.errors import ConfigError
from posixlab.models import ModelSpec
from posixlab.models.capabilities import GENERATE
from posixlab.rephrase import RephraserConfig
from posixlab.tasks import make_task
from posixlab.tasks.classification import ClassificationConfig, ClassificationData, classification_accuracy
from posixlab.tasks.posix import PosixConfig, PosixTask

SMOL = ModelSpec("smollm2-135m-instruct", "packaged", "smollm2-135m-instruct")


@pytest.fixture
def text_only_backend():
    """A backend that can only generate text (as a chat API can): registered for one test, then removed."""
    def never(*_):
        raise AssertionError("a text-only model must be refused before anything is loaded")

    register(Backend("text-only-test", frozenset({GENERATE}), never, never))
    yield "text-only-test"
    BACKENDS.pop("text-only-test")


def test_a_task_that_needs_scores_refuses_a_text_only_model_before_any_work(text_only_backend, tmp_path):
    from posixlab.runner import run

    spec = ModelSpec("api-model", "packaged", "smollm2-135m-instruct", backend=text_only_backend)
    cfg = PosixConfig(model=spec, dataset=DatasetSpec("mmlu"), num_sets=2, output_dir=str(tmp_path / "out"))
    with pytest.raises(ConfigError, match=r"cannot score.*ψ.*model\.backend=transformers, model\.backend=vllm"):
        run(cfg, progress=False)
    assert not (tmp_path / "out").exists(), "nothing was built or written"
    label_probs = ClassificationConfig(model=spec, probability="label_probs")
    with pytest.raises(ConfigError, match="probability=label_probs"):
        check_capabilities(make_task(label_probs).needs(), spec)
    check_capabilities(make_task(ClassificationConfig(model=spec)).needs(), spec)  # greedy answers: text is enough


def test_an_unknown_backend_is_named():
    from posixlab.runner import check

    with pytest.raises(ConfigError, match="unknown backend 'tgi'; choose one of transformers, vllm, chat"):
        check(make_task(PosixConfig(model=ModelSpec("m", "packaged", "m", backend="tgi"), dataset=DatasetSpec("mmlu"))))


@pytest.mark.slow  # run.py in a subprocess
def test_a_key_the_task_does_not_use_is_an_error_with_exit_status_2(root, tmp_path):
    result = subprocess.run([sys.executable, "run.py", "task=classification", "num_sets=3", "logger=none",
                             f"hydra.run.dir={tmp_path}"], cwd=root, capture_output=True, text=True, timeout=300)
    assert result.returncode == 2, result.stderr[-2000:]
    assert "task.num_sets is a setting of task=posix, not of task=classification" in result.stderr
    assert "(task=classification has its samples: dataset.num_samples)" in result.stderr




def _classification(rephrasings_file, out, **kw) -> ClassificationConfig:
    return ClassificationConfig(model=SMOL, data=ClassificationData(num_samples=5), num_rephrasings=3,
                                output_dir=str(out), score_cache=False,
                                rephraser=RephraserConfig(backend="file", path=str(rephrasings_file),
                                                          min_similarity=0.0), **kw)


@pytest.mark.slow
def test_classification_shards_merge_into_the_whole_run_and_the_api_gives_the_same(lm, tmp_path, rephrasings_file):
    import posixlab
    from posixlab.merge import merge_shards
    from posixlab.runner import run

    whole = run(_classification(rephrasings_file, tmp_path / "whole", seed=3), lm=lm, progress=False)
    for k in (1, 2):
        run(_classification(rephrasings_file, tmp_path / f"shard{k}", seed=3, shard=f"{k}/2"), lm=lm, progress=False)
    merged = merge_shards([tmp_path / "shard2", tmp_path / "shard1"], tmp_path / "merged")
    read = lambda folder: [json.loads(line) for line in (folder / "samples.jsonl").read_text().splitlines()]  # noqa
    by_index = sorted(read(tmp_path / "merged"), key=lambda r: r["sample_index"])
    assert [r["sample_index"] for r in by_index] == [0, 1, 2, 3, 4]
    assert [[p["label"] for p in r["predictions"]] for r in by_index] == \
        [[p["label"] for p in r["predictions"]] for r in sorted(read(tmp_path / "whole"), key=lambda r: r["sample_index"])]
    assert merged["sensitivity"] == whole["sensitivity"] and merged["consistency"] == whole["consistency"]
    assert merged["micro_f1"] == whole["micro_f1"] and merged["config_fingerprint"] == whole["config_fingerprint"]
    assert (tmp_path / "merged" / "rephrasings.json").is_file()
    # the bootstrap interval uses the run's seed (the summary had no seed, so it used 0 whatever the seed was)
    assert whole["seed"] == 3
    records = read(tmp_path / "whole")
    assert whole["accuracy"]["by_greedy"]["ci95"] == classification_accuracy(records, 3, 3)["by_greedy"]["ci95"]
    # the Python API runs the same task through the same skeleton
    result = posixlab.classify(ClassificationData(num_samples=5), model=lm, num_rephrasings=3, seed=3,
                               rephraser=RephraserConfig(backend="file", path=str(rephrasings_file),
                                                         min_similarity=0.0), progress=False)
    assert result.sensitivity == whole["sensitivity"]["mean"] and result.micro_f1 == whole["micro_f1"]["mean"]
    assert result.consistency == whole["consistency"]["mean"]
    assert list(result.to_pandas()["sample_id"]) == [r["sample_id"] for r in records]
    saved = posixlab.load_classification(result.save(tmp_path / "saved"))
    assert saved.summary == json.loads(json.dumps(result.summary)) and len(saved.records) == 5


class _FailingTask(PosixTask):
    """POSIX, failing while recording its second set: the run stops after its score cache was opened."""

    def record(self, prompt_set, requests, scores, lm):
        self.recorded = getattr(self, "recorded", 0) + 1
        if self.recorded == 2:
            raise RuntimeError("disk full")
        return super().record(prompt_set, requests, scores, lm)


@pytest.mark.slow
def test_the_score_cache_is_closed_when_a_run_fails(lm, tmp_path, monkeypatch):
    from posixlab.runner import run
    from posixlab.scoring import ScoreCache

    closed = []
    original = ScoreCache.close
    monkeypatch.setattr(ScoreCache, "close", lambda self: (closed.append(self.path), original(self)))
    cfg = PosixConfig(model=SMOL, dataset=DatasetSpec("mmlu"), num_sets=3, num_variants=2,
                      output_dir=str(tmp_path / "out"), score_cache_dir=str(tmp_path / "scores"), embedding=None)
    with pytest.raises(RuntimeError, match="disk full"):
        run(_FailingTask(cfg), lm=lm, progress=False)
    assert len(closed) == 1 and closed[0].parent == tmp_path / "scores"
    assert len((tmp_path / "out" / "sets.jsonl").read_text().splitlines()) == 1, "the finished set is kept"


@pytest.mark.slow  # the packaged SmolLM2's tokenizer
def test_a_dry_run_loads_no_weights_starts_no_server_and_writes_no_cache(tmp_path, monkeypatch):
    """dry_run=true plans with the tokenizer alone: the in-process model's weights never load, a vLLM server is
    neither started nor asked, and no score cache file is made; the plan counts every prompt."""
    import posixlab.models.loading
    import posixlab.serving.model
    from posixlab.models.loading import ServerSettings
    from posixlab.runner import run

    def never(*_, **__):
        raise AssertionError("a dry run needs no weights and no server")

    monkeypatch.setattr(posixlab.models.loading, "load_model", never)
    monkeypatch.setattr(posixlab.serving.model, "connect", never)
    launched = ModelSpec("smollm2-135m-instruct", "packaged", "smollm2-135m-instruct", backend="vllm",
                         server=ServerSettings(launch=True))
    for spec in (SMOL, launched):
        cfg = PosixConfig(model=spec, dataset=DatasetSpec("mmlu"), num_sets=3, num_variants=4, dry_run=True,
                          output_dir=str(tmp_path / spec.backend), score_cache_dir=str(tmp_path / "scores"))
        plan = run(cfg, progress=False)["dry_run"]
        assert plan == {"task": "posix", "model": "smollm2-135m-instruct", "units": 3, "requests": 3, "prompts": 15}
    assert not (tmp_path / "scores").exists()
    # the context length comes from the config: a prompt too long is refused, as the real run would refuse it
    from posixlab.errors import ContextLengthError

    sets = tmp_path / "long.jsonl"
    sets.write_text(json.dumps({"id": "long", "prompts": ["word " * 9000, "short"]}) + "\n")
    long = PosixConfig(model=SMOL, dataset=DatasetSpec("prompt_sets", source="path", path=str(sets)), variant="user",
                       dry_run=True, output_dir=str(tmp_path / "long"))
    with pytest.raises(ContextLengthError, match="8192-token context"):
        run(long, progress=False)


@pytest.mark.slow  # the packaged SmolLM2's tokenizer
def test_a_dry_run_of_paraphrases_loads_no_embedding_model(tmp_path, monkeypatch):
    """The paraphrases' quality checks read an embedding model (MiniLM): a dry run of a paraphrase run, or of a
    classification run (its task sentence's rephrasings), loaded it to re-check shipped paraphrases it then only
    counted. It plans with the records as they are; the run itself checks them."""
    import posixlab.embeddings
    from posixlab.runner import run
    from posixlab.tasks.classification.config import ClassificationConfig, ClassificationData

    def never(*_, **__):
        raise AssertionError("a dry run loads no embedding model")

    monkeypatch.setattr(posixlab.embeddings.SentenceEmbedder, "__init__", never)
    cfg = PosixConfig(model=SMOL, dataset=DatasetSpec("mmlu", source="sample"), variant="paraphrase", num_sets=2,
                      num_variants=3, dry_run=True, embedding=None, output_dir=str(tmp_path / "posix"))
    assert run(cfg, progress=False)["dry_run"]["prompts"] == 8
    cfg = ClassificationConfig(model=SMOL, data=ClassificationData("mmlu_letters", num_samples=2), dry_run=True,
                               output_dir=str(tmp_path / "cls"))
    assert run(cfg, progress=False)["dry_run"]["units"] == 2


@pytest.mark.slow  # the packaged SmolLM2's tokenizer
def test_prompts_encoded_in_one_batch_get_the_ids_they_get_one_at_a_time():
    """A set's prompts are tokenised in one call (the fast tokenizer's batch, on every core): the very same ids as
    one call per prompt, with and without the special tokens, for the prompts a 3-shot set holds and for edge cases."""
    from posixlab.models.loading import open_for_plan
    from posixlab.tasks.posix import build_prompt_sets

    lm = open_for_plan(SMOL)
    sets, _ = build_prompt_sets(PosixConfig(model=SMOL, dataset=DatasetSpec("mmlu"), num_sets=3, num_variants=6,
                                            shots=3, embedding=None), progress=False)
    texts = [p.text for s in sets for p in s.prompts]
    texts += ["", " ", "  leading spaces\tand a tab", "Ünïcödé — «quotes», 数学 🙂", "A: (B)", "x" * 5000,
              "<|im_start|>user\nhi<|im_end|>\n"]
    for special in (True, False):
        batch = lm.encode_batch(texts, add_special_tokens=special)
        assert batch == [lm.encode(t, add_special_tokens=special) for t in texts]
        assert all(type(ids) is list for ids in batch)
    assert lm.encode_batch([]) == []
    # equal ids share one int object (a paper-sized cell holds ~150 million of them until its last set is scored)
    first, second = lm.encode_batch([texts[0], texts[0]])
    assert max(first) > 256 and all(a is b for a, b in zip(first, second))
    # what a task's requests hold: the batch's ids, checked to fit, for ψ and for answers alone
    task = PosixTask(PosixConfig(model=SMOL, dataset=DatasetSpec("mmlu"), shots=3, embedding=None))
    (request,) = task.requests(sets[0], lm)
    assert request.ids == [lm.encode(p.text) for p in sets[0].prompts]
    options = task._continuations(sets[0])
    assert len(options) == 4 and request.candidates == [lm.encode(c, add_special_tokens=False) for c in options]
    task = PosixTask(PosixConfig(model=SMOL, dataset=DatasetSpec("mmlu"), shots=3, embedding=None, psi=False))
    assert [r.ids for r in task.requests(sets[0], lm)] == [[lm.encode(p.text)] for p in sets[0].prompts]


def test_a_cache_whose_other_jobs_files_are_large_says_so_when_it_opens(tmp_path, monkeypatch, capsys):
    """Every open reads the other jobs' files into memory: past PEERS_WARNING_BYTES of them a warning says how to keep
    a sweep's cache folders small; the rows are read either way."""
    import posixlab.cachefiles
    from posixlab.scoring import ScoreCache

    identity = {"name": "m", "model": "x"}
    live = ScoreCache(tmp_path, identity)  # a job still running: its file is the next one's peer
    live.store({(1, 2, 3): ((4,), [-0.5])}, {((1, 2, 3), (5,)): -1.25}, 5)
    size = live.path.stat().st_size
    monkeypatch.setattr(posixlab.cachefiles, "PEERS_WARNING_BYTES", size)
    quiet = ScoreCache(tmp_path, identity)
    assert capsys.readouterr().err == "" and quiet.score((1, 2, 3), (5,)) == -1.25
    quiet.close()
    monkeypatch.setattr(posixlab.cachefiles, "PEERS_WARNING_BYTES", size - 1)
    warned = ScoreCache(tmp_path, identity)
    err = capsys.readouterr().err
    assert err.count("posixlab: warning:") == 1 and f"the other jobs' files of the cache {tmp_path}/m-" in err
    assert "(1 file) hold 0.0 GB" in err and "score_cache_dir='/shared/scores/${task.run_name}'" in err
    assert warned.score((1, 2, 3), (5,)) == -1.25 and warned.generation((1, 2, 3), 5) == ([4], [-0.5])
    warned.close()
    live.close()


def test_a_cache_file_of_the_single_file_layout_in_wal_mode_is_read_with_its_wal(tmp_path):
    """A ``<stem>.sqlite`` of the earlier layout, in WAL mode with rows still in its WAL (its writer open), is read as
    a peer through SQLite: every row, those in the WAL too; it is never written."""
    import shutil
    import sqlite3

    from posixlab.scoring import ScoreCache
    from posixlab.scoring.cache import _checksum, score_key

    identity = {"name": "m", "model": "legacy"}
    old = ScoreCache(tmp_path / "old", identity)
    old.store({(1, 2, 3): ((4,), [-0.5])}, {((1, 2, 3), (5,)): -1.25}, 5)
    old.close()
    legacy = tmp_path / "shared" / f"{old.stem}.sqlite"
    legacy.parent.mkdir()
    shutil.copyfile(old.path, legacy)
    writer = sqlite3.connect(legacy, isolation_level=None)
    assert writer.execute("PRAGMA journal_mode=WAL").fetchone()[0] == "wal"
    key, payload = score_key((1, 2, 3), (6,)), json.dumps({"logprob": -2.5})
    writer.execute("INSERT INTO scores VALUES (?, ?, ?)", (key, payload, _checksum(key, payload)))
    assert (legacy.parent / f"{legacy.name}-wal").stat().st_size > 0  # the row is in the WAL, not yet in the file
    before = legacy.read_bytes()
    try:
        cache = ScoreCache(tmp_path / "shared", identity)
        assert cache.path != legacy and cache.generation((1, 2, 3), 5) == ([4], [-0.5])
        assert cache.score((1, 2, 3), (5,)) == -1.25 and cache.score((1, 2, 3), (6,)) == -2.5
        cache.close()
        assert legacy.read_bytes() == before  # read, never written
    finally:
        writer.close()


def test_the_libraries_bars_are_off_while_a_quiet_run_works_and_back_after():
    from huggingface_hub.utils import are_progress_bars_disabled
    from transformers.utils import logging as transformers_logging

    from posixlab.runner import library_bars

    before = (are_progress_bars_disabled(), transformers_logging.is_progress_bar_enabled())
    with library_bars(shown=False):
        assert are_progress_bars_disabled() and not transformers_logging.is_progress_bar_enabled()
    assert (are_progress_bars_disabled(), transformers_logging.is_progress_bar_enabled()) == before
    with library_bars(shown=True):
        assert (are_progress_bars_disabled(), transformers_logging.is_progress_bar_enabled()) == before


def test_status_reads_a_running_cell_s_psi_without_parsing_its_records(tmp_path):
    """``posixlab status`` finds each POSIX record's ψ in its line: the same values as parsing it, even where a prompt's
    text holds the key itself; a line without a plain value is parsed whole, a line being written is left out. The file
    is read a line at a time, and only a newline ends one."""
    from posixlab.status import _records
    from posixlab.tasks.posix import PosixTask

    tricky = {"set_index": 0, "prompts": [{"text": 'Report {"psi": 9, "x": 1} as JSON', "kind": "original"}],
              "psi_per_prompt": [7.0], "logprob_matrix": [[-1.5]], "psi": 0.25, "psi_reference_compat": 8.0}
    lines = [tricky, {"set_index": 1, "psi": 1e-05, "factors": {}}, {"set_index": 2, "psi": None},
             {"set_index": 3, "prompts": [{"text": "a\u2028b\u0085c"}]}]  # separators only "\n" ends a line at
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in lines) + '{"set_index": 4, "psi": 0.'
    (tmp_path / "sets.jsonl").write_text(text, encoding="utf-8")
    name, fast = _records(tmp_path, PosixTask.live_keys)
    assert name == "sets.jsonl" and fast[:3] == [{"psi": 0.25}, {"psi": 1e-05}, {"psi": None}]
    assert fast[3] == lines[3]  # no ψ in the line: parsed whole
    assert _records(tmp_path)[1] == lines and PosixTask.live_metrics(fast) == PosixTask.live_metrics(lines)


def test_records_are_streamed_a_line_at_a_time_and_only_a_newline_ends_one(tmp_path):
    from posixlab.results import SetWriter, iter_records, read_records

    texts = ["a\u2028b", "c\u0085d", "e\rf", "g\u2029h\n"]  # line separators a text may hold, written as they are
    with SetWriter(tmp_path) as writer:
        for n, text in enumerate(texts):
            writer.write({"set_index": len(texts) - 1 - n, "text": text})
    assert (tmp_path / "sets.jsonl").read_text(encoding="utf-8").count("\n") == len(texts)
    assert [r["text"] for r in iter_records(tmp_path, "sets.jsonl")] == texts
    assert [r["text"] for r in read_records(tmp_path, "sets.jsonl", "set_index")] == texts[::-1]
