"""How much work the scoring engine's forward passes and waves may hold (``engine.*``): plain settings, importable
without torch (a chat run reads them and never scores)."""

from __future__ import annotations

from dataclasses import dataclass

from posixlab.errors import ConfigError

GPU_SHARE = 0.75  # gpu_memory_gb=auto: this share of the card's memory left by the weights


@dataclass
class EngineOptions:
    """How much work one forward pass and one wave may hold.

    Every default is fixed by the device, so one configuration cuts the same batches on every run of a machine
    type (and batches change a log-probability by float rounding only): on a CPU 4 GB; on a GPU
    (``gpu_memory_gb="auto"``) 75% of the card's total memory less the model's weights, in whole GB: a property of
    the card and the model, not of the moment (an 80 GB H100 with a 7B model in bfloat16: 49 GB; a 24 GB card: 7 GB).
    ``gpu_memory_gb=None`` restores the old sizing from the GPU memory free at run time, which is not reproducible:
    two runs of one configuration can batch differently (another process holding memory)."""

    batch_tokens: int | None = None  # tokens (padding included) per forward pass; None: 4096 on CPU, 32768 on GPU
    # what a wave's caches and its passes may allocate above the weights (scoring/memory.py counts it);
    # None: 4 on CPU, gpu_memory_gb on a GPU
    memory_gb: float | None = None
    # the GPU budget when memory_gb is unset: a number of GB; auto: 75% of (the card's memory - the weights), whole
    # GB; None: half the free GPU memory at run time (not reproducible)
    gpu_memory_gb: float | str | None = "auto"
    # prompts per wave at most; None: 128 on CPU, 1024 on GPU. A decoding step reads every weight once however many
    # rows it carries: a 7B model's step is bound by that read below about 250 rows on an H100/H200 (13 GB at
    # 3.3-4.8 TB/s against 13 GFLOP a row at ~790 TFLOP/s), so GPU waves hold four times that; the budget still rules
    max_wave_rows: int | None = None
    # decode the prompts of a set that share most of their tokens (few-shot exemplars, a long header) together, on
    # one copy of their distinct beginnings, so that a decoding step reads those keys and values once, not once a
    # prompt (ScoringEngine._decoding_groups); None: on a GPU (a decoding step there is bound by reading the caches),
    # not on a CPU (bound by arithmetic: no faster there). Numbers change by float rounding only.
    shared_decoding: bool | None = None
    # with sdpa and grouped-query attention (Mistral, Llama-3, Qwen2.5, SmolLM2), attend in every pass without
    # repeating a layer's keys and values for every query head (causal_lm.folded_sdpa_attention): a prefill or
    # scoring pass on long prompts then reads them once a key/value head, not once a query head, and holds a quarter
    # of the copies; None: on a GPU, not on a CPU (bound by arithmetic: no faster there, and the CPU's numbers stay
    # those of earlier runs). Shared decoding's passes fold whatever this says. Numbers change by float rounding only.
    fold_heads: bool | None = None

    def __post_init__(self):
        """Each setting's type and range, checked when the options are made: before a model loads.

        >>> EngineOptions(max_wave_rows="abc")
        Traceback (most recent call last):
        ...
        posixlab.errors.ConfigError: engine.max_wave_rows takes a whole number of at least 1 or null, not 'abc'
        >>> EngineOptions(gpu_memory_gb=0)
        Traceback (most recent call last):
        ...
        posixlab.errors.ConfigError: engine.gpu_memory_gb takes a number of GB above 0, auto or null, not 0
        """
        whole, gb = "a whole number of at least 1 or null", "a number of GB above 0"
        for key, takes, integer, words in (("batch_tokens", whole, True, ()), ("max_wave_rows", whole, True, ()),
                                           ("memory_gb", f"{gb} or null", False, ()),
                                           ("gpu_memory_gb", f"{gb}, auto or null", False, ("auto",))):
            value = getattr(self, key)
            number = isinstance(value, (int, float)) and not isinstance(value, bool)
            if not (value is None or value in words or (number and value > 0 and (not integer or value == int(value)))):
                raise ConfigError(f"engine.{key} takes {takes}, not {value!r}")
        for key in ("shared_decoding", "fold_heads"):
            if getattr(self, key) not in (None, True, False):
                raise ConfigError(f"engine.{key} takes true, false or null, not {getattr(self, key)!r}")

    def wave_rows(self, device) -> int:
        """Prompts a wave holds at most on ``device`` (a torch.device)."""
        if self.max_wave_rows is not None:
            return int(self.max_wave_rows)
        return 1024 if device.type == "cuda" else 128

    def shares_decoding(self, device) -> bool:
        """Whether the prompts of a set that share most of their tokens decode together on ``device``."""
        return device.type == "cuda" if self.shared_decoding is None else bool(self.shared_decoding)

    def folds_heads(self, device) -> bool:
        """Whether every pass on ``device`` folds a grouped-query model's query heads onto their key/value head."""
        return device.type == "cuda" if self.fold_heads is None else bool(self.fold_heads)

    def resolve(self, device, weights_bytes: int = 0) -> tuple[int, int]:
        """(batch_tokens, memory budget in bytes) for ``device`` and a model of ``weights_bytes``: a function of the
        options, the device type and the card, unless ``gpu_memory_gb`` is None on a GPU (then half the memory free
        now)."""
        gpu = device.type == "cuda"  # a torch.device; torch itself is imported only for a GPU
        if gpu:
            import torch

        tokens = int(self.batch_tokens or (32768 if gpu else 4096))
        if self.memory_gb is not None:
            memory = int(self.memory_gb * 2**30)
        elif gpu and self.gpu_memory_gb == "auto":
            total = torch.cuda.get_device_properties(device).total_memory
            memory = int(GPU_SHARE * (total - weights_bytes) / 2**30) * 2**30
            if memory <= 0:
                raise ConfigError(f"the model's weights ({weights_bytes / 2**30:.1f} GB) leave no room on this GPU "
                                  f"({total / 2**30:.1f} GB): use a larger card, a smaller dtype or a vLLM server")
        elif gpu and self.gpu_memory_gb is not None:
            memory = int(self.gpu_memory_gb * 2**30)
        elif gpu:
            memory = torch.cuda.mem_get_info(device)[0] // 2
        else:
            memory = 4 * 2**30  # 1 GB of a wave's caches fits a 3-shot MMLU set of the packaged models; 2 GB did not
        return tokens, memory
