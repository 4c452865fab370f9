"""Structured outputs (strategy=structured, posixlab/structured/): schemas as instructor builds them, schema variants
with exactly the change they record, instructor's requests per mode, failures counted per prompt and per dimension
against a scripted server, and a real llama.cpp server's JSON and tools modes."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from chat_server import ChatServer, completion
from posixlab.errors import ConfigError
from posixlab.models import ModelSpec
from posixlab.models.loading import ServerSettings
from posixlab.runner import run
from posixlab.structured.schema import ClassifierSchema, check_answer
from posixlab.structured.variants import schema_variants
from posixlab.tasks.classification import ClassificationConfig, ClassificationData

BASE = ClassifierSchema(classes=("Number", "Entity", "Person"),
                        descriptions={"Number": "a number", "Entity": "entity", "Person": "a person"})

CLASSIFIER = """
name: trec_mini
task: Classify the question by the kind of answer it asks for.
classes:
  - {name: Number, definition: a number}
  - {name: Entity, definition: entity}
  - {name: Person, definition: a person}
samples:
  - {text: "How many moons does Mars have?", label: Number}
  - {text: "What is the fastest land animal?", label: Entity}
  - {text: "Who wrote Hamlet?", label: Person}
"""


def label_property(schema: dict) -> tuple[str, dict]:
    return next((k, v) for k, v in schema["properties"].items() if "enum" in v)


# --- the schema and its variants -----------------------------------------------------------------------------------

def test_each_variant_changes_exactly_what_it_records():
    base_json = BASE.json_schema()
    for variant in schema_variants(BASE, 10, seed=3)[1:]:
        new = variant.schema.json_schema()
        name, prop = label_property(new)
        base_name, base_prop = label_property(base_json)
        if variant.dimension == "description":
            target = variant.change.split(":")[0]
            changed = [c for c in BASE.classes if variant.schema.descriptions[c] != BASE.descriptions[c]]
            assert changed == [target] and prop["enum"] == base_prop["enum"] and new["title"] == base_json["title"]
            assert prop["description"] != base_prop["description"]
        elif variant.dimension == "order":
            assert prop["enum"] != base_prop["enum"] and sorted(prop["enum"]) == sorted(base_prop["enum"])
            assert variant.change == f"enum order {', '.join(prop['enum'])}"
        elif variant.dimension == "names":
            assert (name != base_name) != (new["title"] != base_json["title"])  # one name, not both
            assert prop["description"] == base_prop["description"]
        elif variant.dimension == "mode":
            assert variant.schema.mode == "tools" and new == base_json  # the same schema, sent another way
        else:
            pytest.fail(variant.dimension)
    assert schema_variants(BASE, 10, seed=3) == schema_variants(BASE, 10, seed=3)  # seeded
    assert schema_variants(BASE, 10, seed=3) != schema_variants(BASE, 10, seed=4)


def test_key_order_puts_the_reasoning_field_before_or_after_the_label():
    after = replace(BASE, reasoning="after")
    assert list(after.json_schema()["properties"]) == ["label", "reasoning"]
    variant = next(v for v in schema_variants(after, 6, seed=0) if v.dimension == "key_order")
    assert list(variant.schema.json_schema()["properties"]) == ["reasoning", "label"]
    with pytest.raises(ConfigError, match="key_order dimension moves a reasoning field"):
        schema_variants(BASE, 4, dimensions=("key_order",))
    with pytest.raises(ConfigError, match="only 2 distinct variants"):
        schema_variants(BASE, 4, dimensions=("mode",))


def test_instructor_builds_the_request_of_each_mode():
    messages = [{"role": "user", "content": "Who wrote Hamlet?"}]
    as_schema = BASE.request_kwargs(messages)
    assert as_schema["response_format"]["type"] == "json_schema"
    assert label_property(as_schema["response_format"]["json_schema"]["schema"])[1]["enum"] == list(BASE.classes)
    as_json = replace(BASE, mode="json").request_kwargs(messages)
    assert as_json["response_format"] == {"type": "json_object"}
    assert '"enum"' in as_json["messages"][0]["content"] and as_json["messages"][-1] == messages[0]
    as_tools = replace(BASE, mode="tools").request_kwargs(messages)
    assert as_tools["tools"][0]["function"]["name"] == "Classification"
    assert as_tools["tool_choice"] == {"type": "function", "function": {"name": "Classification"}}


@pytest.mark.parametrize("answer, expected", [
    ('{"label": "Person"}', ("Person", None)), ('{"label": "Person", "reasoning": "x"}', ("Person", None)),
    ('{"label": "person"}', (None, "out_of_enum")), ('{"label": 3}', (None, "out_of_enum")),
    ('{"category": "Person"}', (None, "missing_field")), ('["Person"]', (None, "invalid_json")),
    ('{"label": "Person"', (None, "invalid_json")), ("", (None, "invalid_json"))])
def test_answers_are_checked_against_the_schema(answer, expected):
    assert check_answer(answer, BASE) == expected


# --- a run against a scripted server -------------------------------------------------------------------------------

def schema_rule(body: dict) -> tuple[str, str | None]:
    """The scripted model: answers the enum's first member under the field the schema names, except that a schema
    named Prediction gets broken JSON and one named TextCategory an answer outside the enum; tools-mode requests
    are answered with a tool call. Returns (the text it sends, the failure it should be counted as)."""
    if "tools" in body:
        schema = body["tools"][0]["function"]["parameters"]
        title = body["tools"][0]["function"]["name"]
    else:
        schema = body["response_format"]["json_schema"]["schema"]
        title = schema["title"]
    name, prop = label_property(schema)
    if title == "Prediction":
        return '{"' + name + '": ', "invalid_json"
    if title == "TextCategory":
        return json.dumps({name: "Something else"}), "out_of_enum"
    return json.dumps({name: prop["enum"][0]}), None


def scripted(body, n):
    text, _ = schema_rule(body)
    if "tools" in body:
        reply = completion("")
        reply["choices"][0]["message"] = {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": body["tools"][0]["function"]["name"], "arguments": text}}]}
        return 200, {}, reply
    return 200, {}, completion(text)


def structured_config(base_url: str, tmp_path: Path, **task) -> ClassificationConfig:
    path = tmp_path / "trec_mini.yaml"
    path.write_text(CLASSIFIER, encoding="utf-8")
    model = ModelSpec("scripted", "api", "scripted", backend="chat",
                      server=ServerSettings(base_url=base_url, max_concurrency=2))
    return ClassificationConfig(model=model, data=ClassificationData(name="classifier", source="path",
                                                                     path=str(path)),
                                strategy="structured", output_dir=str(tmp_path / "run"),
                                cache_dir=str(tmp_path / "cache"), **task)


def test_schema_variants_failures_counted_per_prompt_and_dimension(tmp_path):
    with ChatServer(scripted) as server:
        summary = run(structured_config(server.base_url, tmp_path, variants="schema", num_rephrasings=12),
                      progress=False)
        bodies = server.bodies
    assert len(bodies) == 3 * 12
    saved = json.loads((tmp_path / "run" / "rephrasings.json").read_text())["schemas"]
    # what the scripted model does with each prompt's schema, as saved with the run (the requests instructor builds)
    schemas = [ClassifierSchema(**{**v["schema"], "classes": tuple(v["schema"]["classes"])}) for v in saved]
    expected = [schema_rule(schema.request_kwargs([{"role": "user", "content": "x"}]))[1] for schema in schemas]
    assert len(set(expected)) == 3  # valid answers and two kinds of failure among the variants
    records = [json.loads(line) for line in (tmp_path / "run" / "samples.jsonl").read_text().splitlines()]
    for record in records:
        assert [p["parse"]["failure"] for p in record["predictions"]] == expected
        assert all((p["label"] == "N/A") == (p["parse"]["failure"] is not None) for p in record["predictions"])
    structured = summary["structured"]
    assert structured["failures"]["rate"] == pytest.approx(sum(e is not None for e in expected) / 12)
    assert [p["dimension"] for p in structured["per_prompt"]] == [s["dimension"] for s in saved]
    dims = {d["dimension"]: d for d in structured["per_dimension"]}
    assert set(dims) == {"description", "order", "names", "mode"}
    names = [q for q, s in enumerate(saved) if s["dimension"] == "names"]
    assert dims["names"]["failure_rate"] == pytest.approx(sum(expected[q] is not None for q in names) / len(names))
    assert dims["mode"]["failures"] == {"invalid_json": 0, "missing_field": 0, "out_of_enum": 0}
    # the enum's first member is the answer: moving the enum's members moves predictions, rewording does not
    assert dims["order"]["sensitivity"] > 0 and dims["description"]["sensitivity"] == 0
    tools = [b for b in bodies if "tools" in b]
    assert tools and all(b["tool_choice"]["function"]["name"] == b["tools"][0]["function"]["name"] for b in tools)
    assert "## Structured answers" in (tmp_path / "run" / "summary.md").read_text()


def test_structured_settings_that_cannot_work_are_config_errors(tmp_path):
    cfg = structured_config("http://127.0.0.1:9/v1", tmp_path)
    served = replace(cfg, model=ModelSpec("smollm2-135m-instruct", "packaged", "smollm2-135m-instruct",
                                          backend="vllm", server=ServerSettings(base_url="http://127.0.0.1:9/v1")))
    with pytest.raises(ConfigError, match="tools mode and the mode dimension need a chat model"):
        run(replace(served, structured_mode="tools"), progress=False)
    with pytest.raises(ConfigError, match="scored in this process"):
        run(replace(served, probability="label_probs"), progress=False)
    local = replace(cfg, model=ModelSpec("smollm2-135m-instruct", "packaged", "smollm2-135m-instruct"))
    with pytest.raises(ConfigError, match="tools mode and the mode dimension need a chat model"):
        run(replace(local, structured_mode="tools"), progress=False)
    with pytest.raises(ConfigError, match="needs strategy=structured"):
        run(replace(cfg, strategy="simple", variants="schema"), progress=False)
    with pytest.raises(ConfigError, match="scored in this process"):
        run(replace(cfg, probability="label_probs"), progress=False)


def test_structured_checks_ask_for_capabilities_not_backend_names(tmp_path, monkeypatch):
    """A backend of any name with instructor's request modes (tools) may use tools mode; one with slot scores may
    read the classes' probabilities in the JSON slot; one with neither may do neither."""
    from types import SimpleNamespace

    from posixlab import backends
    from posixlab.models.capabilities import GENERATE, SLOT_SCORES, STRUCTURED, TOOLS
    from posixlab.tasks.classification.config import check_settings

    cfg = structured_config("http://127.0.0.1:9/v1", tmp_path)
    for name, capabilities in (("mine-api", {TOOLS}), ("mine-local", {SLOT_SCORES}), ("mine-bare", set())):
        monkeypatch.setitem(backends.BACKENDS, name, SimpleNamespace(
            name=name, capabilities=frozenset({GENERATE, STRUCTURED, *capabilities})))
    api, local, bare = (replace(cfg, model=replace(cfg.model, backend=b)) for b in ("mine-api", "mine-local",
                                                                                      "mine-bare"))
    check_settings(replace(api, structured_mode="tools"))
    check_settings(replace(local, probability="label_probs"))
    with pytest.raises(ConfigError, match="tools mode and the mode dimension need a chat model"):
        check_settings(replace(local, structured_mode="tools"))
    with pytest.raises(ConfigError, match="scored in this process"):
        check_settings(replace(api, probability="label_probs"))
    with pytest.raises(ConfigError, match="need a chat model"):
        check_settings(replace(bare, variants="schema", schema_dimensions=("mode",)))


