"""A classifier asked for a JSON object (``strategy=structured``): the schema, as ``instructor`` builds one from a
Pydantic model, and the check of an answer against it.

Engineers classify with a Pydantic model whose field is the class (an enum of the class names, a description of
each class in the field's description) and let ``instructor`` turn it into a JSON schema (JSON-schema mode) or a
function to call (tools mode). Every part of that schema is wording a model reads: the model's name and docstring,
the field's name and description, the order of the enum's members, a reasoning field before or after the label,
and the mode. ``ClassifierSchema`` holds all of them as plain data, so that a variant (``variants.py``) changes one
and records which; ``pydantic_model`` builds the model ``instructor`` is given.

>>> schema = ClassifierSchema(classes=("Number", "Entity"), descriptions={"Number": "a number", "Entity": "an entity"})
>>> model = schema.pydantic_model()
>>> model.__name__, list(model.model_fields)
('Classification', ['label'])
>>> model.model_json_schema()["properties"]["label"]["enum"]
['Number', 'Entity']
>>> print(model.model_json_schema()["properties"]["label"]["description"])
The class of the text. Number: a number. Entity: an entity.
>>> check_answer('{"label": "Entity"}', schema)
('Entity', None)
>>> check_answer('{"label": "Person"}', schema), check_answer('{"lab": "Entity"}', schema)
((None, 'out_of_enum'), (None, 'missing_field'))
>>> check_answer('Entity', schema)
(None, 'invalid_json')
"""

from __future__ import annotations

import enum
import json
from dataclasses import asdict, dataclass, field
from typing import Literal

from pydantic import BaseModel, Field, create_model

# instructor's modes: json_schema (OpenAI structured outputs, response_format json_schema), json (response_format
# json_object with the schema in a system message: what llama.cpp's server takes), tools (a function to call)
MODES = ("json_schema", "json", "tools")
REASONING = (None, "before", "after")  # no reasoning field, or one before or after the label (key order)
FAILURES = ("invalid_json", "missing_field", "out_of_enum")  # an answer that is not what the schema asks: N/A


@dataclass(frozen=True)
class ClassifierSchema:
    classes: tuple[str, ...]  # the enum's members, in the order the schema lists them
    descriptions: dict = field(default_factory=dict, hash=False)  # class -> its description ("" or absent: none)
    model_name: str = "Classification"
    docstring: str = "Classify the text."
    field_name: str = "label"
    field_intro: str = "The class of the text."  # the field description's first sentence, before the classes'
    reasoning: str | None = None  # None | before | after: a free-text reasoning field and where it sits
    reasoning_name: str = "reasoning"
    reasoning_description: str = "Your reasoning, in one or two sentences."
    mode: str = "json_schema"  # json_schema | json | tools (MODES)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["classes"] = list(self.classes)
        return d

    def field_description(self) -> str:
        described = [f"{c}: {self.descriptions[c].rstrip('.')}." for c in self.classes if self.descriptions.get(c)]
        return " ".join([self.field_intro, *described]).strip()

    def pydantic_model(self) -> type[BaseModel]:
        """The Pydantic model ``instructor`` is given: the label a ``Literal`` of the classes (an ``enum`` in the
        JSON schema, in this order), its description naming each class's; a reasoning field where asked."""
        label = (Literal[tuple(self.classes)], Field(description=self.field_description()))
        fields = {self.field_name: label}
        if self.reasoning is not None:
            thought = (str, Field(description=self.reasoning_description))
            fields = ({self.reasoning_name: thought, **fields} if self.reasoning == "before"
                      else {**fields, self.reasoning_name: thought})
        return create_model(self.model_name, __doc__=self.docstring, **fields)

    def json_schema(self) -> dict:
        return self.pydantic_model().model_json_schema()

    def decoding_schema(self) -> dict:
        """The JSON schema that constrained decoding holds an answer to (llguidance in process, vLLM's
        ``structured_outputs``): this schema with no keys beyond its own (a model held to a schema should not invent
        fields the schema does not name)."""
        return {**self.json_schema(), "additionalProperties": False}

    def request_kwargs(self, messages: list[dict]) -> dict:
        """What ``instructor`` sends for this schema in its mode (messages, ``response_format`` or ``tools`` and
        ``tool_choice``): its own request builder, so the request is the one engineers' code sends."""
        import instructor
        from instructor.processing.response import handle_response_model

        mode = {"json_schema": instructor.Mode.JSON_SCHEMA, "json": instructor.Mode.JSON,
                "tools": instructor.Mode.TOOLS}[self.mode]
        return handle_response_model(self.pydantic_model(), mode=mode, messages=messages)[1]


