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
            thought = (str, Field(description="Your reasoning, in one or two sentences."))
            fields = ({self.reasoning_name: thought, **fields} if self.reasoning == "before"
                      else {**fields, self.reasoning_name: thought})
        model = create_model(self.model_name, __doc__=self.docstring, **fields)
        return model

    def json_schema(self) -> dict:
        return self.pydantic_model().model_json_schema()

    def request_kwargs(self, messages: list[dict]) -> dict:
        """What ``instructor`` sends for this schema in its mode (messages, ``response_format`` or ``tools`` and
        ``tool_choice``): its own request builder, so the request is the one engineers' code sends."""
        import instructor
        from instructor.processing.response import handle_response_model

        mode = {"json_schema": instructor.Mode.JSON_SCHEMA, "json": instructor.Mode.JSON,
                "tools": instructor.Mode.TOOLS}[self.mode]
        return handle_response_model(self.pydantic_model(), mode=mode, messages=messages)[1]


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