def test_in_process_constrained_decoding_gives_only_schema_valid_answers(lm, tmp_path):
    """SmolLM2 in this process, its greedy decoding held to each variant's schema by llguidance: every answer is a
    valid object of its schema (the failures are 0), under schema variants of every in-process dimension."""
    cfg = structured_config("unused", tmp_path, variants="schema", num_rephrasings=7, schema_reasoning=None)
    cfg = replace(cfg, model=ModelSpec("smollm2-135m-instruct", "packaged", "smollm2-135m-instruct"),
                  score_cache=False)
    summary = run(cfg, lm=lm, progress=False)
    records = [json.loads(line) for line in (tmp_path / "run" / "samples.jsonl").read_text().splitlines()]
    saved = json.loads((tmp_path / "run" / "rephrasings.json").read_text())["schemas"]
    assert {s["dimension"] for s in saved} == {"original", "description", "order", "names"}
    assert any(s["schema"]["field_name"] != "label" for s in saved)  # each prompt decoded under its own schema
    for record in records:
        for p, variant in zip(record["predictions"], saved):
            answer = json.loads(p["answer"])
            field = variant["schema"]["field_name"]
            assert set(answer) == {field} and answer[field] in variant["schema"]["classes"], p["answer"]
            assert p["parse"]["failure"] is None and p["label"] == answer[field]
    assert summary["structured"]["failures"]["rate"] == 0.0
