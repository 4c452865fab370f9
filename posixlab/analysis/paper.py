"""The paper's reported values (Chatterjee et al., 2024, Tables 1, 2, 6-9), printed beside ours where the model and
setting match, and what we know about each configured model (its label in the paper, its size).

Values are (mean, sd) of ψ over prompt sets, as printed; the paper's typos ("0.0.528") are read as the evident
number (0.528).
"""

from __future__ import annotations

# config name (conf/model/*.yaml) -> (the paper's label, parameters in billions, instruction-tuned?)
MODELS = {
    "llama2-7b": ("Llama-2-7b", 7.0, False),
    "llama2-7b-chat": ("Llama-2-7b-chat", 7.0, True),
    "llama2-13b": ("Llama-2-13b", 13.0, False),
    "llama2-13b-chat": ("Llama-2-13b-chat", 13.0, True),
    "llama3-8b": ("Llama-3-8b", 8.0, False),
    "llama3-8b-instruct": ("Llama-3-8b-chat", 8.0, True),
    "mistral-7b": ("Mistral-7B", 7.2, False),
    "mistral-7b-instruct": ("Mistral-7B-Instruct", 7.2, True),
    "olmo-1b": ("OLMo-1B", 1.2, False),
    "olmo-7b": ("OLMo-7B-Base", 6.9, False),
    "olmo-7b-instruct": ("OLMo-7B-Instruct", 6.9, True),
    # packaged models (offline); not in the paper
    "smollm2-135m-instruct": ("SmolLM2-135M-Instruct", 0.135, True),
    "gemma3-270m": ("Gemma-3-270M", 0.27, False),
    "qwen2.5-coder-0.5b-instruct": ("Qwen2.5-Coder-0.5B-Instruct", 0.49, True),
    "qwen2.5-coder-1.5b-instruct": ("Qwen2.5-Coder-1.5B-Instruct", 1.54, True),
    "gpt2": ("GPT-2", 0.124, False),
}

MAIN_MODELS = ["llama2-7b", "llama2-7b-chat", "llama3-8b", "llama3-8b-instruct", "mistral-7b", "mistral-7b-instruct",
               "olmo-7b", "olmo-7b-instruct"]
VARIANTS = ["spelling", "template", "paraphrase", "mixture"]
DATASETS = {"mmlu": "MMLU", "alpaca": "Alpaca", "bbh": "BBH"}  # data set names as the paper writes them


def label(model: str) -> str:
    """The model as the paper's tables write it; a model with an adapter (``<base>+<adapter>``) keeps its base's.

    >>> label("llama2-7b"), label("llama2-7b+my-lora"), label("my-model")
    ('Llama-2-7b', 'Llama-2-7b+my-lora', 'my-model')
    """
    if model in MODELS:
        return MODELS[model][0]
    base, plus, adapter = model.partition("+")
    return MODELS.get(base, (base,))[0] + plus + adapter


def dataset_label(dataset: str) -> str:
    return DATASETS.get(dataset, dataset)


def size(model: str) -> float:
    """Parameters in billions (the base's, for a model with an adapter); unknown: infinity (listed last)."""
    return MODELS.get(model, MODELS.get(model.partition("+")[0], (None, float("inf"))))[1]


def _parse(table: str, columns: list[tuple[str, str]]) -> dict:
    values = {}
    for line in table.strip().splitlines():
        model, *cells = line.split()
        for (dataset, variant), cell in zip(columns, cells):
            mean, sd = cell.split("±")
            values[(model, dataset, variant, 0)] = (float(mean), float(sd))
    return values


