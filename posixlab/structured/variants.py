"""Schema variants (``task.variants=schema``): the original schema and Q - 1 variants, each changing one dimension of
it and recording which and how, seeded per variant (the same seed, the same variants), as HELM's perturbations are.

Dimensions (Errica et al. §1 and Fig. 1; ``blackbox-apis.md`` §3):

- ``description``: one class's description edited the way the paper's was ("ENTY: entity" → "an entity"): an
  article added or dropped, a capital changed, a word swapped for a synonym;
- ``rewording``: one class's description replaced by a paraphrase of it, written by the rephraser and kept only if
  it passes the paraphrase quality checks (``rewordings``: class -> its paraphrases; asked for by name, since it
  costs rephraser requests);
- ``order``: the enum's members in another order;
- ``names``: the field's name (``label`` → ``category``, ``answer`` ...) or the model's (``Classification`` →
  ``QuestionType`` ...);
- ``key_order``: a reasoning field before the label instead of after it (or after instead of before);
- ``mode``: instructor's JSON-schema mode against its tools mode.

Variants are dealt round-robin over the dimensions asked for, so every dimension gets about (Q - 1) / D of them;
within a dimension the k-th variant draws from ``random.Random(f"{seed}/{dimension}/{k}")``. A variant identical to
the original or to an earlier one is drawn again (up to a limit), so the Q schemas differ.

>>> base = ClassifierSchema(classes=("Number", "Entity", "Person"),
...                         descriptions={"Number": "a number", "Entity": "an entity", "Person": "a person"},
...                         reasoning="after")
>>> variants = schema_variants(base, 8, seed=0)
>>> [v.dimension for v in variants]
['original', 'description', 'order', 'names', 'key_order', 'mode', 'description', 'order']
>>> variants[4].schema.reasoning, variants[5].schema.mode
('before', 'tools')
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace

from posixlab.errors import ConfigError
from posixlab.structured.schema import ClassifierSchema

DIMENSIONS = ("description", "order", "names", "key_order", "mode", "rewording")
ON_REQUEST = ("rewording",)  # left out of the default dimensions: it needs the rephraser's paraphrases
FIELD_NAMES = ("label", "category", "answer", "class_name", "prediction")
MODEL_NAMES = ("Classification", "QuestionType", "Prediction", "TextCategory", "Label")
ARTICLES = ("a ", "an ", "the ")
SYNONYMS = {"question": "query", "asks": "requests", "number": "numeral", "person": "individual",
            "place": "location", "thing": "object", "text": "passage", "answer": "reply", "implies": "entails",
            "true": "correct", "false": "incorrect", "option": "choice", "correct": "right", "kind": "type"}


@dataclass(frozen=True)
class SchemaVariant:
    schema: ClassifierSchema
    dimension: str  # original | description | order | names | key_order | mode
    change: str  # what was changed, in words

    def to_dict(self) -> dict:
        return {"dimension": self.dimension, "change": self.change, "schema": self.schema.to_dict()}


def edit_description(text: str, rng: random.Random) -> tuple[str, str]:
    """A small edit of one description, like the paper's: drop or add an article, change a capital, or a synonym.

    >>> edit_description("entity", random.Random(0))[0] in {"an entity", "Entity", "the entity", "a entity"}
    True
    """
    edits = []
    lower = text.lower()
    for article in ARTICLES:
        if lower.startswith(article):
            edits.append((text[len(article):], f"article {article.strip()!r} dropped"))
    if not any(lower.startswith(a) for a in ARTICLES):
        article = "an " if lower[:1] in "aeiou" else "a "
        edits.append((article + text, f"article {article.strip()!r} added"))
    if text[:1].isalpha():
        flipped = text[0].lower() if text[0].isupper() else text[0].upper()
        edits.append((flipped + text[1:], "first letter's case changed"))
    words = text.split(" ")
    for k, word in enumerate(words):
        core = word.strip(".,;:").lower()
        if core in SYNONYMS:
            swapped = word.lower().replace(core, SYNONYMS[core])
            edits.append((" ".join(words[:k] + [swapped] + words[k + 1:]), f"{core!r} -> {SYNONYMS[core]!r}"))
    return rng.choice(edits)


def _variant(base: ClassifierSchema, dimension: str, rng: random.Random,
             rewordings: dict | None = None) -> tuple[ClassifierSchema, str]:
    if dimension == "description":
        described = [c for c in base.classes if base.descriptions.get(c)]
        if not described:
            raise ConfigError("schema variants of the description dimension need class descriptions (a definition "
                              "per class: the data set's, or your classifier file's)")
        target = rng.choice(described)
        new, how = edit_description(base.descriptions[target], rng)
        return replace(base, descriptions={**base.descriptions, target: new}), \
            f"{target}: {base.descriptions[target]!r} -> {new!r} ({how})"
    if dimension == "rewording":
        target = rng.choice(sorted(c for c in base.classes if (rewordings or {}).get(c)))
        new = rng.choice(rewordings[target])
        return replace(base, descriptions={**base.descriptions, target: new}), \
            f"{target}: {base.descriptions.get(target, '')!r} -> {new!r} (reworded by the rephraser)"
    if dimension == "order":
        order = list(base.classes)
        while len(order) > 1 and order == list(base.classes):
            rng.shuffle(order)
        return replace(base, classes=tuple(order)), f"enum order {', '.join(order)}"
    if dimension == "names":
        if rng.random() < 0.5:
            name = rng.choice([n for n in FIELD_NAMES if n != base.field_name])
            return replace(base, field_name=name), f"field {base.field_name!r} -> {name!r}"
        name = rng.choice([n for n in MODEL_NAMES if n != base.model_name])
        return replace(base, model_name=name), f"model {base.model_name!r} -> {name!r}"
    if dimension == "key_order":
        where = "before" if base.reasoning != "before" else "after"
        return replace(base, reasoning=where), f"reasoning field {where} the label"
    if dimension == "mode":  # JSON-schema (or JSON) mode against tools mode
        mode = "tools" if base.mode != "tools" else "json_schema"
        return replace(base, mode=mode), f"instructor mode {base.mode} -> {mode}"
    raise ConfigError(f"unknown schema dimension {dimension!r}; choose from {', '.join(DIMENSIONS)}")


def schema_variants(base: ClassifierSchema, count: int, seed: int = 0, dimensions: tuple[str, ...] | None = None,
                    rewordings: dict | None = None) -> list[SchemaVariant]:
    """The original (first) and ``count - 1`` distinct variants, dealt round-robin over ``dimensions`` (default:
    all of them but ``rewording``; ``key_order`` only when the schema has a reasoning field). A dimension with no new
    variant left (``mode`` has one; ``key_order`` one) leaves the rotation; too few variants in all is a
    ``ConfigError``. ``rewordings``: class -> paraphrases of its description, for the ``rewording`` dimension."""
    if dimensions is None:
        dimensions = tuple(d for d in DIMENSIONS
                           if d not in ON_REQUEST and (d != "key_order" or base.reasoning is not None))
    unknown = set(dimensions) - set(DIMENSIONS)
    if unknown or not dimensions:
        raise ConfigError(f"task.schema_dimensions must name some of {', '.join(DIMENSIONS)}, got {list(dimensions)}")
    if "key_order" in dimensions and base.reasoning is None:
        raise ConfigError("the key_order dimension moves a reasoning field: add one with task.schema_reasoning=after "
                          "(or before), or leave key_order out of task.schema_dimensions")
    if "rewording" in dimensions and not any((rewordings or {}).values()):
        raise ConfigError("the rewording dimension replaces a class description by the rephraser's paraphrase of it: "
                          "the classes need descriptions, and the rephraser paraphrases (none were given)")
    out = [SchemaVariant(base, "original", "none")]
    seen = {_key(base)}
    rotation, drawn = list(dimensions), {d: 0 for d in dimensions}
    while len(out) < count:
        if not rotation:
            raise ConfigError(f"the schema has only {len(out)} distinct variants over {', '.join(dimensions)}; ask "
                              f"for fewer (task.num_rephrasings={len(out)}) or more dimensions")
        dimension = rotation[(len(out) - 1) % len(rotation)]
        for attempt in range(50):
            rng = random.Random(f"{seed}/{dimension}/{drawn[dimension]}/{attempt}")
            schema, change = _variant(base, dimension, rng, rewordings)
            if _key(schema) not in seen:
                seen.add(_key(schema))
                drawn[dimension] += 1
                out.append(SchemaVariant(schema, dimension, change))
                break
        else:
            rotation.remove(dimension)
    return out


def _key(schema: ClassifierSchema) -> str:
    import json

    return json.dumps(schema.to_dict(), sort_keys=True)