@pytest.mark.slow
def test_llama_cpp_json_mode_honours_json(llama_server, tmp_path):
    """llama.cpp's server in instructor's JSON mode (json_object; the schema in a system message): every answer is
    a JSON object, which the server's grammar enforces; whether its label is in the enum is the model's doing and
    is counted, not assumed."""
    from conftest import LLAMA_MODEL

    cfg = structured_config(llama_server, tmp_path, structured_mode="json", num_rephrasings=1)
    cfg = replace(cfg, model=replace(cfg.model, name=LLAMA_MODEL, path=LLAMA_MODEL))
    summary = run(cfg, progress=False)
    records = [json.loads(line) for line in (tmp_path / "run" / "samples.jsonl").read_text().splitlines()]
    answers = [p["answer"] for r in records for p in r["predictions"]]
    assert len(answers) == 3 and all(isinstance(json.loads(a), dict) for a in answers), answers
    assert summary["structured"]["failures"]["counts"]["invalid_json"] == 0



@pytest.mark.slow
def test_llama_cpp_tools_mode_answers_by_a_named_tool_call(llama_server, tmp_path):
    """llama.cpp's server takes instructor's tools mode (the schema as a function's parameters, the call named by
    tool_choice) and answers with a tool call whose arguments its grammar holds to that schema: every answer is an
    object with the label field and a class of the enum (checked, not assumed from the status)."""
    from conftest import LLAMA_MODEL

    cfg = structured_config(llama_server, tmp_path, structured_mode="tools", num_rephrasings=1)
    cfg = replace(cfg, model=replace(cfg.model, name=LLAMA_MODEL, path=LLAMA_MODEL))
    summary = run(cfg, progress=False)
    records = [json.loads(line) for line in (tmp_path / "run" / "samples.jsonl").read_text().splitlines()]
    answers = [json.loads(p["answer"]) for r in records for p in r["predictions"]]
    assert len(answers) == 3 and summary["structured_mode"] == "tools"
    assert all(set(a) == {"label"} and a["label"] in summary["classes"] for a in answers), answers
    assert summary["structured"]["failures"]["rate"] == 0.0