_T1 = [(d, v) for d in ("mmlu", "alpaca") for v in VARIANTS]
PAPER: dict[tuple[str, str, str, int], tuple[float, float]] = _parse("""
llama2-7b           0.083±0.073 1.12±0.377  0.160±0.160 0.821±0.272 0.146±0.115 0.202±0.103 0.252±0.192 0.271±0.158
llama2-7b-chat      0.082±0.103 0.809±0.283 0.135±0.189 0.444±0.258 0.246±0.175 0.164±0.139 0.66±0.33   0.500±0.229
llama3-8b           0.086±0.097 1.106±0.612 0.11±0.109  0.641±0.383 0.123±0.091 0.150±0.107 0.249±0.175 0.239±0.136
llama3-8b-instruct  0.087±0.09  1.048±0.612 0.134±0.126 0.650±0.421 0.184±0.152 0.15±0.13   0.413±0.259 0.357±0.201
mistral-7b          0.065±0.06  1.222±0.571 0.108±0.114 0.672±0.303 0.18±0.14   0.217±0.148 0.242±0.181 0.295±0.181
mistral-7b-instruct 0.105±0.098 1.464±0.528 0.126±0.112 0.886±0.328 0.195±0.130 0.124±0.069 0.296±0.236 0.272±0.152
olmo-7b             0.197±0.207 1.672±0.383 0.189±0.164 1.134±0.286 0.355±0.305 0.369±0.095 0.281±0.199 0.448±0.227
olmo-7b-instruct    0.527±0.485 1.499±0.384 0.831±0.595 1.413±0.474 0.646±0.378 0.192±0.113 0.633±0.382 0.62±0.312
olmo-1b             0.089±0.099 0.896±0.205 0.102±0.082 0.602±0.17  0.257±0.229 0.355±0.069 0.185±0.128 0.358±0.139
llama2-13b          0.057±0.073 1.16±0.518  0.093±0.106 0.677±0.349 0.141±0.126 0.177±0.109 0.225±0.173 0.249±0.148
llama2-13b-chat     0.072±0.086 0.858±0.324 0.095±0.102 0.438±0.248 0.222±0.172 0.134±0.135 0.592±0.3   0.461±0.213
""", _T1)  # Table 1; Table 6 (OLMo-1B); Tables 7/8 (Llama-2-13B base / chat)

_T2_MODELS = ["llama2-7b", "llama2-7b-chat", "mistral-7b", "mistral-7b-instruct"]
for _shots, _variant, _cells in [
    (1, "spelling", "0.026±0.021 0.048±0.066 0.042±0.039 0.087±0.065"),
    (1, "template", "0.513±0.347 0.357±0.169 0.2±0.244 1.387±0.707"),
    (1, "paraphrase", "0.035±0.031 0.064±0.07 0.046±0.045 0.085±0.081"),
    (2, "spelling", "0.027±0.024 0.049±0.07 0.042±0.041 0.085±0.072"),
    (2, "template", "0.482±0.38 0.272±0.117 0.225±0.247 1.128±0.773"),
    (2, "paraphrase", "0.036±0.035 0.065±0.074 0.047±0.047 0.085±0.09"),
    (3, "spelling", "0.028±0.024 0.051±0.073 0.043±0.041 0.088±0.073"),
    (3, "template", "0.554±0.433 0.249±0.091 0.23±0.247 1.101±0.775"),
    (3, "paraphrase", "0.039±0.039 0.068±0.077 0.047±0.047 0.086±0.098"),
]:  # Table 2 (few-shot, MMLU); its 0-shot rows repeat Table 1
    for _model, _cell in zip(_T2_MODELS, _cells.split()):
        _mean, _sd = _cell.split("±")
        PAPER[(_model, "mmlu", _variant, _shots)] = (float(_mean), float(_sd))

for _model, _cell in [("llama2-7b", "0.729±0.295"), ("llama2-7b-chat", "0.989±0.351"), ("llama3-8b", "0.58±0.385"),
                      ("llama3-8b-instruct", "0.745±0.35"), ("mistral-7b", "0.966±0.447"),
                      ("mistral-7b-instruct", "0.542±0.239"), ("olmo-7b", "1.029±0.427"),
                      ("olmo-7b-instruct", "1.304±0.47"), ("olmo-1b", "1.021±0.292"), ("llama2-13b", "0.851±0.357"),
                      ("llama2-13b-chat", "0.972±0.388")]:  # Table 9 (BBH, templates only)
    _mean, _sd = _cell.split("±")
    PAPER[(_model, "bbh", "template", 0)] = (float(_mean), float(_sd))


def paper_value(model: str, dataset: str, variant: str, shots: int) -> tuple[float, float] | None:
    """The paper's (mean, sd) for this cell, or None. Only hub MMLU/Alpaca/BBH runs are comparable; the caller
    decides whether the data set matches (the bundled MMLU sample is a subset of the same test split)."""
    return PAPER.get((model, dataset, variant, shots))
