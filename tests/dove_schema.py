"""What DOVE's schema requires of an evaluation record (SLAB-NLP/DOVE, src/schema_validation/schema.json at 014654e,
draft-07), restated here as a JSON Schema of our own: every key it requires, at every level, and the enums of the
fields a multiple-choice export fills. DOVE's contributors are asked to validate against that file; the tests
validate every exported record against this restatement with ``jsonschema`` (an independent reader of the layout,
not posixlab's code)."""

STRING, INTEGER, NUMBER = {"type": "string"}, {"type": "integer"}, {"type": "number"}


def obj(required: dict, optional: dict | None = None) -> dict:
    return {"type": "object", "required": list(required), "properties": {**required, **(optional or {})}}


CHOICE = obj({"id": STRING, "text": STRING})
DOVE_RECORD = obj({
    "evaluation_id": STRING,
    "model": obj({
        "model_info": obj({"name": STRING}, {"family": {"enum": ["Llama", "Mistral", "OLMo", "gemma", "gpt", "palm",
                                                                  "claude", "falcon", "Qwen", None]}}),
        "configuration": obj({"context_window": {"type": "integer", "minimum": 1}}, {
            "architecture": {"enum": ["transformer", "moe", "ssm", None]},
            "parameters": {"type": ["integer", "null"], "minimum": 1},
            "is_instruct": {"type": "boolean"}, "hf_path": {"type": ["string", "null"]},
            "revision": {"type": ["string", "null"]}}),
        "inference_settings": obj({"quantization": obj({
            "bit_precision": {"enum": ["none", "int8", "int4", "float16", "float32"]},
            "method": {"enum": ["None", "dynamic", "static"]}})}, {"generation_args": obj({}, {
                "use_vllm": {"type": "boolean"}, "temperature": {"type": ["number", "null"]},
                "top_p": {"type": ["number", "null"]}, "top_k": {"type": ["number", "null"]},
                "max_tokens": {"type": "integer", "minimum": 1},
                "stop_sequences": {"type": "array", "items": STRING}})}),
    }),
    "prompt_config": obj({
        "prompt_class": {"enum": ["MultipleChoice", "OpenEnded", "Completion", "Table"]},
        "dimensions": obj({"instruction_phrasing": obj({"name": STRING, "text": STRING}),
                           "shots": {"type": "integer", "minimum": 0, "maximum": 10}}, {
            "demonstrations": {"type": "array"},
            "mc_enumerator": {"enum": ["capitals", "lowercase", "numbers", "roman", "keyboard", "greek"]},
            "mc_separator": {"enum": ["\\s", "\n", ", ", "; ", " | ", " OR ", " or "]},
            "mc_choices_order": obj({"method": STRING, "description": STRING})}),
    }),
    "instance": obj({
        "task_type": {"enum": ["classification", "generation"]},
        "raw_input": STRING,
        "language": STRING,
        "sample_identifier": obj({"dataset_name": STRING, "hf_repo": STRING,
                                  "hf_split": {"enum": ["train", "test", "validation"]}, "hf_index": INTEGER}),
    }, {"classification_fields": obj({"question": STRING, "choices": {"type": "array", "items": CHOICE},
                                      "ground_truth": CHOICE}, {"full_input": STRING})}),
    "output": obj({"response": STRING}, {"cumulative_logprob": {"type": ["number", "null"]}}),
    "evaluation": obj({"ground_truth": STRING, "score": {"type": "number", "minimum": 0, "maximum": 1},
                       "evaluation_method": obj({"method_name": STRING, "description": STRING},
                                                {"parameters": {"type": "object"}})}),
})