# --- your own schema -----------------------------------------------------------------------------------------------

def test_your_own_pydantic_model_is_read_and_rebuilt_exactly():
    """An instructor-style model (a Literal label whose description names each class, a reasoning field before it)
    is read into its parts and rebuilt to the very same JSON schema; the variants vary its own names."""
    from typing import Literal

    from pydantic import BaseModel, Field

    from posixlab.structured.schema import read_schema

    class QuestionType(BaseModel):
        """What kind of answer the question expects."""
        thoughts: str = Field(description="Think first.")
        kind: Literal["Person", "Number", "Entity"] = Field(
            description="The answer's type. Person: a person. Number: a number. Entity: entity.")

    schema = read_schema(QuestionType)
    assert (schema.model_name, schema.docstring, schema.field_name, schema.field_intro) == \
        ("QuestionType", "What kind of answer the question expects.", "kind", "The answer's type.")
    assert schema.classes == ("Person", "Number", "Entity")
    assert schema.descriptions == {"Person": "a person", "Number": "a number", "Entity": "entity"}
    assert (schema.reasoning, schema.reasoning_name, schema.reasoning_description) == ("before", "thoughts",
                                                                                       "Think first.")
    assert schema.json_schema() == QuestionType.model_json_schema()
    variants = schema_variants(schema, 6, seed=0)
    assert variants[0].schema.json_schema() == QuestionType.model_json_schema()
    key_order = next(v for v in variants if v.dimension == "key_order").schema.json_schema()
    assert list(key_order["properties"]) == ["kind", "thoughts"]


