"""One sample's record: every prompt's answer, its class and the class distribution p(y | x, prompt), read one of
two ways (``probability``): ``greedy`` (the class the greedy answer names) or ``label_probs`` (the classes'
probabilities as the answer, normalised among themselves); and, with task.repeats = R, every repeat's class."""

from __future__ import annotations

import numpy as np

from posixlab.answers import parse_answer
from posixlab.data.classification import Sample
from posixlab.metrics.classification import NA, class_distribution, sensitivity
from posixlab.structured.slots import slot_logprobs
from posixlab.tasks.base import Request, answer_texts
from posixlab.tasks.classification.config import ClassificationConfig
from posixlab.tasks.classification.inputs import Inputs


def label_distribution(logprobs: list[float]) -> list[float]:
    """Label log-probabilities normalised into a distribution over the classes (softmax), in float64.

    >>> import math
    >>> [round(p, 3) for p in label_distribution([math.log(0.3), math.log(0.1)])]
    [0.75, 0.25]
    """
    x = np.asarray(logprobs, dtype=np.float64)
    p = np.exp(x - x.max())
    return (p / p.sum()).tolist()


def read_record(cfg: ClassificationConfig, inputs: Inputs, sample: Sample, requests: list[Request], scores: list,
                lm) -> dict:
    """The record of one sample from its requests (``build_requests``: R repeats of each prompt, in prompt order)
    and what the engine returned for each."""
    classes, all_classes = inputs.classes, [*inputs.classes, NA]
    predictions, per_rephrasing, logprobs = [], [], []
    repeats = cfg.repeats
    for q, set_scores in enumerate(scores[::repeats]):  # repeat 0 of each rephrasing: the paper's answers
        answer = answer_texts(set_scores, lm)[0].strip()
        parse = _parse(inputs, answer, sample, q)
        label = parse["label"]
        lp = _label_logprobs(cfg, inputs, set_scores, requests[q * repeats], q, lm)
        if lp is not None:
            logprobs.append(lp)
            per_rephrasing.append([*label_distribution(lp), 0.0])
            label = classes[int(np.argmax(lp))]
        elif inputs.schemas and cfg.probability == "label_probs":  # no JSON slot in the answer: N/A
            logprobs.append(None)
            per_rephrasing.append(class_distribution([NA], all_classes).tolist())
            label = NA
        else:
            per_rephrasing.append(class_distribution([label], all_classes).tolist())
        prediction = {"rephrasing": q, "answer": answer, "label": label, "parse": parse}
        if hasattr(set_scores, "answers"):  # a chat API: what answered (the served model, its fingerprint)
            served = set_scores.answers[0]
            prediction["served"] = [served.served_model, served.system_fingerprint]
        if repeats > 1:  # every repeat's label, repeat 0 first (the noise floor: posixlab/metrics/noise.py)
            again = range(q * repeats + 1, (q + 1) * repeats)
            prediction["repeat_labels"] = [label] + [_label(cfg, inputs, scores[k], lm, sample, q, requests[k])
                                                     for k in again]
            prediction["repeat_answers"] = [answer] + [answer_texts(scores[k], lm)[0].strip() for k in again]
        predictions.append(prediction)
    distribution = np.mean(np.asarray(per_rephrasing), axis=0)
    return {"sample_id": sample.sample_id, "text": sample.text, "gold": sample.gold, "predictions": predictions,
            "label_logprobs": logprobs or None, "distribution": distribution.tolist(),
            "sensitivity": sensitivity(distribution)}


def _parse(inputs: Inputs, answer: str, sample: Sample, q: int) -> dict:
    """The parse record of one answer: the one parser's (free text), or the schema check (structured: an answer
    that is not a valid object of its schema is N/A, with the failure named)."""
    if not inputs.schemas:
        return parse_answer(answer, inputs.classes, inputs.aliases, sample.fields.get("options"))
    from posixlab.structured.schema import check_answer

    label, failure = check_answer(answer, inputs.schemas[q].schema)
    return {"label": NA if label is None else label, "rule": "schema", "failure": failure}


def _label(cfg: ClassificationConfig, inputs: Inputs, result, lm, sample: Sample, q: int, request: Request) -> str:
    """The class one answer gives: the labels' most probable (label_probs) or the parsed greedy answer."""
    lp = _label_logprobs(cfg, inputs, result, request, q, lm)
    if lp is not None:
        return inputs.classes[int(np.argmax(lp))]
    if inputs.schemas and cfg.probability == "label_probs":
        return NA
    return _parse(inputs, answer_texts(result, lm)[0].strip(), sample, q)["label"]


def _label_logprobs(cfg: ClassificationConfig, inputs: Inputs, result, request: Request, q: int,
                    lm) -> list[float] | None:
    """The classes' log-probabilities as the answer: after the prompt (free text: the request carried the label
    tokens, scored by the engine), or in the JSON slot of the structured answer (``slot_logprobs``); None in greedy
    mode or where the answer has no slot."""
    if request.candidates:
        return result.candidates[0].tolist()
    if inputs.schemas and cfg.probability == "label_probs":
        return slot_logprobs(lm, request.ids[0], result.responses[0], inputs.schemas[q].schema, inputs.classes)
    return None
