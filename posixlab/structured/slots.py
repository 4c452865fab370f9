"""Each class's probability in the label slot of a JSON answer (strategy=structured with probability=label_probs):
token-level scores inside one full sequence, read in this process (the ``slot_scores`` capability: ``score_full``,
which only an in-process model has)."""

from __future__ import annotations

import re


def slot_logprobs(lm, prompt_ids: list[int], response: list[int], schema, classes) -> list[float] | None:
    """log P(class + '"' | prompt, the answer up to its label's value) for each of ``classes`` (the task's order,
    whatever order the schema's enum lists them in); None where the answer has no label slot (a failure, counted as N/A).

    The context is the greedy (schema-held) answer's own tokens up to where the label's value starts (its reasoning
    field too, when that comes first), so the probability is read where the model answered; where a token runs
    across that point, the answer's text up to it is encoded afresh. Each class is scored as its own tokens and the
    closing quote, by the raw model (no grammar mask), and the classes are normalised among themselves by the caller
    (``label_distribution``): the model's preference among the enum's members at the slot, which is the greedy
    answer's class wherever the value's first token decides it."""
    eos = lm.eos_ids
    tokens = [t for t in response if t not in eos]
    text = lm.decode(tokens)
    found = re.search(r'"' + re.escape(schema.field_name) + r'"\s*:\s*"', text)
    if found is None:
        return None
    start = found.end()
    context = None
    for k in range(len(tokens) + 1):
        piece = lm.decode(tokens[:k])
        if len(piece) >= start:
            if piece == text[:start]:
                context = list(prompt_ids) + tokens[:k]
            break
    if context is None:  # a token runs across the slot's start: the text up to it, encoded afresh
        context = list(prompt_ids) + lm.encode(text[:start], add_special_tokens=False)
    return [lm.score_full(context, lm.encode(f'{c}"', add_special_tokens=False)) for c in classes]