def test_enum_and_const_schemas_from_files_are_read(tmp_path):
    """An Enum label (a $ref into $defs) with the classes described in the field's description, and a oneOf of
    consts each with its description, both from JSON files; names and order as written."""
    import enum

    from pydantic import BaseModel, Field

    from posixlab.structured.schema import read_schema

    class Kind(str, enum.Enum):
        NUM = "NUM"
        ENTY = "ENTY"

    class Answer(BaseModel):
        """Classify."""
        category: Kind = Field(description="NUM: a number. ENTY: entity.")

    path = tmp_path / "enum.json"
    path.write_text(json.dumps(Answer.model_json_schema()))
    schema = read_schema(str(path))
    assert (schema.model_name, schema.field_name, schema.classes) == ("Answer", "category", ("NUM", "ENTY"))
    assert schema.descriptions == {"NUM": "a number", "ENTY": "entity"} and schema.field_intro == ""
    const = {"title": "T", "type": "object", "required": ["label"], "properties": {"label": {
        "description": "The class.", "oneOf": [{"const": "B", "description": "bee"}, {"const": "A"}]}}}
    path.write_text(json.dumps(const))
    schema = read_schema(path)
    assert schema.classes == ("B", "A") and schema.descriptions == {"B": "bee"} and schema.field_intro == "The class."
    assert schema.docstring is None and "description" not in schema.json_schema()


@pytest.mark.parametrize("schema, message", [
    ({"properties": {"a": {"enum": ["x"]}, "b": {"enum": ["y"]}}}, "exactly one label field.*it has 2: a, b"),
    ({"properties": {"a": {"type": "string"}}}, "exactly one label field.*it has 0"),
    ({"properties": {"a": {"enum": ["x", "y"]}, "n": {"type": "integer"}}}, "at most one free-text string field"),
    ({"properties": {"a": {"enum": ["x", "x"]}}}, "distinct string classes"),
    ({"type": "object"}, "not a JSON schema of an object with properties"),
])
def test_schemas_posixlab_cannot_vary_are_clear_errors(schema, message):
    from posixlab.structured.schema import read_schema

    with pytest.raises(ConfigError, match=message):
        read_schema(schema)


def test_your_own_schema_runs_and_is_checked_before_any_request(tmp_path):
    """task.schema: the scripted server receives your model's name and field, answers are read from your field; a
    schema whose classes are not the data set's, a file that is not JSON, or a schema without strategy=structured
    is a ConfigError before any request is sent."""
    own = {"title": "QuestionKind", "description": "Classify the question.", "type": "object",
           "required": ["kind"], "properties": {"kind": {
               "description": "Kind. Entity: entity. Number: a number. Person: a person.",
               "enum": ["Entity", "Number", "Person"], "type": "string"}}}
    with ChatServer(scripted) as server:
        summary = run(structured_config(server.base_url, tmp_path, schema=own, variants="schema", num_rephrasings=1),
                      progress=False)
        bodies = server.bodies
        with pytest.raises(ConfigError, match=r"lists \['Entity', 'Number'\], but the data set's classes are"):
            bad = {**own, "properties": {"kind": {**own["properties"]["kind"], "enum": ["Entity", "Number"]}}}
            run(structured_config(server.base_url, tmp_path, schema=bad), progress=False)
        with pytest.raises(ConfigError, match="add strategy=structured"):
            run(replace(structured_config(server.base_url, tmp_path, schema=own), strategy="simple"), progress=False)
        assert len(server.bodies) == len(bodies)  # nothing sent for the bad configurations
    sent = bodies[0]["response_format"]["json_schema"]
    assert sent["name"] == "QuestionKind"
    assert sent["schema"]["properties"]["kind"]["enum"] == own["properties"]["kind"]["enum"]
    records = [json.loads(line) for line in (tmp_path / "run" / "samples.jsonl").read_text().splitlines()]
    assert {p["label"] for r in records for p in r["predictions"]} == {"Entity"}  # the enum's first member
    assert summary["structured"]["failures"]["rate"] == 0.0
    (tmp_path / "broken.json").write_text("{not json")
    from posixlab.structured.schema import load_schema_file

    with pytest.raises(ConfigError, match="broken.json is not JSON"):
        load_schema_file(tmp_path / "broken.json")


