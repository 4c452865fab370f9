"""What the engine allocates above the weights, and the batches it cuts from one budget (``EngineOptions.memory_gb`` /
``gpu_memory_gb``): pure functions of sizes, no model and no device. The sizes come from the model (``ModelShape.of``).

**A forward pass** of ``rows`` rows × ``queries`` new tokens that see ``keys`` keys each (``pass_bytes``) allocates,
as measured on a CPU with torch's profiler (``tests/test_memory_model.py`` holds the count to the measure) and, for
the CUDA kernel's padded mask, as its source reads:

- the masks: the boolean ``visible`` on the device and its negation (1 byte a query-key pair each), and the additive
  mask built from it (one per attention type), counted twice: the memory-efficient kernel pads a mask whose rows are
  not aligned to 8 keys, one layer at a time;
- the residual stream and the projections around attention: six hidden-size vectors a query;
- then the largest of what one layer (or the head) holds at a time: the MLP's three intermediate vectors (gate, up,
  their product); attention's own temporaries (with grouped-query attention, an explicit mask and more than one query,
  transformers repeats one layer's keys and values for every head; the scores, where attention materialises them:
  ``ModelShape.score_bytes``); or the logits kept (``kept`` a row, in the model's dtype).

The keys and values a pass writes go into a buffer allocated before it (``SlotLayer``), counted with the buffer:

- a **prefill** row: its ancestors' keys and values and its segment's (``prefill_row``);
- a **decoding** row: its block's buffer with room for the response, the copies of the rows still running that
  dropping finished rows makes (``DROP_SHARE``), a one-token pass and the float32 log-softmax of its logits
  (``decode_row``); a block's buffer stays held until the wave is scored; with shared decoding, a **group** of a
  set's prompts on one copy of their distinct segments, a query a prompt (``decode_group``), its buffer freed once
  decoded;
- a **scoring** row: its copy of the prompt's cache with slots for the response trie, and the trie's pass
  (``score_row``); the target log-probabilities are widened to float32 a slice at a time beside it (``slice_bytes``).

**A wave** holds (``wave_bytes``) its prompts' distinct beginnings (the prefill's segments), every decoding block's
buffer and the next-token logits of its prompts. Waves are planned within half the budget (``plan_waves``; a set over
that runs alone); decoding blocks are cut in turn from what the wave and the blocks before them leave
(``decode_blocks``); each scoring chunk from what the wave's blocks leave (``score_chunk``). A set too large for
that (its prompts' buffers alone outgrow the budget: long few-shot prompts on a small card) runs holding its segments
instead: each block's buffer is freed once decoded, and each scoring chunk rebuilds its prompts' caches from the
segments, so it needs its distinct beginnings and one row beside them (``ScoringEngine._set_bytes``). Shared
decoding always works that way: its waves hold their segments only (``plan_waves(hold=False)``) and its blocks of
groups (``group_blocks``) free their buffers once decoded.

>>> llama7b = ModelShape(layers=32, hidden=4096, intermediate=11008, heads=32, kv_heads=32, head_dim=128,
...                      vocab=32000, dtype_bytes=2)
>>> llama7b.kv_bytes_per_token                       # 2 (keys, values) x 32 layers x 32 heads x 128 x 2 bytes
524288
>>> # one query and key: masks 2 + 2 * 2 = 6, hidden 6 * 4096 * 2 = 49,152, then the MLP 3 * 11008 * 2 = 66,048
>>> # (more than the logits 32000 * 2 = 64,000)
>>> pass_bytes(llama7b, rows=1, queries=1, keys=1, kept=1)
115206
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from posixlab.scoring.options import GPU_SHARE

GIB = 2**30
# Rows still running when a decoding block drops its finished ones (the engine drops them once a quarter is idle), and
# the extra of the next drop, one layer at a time: 0.75 + 0.75**2 / layers of the block's buffer at most.
DROP_SHARE = 0.75


@dataclass(frozen=True)
class ModelShape:
    """The sizes of a decoder that decide what its passes allocate."""

    layers: int
    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    dtype_bytes: int  # of activations and caches (4 float32, 2 bfloat16/float16)
    mask_types: int = 1  # additive masks built per pass: 1, or 2 with sliding-window layers beside full ones
    # bytes a (head, query, key) triple of attention scores takes where attention materialises them: 0 for SDPA's
    # fused kernels (CUDA's memory-efficient and flash kernels, the CPU's in float32); eager attention and the CPU's
    # SDPA in bfloat16/float16 (its math path) keep the scores, their masked sum and float32 softmax
    score_bytes: int = 0
    # sdpa folds a grouped-query model's query heads onto their key/value head in shared decoding's passes
    # (``causal_lm.folded_sdpa_attention``); eager attention repeats the keys and values instead
    folds_heads: bool = True

    @property
    def kv_bytes_per_token(self) -> int:
        """Keys and values of one token, every layer."""
        return 2 * self.layers * self.kv_heads * self.head_dim * self.dtype_bytes

    @classmethod
    def of(cls, model, device_type: str = "cpu") -> ModelShape:
        """The shape of a transformers model (its text config) on a device of ``device_type``."""
        config = model.config.get_text_config(decoder=True)
        heads = config.num_attention_heads
        layer_types = set(getattr(config, "layer_types", None) or ())
        d = model.dtype.itemsize
        eager = getattr(model.config, "_attn_implementation", None) == "eager"  # else sdpa (the engine needs one)
        fused = not eager and (device_type == "cuda" or d == 4)
        return cls(layers=config.num_hidden_layers, hidden=config.hidden_size,
                   intermediate=getattr(config, "intermediate_size", None) or 4 * config.hidden_size, heads=heads,
                   kv_heads=getattr(config, "num_key_value_heads", None) or heads,
                   head_dim=getattr(config, "head_dim", None) or config.hidden_size // heads,
                   vocab=int(config.vocab_size), dtype_bytes=d, mask_types=max(1, len(layer_types)),
                   score_bytes=0 if fused else 2 * d + 8, folds_heads=not eager)


def pass_bytes(shape: ModelShape, rows: int, queries: int, keys: int, kept: int, folded: bool = False) -> int:
    """Bytes one forward pass allocates above the weights and the cache buffer it writes to (module docstring).

    >>> tiny = ModelShape(layers=2, hidden=8, intermediate=16, heads=2, kv_heads=1, head_dim=4, vocab=10,
    ...                   dtype_bytes=4)
    >>> # masks 3*5*(2+8) = 150; hidden 3*6*8*4 = 576; then the largest of: MLP 3*3*16*4 = 576, one layer's keys and
    >>> # values repeated to both heads 2*5*2*4*4 = 320, logits 1*10*4 = 40
    >>> pass_bytes(tiny, rows=1, queries=3, keys=5, kept=1)
    1302
    >>> pass_bytes(tiny, rows=4, queries=3, keys=5, kept=1) == 4 * 1302    # linear in rows
    True
    """
    d = shape.dtype_bytes
    masks = queries * keys * (2 + 2 * d * shape.mask_types)
    hidden = 6 * queries * shape.hidden * d
    mlp = 3 * queries * shape.intermediate * d
    # grouped-query attention with a mask and more than one query: one layer's keys and values repeated to every head;
    # ``folded`` (shared decoding's passes with sdpa): the mask repeated to every head of a key/value head instead,
    # and padded again by the CUDA kernel
    grouped = shape.kv_heads < shape.heads and queries > 1
    repeated = 0 if not grouped else 2 * (shape.heads // shape.kv_heads) * queries * keys * d if folded else \
        2 * keys * shape.heads * shape.head_dim * d
    attention = repeated + shape.heads * queries * keys * shape.score_bytes
    logits = kept * shape.vocab * d
    return rows * (masks + hidden + max(mlp, attention, logits))


def prefill_row(shape: ModelShape, length: int, past: int, folded: bool = False) -> int:
    """One row of a prefill pass: its buffer (its ancestors' keys and values, then its segment's) and the pass
    (``folded``: its heads folded, ``EngineOptions.fold_heads``)."""
    return (past + length) * shape.kv_bytes_per_token + pass_bytes(shape, 1, length, past + length, 1, folded)


def decode_row(shape: ModelShape, width: int, max_new_tokens: int) -> int:
    """One row of a decoding block padded to ``width``: its buffer, the copies dropping finished rows makes, one
    decoding step's pass and its float32 log-softmax (and a constrained engine's masked copy of the logits)."""
    return decode_group(shape, width, 1, max_new_tokens)


def decode_group(shape: ModelShape, keys: int, queries: int, max_new_tokens: int) -> int:
    """One group of a decoding block: ``queries`` prompts decoded on one copy of their ``keys`` distinct prompt
    tokens (shared decoding; a row alone is a group of one). Its buffer with ``queries`` slots a step, the copies
    dropping finished groups makes, a step's pass of ``queries`` tokens that keeps every one's logits, and their
    float32 log-softmax.

    >>> tiny = ModelShape(layers=2, hidden=8, intermediate=16, heads=2, kv_heads=1, head_dim=4, vocab=10,
    ...                   dtype_bytes=4)
    >>> decode_group(tiny, 10, 1, 5) == decode_row(tiny, 10, 5)
    True
    >>> decode_group(tiny, 30, 3, 5) < 3 * decode_row(tiny, 30, 5)     # three rows on one copy of 30 tokens
    True
    """
    capacity = keys + queries * (max_new_tokens - 1)
    buffer = capacity * shape.kv_bytes_per_token
    drops = DROP_SHARE + DROP_SHARE**2 / shape.layers
    folded = shape.folds_heads and queries > 1  # the engine's decoding passes of several queries fold the heads
    return math.ceil(buffer * (1 + drops)) + pass_bytes(shape, 1, queries, capacity, queries, folded) + \
        queries * shape.vocab * (8 + shape.dtype_bytes)


def decode_buffer(shape: ModelShape, width: int, max_new_tokens: int) -> int:
    """What a decoding row keeps until its wave is scored: its buffer, ``width + max_new_tokens - 1`` slots."""
    return (width + max_new_tokens - 1) * shape.kv_bytes_per_token


def score_row(shape: ModelShape, width: int, cached: int, folded: bool = False) -> int:
    """One row of a scoring chunk: a copy of its prompt's cache (``cached`` slots) with ``width`` slots for the
    response trie, and the trie's pass, which keeps the logits of every node (``folded``: its heads folded)."""
    return (cached + width) * shape.kv_bytes_per_token + pass_bytes(shape, 1, width, cached + width, width, folded)


