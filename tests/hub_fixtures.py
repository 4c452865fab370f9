"""The hub stand-in's repositories, built once per test session (``hub`` fixture, registered by conftest.py):

- ``meta-llama/Llama-2-7b-hf``, gated, laid out like the real one (config.json, generation_config.json,
  tokenizer.json, tokenizer_config.json, model.safetensors, README.md, LICENSE.txt): a TINY random LlamaForCausalLM
  (hidden 16, 2 layers) with a byte-level BPE tokenizer trained here on the bundled MMLU sample (no download);
- ``posixlab-test/llama2-7b-lora``: a LoRA adapter on that model (``build_adapter_repo``);
- ``cais/mmlu``: the bundled MMLU sample as the hub's ``all`` config (``all/{test,validation,dev}-*.parquet``;
  question, subject with underscores, choices, answer 0-3; the dev split: ``mmlu_dev_rows``), its README declaring
  the configs, as the hub's does;
- ``tatsu-lab/alpaca`` (``data/train-*.parquet``: instruction, input, output, text) and ``lukaemon/bbh`` (one config
  per task, ``<task>/test-*.parquet``: input, target), from tests/fixtures;
- ``allenai/ai2_arc``: ARC's layout (config ``ARC-Challenge``, ``test-*.parquet``: id, question, choices {text,
  label}, answerKey) holding tests/fixtures/questions_fixture.jsonl's questions, for ``dataset=questions``, and a
  ``train`` split of them reworded (``arc_train_rows``).

Subprocesses reach it through ``hub_env``: HF_ENDPOINT must be in the environment before huggingface_hub, datasets and
transformers are imported (they read it at import time), so only subprocesses are pointed at it; no test of this
process's own hub clients relies on it. A proxy that refuses everything, with loopback exempt, makes any request
for the real internet fail at once instead of leaving the machine.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from pathlib import Path

import pytest

from hub_server import HubServer
from posixlab.data.files import read_records

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
MODEL_ID = "meta-llama/Llama-2-7b-hf"
ADAPTER_ID = "posixlab-test/llama2-7b-lora"  # a LoRA adapter on MODEL_ID (model.adapter=...)
TOKEN = "hf_test_token_posixlab"
BBH_TASKS = ("boolean_expressions", "navigate")  # the tasks of tests/fixtures/bbh_fixture.jsonl


@dataclass
class Hub:
    server: HubServer
    folders: dict  # repo id -> the folder it is served from

    @property
    def url(self) -> str:
        return self.server.url


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed when the block ends: connections are refused


def hub_env(hf_home: Path, endpoint: str, token: str | None = TOKEN, **extra) -> dict:
    """The environment of a subprocess that uses the hub at ``endpoint``, with its own Hugging Face cache."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("HF_", "HUGGING_FACE_", "TRANSFORMERS_", "WANDB_")) and k.lower() not in
           ("http_proxy", "https_proxy", "all_proxy", "no_proxy")}
    refuse = f"http://127.0.0.1:{closed_port()}"
    env.update({"HF_HOME": str(hf_home), "HF_ENDPOINT": endpoint, "HF_HUB_DISABLE_TELEMETRY": "1",
                "HTTP_PROXY": refuse, "HTTPS_PROXY": refuse, "ALL_PROXY": refuse, "NO_PROXY": "127.0.0.1,localhost",
                "TOKENIZERS_PARALLELISM": "false", "PYTHONUNBUFFERED": "1", **extra})
    if token is not None:
        env["HF_TOKEN"] = token
    return env