# --- the classes' probabilities in the JSON slot (probability=label_probs, in process) -----------------------------

def test_slot_logprobs_read_each_class_where_the_label_s_value_starts(lm):
    """The context is the prompt and the answer up to the label's value (a reasoning field first included); each
    class is scored as its tokens and the closing quote, in the task's class order whatever the enum's order; an
    answer without the label's slot gives None."""
    from posixlab.structured.slots import slot_logprobs

    prompt = lm.encode("Classify: Who wrote Hamlet?\n", add_special_tokens=False)
    classes = ["Number", "Entity", "Person"]
    reordered = replace(BASE, classes=("Person", "Number", "Entity"), reasoning="before")
    for schema, head in ((BASE, '{"label": "'), (reordered, '{"reasoning": "a name", "label": "')):
        response = lm.encode(head, add_special_tokens=False) + lm.encode('Person"}', add_special_tokens=False)
        expected = [lm.score_full(prompt + lm.encode(head, add_special_tokens=False),
                                  lm.encode(f'{c}"', add_special_tokens=False)) for c in classes]
        assert slot_logprobs(lm, prompt, response, schema, classes) == pytest.approx(expected, abs=1e-6)
    whole = lm.encode('{"label": "Person"}', add_special_tokens=False)  # tokens as the tokenizer joins them
    got = slot_logprobs(lm, prompt, whole, BASE, classes)
    assert got is not None and len(got) == 3 and all(x < 0 for x in got)
    assert slot_logprobs(lm, prompt, lm.encode('{"class": "Person"}', add_special_tokens=False), BASE,
                         classes) is None


def test_label_probs_in_the_json_slot_end_to_end(lm, tmp_path):
    """strategy=structured probability=label_probs in process: every prediction's class is the argmax of its slot
    probabilities, which are a distribution over the classes; a chat model is refused before any request."""
    import numpy as np

    cfg = structured_config("unused", tmp_path, variants="schema", num_rephrasings=3, probability="label_probs")
    cfg = replace(cfg, model=ModelSpec("smollm2-135m-instruct", "packaged", "smollm2-135m-instruct"),
                  score_cache=False)
    summary = run(cfg, lm=lm, progress=False)
    records = [json.loads(line) for line in (tmp_path / "run" / "samples.jsonl").read_text().splitlines()]
    classes = ["Number", "Entity", "Person"]
    agree = 0
    for record in records:
        assert len(record["label_logprobs"]) == 3
        for p, lp in zip(record["predictions"], record["label_logprobs"]):
            assert p["label"] == classes[int(np.argmax(lp))]
            agree += p["parse"]["label"] == p["label"]
    assert agree >= 5, agree  # the slot's most probable class is mostly the class greedy decoding wrote
    assert sum(record["distribution"]) == pytest.approx(1.0)
    assert 0.0 <= summary["sensitivity"]["mean"] <= 1.0
    with pytest.raises(ConfigError, match="scored in this process"):
        run(structured_config("http://127.0.0.1:9/v1", tmp_path, probability="label_probs"), progress=False)


