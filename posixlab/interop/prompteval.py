"""PromptEval (Maia Polo et al., NeurIPS 2024: "Efficient multi-prompt evaluation of LLMs"): the correctness its
authors published for 15 LLMs under 100 MMLU prompt templates (``PromptEval/PromptEval_MMLU_correctness`` on the hub,
MIT), read as rows ``posixlab.interop.dove`` takes, so that ``posixlab dove summary`` puts those models' accuracy
spread, worst case, PSS and CPS beside a posixlab run's, on the same questions.

**The layout read** (the hub's files, as ``hf download`` keeps them): one Parquet file per subject and model,
``<subject>/<model>-00000-of-00001.parquet`` (the hub's config is the subject, its split the model, as
``meta_llama_llama_3_8b_instruct``); a row per template (row k is template k), a column ``example_<j>`` per question,
cells 1/0 (True/False; a missing cell is left out). The templates vary the separators, spacing and connectives of
one MMLU prompt (PromptEval's ``mmlu_data/build_templates.py``); they are named ``prompteval.<k>`` here, the
instruction phrasing of DOVE's rows, since the files carry no template text.

**The question**: PromptEval evaluated each subject's test split of ``cais/mmlu`` with lm-evaluation-harness (its
``mmlu_data/README.md``), so ``example_<j>`` is taken as question j of that split, in the hub's order. A file whose
column count is not the subject's test size (``posixlab.data.mmlu.TEST_SPLIT_SIZES``) is refused rather than
guessed at. Each question is keyed as DOVE keys it (``mmlu.<subject>``, test, the index in the hub's ``all`` split),
which joins PromptEval's rows, DOVE's and a posixlab export (``posixlab dove export``) on the question.

**What is not there**: the answer each model gave (only whether it was right), so the consistency rate of these
rows is not defined (``n/a``); and the shot count, which PromptEval's lm-evaluation-harness command leaves at 0.
"""

from __future__ import annotations

import re
from pathlib import Path

from posixlab.data.mmlu import TEST_SPLIT_SIZES, hub_index
from posixlab.errors import ConfigError

SHARD = re.compile(r"-\d{5}-of-\d{5}$")  # the hub's shard suffix of a Parquet file name
EXAMPLE = re.compile(r"example_(\d+)")
PROMPT_COLUMN = "dimensions_4: instruction_phrasing_text"  # DOVE_Lite's column that names the prompt


def is_prompteval(columns) -> bool:
    """Whether a table's columns are PromptEval's: ``example_0`` ... ``example_<J-1>``, nothing else.

    >>> is_prompteval(["example_0", "example_1"]), is_prompteval(["dataset", "score"]), is_prompteval([])
    (True, False, False)
    """
    names = [str(c) for c in columns]
    return bool(names) and sorted(names) == sorted(f"example_{j}" for j in range(len(names)))


def subject_and_model(path: str | Path) -> tuple[str, str]:
    """(subject, model) of a PromptEval file named as the hub names it, ``<subject>/<model>-00000-of-00001.parquet``
    (or ``<subject>/<model>.parquet``).

    >>> subject_and_model("pe/logical_fallacies/google_gemma_7b_it-00000-of-00001.parquet")
    ('logical_fallacies', 'google_gemma_7b_it')
    """
    path = Path(path)
    subject, model = path.parent.name, SHARD.sub("", path.stem)
    if subject not in TEST_SPLIT_SIZES:
        raise ConfigError(f"{path}: PromptEval's files are named <subject>/<model>-00000-of-00001.parquet, as the hub "
                          f"keeps them (hf download PromptEval/PromptEval_MMLU_correctness --repo-type dataset "
                          f"--include '<subject>/*' --local-dir DIR); {subject!r} is no MMLU subject. A file saved "
                          f"under another name: read_prompteval(path, subject=..., model=...)")
    return subject, model


def read_prompteval(path: str | Path, subject: str | None = None, model: str | None = None,
                    table=None) -> list[dict]:
    """One row per cell of a PromptEval correctness file, in DOVE_Lite's columns (``posixlab.interop.dove`` reads
    them): ``dataset`` ``mmlu.<subject>``, ``sample_index`` the question's index in the hub's ``all`` split,
    ``model``, the template as the instruction phrasing ``prompteval.<k>``, 0 shots, ``score``. Templates in row
    order, questions in column order. ``subject``/``model`` default to the file's name (``subject_and_model``);
    ``table``: the file's rows when already read (a pandas DataFrame).

    >>> import pandas as pd
    >>> cells = pd.DataFrame({f"example_{j}": [j % 2, 1] for j in range(100)})   # 2 templates, 100 questions
    >>> rows = read_prompteval("x.parquet", "abstract_algebra", "m", table=cells)
    >>> len(rows), rows[1]["sample_index"], rows[1]["score"], rows[100]["dimensions_4: instruction_phrasing_text"]
    (200, 1, 1.0, 'prompteval.1')
    """
    if subject is None or model is None:
        named = subject_and_model(path)
        subject, model = subject or named[0], model or named[1]
    if subject not in TEST_SPLIT_SIZES:
        raise ConfigError(f"{path}: subject {subject!r} is no MMLU subject (as the hub names them: abstract_algebra, "
                          f"...)")
    import pandas as pd

    if table is None:
        table = pd.read_parquet(path)
    if not is_prompteval(table.columns):
        raise ConfigError(f"{path}: not PromptEval's layout (columns example_0 ... example_<J-1>, a row per "
                          f"template); its columns begin {list(table.columns)[:4]}")
    width, size = len(table.columns), TEST_SPLIT_SIZES[subject]
    if width != size:
        raise ConfigError(f"{path}: {width} questions, but {subject}'s test split has {size}; example_<j> is read as "
                          f"question j of that split, so a file of another length cannot be placed")
    places = [hub_index(f"mmlu/{subject}/{j}")[1] for j in range(width)]
    columns = sorted(table.columns, key=lambda c: int(EXAMPLE.fullmatch(str(c)).group(1)))
    rows = []
    for k, cells in enumerate(table[columns].itertuples(index=False)):
        for place, cell in zip(places, cells):
            if pd.isna(cell):
                continue
            score = float(cell)
            if score not in (0.0, 1.0):
                raise ConfigError(f"{path}: template {k} scores {cell!r}; PromptEval's cells are correctness, 1 or 0")
            rows.append({"dataset": f"mmlu.{subject}", "sample_index": place, "model": model, PROMPT_COLUMN:
                         f"prompteval.{k}", "dimensions_5: shots": 0, "score": score})
    return rows