def _tokenizer(texts: list[str]):
    """A byte-level BPE of 512 tokens with Llama's special tokens (<unk>, <s>, </s>) and its BOS prefix."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=512, special_tokens=["<unk>", "<s>", "</s>"],
                                                       initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                                       show_progress=False))
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B",
                                                       special_tokens=[("<s>", tok.token_to_id("<s>"))])
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>")


def build_model_repo(folder: Path, texts: list[str]) -> None:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    tokenizer = _tokenizer(texts)
    tokenizer.save_pretrained(folder)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=4096,
                         bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id)
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(folder)  # config.json, generation_config.json, model.safetensors
    (folder / "README.md").write_text("---\nextra_gated_heading: Access Llama 2 on Hugging Face\n---\n# tiny Llama\n")
    (folder / "LICENSE.txt").write_text("LLAMA 2 COMMUNITY LICENSE AGREEMENT (test stand-in)\n")


def build_adapter_repo(folder: Path, base: Path, seed: int = 0) -> None:
    """A LoRA adapter (rank 4 on the attention's query and value projections) on the model in ``base``, with weights
    that change its answers (peft's default initialisation would leave the model as it is), as peft saves one:
    adapter_config.json (naming ``base``), adapter_model.safetensors."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(base),
                           LoraConfig(r=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False))
    model.save_pretrained(folder)


def _parquet(rows: list[dict], path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)


def _readme(folder: Path, configs: dict[str, list[str]]) -> None:
    """A data set card whose YAML declares each config's files per split (``load_dataset(id, config)`` needs it)."""
    lines = ["---", "configs:"]
    for name, splits in configs.items():
        lines += [f"- config_name: {name}", "  data_files:"]
        lines += [f"  - split: {split}\n    path: {name}/{split}-*" for split in splits]
    (folder / "README.md").write_text("\n".join(lines + ["---", "# test stand-in", ""]))


def mmlu_dev_rows(rows: list[dict]) -> list[dict]:
    """The stand-in's dev split: five questions of the first subject (abstract algebra), as the real one has five a
    subject, worded apart from every test question (a dev question is never one evaluated)."""
    return [{**r, "question": f"{r['question']} (dev {k})"} for k, r in enumerate(rows[:5])]


def build_mmlu_repo(folder: Path, sample: list[dict]) -> None:
    letters = "ABCD"
    rows = [{"question": r["question"], "subject": r["subject"].replace(" ", "_"), "choices": list(r["choices"]),
             "answer": letters.index(r["answer"])} for r in sample]
    for split, part in (("test", rows), ("validation", rows[:5]), ("dev", mmlu_dev_rows(rows))):
        _parquet(part, folder / "all" / f"{split}-00000-of-00001.parquet")
    _readme(folder, {"all": ["test", "validation", "dev"]})


def build_alpaca_repo(folder: Path) -> None:
    rows = read_records(FIXTURES / "alpaca_fixture.jsonl")
    rows = [{**r, "text": f"### Instruction:\n{r['instruction']}\n\n### Response:\n{r['output']}"} for r in rows]
    _parquet(rows, folder / "data" / "train-00000-of-00001-a09b74b3ef9c3b56.parquet")
    (folder / "README.md").write_text("---\nlicense: cc-by-nc-4.0\n---\n# Alpaca (test stand-in)\n")


def build_bbh_repo(folder: Path) -> None:
    rows = read_records(FIXTURES / "bbh_fixture.jsonl")
    for task in BBH_TASKS:
        _parquet([{"input": r["input"], "target": r["target"]} for r in rows if r["task"] == task],
                 folder / task / "test-00000-of-00001.parquet")
    _readme(folder, {task: ["test"] for task in BBH_TASKS})


ARC_ID, ARC_CONFIG = "allenai/ai2_arc", "ARC-Challenge"


def arc_train_rows(rows: list[dict]) -> list[dict]:
    """The stand-in's train split (few-shot exemplars: ``dataset.exemplar_split=train``): the test questions in
    reverse order, each worded apart from every test question and with an id of its own."""
    return [{**r, "id": f"{r['id']}-train", "question": f"{r['question']} (train)"} for r in reversed(rows)]


def build_arc_repo(folder: Path) -> None:
    rows = read_records(FIXTURES / "questions_fixture.jsonl")
    _parquet(rows, folder / ARC_CONFIG / "test-00000-of-00001.parquet")
    _parquet(arc_train_rows(rows), folder / ARC_CONFIG / "train-00000-of-00001.parquet")
    _readme(folder, {ARC_CONFIG: ["test", "train"]})


@pytest.fixture(scope="session")
def hub(tmp_path_factory):
    """One hub stand-in for the whole session, serving the repositories above. A test that sets a fault must
    ``hub.server.clear()`` it (``healthy_hub`` does)."""
    root = tmp_path_factory.mktemp("hub")
    sample = read_records(ROOT / "posixlab" / "data" / "mmlu_sample.jsonl")
    folders = {MODEL_ID: root / "model", "cais/mmlu": root / "mmlu", "tatsu-lab/alpaca": root / "alpaca",
               "lukaemon/bbh": root / "bbh", ADAPTER_ID: root / "adapter", ARC_ID: root / "arc"}
    for folder in folders.values():
        folder.mkdir()
    build_model_repo(folders[MODEL_ID], [f"{r['question']} {' '.join(r['choices'])}" for r in sample])
    build_mmlu_repo(folders["cais/mmlu"], sample)
    build_alpaca_repo(folders["tatsu-lab/alpaca"])
    build_bbh_repo(folders["lukaemon/bbh"])
    build_arc_repo(folders[ARC_ID])
    build_adapter_repo(folders[ADAPTER_ID], folders[MODEL_ID])
    server = HubServer(token=TOKEN)
    server.add("model", MODEL_ID, folders[MODEL_ID], gated=True)
    server.add("model", ADAPTER_ID, folders[ADAPTER_ID])
    for repo_id in ("cais/mmlu", "tatsu-lab/alpaca", "lukaemon/bbh", ARC_ID):
        server.add("dataset", repo_id, folders[repo_id])
    try:
        yield Hub(server, folders)
    finally:
        server.close()


@pytest.fixture
def healthy_hub(hub):
    """The session's hub, with no fault before or after the test."""
    hub.server.clear()
    yield hub
    hub.server.clear()
