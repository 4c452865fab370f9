"""What the engine's passes allocate above the weights: one memory model that sizes waves, decoding blocks, prefill
and scoring chunks from one budget (``EngineOptions.memory_gb`` / ``gpu_memory_gb``).

Pure functions of sizes: no model, no device. The sizes come from the model's config (``ModelShape.of``). Counted,
for a pass of ``rows`` rows × ``queries`` new tokens that see ``keys`` keys (cached and new) each:

- the attention masks: the boolean ``visible`` (1 byte a query-key pair) and the additive float mask built from it
  (one per attention type: full, and sliding-window where the model has it);
- one layer's activations at their peak, since layers run one after the other: the residual stream and the
  projections around attention (about six hidden-size vectors a token), plus the larger of the attention weights
  (scores and their softmax, materialised because the mask is explicit) and the MLP's three intermediate vectors
  (gate, up, their product);
- the keys and values this pass appends, and one layer's copy of the whole cache while it is appended (a cache
  grows by concatenation);
- the logits kept (``kept`` a row) and, for log-probabilities, their float32 copy and the log-sum-exp's float32
  temporary.

And what a wave holds while its passes run (``wave_bytes``): the prefill's segments (each shared beginning once) and
every decoding block's stacked cache with room for the responses. The engine plans waves within half the budget and
sizes each pass within what the wave's caches leave, so a budget is what a run spends, not a wish (measured on an
H200 at 7B: a peak of 0.47-0.72 of the budget above the weights; figures/gpu_check/, section 6).

>>> llama7b = ModelShape(layers=32, hidden=4096, intermediate=11008, heads=32, kv_heads=32, head_dim=128,
...                      vocab=32000, dtype_bytes=2)
>>> llama7b.kv_bytes_per_token                       # 2 (keys, values) x 32 layers x 32 heads x 128 x 2 bytes
524288
>>> # one token: masks 3, hidden 49,152, MLP 66,048 (> attention 128), its keys and values 524,288, one layer's
>>> # cache copy 16,384, its logits with their float32 copies 320,000
>>> pass_bytes(llama7b, rows=1, queries=1, keys=1, kept=1)
975875
"""

from __future__ import annotations

from dataclasses import dataclass

GIB = 2**30


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

    @property
    def kv_bytes_per_token(self) -> int:
        """Keys and values of one token, every layer."""
        return 2 * self.layers * self.kv_heads * self.head_dim * self.dtype_bytes

    @classmethod
    def of(cls, model) -> "ModelShape":
        """The shape of a transformers model (its text config)."""
        config = model.config.get_text_config(decoder=True)
        heads = config.num_attention_heads
        layer_types = set(getattr(config, "layer_types", None) or ())
        return cls(layers=config.num_hidden_layers, hidden=config.hidden_size,
                   intermediate=getattr(config, "intermediate_size", None) or 4 * config.hidden_size, heads=heads,
                   kv_heads=getattr(config, "num_key_value_heads", None) or heads,
                   head_dim=getattr(config, "head_dim", None) or config.hidden_size // heads,
                   vocab=int(config.vocab_size), dtype_bytes=model.dtype.itemsize,
                   mask_types=max(1, len(layer_types)))


def pass_bytes(shape: ModelShape, rows: int, queries: int, keys: int, kept: int) -> int:
    """Bytes one forward pass allocates above the weights and the cache it reads (module docstring: what is counted).

    >>> tiny = ModelShape(layers=2, hidden=8, intermediate=16, heads=2, kv_heads=1, head_dim=4, vocab=10,
    ...                   dtype_bytes=4)
    >>> # masks 3*5*(1+4) = 75; hidden 3*6*8*4 = 576; attention 2*2*3*5*4 = 240 < MLP 3*3*16*4 = 576;
    >>> # new keys/values 3*(2*2*1*4*4) = 192; one layer's cache copy 5*2*1*4*4 = 160; logits 1*10*(4+8) = 120
    >>> pass_bytes(tiny, rows=1, queries=3, keys=5, kept=1)
    1699
    >>> pass_bytes(tiny, rows=4, queries=3, keys=5, kept=1) == 4 * 1699    # linear in rows
    True
    """
    d = shape.dtype_bytes
    masks = queries * keys * (1 + d * shape.mask_types)
    hidden = 6 * queries * shape.hidden * d
    attention = 2 * shape.heads * queries * keys * d
    mlp = 3 * queries * shape.intermediate * d
    appended = queries * shape.kv_bytes_per_token
    cache_copy = keys * 2 * shape.kv_heads * shape.head_dim * d
    logits = kept * shape.vocab * (d + 8)
    return rows * (masks + hidden + max(attention, mlp) + appended + cache_copy + logits)


def wave_bytes(shape: ModelShape, rows: int, width: int, max_new_tokens: int, unique_tokens: int) -> int:
    """Bytes of cache a wave holds while it decodes: its prompts' distinct beginnings (``unique_tokens``, the
    prefill's segments) and each row's stacked cache, padded to ``width`` with room for the responses.

    >>> tiny = ModelShape(layers=2, hidden=8, intermediate=16, heads=2, kv_heads=1, head_dim=4, vocab=10,
    ...                   dtype_bytes=4)
    >>> wave_bytes(tiny, rows=3, width=10, max_new_tokens=5, unique_tokens=20)   # (20 + 3 * 15) * 64
    4160
    """
    return (unique_tokens + rows * (width + max_new_tokens)) * shape.kv_bytes_per_token


def rows_that_fit(budget: int, per_row: int) -> int:
    """How many rows of ``per_row`` bytes a budget holds (0 when not even one).

    >>> rows_that_fit(1000, 300), rows_that_fit(100, 300)
    (3, 0)
    """
    return max(0, budget // max(1, per_row))


def describe_bytes(n: int) -> str:
    """
    >>> describe_bytes(3 * GIB // 2), describe_bytes(5 * 2**20)
    ('1.50 GB', '0.005 GB')
    """
    return f"{n / GIB:.2f} GB" if n >= GIB // 10 else f"{n / GIB:.3f} GB"