def read_schema(source, mode: str = "json_schema") -> ClassifierSchema:
    """Your own classifier schema as a ``ClassifierSchema``: ``source`` is a Pydantic model class, its JSON schema
    (a dict), or a JSON schema file's path.

    What is read: the model's title and description (its docstring); one label field, the only property whose
    values are a closed set (a ``Literal`` or ``enum``, inline or a ``$ref`` to an ``Enum``, or a ``oneOf``/``anyOf`` of
    ``const`` values, each with its own description); its name, description and the classes in order; and at most
    one free-text string field, the reasoning field, before or after the label. Class descriptions are read from the
    ``const`` entries, or from the label's description where it names every class as ``instructor`` users write it
    ("The class. NUM: a number. ENTY: an entity."); otherwise the whole description is the field's introduction and
    the classes have none (the ``description`` dimension then has nothing to edit). The schema is rebuilt from what
    was read, in the ``Literal`` form: an instructor-style model comes back exactly (tested), an ``Enum`` one as
    the same wording with the enum inline, and every variant differs from it in one dimension.

    >>> from typing import Literal
    >>> from pydantic import BaseModel, Field
    >>> class QuestionType(BaseModel):
    ...     \"\"\"The kind of answer a question expects.\"\"\"
    ...     category: Literal["NUM", "ENTY"] = Field(description="The type. NUM: a number. ENTY: an entity.")
    >>> schema = read_schema(QuestionType)
    >>> schema.model_name, schema.field_name, schema.classes, schema.descriptions
    ('QuestionType', 'category', ('NUM', 'ENTY'), {'NUM': 'a number', 'ENTY': 'an entity'})
    >>> schema.json_schema() == QuestionType.model_json_schema()
    True
    """
    from posixlab.errors import ConfigError

    where, source = _as_json_schema(source)
    properties = _resolved_properties(source)
    labels = {name: found for name, prop in properties.items() if (found := _closed_set(prop)) is not None}
    if len(labels) != 1:
        raise ConfigError(f"{where} needs exactly one label field, a property whose values are a closed set (Literal "
                          f"or enum); it has {len(labels)}{': ' + ', '.join(labels) if labels else ''}")
    (label, (classes, descriptions)), = labels.items()
    if not classes or not all(isinstance(c, str) for c in classes) or len(set(classes)) != len(classes):
        raise ConfigError(f"{where}: the label field {label!r} must list distinct string classes, got {classes}")
    others = [name for name in properties if name != label]
    if len(others) > 1 or others and properties[others[0]].get("type") != "string":
        raise ConfigError(f"{where}: besides the label {label!r}, posixlab takes at most one free-text string field "
                          f"(a reasoning field); found {', '.join(others)}: remove the others, or measure them "
                          f"with your own code")
    intro = properties[label].get("description", "")
    if not descriptions:
        intro, descriptions = _split_description(intro, classes)
    read = {"classes": tuple(classes), "descriptions": descriptions, "field_name": label, "field_intro": intro,
            "model_name": source.get("title", "Classification"), "docstring": source.get("description"),
            "mode": mode}
    if others:
        names = list(properties)
        read.update(reasoning="before" if names.index(others[0]) < names.index(label) else "after",
                    reasoning_name=others[0], reasoning_description=properties[others[0]].get("description", ""))
    return ClassifierSchema(**read)


