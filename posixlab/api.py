"""``posixlab.evaluate``: POSIX for your own prompt sets and your own model, from Python, no Hydra and no W&B::

    import posixlab
    result = posixlab.evaluate([["What is 2+2?", "what's 2 + 2?"]], model="smollm2-135m-instruct")
    result.posix, result.psi

It runs the same pipeline as the ``posixlab`` command (``posixlab dataset=prompt_sets dataset.path=FILE``), with the
same engine settings, so the numbers are the same, bit for bit.
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
import warnings
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path

import numpy as np

from posixlab.data import DatasetSpec
from posixlab.data.prompt_sets import UserPromptSet, prompt_sets_from_lists, read_prompt_set_file
from posixlab.embeddings import EmbeddingSpec
from posixlab.errors import ConfigError, PromptSetFileError, check_progress
from posixlab.judge import ALPHA, DEFAULT_JUDGE, INSTRUCTION, ROWS_FILE, check_options, judge_run, judged_rows, \
    read_judged
from posixlab.judge import SUMMARY_FILE as JUDGE_FILE
from posixlab.models import PACKAGED_MODELS, CausalLM, ModelSpec, spec_from_dict
from posixlab.models.causal_lm import TokenizedModel
from posixlab.runner import run
from posixlab.results import SETS_FILE, SUMMARY_FILE, RunResult, check_run_folder, read_sets
from posixlab.scoring import EngineOptions
from posixlab.tasks.base import check_max_new_tokens
from posixlab.tasks.posix import USER_SETS, USER_VARIANT, PosixConfig

CONFIG_FILE = "config.yaml"


class JudgeWarning(UserWarning):
    """A judge whose verdicts say more about the judge than the model (``posixlab.judge.judge_warnings``)."""


@dataclass
class EvaluationResult(RunResult):
    """What ``evaluate`` computed: the summary and one record per prompt set (the records of ``sets.jsonl``)."""

    config: dict = field(repr=False, default_factory=dict)
    judged: dict | None = field(repr=False, default=None)  # a judge's summary (judge.json): judge= or .judge()
    verdicts: list[dict] = field(repr=False, default_factory=list)  # its rows (judge.jsonl), one a judged set
    folder: Path | None = field(repr=False, default=None)  # the run's files (output_dir=, load_result), or None

    def __repr__(self) -> str:
        model = self.summary.get("model", {}).get("name", "?")
        judged = "" if self.judged_share is None else f", judged_share={self.judged_share:.4f}"
        return f"EvaluationResult(posix={self.posix:.4f}{judged}, sets={len(self.records)}, model={model!r})"

    @property
    def posix(self) -> float:
        """POSIX: the mean of ψ over the prompt sets (paper Def. 3.3)."""
        return self.summary["psi"]["posix"]

    @property
    def posix_ci95(self) -> tuple[float, float] | None:
        """POSIX's 95% expanded percentile bootstrap interval over the sets (seeded by the run's seed), as the result
        line prints it."""
        ci = self.summary["psi"].get("ci95")
        return None if ci is None else (ci[0], ci[1])

    @property
    def psi(self) -> list[float]:
        """ψ of each prompt set, in the order the sets were given."""
        return [r["psi"] for r in self.records]

    @property
    def psi_reference_compat(self) -> list[float]:
        """ψ of each set as the authors' library (prompt-sensitivity-index 0.0.1) computes it."""
        return [r["psi_reference_compat"] for r in self.records]

    @property
    def ids(self) -> list[str]:
        """The sets' ids (``set-0``, ... for sets given as lists)."""
        return [r["item_id"] for r in self.records]

    @property
    def prompts(self) -> list[list[str]]:
        return [[p["text"] for p in r["prompts"]] for r in self.records]

    @property
    def responses(self) -> list[list[str]]:
        """The greedy response to each prompt, per set."""
        return [[resp["text"] for resp in r["responses"]] for r in self.records]

    @property
    def matrices(self) -> list[np.ndarray]:
        """Per set, the N×N matrix ``M[i, j] = log P(y_j | x_i)`` (natural log, summed over y_j's tokens)."""
        return [np.asarray(r["logprob_matrix"], dtype=np.float64) for r in self.records]

    @property
    def accuracy(self) -> dict | None:
        """Accuracy over the prompts for sets with a gold ``answer`` (``posixlab/answers.py``): per reading
        (``by_options``, ``by_greedy``) the mean, per-prompt values, spread, worst case, CPS, consistency rate, PSS,
        prompts needed, two-way interval; None when no set has an answer."""
        return self.summary.get("accuracy")

    @property
    def factors(self) -> list[dict]:
        """Per set, the paper's four factors (response diversity and entropy, semantic coherence, variance in
        confidence); a factor a set does not have is None."""
        return [r["factors"] for r in self.records]

    @property
    def judged_share(self) -> float | None:
        """The judge's mean over the sets of the share of variants whose response it called the same as the
        original's (identical ones count); None where no judge read the run (``judge``) or none of its replies
        was a yes or no."""
        return (self.judged or {}).get("judged_share")

    @property
    def judged_share_ci95(self) -> tuple[float, float] | None:
        """``judged_share``'s 95% interval over the sets (expanded percentile bootstrap, ``posixlab.judge``)."""
        ci = (self.judged or {}).get("judged_share_ci95")
        return None if ci is None else (ci[0], ci[1])

    def judge(self, model=DEFAULT_JUDGE, *, tokenizer=None, base_url: str | None = None,
              api_key_env: str = "OPENAI_API_KEY", max_concurrency: int = 8, sets: int | None = None,
              both_orders: bool = False, instruction: str = INSTRUCTION, alpha: float = ALPHA, decoys: int = 1,
              cache_dir: str | None = None, progress: bool = True) -> dict:
        """Ask a judge model which variants' responses say the same as the original's, as ``posixlab judge RUN``
        does; returns its summary (also ``self.judged``, its rows ``self.verdicts``, and ``judged_share``).

        ``model``: any form ``evaluate`` takes (a packaged name, a hub id, a loaded model with ``tokenizer=``), or
        with ``base_url`` a model served by an OpenAI-compatible chat endpoint (its key in ``api_key_env``).
        ``instruction``: the request's text, with ``{first_prompt}``, ``{first}``, ``{second_prompt}`` and
        ``{second}``. ``sets``, ``both_orders``, ``alpha``, ``decoys``: ``posixlab judge``'s options
        (``posixlab.judge.judge_run``). Where the result has a folder (``evaluate(output_dir=)``, ``load_result``),
        the verdicts are written there (``judge.jsonl``, ``judge.json``, ``figures/psi_vs_judged.png``), and a judge
        asked again reuses them; otherwise they are kept here and ``save`` writes them."""
        for name, value in (("sets", sets), ("max_concurrency", max_concurrency)):
            if value is not None and value < 1:
                raise ConfigError(f"{name} must be at least 1, got {value}")
        check_options(instruction, alpha, decoys)
        spec, lm = judge_model(model, tokenizer, base_url, api_key_env, max_concurrency)
        with tempfile.TemporaryDirectory(prefix="posixlab-judge-") as scratch:
            folder = self.folder or self._write(Path(scratch), verdicts=False)  # another judge's would clash
            judged = judge_run(folder, spec, lm=lm, sets=sets, instruction=instruction, both_orders=both_orders,
                               alpha=alpha, decoys=decoys, cache_dir=cache_dir, progress=progress, flags=False)
            self.judged, self.verdicts = judged, judged_rows(folder, judged)
        if self.folder is None:
            self.judged["run"] = None  # judged in a folder now gone: ``save`` writes the verdicts beside the run
        else:  # the folder as ``posixlab judge`` leaves it: its figure too, for the run's page
            from posixlab.analysis.judged import draw_judged

            try:
                draw_judged(self.folder, judged)
            except Exception as exc:  # noqa: BLE001 (the verdicts stand without the figure)
                warnings.warn(f"posixlab judge: no figure of ψ against the judge ({type(exc).__name__}: {exc})",
                              JudgeWarning, stacklevel=_first_caller_outside())
        for warning in judged.get("warnings") or []:  # e.g. a judge that says yes to everything, or to nothing
            warnings.warn(f"posixlab judge: {warning}", JudgeWarning, stacklevel=_first_caller_outside())
        return self.judged

    def to_pandas(self):
        """One row per prompt set: id, subject, number of prompts, ψ (both modes), answer, the share of its prompts
        answered right in each reading (options: where the run scored them), and the factors; with a judge's
        verdicts (``judge``), each set's ``identical_share`` and ``judged_share`` too."""
        import pandas as pd

        judged = {row["set_id"]: row for row in self.verdicts}
        rows = [{"id": r["item_id"], "subject": r.get("subject"), "num_prompts": len(r["prompts"]), "psi": r["psi"],
                 "psi_reference_compat": r["psi_reference_compat"], "answer": r.get("answer"),
                 "accuracy_options": _share(r, "by_options"), "accuracy_greedy": _share(r, "by_greedy"),
                 "max_new_tokens": r.get("max_new_tokens"),
                 **r["factors"], **(_judged_columns(judged, r) if self.judged else {})} for r in self.records]
        return pd.DataFrame(rows)

    def save(self, folder: str | Path) -> Path:
        """Write the files a ``posixlab`` run writes (``sets.jsonl``, ``summary.json``, ``summary.md``,
        ``config.yaml``, and a judge's ``judge.jsonl`` and ``judge.json``) into ``folder``; ``posixlab.analysis``,
        ``posixlab report`` and ``posixlab compare`` read it like any run folder."""
        return self._write(Path(folder).expanduser(), verdicts=True)

    def _write(self, folder: Path, verdicts: bool) -> Path:
        from posixlab.results import SetWriter, write_summary

        with SetWriter(folder) as writer:
            for record in self.records:
                writer.write(record)
        write_summary(folder, self.summary)
        (folder / CONFIG_FILE).write_text(_yaml(self.config), encoding="utf-8")
        judged_here = self.judged is not None and self.judged["run"] is not None and \
            folder.resolve() == Path(self.judged["run"]).resolve()
        if verdicts and self.judged is not None and not judged_here:  # judged elsewhere: its verdicts come along
            (folder / ROWS_FILE).write_text("".join(json.dumps(row, ensure_ascii=False) + "\n"
                                                    for row in self.verdicts), encoding="utf-8")
            judged = {**self.judged, "run": str(folder)}
            (folder / JUDGE_FILE).write_text(json.dumps(judged, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        return folder


def evaluate(prompt_sets, model="smollm2-135m-instruct", *, tokenizer=None, max_new_tokens: int = 30,
             seed: int = 0, chat_template: bool = False, cache_dir: str | None = None,
             score_cache: bool | None = None, score_cache_dir: str | None = None,
             embedding: EmbeddingSpec | str | None = "all-MiniLM-L6-v2", engine: EngineOptions | None = None,
             output_dir: str | Path | None = None, progress: bool = True, judge=None) -> EvaluationResult:
    """POSIX of ``prompt_sets`` under ``model``: greedy responses, every response scored under every prompt of its
    set, ψ per set, and their mean.

    ``prompt_sets``: a list of lists of strings (each inner list one intent-aligned set, the first prompt its
    original), or dicts as in a prompt-set file, or the path of a ``.jsonl``/``.json`` prompt-set file
    (``posixlab/data/prompt_sets.py``). Everything is validated before the model is loaded.

    ``model``: a packaged model (``smollm2-135m-instruct``, ``gemma3-270m``, ``qwen2.5-coder-0.5b-instruct``, ...), a
    model configured in ``posixlab/conf/model/`` (``llama2-7b``, ...), a local model folder, a local ``.gguf`` file
    (run quantized by llama.cpp: ``posixlab/llamacpp/``), a Hugging Face Hub id,
    a ``ModelSpec`` (``backend="vllm", server=ServerSettings(base_url=...)`` for a vLLM server), a loaded ``CausalLM`` or connected
    ``ServedModel`` (``posixlab.backends.load``), or a loaded ``transformers`` model together with ``tokenizer=``.

    ``score_cache``: reuse (and store) generations and scores in ``<cache_dir>/scores``. None (the default): on for
    models loaded by name, off for a model object you pass in, whose weights may differ from any saved copy.
    ``embedding``: the sentence-embedding model of the semantic-coherence factor (an ``EmbeddingSpec``, or a name
    as the command line takes it: ``"minilm"``, ``"gte-large"``, the paper's, from the hub, or a hub id); None leaves
    that factor out. ``output_dir``: also keep the run's files there (as ``save``).
    ``judge``: a judge model (any form ``model`` takes) that then reads the responses, with ``EvaluationResult.judge``'s
    defaults (``result.judged_share``; call ``result.judge(...)`` for its other options); opened once the run's
    model is closed.
    """
    given = _prompt_sets(prompt_sets)  # validated before any model is loaded
    path = str(prompt_sets) if isinstance(prompt_sets, (str, Path)) else None
    dataset = DatasetSpec(USER_SETS, source="path", path=path, variants=[USER_VARIANT])
    return evaluated(dict(dataset=dataset, variant=USER_VARIANT, num_sets=None, max_new_tokens=max_new_tokens,
                          seed=seed, chat_template=chat_template, cache_dir=cache_dir, score_cache_dir=score_cache_dir,
                          engine=engine or EngineOptions(), embedding=_embedding(embedding)),
                     model, tokenizer, score_cache=score_cache, output_dir=output_dir, progress=progress, judge=judge,
                     given=given)


def evaluated(settings: dict, model, tokenizer=None, *, score_cache: bool | None, output_dir, progress, judge,
              given=None) -> EvaluationResult:
    """The run of a ``PosixConfig`` of ``settings`` (every field but the model, output folder and score cache) on
    ``model`` (any form ``evaluate`` takes), in ``output_dir`` or a scratch folder, then ``judge``'s reading: what
    ``evaluate`` and ``evaluate_dataset`` return. The model and the judge are resolved before anything runs."""
    check_max_new_tokens(settings["max_new_tokens"])
    check_progress(progress)
    spec, lm = resolve_model(model, tokenizer)
    if judge is not None:  # a judge it cannot resolve stops here, before the run
        judge_spec, judge_lm = judge_model(judge)
        judge = judge_spec if judge_lm is None else judge_lm
    if score_cache is None:
        score_cache = lm is None
    with tempfile.TemporaryDirectory(prefix="posixlab-") as scratch:
        cfg = PosixConfig(model=spec, output_dir=str(output_dir or scratch), score_cache=score_cache, **settings)
        summary = run(cfg, lm=lm, progress=progress, given=given)
        result = EvaluationResult(summary=summary, records=read_sets(cfg.output_dir), config=asdict(cfg),
                                  folder=None if output_dir is None else Path(output_dir))
        if output_dir is not None:
            (Path(output_dir) / CONFIG_FILE).write_text(_yaml(result.config), encoding="utf-8")
    if judge is not None:
        result.judge(judge, cache_dir=settings.get("cache_dir"), progress=progress)
    return result


def _share(record: dict, reading: str) -> float | None:
    """The share of a set's prompts answered right under ``reading``; None without a gold answer."""
    answers = [a[reading] for a in record.get("answers") or [] if a.get(reading)]
    return sum(bool(a["correct"]) for a in answers) / len(answers) if answers else None


def load_result(folder: str | Path) -> EvaluationResult:
    """A saved run folder (from ``save``, ``output_dir`` or the ``posixlab`` command) as an ``EvaluationResult``."""
    folder = Path(folder).expanduser()
    check_run_folder(folder, SETS_FILE)
    summary = json.loads((folder / SUMMARY_FILE).read_text(encoding="utf-8"))
    result = EvaluationResult(summary=summary, records=read_sets(folder), config=summary.get("config", {}),
                              folder=folder)
    judged, _ = read_judged(folder, summary)  # a judge of an earlier run in this folder is not this run's
    if judged is not None and judged.get("judge", {}).get("key"):
        result.judged, result.verdicts = judged, judged_rows(folder, judged)
    return result


def _first_caller_outside() -> int:
    """The stack level, for a warning raised in this module, of its first caller outside it (``evaluate(judge=)``
    calls ``judge``: the warning points at the user's line either way)."""
    level, frame = 1, sys._getframe(1)
    while frame is not None and frame.f_globals.get("__name__") == __name__:
        level, frame = level + 1, frame.f_back
    return level


def _judged_columns(judged: dict[str, dict], record: dict) -> dict:
    row = judged.get(record["set_id"], {})
    return {"identical_share": row.get("identical_share"), "judged_share": row.get("judged_share")}


def _prompt_sets(prompt_sets) -> list[UserPromptSet]:
    if isinstance(prompt_sets, str) and Path(prompt_sets).suffix.lower() not in (".json", ".jsonl") \
            and not Path(prompt_sets).exists():  # a prompt, not a file's name
        raise PromptSetFileError(f"evaluate takes prompt sets (a list of lists of prompts) or a .jsonl/.json file; "
                                 f"{prompt_sets[:60]!r} is neither. One set: posixlab.evaluate([[prompt, variant, "
                                 f"...]]); its variants from a variant type: posixlab.evaluate_dataset")
    if isinstance(prompt_sets, (str, Path)):
        return read_prompt_set_file(prompt_sets)
    return prompt_sets_from_lists(prompt_sets)


def configured_models() -> list[str]:
    """The model names of ``posixlab/conf/model/`` (what ``model=NAME`` takes on the command line)."""
    folder = resources.files("posixlab") / "conf" / "model"
    return sorted(p.name.removesuffix(".yaml") for p in folder.iterdir()
                  if p.name.endswith(".yaml") and not p.name.startswith("_"))  # none today; a leading _ marks a shared node


def resolve_model(model, tokenizer) -> tuple[ModelSpec, TokenizedModel | None]:
    """(spec, loaded model or None) for every form ``evaluate`` takes: the one resolution of a model argument that
    ``classify`` and ``posixlab judge --judge`` share."""
    if isinstance(model, TokenizedModel):  # loaded here (CausalLM) or connected to a server (ServedModel)
        return ModelSpec(model.name, "loaded", model.name), model
    if isinstance(model, ModelSpec):
        return model, None
    if not isinstance(model, (str, Path)):  # an object: a loaded transformers model
        if tokenizer is None:
            raise ConfigError(f"model is a loaded {type(model).__name__}; pass its tokenizer too: "
                              f"posixlab.evaluate(sets, model=model, tokenizer=tokenizer)")
        return _wrap_loaded(model, tokenizer)
    if tokenizer is not None:
        raise ConfigError("tokenizer= goes with a loaded model object; a model given by name loads its own")
    name = str(model)
    if name in PACKAGED_MODELS:
        return ModelSpec(name, "packaged", name), None
    if name in configured_models():
        import yaml

        text = (resources.files("posixlab") / "conf" / "model" / f"{name}.yaml").read_text(encoding="utf-8")
        options = yaml.safe_load(text)
        options.pop("defaults", None)  # _defaults: ModelSpec's own defaults (posixlab/cli.py)
        return spec_from_dict(options), None
    if name.endswith(".gguf") and Path(name).expanduser().is_file():  # a quantized file: llama.cpp runs it as it is
        from posixlab.llamacpp.hub import gguf_label

        file = Path(name).expanduser().resolve()
        return ModelSpec(gguf_label(str(file)), "local", str(file), backend="llamacpp"), None
    if Path(name).expanduser().is_dir():
        folder = Path(name).expanduser().resolve()
        return ModelSpec(folder.name, "local", str(folder)), None
    if name.count("/") == 1 and not name.startswith((".", "/")) and ":" not in name:
        return ModelSpec(name.split("/")[1], "hub", name), None  # named by its repository, as model=ID names it
    if re.fullmatch(r"[^/.:][^/:]*/[^/:]+(:[^/:]+|(/[^/:]+)+\.gguf)", name):  # a GGUF repository's file on the hub
        from posixlab.llamacpp.hub import gguf_label

        return ModelSpec(gguf_label(name), "hub", name, backend="llamacpp"), None
    if name.startswith(("/", "./", "../", "~")) or name.endswith(".gguf"):  # meant as a path: say which is missing
        missing = Path(name).expanduser().absolute()
        beside = _listing(missing.parent) if missing.parent.is_dir() else None  # a typo in the last name, say
        raise ConfigError(f"model={name}: no {'file' if name.endswith('.gguf') else 'folder'} at {missing}"
                          + (f" ({missing.parent} holds {beside})" if beside else "")
                          + "; give a model folder (config.json and weights), a .gguf file, or a model's name")
    import difflib

    configured = configured_models()
    # a name's beginning (model=smollm2, model=llama2) or a typo (model=gemma3-207m)
    close = [m for m in configured if m == name.lower()] or [m for m in configured if m.startswith(name.lower())] \
        or difflib.get_close_matches(name.lower(), configured, n=1, cutoff=0.75)
    raise ConfigError(f"model {name!r} is not a packaged model ({', '.join(PACKAGED_MODELS)}), a configured one "
                      f"({', '.join(m for m in configured if m not in PACKAGED_MODELS)}: posixlab/conf/model/), "
                      f"a local folder, a .gguf file, a Hugging Face Hub id (owner/name) or a GGUF file on the hub "
                      f"(owner/name:Q4_K_M, owner/name/file.gguf)"
                      + (f"; did you mean {' or '.join(close)}?" if 0 < len(close) <= 4 else ""))


def _listing(folder: Path, most: int = 6) -> str:
    """What a folder holds, as a missing path's message names it: its model folders and .gguf files first ("" when
    nothing but hidden files)."""
    entries = sorted(folder.iterdir(), key=lambda p: (not (p.suffix == ".gguf" or (p / "config.json").is_file()),
                                                      p.name))
    names = [p.name + "/" * p.is_dir() for p in entries if not p.name.startswith(".")]
    return ", ".join(names[:most]) + (", ..." if len(names) > most else "")


def judge_model(model, tokenizer=None, base_url: str | None = None, api_key_env: str = "OPENAI_API_KEY",
                max_concurrency: int = 8) -> tuple[ModelSpec, TokenizedModel | None]:
    """(spec, loaded model or None) of a judge: with ``base_url``, ``model`` served by that OpenAI-compatible chat
    endpoint (``max_concurrency`` requests in flight); else every form ``evaluate`` takes (``resolve_model``)."""
    if base_url:
        from posixlab.chat.model import chat_model

        if not isinstance(model, str):
            raise ConfigError(f"with base_url, the judge is the name of the model the endpoint serves, not a "
                              f"{type(model).__name__}")
        return chat_model(model, base_url, api_key_env=api_key_env, max_concurrency=max_concurrency), None
    try:
        return resolve_model(model, tokenizer)
    except ConfigError as exc:  # an API's model named without its endpoint (gpt-4o, claude-...): say how to reach it
        raise ConfigError(f"{exc}; a model an OpenAI-compatible chat endpoint serves also needs its address: "
                          f"posixlab judge RUN --judge MODEL --base-url URL, or result.judge(MODEL, base_url=URL)") \
            from None


def _wrap_loaded(model, tokenizer) -> tuple[ModelSpec, CausalLM]:
    import torch
    import transformers

    name = str(getattr(model, "name_or_path", None) or getattr(model.config, "_name_or_path", "") or "loaded-model")
    parameter = next(model.parameters())
    identity = {"name": name, "source": "loaded", "path": name, "class": type(model).__name__,
                "dtype": str(parameter.dtype).removeprefix("torch."), "device": str(parameter.device),
                "transformers": transformers.__version__, "torch": torch.__version__}
    return ModelSpec(name, "loaded", name), CausalLM(model, tokenizer, name=name, identity=identity)


def _embedding(embedding) -> EmbeddingSpec | None:
    """``embedding=`` as the command line takes it: an option of ``posixlab/conf/embedding/`` (``"gte-large"``, the
    paper's, from the hub; ``"minilm"``), a packaged model's name, or a hub id (``"thenlper/gte-large"``)."""
    if embedding is None or isinstance(embedding, EmbeddingSpec):
        return embedding
    if not isinstance(embedding, str):
        raise ConfigError(f"embedding must be an EmbeddingSpec, a name (minilm, gte-large, a hub id) or None, not "
                          f"{type(embedding).__name__}")
    option = resources.files("posixlab") / "conf" / "embedding" / f"{embedding}.yaml"
    if embedding != "none" and "/" not in embedding and option.is_file():
        import yaml

        return EmbeddingSpec(**yaml.safe_load(option.read_text(encoding="utf-8")))
    if embedding.count("/") == 1 and not Path(embedding).expanduser().exists():  # owner/name: the hub's
        return EmbeddingSpec(name=embedding.rpartition("/")[2], source="hub", model=embedding)
    return EmbeddingSpec(name=embedding)


def _yaml(config: dict) -> str:
    import yaml

    return yaml.safe_dump(json.loads(json.dumps(config, default=str)), sort_keys=False, allow_unicode=True)


__all__ = ["EvaluationResult", "JudgeWarning", "configured_models", "evaluate", "load_result"]