def test_rewording_replaces_a_description_by_the_rephraser_s_checked_paraphrase(tmp_path):
    """schema_dimensions=rewording,order: each rewording variant swaps one class's description for a paraphrase
    from the rephraser (here a paraphrase file), the change recorded and sent in the schema; a paraphrase the quality
    rules drop is never used; without enough paraphrases the run stops before any request."""
    from posixlab.rephrase import RephraserConfig

    file = tmp_path / "descriptions.jsonl"
    file.write_text("\n".join(json.dumps(r) for r in [
        {"original": "a number", "paraphrases": ["a numerical quantity", "an amount or count"]},
        {"original": "entity", "paraphrases": ["a thing or object", "an object"]},
        {"original": "a person", "paraphrases": ["a human being", "someone"]}]) + "\n")
    rephraser = RephraserConfig(backend="file", path=str(file), min_similarity=0.0, validate=False)
    with ChatServer(scripted) as server:
        cfg = replace(structured_config(server.base_url, tmp_path, variants="schema", num_rephrasings=5,
                                        schema_dimensions=("rewording", "order")), rephraser=rephraser)
        run(cfg, progress=False)
        bodies = list(server.bodies)
        thin = tmp_path / "thin.jsonl"
        thin.write_text(json.dumps({"original": "a number", "paraphrases": []}) + "\n")
        with pytest.raises(Exception, match="paraphrases of 'a number'"):
            run(replace(cfg, output_dir=str(tmp_path / "thin"), rephraser=replace(rephraser, path=str(thin))),
                progress=False)
        assert len(server.bodies) == len(bodies)  # stopped before any request
        # a dry run asks the rephraser for nothing (here the run's own endpoint, rephraser=auto) and sends nothing
        plan = run(replace(cfg, output_dir=str(tmp_path / "dry"), dry_run=True,
                           rephraser=RephraserConfig(backend="auto", validate=False)), progress=False)["dry_run"]
        assert plan["to_send"] > 0 and len(server.bodies) == len(bodies)
    saved = json.loads((tmp_path / "run" / "rephrasings.json").read_text())
    reworded = [v for v in saved["schemas"] if v["dimension"] == "rewording"]
    assert len(reworded) == 2 and saved["rephraser"]["variants"] == "schema"
    paraphrases = {"Number": ["a numerical quantity"], "Entity": ["a thing or object"], "Person": ["a human being"]}
    for v in reworded:
        changed = {c: d for c, d in v["schema"]["descriptions"].items() if d != BASE.descriptions[c]}
        (cls, new), = changed.items()
        assert new in paraphrases[cls] and "reworded by the rephraser" in v["change"]
        sent = [b for b in bodies if new in json.dumps(b)]
        assert sent, f"no request carried the reworded description {new!r}"


def test_classify_takes_your_own_pydantic_model(tmp_path):
    """posixlab.classify(schema=MyModel): the model's own name and field reach the request, answers are read from it."""
    from typing import Literal

    from pydantic import BaseModel, Field

    import posixlab

    class QuestionKind(BaseModel):
        """Classify the question."""
        kind: Literal["Person", "Number", "Entity"] = Field(description="Kind. Person: a person. Number: a number.")

    path = tmp_path / "trec_mini.yaml"
    path.write_text(CLASSIFIER, encoding="utf-8")
    with ChatServer(scripted) as server:
        result = posixlab.classify(str(path), posixlab.chat_model("scripted", base_url=server.base_url),
                                   strategy="structured", variants="schema", num_rephrasings=1, schema=QuestionKind,
                                   cache_dir=str(tmp_path / "cache"), progress=False)
        bodies = server.bodies
    assert {b["response_format"]["json_schema"]["name"] for b in bodies} == {"QuestionKind"}
    assert [r["predictions"][0]["label"] for r in result.records] == ["Person"] * 3  # the enum's first member


def test_the_failure_note_says_what_a_failed_answer_counts_as_for_each_reading():
    """greedy: a failed answer is N/A; label_probs: one that reached its label slot is read from the slot (what
    tasks/classification/records.py does), so the summary must not say N/A for it."""
    from posixlab.structured.summary import structured_summary

    recs = [{"gold": "a", "predictions": [{"label": "a", "parse": {"failure": None}},
                                          {"label": "b", "parse": {"failure": "invalid_json"}}]}]
    greedy = structured_summary(recs, ["a", "b", "N/A"], None)["failures"]["note"]
    slots = structured_summary(recs, ["a", "b", "N/A"], None, probability="label_probs")["failures"]["note"]
    assert greedy.endswith("is N/A in S and C") and "read from the slot's class probabilities" in slots
