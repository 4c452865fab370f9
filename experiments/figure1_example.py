"""Errica et al.'s Figure 1, as a worked example: a question classifier with a structured answer, and the
prediction under each small edit of its schema.

The classifier is posixlab's TREC-like set (``posixlab/data/trec_like.yaml``: 36 questions, TREC's six classes with
Li & Roth's glosses, so the Entity class is described as "entity", the description the paper edits). The schema is
built as ``instructor`` builds it from a Pydantic model (``ClassifierSchema``); each row below changes one thing of
it, by hand, as the paper's figure does (its own edit first: "entity" → "an entity"). Each model answers every
question under every schema, in process, with greedy decoding held to that schema by llguidance; the table gives
one question's answers (chosen before the run: the set's first Entity question) and, over all 36 questions, how
many predictions each edit changed against the original schema, and the accuracy.

    python -m experiments.figure1_example --out figures/structured/        # about 5 minutes on 2 cores

Writes ``figure1_example.md`` and ``figure1_example.json``.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

from posixlab import classify
from posixlab.models import ModelSpec, load_model
from posixlab.structured.schema import ClassifierSchema

CLASSIFIER = Path(__file__).resolve().parent.parent / "posixlab" / "data" / "trec_like.yaml"
QUESTION = 6  # the set's first Entity question ("What instrument did Louis Armstrong play?"), chosen before the run
MODELS = ("smollm2-135m-instruct", "qwen2.5-coder-0.5b-instruct")


def edits(base: ClassifierSchema) -> list[tuple[str, ClassifierSchema]]:
    """The original schema and one-change edits of it, the paper's first."""
    described = lambda text: replace(base, descriptions={**base.descriptions, "Entity": text})  # noqa: E731
    return [("original", base),
            ('Entity: "entity" → "an entity" (the paper\'s edit)', described("an entity")),
            ('Entity: "entity" → "Entity"', described("Entity")),
            ('Entity: "entity" → "the entity"', described("the entity")),
            ("enum order reversed", replace(base, classes=tuple(reversed(base.classes)))),
            ('field "label" → "category"', replace(base, field_name="category")),
            ('model "Classification" → "QuestionType"', replace(base, model_name="QuestionType"))]


def compact(answer: str) -> str:
    """A JSON answer on one line (a table cell); the text as sent where it is not JSON."""
    try:
        return json.dumps(json.loads(answer), ensure_ascii=False)
    except ValueError:
        return answer.replace("\n", " ")


def render(report: dict) -> str:
    """The Markdown tables of a report (``figure1_example.json``)."""
    lines = [f"Question: \"{report['question']}\" (gold: Entity). Schema as instructor builds it from a Pydantic "
             f"model; greedy decoding held to each schema (llguidance), in process.", ""]
    for name, per_edit in report["models"].items():
        lines += [f"**{name}**", "", "| schema | this question's answer | predictions changed (of 36) | accuracy |",
                  "|---|---|---|---|"]
        lines += [f"| {r['edit']} | `{compact(r['answer'])}` | {r['changed']} | {r['accuracy']:.3f} |" for r in per_edit]
        lines.append("")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--models", nargs="+", default=list(MODELS))
    args = parser.parse_args(argv)
    from posixlab.data.classifier_file import load_classifier

    own = load_classifier(CLASSIFIER)
    base = ClassifierSchema(classes=tuple(own.classes), descriptions=dict(own.definitions))
    rows = edits(base)
    report = {"classifier": "posixlab/data/trec_like.yaml", "question": own.samples[QUESTION].text, "models": {}}
    for name in args.models:
        lm = load_model(ModelSpec(name, "packaged", name))
        per_edit = []
        for label, schema in rows:
            result = classify(str(CLASSIFIER), lm, strategy="structured", variants="schema", num_rephrasings=1,
                              schema=schema.json_schema(), chat_template=True, max_new_tokens=20,
                              progress=False)
            records = sorted(result.records, key=lambda r: r["sample_index"])
            predictions = [r["predictions"][0] for r in records]
            per_edit.append({"edit": label, "answer": predictions[QUESTION]["answer"],
                             "labels": [p["label"] for p in predictions],
                             "gold": [r["gold"] for r in records]})
        original = per_edit[0]["labels"]
        for row in per_edit:
            row["changed"] = sum(a != b for a, b in zip(row["labels"], original))
            row["accuracy"] = round(sum(a == g for a, g in zip(row["labels"], row["gold"])) / len(row["gold"]), 3)
        report["models"][name] = per_edit
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "figure1_example.json").write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n",
                                              encoding="utf-8")
    text = render(report)
    (out / "figure1_example.md").write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