def _as_json_schema(source) -> tuple[str, dict]:
    """(how errors name it, the JSON schema) of a file path, a Pydantic model class or a dict."""
    import os

    from posixlab.errors import ConfigError

    where = "your schema"
    if isinstance(source, (str, os.PathLike)):
        where, source = f"the schema file {source}", load_schema_file(source)
    elif isinstance(source, type) and issubclass(source, BaseModel):
        where, source = f"your Pydantic model {source.__name__}", source.model_json_schema()
    if not isinstance(source, dict) or not isinstance(source.get("properties"), dict) or not source["properties"]:
        raise ConfigError(f"{where} is not a JSON schema of an object with properties: give a Pydantic model, "
                          f"its model_json_schema(), or a file holding it")
    return where, source


def _resolved_properties(source: dict) -> dict:
    """The schema's properties in order, each ``$ref`` (bare or in an ``allOf``, as Pydantic writes an ``Enum``
    field) replaced by its definition, the property's own keys (its description) kept."""
    defs = source.get("$defs", source.get("definitions", {}))

    def resolve(prop: dict) -> dict:
        ref = prop.get("$ref") or next((p.get("$ref") for p in prop.get("allOf", []) if "$ref" in p), None)
        if ref:
            target = defs.get(ref.rsplit("/", 1)[-1], {})
            return {**target, **{k: v for k, v in prop.items() if k not in ("$ref", "allOf")}}
        return prop

    return {name: resolve(prop) for name, prop in source["properties"].items()}


def _closed_set(prop: dict) -> tuple[list, dict] | None:
    """(the values, their descriptions) of a property that takes a closed set of values: an ``enum``, or a
    ``oneOf``/``anyOf`` of ``const``s (each may carry a description); None for any other property."""
    if isinstance(prop.get("enum"), list):
        return prop["enum"], {}
    for key in ("oneOf", "anyOf"):
        options = prop.get(key)
        if isinstance(options, list) and options and all(isinstance(o, dict) and "const" in o for o in options):
            return [o["const"] for o in options], {o["const"]: o["description"] for o in options
                                                   if o.get("description")}
    return None


def load_schema_file(path) -> dict:
    """A JSON schema file's contents (the CLI reads ``task.schema`` so: the run's config then holds the schema
    itself, and its fingerprint changes when the file does)."""
    from posixlab.errors import ConfigError

    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except OSError as exc:
        raise ConfigError(f"the schema file {path} cannot be read ({exc.strerror}): give a JSON schema file's path "
                          f"(task.schema=FILE.json)") from None
    except ValueError as exc:
        raise ConfigError(f"the schema file {path} is not JSON ({exc}): write the schema as JSON (from Pydantic: "
                          f"json.dumps(MyModel.model_json_schema()))") from None


def _split_description(text: str, classes) -> tuple[str, dict]:
    """("The class.", {class: description}) from "The class. NUM: a number. ENTY: an entity." when every class
    appears as "CLASS: " in order; (text, {}) otherwise."""
    positions, start = [], 0
    for c in classes:
        at = text.find(f"{c}: ", start)
        if at < 0 or (at > 0 and not text[at - 1].isspace()):
            return text, {}
        positions.append(at)
        start = at + len(c) + 2
    pieces = {}
    for k, c in enumerate(classes):
        end = positions[k + 1] if k + 1 < len(classes) else len(text)
        pieces[c] = text[positions[k] + len(c) + 2:end].strip().rstrip(".")
    return text[:positions[0]].strip(), pieces


def check_answer(answer: str | dict | None, schema: ClassifierSchema) -> tuple[str | None, str | None]:
    """(the class, None) when ``answer`` (JSON text, or the parsed object) is a valid object of the schema; (None,
    the failure) otherwise: ``invalid_json`` (not a JSON object), ``missing_field`` (no label field),
    ``out_of_enum`` (a label that is not one of the classes). Only the label is checked: a reasoning field is free
    text, and extra keys are allowed (as Pydantic allows them by default)."""
    if isinstance(answer, str):
        try:
            answer = json.loads(answer)
        except ValueError:
            return None, "invalid_json"
    if not isinstance(answer, dict):
        return None, "invalid_json"
    if schema.field_name not in answer:
        return None, "missing_field"
    value = answer[schema.field_name]
    if isinstance(value, enum.Enum):
        value = value.value
    if not isinstance(value, str) or value not in schema.classes:
        return None, "out_of_enum"
    return value, None