def slice_bytes(memory: int, device_type: str = "cuda") -> int:
    """The logits a scoring chunk selects and widens to float32 at a time (``engine.selected_logprobs``): on a GPU
    256 MB, so a chunk's selection is a few large kernels; on a CPU 8 MB, about what its caches hold, so the copy and
    the log-sum-exp's passes over it stay there instead of going out to memory and back (2-3.5x faster on 2 cores,
    and the same numbers: each row's log-sum-exp is its own); a sixteenth of a smaller budget either way.

    >>> slice_bytes(4 * GIB, "cpu") // 2**20, slice_bytes(49 * GIB) // 2**20, slice_bytes(2**26) // 2**20
    (8, 256, 4)
    """
    return min(2**28 if device_type == "cuda" else 2**23, memory // 16)


def prefill_bytes(shape: ModelShape, rows: int, unique_tokens: int) -> int:
    """What a wave's prefill leaves held for its decoding: the keys and values of its prompts' distinct beginnings
    (``unique_tokens``: the segments), and the next-token logits of every segment (at most two a prompt) and of every
    decoding block's rows, kept until the wave is scored."""
    return unique_tokens * shape.kv_bytes_per_token + 3 * rows * shape.vocab * shape.dtype_bytes


def wave_bytes(shape: ModelShape, rows: int, width: int, max_new_tokens: int, unique_tokens: int) -> int:
    """What a wave holds while its passes run: ``prefill_bytes`` and each row's decoding buffer, padded to ``width``
    (the wave's longest prompt: an upper bound of its block's) with room for the response.

    >>> tiny = ModelShape(layers=2, hidden=8, intermediate=16, heads=2, kv_heads=1, head_dim=4, vocab=10,
    ...                   dtype_bytes=4)
    >>> wave_bytes(tiny, rows=3, width=10, max_new_tokens=5, unique_tokens=20)   # (20 + 3 * 14) * 64 + 3 * 3 * 40
    4328
    """
    return prefill_bytes(shape, rows, unique_tokens) + rows * decode_buffer(shape, width, max_new_tokens)


# --- batches from sizes ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SetSize:
    """What planning reads of a prompt set: its distinct prompts, the longest's tokens, its distinct prefix tokens."""

    prompts: int
    longest: int
    unique_tokens: int


def plan_waves(shape: ModelShape, sizes: Sequence[SetSize], max_new_tokens: int, budget: int, max_rows: int,
               order: Sequence[int], hold: bool = True) -> list[list[int]]:
    """Sets (indices into ``sizes``, taken in ``order``) grouped into waves whose ``wave_bytes`` stay within
    ``budget`` and whose prompts number at most ``max_rows``; a set over either runs in a wave of its own.
    ``hold=False``: waves whose decoding buffers are freed once decoded (shared decoding), so a wave holds its
    ``prefill_bytes`` only.

    >>> tiny = ModelShape(layers=2, hidden=8, intermediate=16, heads=2, kv_heads=1, head_dim=4, vocab=10,
    ...                   dtype_bytes=4)
    >>> one = SetSize(prompts=3, longest=10, unique_tokens=20)     # 4,328 bytes (wave_bytes' example)
    >>> plan_waves(tiny, [one] * 5, 5, budget=9000, max_rows=100, order=range(5))
    [[0, 1], [2, 3], [4]]
    >>> plan_waves(tiny, [one] * 5, 5, budget=10**6, max_rows=6, order=range(5))
    [[0, 1], [2, 3], [4]]
    """
    waves, current, rows, width, tokens = [], [], 0, 0, 0
    for i in order:
        size = sizes[i]
        need = wave_bytes(shape, rows + size.prompts, max(width, size.longest), max_new_tokens,
                          tokens + size.unique_tokens) if hold else \
            prefill_bytes(shape, rows + size.prompts, tokens + size.unique_tokens)
        if current and (rows + size.prompts > max_rows or need > budget):
            waves.append(current)
            current, rows, width, tokens = [], 0, 0, 0
        current.append(i)
        rows, width, tokens = rows + size.prompts, max(width, size.longest), tokens + size.unique_tokens
    if current:
        waves.append(current)
    return waves


def decode_blocks(shape: ModelShape, lengths: Sequence[int], max_new_tokens: int, room: int,
                  max_rows: int, keep: bool = True) -> list[list[int]]:
    """Decoding blocks of prompts of ``lengths``, a row each: ``group_blocks`` of groups of one.

    >>> tiny = ModelShape(layers=2, hidden=8, intermediate=16, heads=2, kv_heads=1, head_dim=4, vocab=10,
    ...                   dtype_bytes=4)
    >>> decode_row(tiny, 10, 5), decode_buffer(tiny, 10, 5)              # bytes a row needs, and keeps
    (2464, 896)
    >>> # 3 rows (7,392 bytes), then 2 beside their 2,688 bytes of buffers, then 1 beside 4,480
    >>> decode_blocks(tiny, [10] * 6, 5, room=9000, max_rows=100)
    [[0, 1, 2], [3, 4], [5]]
    >>> decode_blocks(tiny, [10] * 6, 5, room=10**6, max_rows=4)
    [[0, 1, 2, 3], [4, 5]]
    >>> decode_blocks(tiny, [10] * 6, 5, room=9000, max_rows=100, keep=False)    # 3 rows a block, each alone
    [[0, 1, 2], [3, 4, 5]]
    """
    return group_blocks(shape, [(length, 1) for length in lengths], max_new_tokens, room, max_rows, keep)


def group_blocks(shape: ModelShape, groups: Sequence[tuple[int, int]], max_new_tokens: int, room: int,
                 max_rows: int, keep: bool = True) -> list[list[int]]:
    """Decoding blocks of groups of ``(keys, queries)`` (``decode_group``), as indices into ``groups``: sorted by
    queries then keys, each block as large as ``room`` allows with every group padded to the block's largest, where
    the blocks before it keep their buffers (every block's stays held until the wave is scored; with ``keep=False``
    each is freed once decoded, so every block has the whole room); at most ``max_rows`` queries a block (one token a
    query a step: the token budget); rows alone and groups never share a block (a row would be padded to a group's
    queries). A block holds one group at least.

    >>> tiny = ModelShape(layers=2, hidden=8, intermediate=16, heads=2, kv_heads=1, head_dim=4, vocab=10,
    ...                   dtype_bytes=4)
    >>> group_blocks(tiny, [(30, 3), (12, 1), (40, 3), (10, 1)], 5, room=10**6, max_rows=100, keep=False)
    [[3, 1], [0, 2]]
    """
    order = sorted(range(len(groups)), key=lambda g: (groups[g][1], groups[g][0], g))
    blocks, current, held = [], [], 0
    for g in order:
        keys = max(groups[c][0] for c in current + [g])  # every group of a block padded to its largest
        queries = max(groups[c][1] for c in current + [g])
        count = len(current) + 1
        if current and (count * queries > max_rows or (groups[g][1] > 1) != (groups[current[-1]][1] > 1)
                        or held + count * decode_group(shape, keys, queries, max_new_tokens) > room):
            if keep:
                keys, queries = (max(groups[c][i] for c in current) for i in (0, 1))
                held += len(current) * (keys + queries * (max_new_tokens - 1)) * shape.kv_bytes_per_token
            blocks.append(current)
            current = []
        current.append(g)
    blocks.append(current)
    return blocks


def score_chunk(shape: ModelShape, width: int, cached: int, room: int, max_tokens: int, folded: bool = False) -> int:
    """Rows of a scoring chunk whose longest trie is ``width`` tokens, on prompts' caches of ``cached`` slots:
    as many as ``room`` (what the wave leaves, less a float32 slice) and ``max_tokens`` allow, one at least.

    >>> tiny = ModelShape(layers=2, hidden=8, intermediate=16, heads=2, kv_heads=1, head_dim=4, vocab=10,
    ...                   dtype_bytes=4)
    >>> score_row(tiny, 4, 10), score_chunk(tiny, 4, 10, room=60000, max_tokens=1000)
    (3120, 19)
    >>> score_chunk(tiny, 4, 10, room=60000, max_tokens=40)              # 40 tokens: 10 rows of 4
    10
    """
    fit = room // max(1, score_row(shape, width, cached, folded))
    return max(1, min(max_tokens // max(1, width), fit))


def out_of_memory_advice(budget: int, option: str, weights: int, total: int | None = None,
                         others: int | None = None, share: float = GPU_SHARE) -> str:
    """What to set after the device ran out of memory under ``budget`` (``engine.<option>``). On a GPU (``total``
    bytes, ``others`` held by other processes): ``share`` of what the other processes and the weights leave, in whole
    GB (the rule of ``gpu_memory_gb=auto``); where that is no smaller than the budget, nothing else was in the way and
    the budget itself did not hold: half of it. On a CPU: half the budget.

    >>> print(out_of_memory_advice(49 * GIB, "gpu_memory_gb", 13 * GIB, total=80 * GIB, others=20 * GIB))
    other processes hold 20.00 GB of this GPU's 80.00 GB: set engine.gpu_memory_gb=35 (75% of what they and the \
model's weights, 13.00 GB, leave), or free the GPU
    >>> print(out_of_memory_advice(49 * GIB, "gpu_memory_gb", 13 * GIB, total=80 * GIB, others=0))
    nothing else holds this GPU's memory, so the engine outgrew its budget of 49.00 GB (its count of a pass falls \
short there): set engine.gpu_memory_gb=24, and please report it with the run's config.yaml
    >>> print(out_of_memory_advice(49 * GIB, "gpu_memory_gb", 13 * GIB, total=80 * GIB, others=GIB // 2))
    other processes hold only 0.50 GB of this GPU's memory, so the engine outgrew its budget of 49.00 GB (its count \
of a pass falls short there): set engine.gpu_memory_gb=24, and please report it with the run's config.yaml
    >>> print(out_of_memory_advice(49 * GIB, "gpu_memory_gb", 13 * GIB, total=80 * GIB, others=70 * GIB))
    other processes hold 70.00 GB of this GPU's 80.00 GB, and with the model's weights, 13.00 GB, no room is left: \
free the GPU
    >>> print(out_of_memory_advice(4 * GIB, "memory_gb", GIB))
    the machine's memory does not hold a budget of 4.00 GB beside what else runs: set engine.memory_gb=2
    """
    def gb(n: float) -> str:
        return f"{max(1, math.floor(n / GIB)) if n >= GIB else round(n / GIB, 2)}"

    if total is None:
        return (f"the machine's memory does not hold a budget of {describe_bytes(budget)} beside what else runs: set "
                f"engine.{option}={gb(budget / 2)}")
    fits = share * (total - (others or 0) - weights)
    if others and fits < GIB // 100:
        return (f"other processes hold {describe_bytes(others)} of this GPU's {describe_bytes(total)}, and with the "
                f"model's weights, {describe_bytes(weights)}, no room is left: free the GPU")
    if others and fits < budget:
        return (f"other processes hold {describe_bytes(others)} of this GPU's {describe_bytes(total)}: set "
                f"engine.{option}={gb(fits)} ({share:.0%} of what they and the model's weights, "
                f"{describe_bytes(weights)}, leave), or free the GPU")
    held = f"other processes hold only {describe_bytes(others)} of this GPU's memory" if others else \
        "nothing else holds this GPU's memory"
    return (f"{held}, so the engine outgrew its budget of {describe_bytes(budget)} (its count of a pass falls short "
            f"there): set engine.{option}={gb(budget / 2)}, and please report it with the run's config.yaml")


def describe_bytes(n: int) -> str:
    """
    >>> describe_bytes(3 * GIB // 2), describe_bytes(5 * 2**20)
    ('1.50 GB', '0.005 GB')
    """
    return f"{n / GIB:.2f} GB" if n >= GIB // 10 else f"{n / GIB:.3f} GB"

