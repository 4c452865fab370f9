"""The scoring engine: ``M[i, j] = log P(y_j | x_i)`` for many prompt sets, doing each piece of work once.

Every number equals one full forward pass per (prompt, response) pair within float32 rounding
(``scoring/bruteforce.py`` is that reference; the tests hold the two within 1e-4). How the work is cut:

1. **Waves.** Sets are sorted by prompt length and grouped into waves of similar length, as many as fit the memory
   budget. A wave's identical prompts (a spelling variant that equals another prompt) run once.
2. **Prefill.** A wave's prompts run as a radix tree (``radix.py``): the beginning several prompts share (the
   header, the question up to its first misspelling) runs once, each continuation on its ancestors' keys and values.
   Segments of one tree level run in batches of rows padded on the right; nothing real ever attends to padding.
3. **Greedy decoding** continues every prompt of a batch at once (prompts sorted by length, each row's cache gathered
   from its segments). Each row sees its own prompt and its own tokens
   only (explicit positions and masks), so a row's tokens do not depend on its neighbours. The log-probability
   of each generated token is kept: that is the diagonal ``M[j, j]`` (and ``M[i, j]`` whenever ``y_i == y_j``),
   with no second pass. With **shared decoding** (``EngineOptions.shared_decoding``, the default on a GPU) the
   prompts of a set that share most of their tokens (few-shot exemplars) decode as one cache row holding their
   distinct segments once, one query a prompt, so a step reads those keys and values once instead of once a prompt.
4. **Scoring.** For each prompt, the distinct responses of its set other than its own are packed into a token trie
   (``trie.py``) and read in one pass on the prompt's cache with tree attention; rows are batched, longest first,
   and a batch is cut where padding its rows to the longest would cost more than another pass (``padding_pays``).
5. **Cache.** With a ``ScoreCache``, every finished wave is written to disk in one transaction, and sets whose
   generations and scores are all cached are served from it without a forward pass.

Batch sizes follow a memory budget (``EngineOptions``) through one memory model (``memory.py``: what a wave's caches
and each pass really allocate, from the model's sizes): waves are planned within half the budget (a set larger than
that runs alone), each pass within what its wave's caches leave, and a budget that cannot hold one prompt set's caches
with its largest pass row is an error before any work. Caches are buffers allocated once with slots for what a pass
adds (``SlotLayer``). One configuration gives the same batches, and the same bits, on every run.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from posixlab.errors import ConfigError, DeviceMemoryError
from posixlab.models.causal_lm import CausalLM, token_logprobs
from posixlab.scoring import memory as memory_model
from posixlab.scoring.cache import ScoreCache
from posixlab.scoring.memory import DROP_SHARE, ModelShape, describe_bytes
from posixlab.scoring.options import GPU_SHARE, EngineOptions  # noqa: F401  (re-exported)
from posixlab.scoring.radix import path, radix_segments
from posixlab.scoring.trie import ResponseTrie

Ids = tuple[int, ...]
# A prompt prefix is run once for all the prompts that share it only when that saves at least this many tokens:
# each shared level costs one more sequential forward pass (about 0.1 s of fixed cost for SmolLM2 on 2 cores).
SHARING_MIN_SAVING = 64


def padding_pays(padded: int, real: int) -> bool:
    """Whether one pass of ``padded`` tokens, ``real`` of them real, costs less than cutting it in two: its padding
    is at most 64 tokens or a fifth of the pass (a pass also costs a fixed overhead, about 0.1 s for SmolLM2 on 2
    cores, so a little padding is cheaper than another pass).

    >>> padding_pays(100, 40), padding_pays(1000, 850), padding_pays(1000, 750)
    (True, True, False)
    """
    return padded - real <= max(64, 0.2 * padded)


@dataclass
class SetScores:
    responses: list[list[int]]  # greedy response token ids, one per prompt
    generation_logprobs: list[list[float]]  # per-token log-probabilities recorded while generating
    matrix: np.ndarray  # matrix[i, j] = log P(y_j | x_i), float64 holding sums of float32 log-probabilities
    stats: dict = field(default_factory=dict)
    # candidates[i, k] = log P(c_k | x_i) for continuations given to ``score_sets`` (class labels); None without them
    candidates: np.ndarray | None = None

    @property
    def lengths(self) -> list[int]:
        return [len(r) for r in self.responses]


@dataclass
class _Block:
    """Prompts decoded together: their gathered caches and next-token logits, kept until the wave is scored.

    The block's rows decode in groups: a group's prompts attend to one copy of their distinct beginnings (shared
    decoding), and a row alone is a group of one, its own prompt's cache."""

    prompts: list[int]  # indices into the wave's unique prompts, group by group
    lengths: torch.Tensor  # on the model's device
    # (layers, 2, groups, kv_heads, keys + queries * (max_new_tokens - 1), head_dim): each group's prompt segments in
    # its first ``keys`` slots (right-padded with zeros), then ``queries`` slots a decoding step, one for each of its
    # prompts' next token; None once freed (shared decoding, or a set too large to hold every block's buffer until
    # it is scored: scoring then stacks the prompts' caches from the wave's segments)
    kv: torch.Tensor | None
    width: int  # the block's longest prompt
    first_logits: torch.Tensor  # (rows, vocab): raw logits of the token after each prompt
    chains: list[list[int]]  # each row's prompt as the wave's segments, root first
    groups: list[list[int]]  # each group's rows (indices into ``prompts``)
    keys: int  # slots before the response slots: the longest group's prompt tokens
    seen: torch.Tensor  # (groups, queries, keys) bool on the model's device: the slots of each row's own prompt
    key_positions: torch.Tensor  # (groups, keys) on the model's device: each slot's position in its prompts


class SetScorer:
    """What every engine shares: the cache lookups, the assembly of a set's matrix, and the order of the work.

    An engine plans waves of sets and runs each wave (``_plan_waves``, ``_run_wave``): ``ScoringEngine`` here in
    this process, ``posixlab.serving.ServerEngine`` on a vLLM server. Both read the same score cache and build the
    same ``SetScores``, so a set's numbers do not depend on which of them computed it."""

    def __init__(self, lm, max_new_tokens: int, cache: ScoreCache | None = None):
        self.lm = lm
        self.max_new_tokens = max_new_tokens
        self.cache = cache
        self.processed_tokens = 0  # every position run through the model, padding included

    # --- public ------------------------------------------------------------------------------------------------------
    def run(self, requests: list, in_order: bool = False) -> Iterator[tuple[int, SetScores]]:
        """The runner's protocol (``posixlab.backends.Engine``): ``score_sets`` on the requests' ids and candidates."""
        candidates = [request.candidates for request in requests]
        return self.score_sets([request.ids for request in requests], candidates if any(candidates) else None,
                               in_order=in_order)

    def score_sets(self, sets: Sequence[Sequence[Sequence[int]]],
                   candidates: Sequence[Sequence[Sequence[int]]] | None = None,
                   in_order: bool = False) -> Iterator[tuple[int, SetScores]]:
        """Yield ``(index, SetScores)`` for every set of prompt ids, cached sets first, then wave by wave.

        ``candidates[i]``, when given, lists continuations (token ids) to score under every prompt of set ``i``
        besides the set's own responses, such as a classifier's class labels; they come back as
        ``SetScores.candidates``, read in the same trie pass as the responses. ``in_order`` fills waves with the
        sets in the given order instead of by length: for callers whose neighbouring sets share long prefixes (a
        classifier's prompts of one sample under each rephrasing), so that those prefixes run once."""
        if candidates is not None and len(candidates) != len(sets):
            raise ValueError(f"{len(candidates)} candidate lists for {len(sets)} sets")
        extra = [[tuple(c) for c in candidates[i]] if candidates is not None else [] for i in range(len(sets))]
        if any(len(c) == 0 for cs in extra for c in cs):
            raise ValueError("a candidate continuation is empty")
        pending = []
        for index, prompts in enumerate(sets):
            cached = self._from_cache(prompts, extra[index])
            if cached is None:
                pending.append(index)
            else:
                yield index, cached
        for wave in self._plan_waves(sets, pending, in_order):
            yield from self._run_wave([(i, [tuple(p) for p in sets[i]], extra[i]) for i in wave])

    # --- what an engine does -----------------------------------------------------------------------------------------
    def _plan_waves(self, sets, indices: list[int], in_order: bool = False) -> list[list[int]]:
        """The pending sets (``indices``) cut into waves: groups whose work runs, and is cached, together."""
        raise NotImplementedError

    def _run_wave(self, items: list[tuple[int, list[Ids], list[Ids]]]) -> Iterator[tuple[int, SetScores]]:
        """Generate and score the wave's ``(index, prompts, extra continuations)``; yield ``(index, SetScores)``."""
        raise NotImplementedError

    @staticmethod
    def _waves_of_prompts(sets, order: list[int], limit: int) -> list[list[int]]:
        """The sets ``order`` lists, in that order, cut into waves of at most ``limit`` distinct prompts each (a set
        with more is a wave of its own).

        >>> SetScorer._waves_of_prompts([[[1], [2]], [[1], [1]], [[3], [4], [5]]], [0, 1, 2], 3)
        [[0, 1], [2]]
        """
        waves, current, rows = [], [], 0
        for i in order:
            n = len({tuple(p) for p in sets[i]})
            if current and rows + n > limit:
                waves.append(current)
                current, rows = [], 0
            current.append(i)
            rows += n
        return waves + [current] if current else waves

    @staticmethod
    def _responses_needed(slots: list[list[int]], extras: list[list[Ids]], generated: dict) -> dict[int, dict]:
        """For each unique prompt ``u``, the responses it must be scored on: every other distinct response of each
        set it belongs to, and the set's extra continuations (its own response is the generation's diagonal)."""
        needs: dict[int, dict[Ids, None]] = {u: {} for slot in slots for u in slot}
        for slot, extra in zip(slots, extras):
            responses = list(dict.fromkeys([tuple(generated[u][0]) for u in slot] + extra))
            for u in dict.fromkeys(slot):
                own = tuple(generated[u][0])
                needs[u].update((r, None) for r in responses if r != own)
        return needs

    def _finish_wave(self, items, slots: list[list[int]], prompts: list[Ids], generated: dict, needs: dict,
                     scores: dict) -> Iterator[tuple[int, SetScores]]:
        """Store a finished wave in the score cache (one transaction), then yield each of its sets' ``SetScores``.
        ``generated[u]`` and ``scores[(u, response)]`` are indexed by the wave's unique prompt ``u``."""
        if self.cache is not None:
            self.cache.store({prompts[u]: gen for u, gen in generated.items()},
                             {(prompts[u], r): v for (u, r), v in scores.items()}, self.max_new_tokens)
        for (index, set_prompts, extra), slot in zip(items, slots):
            gens = {prompts[u]: generated[u] for u in slot}
            values = {(prompts[u], r): scores[(u, r)] for u in slot for r in needs[u]}
            yield index, self._assemble(set_prompts, gens, values, extra, cached=False)

    # --- cache and assembly ------------------------------------------------------------------------------------------
    def _from_cache(self, prompts, extra: list[Ids]) -> SetScores | None:
        if self.cache is None:
            return None
        prompts = [tuple(p) for p in prompts]
        gens = {}
        for p in dict.fromkeys(prompts):
            gens[p] = self.cache.generation(p, self.max_new_tokens)
            if gens[p] is None:
                return None
        responses = list(dict.fromkeys([tuple(gens[p][0]) for p in prompts] + extra))
        values = {}
        for p in gens:
            for r in responses:
                if r != tuple(gens[p][0]):
                    values[(p, r)] = self.cache.score(p, r)
                    if values[(p, r)] is None:
                        return None
        return self._assemble(prompts, gens, values, extra, cached=True)

    def _assemble(self, prompts: list[Ids], gens: dict, values: dict, extra: list[Ids], *,
                  cached: bool) -> SetScores:
        n = len(prompts)
        responses = [list(gens[p][0]) for p in prompts]
        generation_logprobs = [list(gens[p][1]) for p in prompts]
        diagonal = {p: sum(g[1]) for p, g in gens.items()}
        matrix = np.empty((n, n), dtype=np.float64)
        for i, p in enumerate(prompts):
            own = tuple(gens[p][0])
            for j, r in enumerate(responses):
                matrix[i, j] = diagonal[p] if tuple(r) == own else values[(p, tuple(r))]
        candidate_matrix = None
        if extra:
            candidate_matrix = np.array([[diagonal[p] if c == tuple(gens[p][0]) else values[(p, c)] for c in extra]
                                         for p in prompts], dtype=np.float64)
        unique_responses = {tuple(r) for r in responses}
        scored = unique_responses | set(extra)
        # what the engine runs for this set alone: its prompts' radix tree, each prompt's generated tokens but the
        # last, and each prompt's response trie
        segments, _ = radix_segments(list(gens), min_saving=SHARING_MIN_SAVING)
        work = sum(len(s.tokens) for s in segments) + sum(len(g[0]) - 1 for g in gens.values()) + sum(
            distinct_prefixes([r[:-1] for r in scored if r != tuple(gens[p][0])]) for p in gens)  # the tries' nodes
        stats = {"prompts": n, "unique_prompts": len(gens), "unique_responses": len(unique_responses),
                 # forward tokens: the set's own work (prompts shared with other sets of its wave run once)
                 "cached": cached, "forward_tokens": 0 if cached else work, "engine_tokens": work,
                 # one full pass per (prompt, response) pair plus one generation pass per prompt, as the
                 # authors' library runs
                 "forward_tokens_naive": sum(len(p) for p in prompts) * (n + 1) + sum(map(len, responses)) * (n + 1)}
        return SetScores(responses, generation_logprobs, matrix, stats, candidate_matrix)


class ScoringEngine(SetScorer):
    def __init__(self, lm: CausalLM, max_new_tokens: int, options: EngineOptions | None = None,
                 cache: ScoreCache | None = None):
        super().__init__(lm, max_new_tokens, cache)
        self.options = options or EngineOptions()
        self.weights_bytes = sum(p.numel() * p.element_size() for p in getattr(lm.model, "parameters", lambda: ())())
        self.batch_tokens, self.memory = self.options.resolve(lm.device, self.weights_bytes)
        self.max_wave_rows = self.options.wave_rows(lm.device)
        self.shape = ModelShape.of(lm.model, lm.device.type)
        self.wave_budget = self.memory // 2  # the caches a wave holds while its passes run (a set alone may hold more)
        self.slice_bytes = memory_model.slice_bytes(self.memory, lm.device.type)  # logits selected at a time
        self.pad_id = 0  # any id: padded positions are never seen by a real token
        self.shared_decoding = self.options.shares_decoding(lm.device)
        # prefill and scoring passes fold a grouped-query model's heads (sdpa only: eager attention repeats them)
        self.fold_heads = self.options.folds_heads(lm.device) and self.shape.folds_heads
        self.shared_rows = 0  # prompts decoded in a group of several (shared decoding), for reports

    def _set_bytes(self, n: int, longest: int, unique: int, hold: bool,
                   memory: int | None = None) -> tuple[int, str, int]:
        """What a wave of ``n`` distinct prompts (the longest ``longest`` tokens, ``unique`` distinct prefix tokens)
        holds, and the largest row of a pass beside it (what, bytes). ``hold``: every decoding block keeps its buffer
        until the wave is scored (the usual way); else the wave keeps its segments and frees each block's buffer once
        decoded (a set too large for the usual way). A scoring row's logits slice is the one a budget of ``memory``
        bytes selects (by default the engine's own)."""
        shape, new = self.shape, self.max_new_tokens
        selected = self.slice_bytes if memory is None else memory_model.slice_bytes(memory, self.lm.device.type)
        trie = n * new  # a prompt's trie holds at most every response of its set
        decoding = memory_model.decode_row(shape, longest, new)
        if hold:
            caches = memory_model.wave_bytes(shape, n, longest, new, unique)
            decoding -= memory_model.decode_buffer(shape, longest, new)  # the caches hold it already
        else:
            caches = memory_model.prefill_bytes(shape, n, unique)
        rows = {"a decoding row": decoding,
                "a prefill row": memory_model.prefill_row(shape, longest, 0, self.fold_heads),
                "a scoring row": memory_model.score_row(shape, trie, longest, self.fold_heads) + selected}
        what, row = max(rows.items(), key=lambda item: item[1])
        return caches, what, row

    def _holds_buffers(self, n: int, longest: int, unique: int) -> bool:
        """Whether a wave of such a set runs the usual way (every block's buffer held until it is scored), not on its
        segments (shared decoding, or a set too large for the usual way)."""
        if self.shared_decoding:
            return False
        caches, _, row = self._set_bytes(n, longest, unique, hold=True)
        return caches + row <= self.memory

    def _check_fits(self, n: int, longest: int, unique: int) -> None:
        """A ``ConfigError`` when the budget cannot hold one set of ``n`` distinct prompts (the longest ``longest``
        tokens) alone, either way: its caches and, beside them, one row of its largest pass."""
        if self._holds_buffers(n, longest, unique):
            return
        caches, what, row = self._set_bytes(n, longest, unique, hold=False)
        if caches + row > self.memory:
            # the smallest budget that holds the set, named in the error: a scoring row's logits slice grows with
            # the budget (a sixteenth of a small one), so what a budget needs is counted at that budget, from below
            # until it holds (a few steps: the slice grows by at most a sixteenth of each step)
            at_least = 0
            while caches + row > at_least:
                at_least = caches + row
                caches, what, row = self._set_bytes(n, longest, unique, hold=False, memory=at_least)
            option = "gpu_memory_gb" if self.lm.device.type == "cuda" and self.options.memory_gb is None else \
                "memory_gb"
            raise ConfigError(
                f"the engine's memory budget ({describe_bytes(self.memory)}) cannot hold one prompt set of {n} "
                f"prompts of up to {longest} tokens with {self.max_new_tokens} new tokens on {self.lm.name}: the "
                f"set's caches need {describe_bytes(caches)} and {what} {describe_bytes(row)} beside them. Raise "
                f"engine.{option} to at least {math.ceil(at_least / 2**30 * 100) / 100:.2f} (GB), or shorten the "
                f"prompts (fewer shots)")

    # --- planning ----------------------------------------------------------------------------------------------------
    def _plan_waves(self, sets, indices: list[int], in_order: bool = False) -> list[list[int]]:
        distinct = {i: {tuple(p) for p in sets[i]} for i in indices}
        sizes = {i: memory_model.SetSize(len(distinct[i]), max(len(p) for p in sets[i]),
                                         distinct_prefixes(distinct[i])) for i in indices}
        for size in sizes.values():
            self._check_fits(size.prompts, size.longest, size.unique_tokens)  # before any work
        order = indices if in_order else sorted(indices, key=lambda i: (sizes[i].longest, i))
        return memory_model.plan_waves(self.shape, sizes, self.max_new_tokens, self.wave_budget, self.max_wave_rows,
                                       order, hold=not self.shared_decoding)

    def _wave_room(self, prompts: list[Ids], unique: int | None = None) -> int:
        """What a wave's passes may allocate: the budget less its prefill segments and next-token logits (the
        decoding blocks' buffers are counted as they are cut). ``unique``: the prompts' distinct prefix tokens."""
        unique = distinct_prefixes(prompts) if unique is None else unique
        return self.memory - memory_model.prefill_bytes(self.shape, len(prompts), unique)

    def _blocks(self, groups: list[list[int]], keys: list[int], room: int, keep: bool = True) -> list[list[list[int]]]:
        """Decoding batches of the wave's groups of prompts (``groups``, each decoding on ``keys`` prompt tokens): each
        block as many groups as ``room`` holds beside the blocks before it (``memory.group_blocks``; ``keep=False``:
        each block's buffer freed once decoded) and the token budget allows (one token a row a step). A step reads
        every weight once whatever its rows, so a block is as large as memory allows."""
        sizes = [(k, len(g)) for g, k in zip(groups, keys)]
        return [[groups[g] for g in block] for block in
                memory_model.group_blocks(self.shape, sizes, self.max_new_tokens, room, self.batch_tokens, keep)]

    def _decoding_groups(self, prompts: list[Ids], slots: list[list[int]], segments, chains: list[list[int]],
                         room: int) -> tuple[list[list[int]], list[int]]:
        """The wave's prompts in decoding groups: with shared decoding, the prompts of a set decode together where
        that reads fewer keys and values a step than decoding them one by one: where their distinct beginnings are
        at most half their tokens (few-shot exemplars, a long header), and the group fits the room. Every other prompt
        is a group of its own. (A grouped-query model's sdpa passes fold its heads, ``folded_sdpa_attention``, so a
        group reads its keys and values once, not once a head.) Returns the groups and each one's prompt tokens."""
        if not self.shared_decoding:
            return [[u] for u in range(len(prompts))], [len(p) for p in prompts]
        owner: dict[int, int] = {}
        for s, slot in enumerate(slots):
            for u in slot:
                owner.setdefault(u, s)
        groups, keys = [], []
        for s, slot in enumerate(slots):
            members = [u for u in dict.fromkeys(slot) if owner[u] == s]
            union = sum(len(segments[k].tokens) for k in {k for u in members for k in chains[u]})
            if len(members) > 1 and 2 * union <= sum(len(prompts[u]) for u in members) and \
                    memory_model.decode_group(self.shape, union, len(members), self.max_new_tokens) <= room:
                groups.append(members)
                keys.append(union)
            else:
                groups.extend([u] for u in members)
                keys.extend(len(prompts[u]) for u in members)
        return groups, keys

    def _block(self, groups: list[list[int]], prompts: list[Ids], chains: list[list[int]], segments, segment_kv,
               first_logits) -> _Block:
        """A decoding block of ``groups`` of the wave's prompts: each group's segments stacked once in its own row of
        the buffer, in the order its prompts first reach them."""
        rows = [u for group in groups for u in group]
        unions = [list(dict.fromkeys(k for u in group for k in chains[u])) for group in groups]
        keys = max(sum(len(segments[k].tokens) for k in union) for union in unions)
        queries = max(map(len, groups))
        seen = torch.zeros((len(groups), queries, keys), dtype=torch.bool)
        key_positions = torch.arange(keys).repeat(len(groups), 1)  # slots past a group's segments: never seen
        for g, (group, union) in enumerate(zip(groups, unions)):
            at, slot = {}, 0
            for k in union:
                at[k], length = slot, len(segments[k].tokens)
                key_positions[g, slot:slot + length] = torch.arange(segments[k].start, segments[k].start + length)
                slot += length
            for q, u in enumerate(group):
                for k in chains[u]:
                    seen[g, q, at[k]:at[k] + len(segments[k].tokens)] = True
        device, row = self.lm.device, iter(range(len(rows)))
        return _Block(rows, torch.tensor([len(prompts[u]) for u in rows], device=device),
                      self._stack_kv(unions, keys, segment_kv, capacity=keys + queries * (self.max_new_tokens - 1)),
                      max(len(prompts[u]) for u in rows), torch.stack([first_logits[u] for u in rows]),
                      [chains[u] for u in rows], [[next(row) for _ in group] for group in groups], keys,
                      seen.to(device), key_positions.to(device))

    # --- one wave ----------------------------------------------------------------------------------------------------
    def _run_wave(self, items: list[tuple[int, list[Ids], list[Ids]]]) -> Iterator[tuple[int, SetScores]]:
        """``_wave``; the device running out of memory (another process on the card, a budget the machine cannot
        hold) stops the run with a ``DeviceMemoryError`` that says what to set. The waves before are finished:
        yielded, and in the score cache."""
        advice = None
        try:
            yield from self._wave(items)
        except (RuntimeError, MemoryError) as exc:  # torch.OutOfMemoryError is a RuntimeError, as a CPU's is
            if not is_out_of_memory(exc):
                raise
            advice = self._out_of_memory(exc)
        if advice is not None:  # raised here, not in the handler: the failed wave's frames and tensors are gone
            raise DeviceMemoryError(advice)

    def _out_of_memory(self, exc: BaseException) -> str:
        device = self.lm.device
        total = others = None
        if device.type == "cuda":  # what this process does not hold: other processes (and this one's CUDA context)
            free, total = torch.cuda.mem_get_info(device)
            others = max(0, total - free - torch.cuda.memory_reserved(device))
        option = "gpu_memory_gb" if device.type == "cuda" and self.options.memory_gb is None else "memory_gb"
        asked = re.search(r"tried to allocate ([\d.]+ ?[KMGT]i?B|(\d+) bytes)", str(exc), re.IGNORECASE)
        asked = asked and (describe_bytes(int(asked.group(2))) if asked.group(2) else asked.group(1))
        kept = "The sets finished before it are kept in the score cache: the same command again resumes from them" \
            if self.cache is not None else "The score cache is off (score_cache=false): a rerun starts over"
        return (f"{self.lm.name} ran out of memory on {device} in the scoring engine"
                f"{f' (it asked for {asked} more)' if asked else ''}: "
                f"{memory_model.out_of_memory_advice(self.memory, option, self.weights_bytes, total, others)}. {kept}.")

    def _wave(self, items: list[tuple[int, list[Ids], list[Ids]]]) -> Iterator[tuple[int, SetScores]]:
        unique: dict[Ids, int] = {}
        slots = [[unique.setdefault(p, len(unique)) for p in prompts] for _, prompts, _ in items]
        prompts = list(unique)
        distinct = distinct_prefixes(prompts)
        room = self._wave_room(prompts, distinct)  # what the segments and logits leave; planning kept the wave small
        # the usual way holds every block's buffer until the wave is scored; shared decoding, and a set too large
        # for the usual way, keep the segments instead and free each buffer once decoded (scoring then rebuilds the
        # caches from the segments)
        hold = self._holds_buffers(len(prompts), max(map(len, prompts)), distinct)

        segments, end, segment_kv, first_logits = self._prefill(prompts, room)
        chains = [path(segments, end[u]) for u in range(len(prompts))]
        groups, keys = self._decoding_groups(prompts, slots, segments, chains, room)
        self.shared_rows += sum(len(group) for group in groups if len(group) > 1)
        blocks, generated = [], {}
        for block_groups in self._blocks(groups, keys, room, keep=hold):
            block = self._block(block_groups, prompts, chains, segments, segment_kv, first_logits)
            for u, gen in zip(block.prompts, self._decode(block)):
                generated[u] = gen
            if not hold:
                block.kv = None
            blocks.append(block)
        if hold:
            segment_kv = None

        needs = self._responses_needed(slots, [extra for _, _, extra in items], generated)
        tries = {u: ResponseTrie(list(need)) for u, need in needs.items()}
        scores: dict[tuple[int, Ids], float] = {}
        # scoring chunks take what the decoding buffers (or the segments) and the logits leave, less a slice of
        # logits widened to float32
        held = sum(memory_model.decode_buffer(self.shape, block.width, self.max_new_tokens) * len(block.prompts)
                   for block in blocks) if hold else distinct * self.shape.kv_bytes_per_token
        room = self.memory - memory_model.prefill_bytes(self.shape, len(prompts), 0) - self.slice_bytes - held
        for block in blocks:
            self._score(block, prompts, tries, scores, room, segment_kv)
        del blocks, segment_kv

        yield from self._finish_wave(items, slots, prompts, generated, needs, scores)

    @torch.inference_mode()
    def _prefill(self, prompts: list[Ids], room: int):
        """Run the wave's prompts as a radix tree, level by level: each shared beginning once, on its own.

        Returns the segments, the segment each prompt ends with, every segment's keys and values (a tensor
        ``(layers, 2, kv_heads, length, head_dim)``) and every prompt's next-token logits.
        """
        segments, end = radix_segments(prompts, min_saving=SHARING_MIN_SAVING)
        ending: dict[int, list[int]] = {}
        for u, k in enumerate(end):
            ending.setdefault(k, []).append(u)
        segment_kv: list = [None] * len(segments)
        first_logits: list = [None] * len(prompts)
        levels: dict[int, list[int]] = {}
        for k, segment in enumerate(segments):
            levels.setdefault(segment.level, []).append(k)
        for level in sorted(levels):
            chunk: list[int] = []
            for k in sorted(levels[level], key=lambda k: (len(segments[k].tokens), k)):
                rows = chunk + [k]
                padded = len(rows) * len(segments[k].tokens)
                real = sum(len(segments[j].tokens) for j in rows)
                past = max(segments[j].start for j in rows)
                # segments of a level differ in length: cut where the padding does not pay, where the pass would
                # pass the token budget, or the pass (with its rows' ancestors) the room
                if chunk and (padded > self.batch_tokens or not padding_pays(padded, real) or len(rows)
                              * memory_model.prefill_row(self.shape, len(segments[k].tokens), past,
                                                         self.fold_heads) > room):
                    self._run_segments(chunk, segments, segment_kv, ending, first_logits)
                    rows = [k]
                chunk = rows
            self._run_segments(chunk, segments, segment_kv, ending, first_logits)
        return segments, end, segment_kv, first_logits

    def _run_segments(self, rows, segments, segment_kv, ending, first_logits) -> None:
        """One pass of segments of a tree level on their ancestors' caches: each segment's keys and values kept, and
        the next-token logits of the prompts it ends."""
        ids, positions, visible, key_positions, offset = self._segment_inputs(rows, segments)
        width, past = ids.shape[1], key_positions.shape[1] - ids.shape[1]
        chains = [path(segments, segments[k].parent) if segments[k].parent >= 0 else [] for k in rows]
        kv = self._stack_kv(chains, past, segment_kv, capacity=past + width)
        logits = self.lm.forward_masked(ids, positions, visible, key_positions, self.lm.slot_cache(kv, past),
                                        logits_to_keep=torch.tensor([width - 1]), fold_heads=self.fold_heads)
        self._count(len(rows) * width, sum(len(segments[k].tokens) for k in rows))
        for r, k in enumerate(rows):
            segment_kv[k] = kv[:, :, r, :, past + int(offset[r]):past + width].clone()
            for u in ending.get(k, ()):
                first_logits[u] = logits[r, 0]  # a view: the pass keeps one column of logits, no more

    def _segment_inputs(self, rows, segments):
        """Token ids, positions, the causal mask over ancestors and segment, the keys' positions, and each row's
        padding. Segments are padded on the LEFT, so that every row ends in the last column and the logits are needed
        in that one column only. Positions and masks are explicit, so the padding changes nothing."""
        n = len(rows)
        lengths = torch.tensor([len(segments[k].tokens) for k in rows])
        starts = torch.tensor([segments[k].start for k in rows])
        width, past = int(lengths.max()), int(starts.max())
        offset = width - lengths  # padding columns before each row's tokens
        ids = torch.full((n, width), self.pad_id, dtype=torch.long)
        for r, k in enumerate(rows):
            ids[r, int(offset[r]):] = torch.tensor(segments[k].tokens)
        column = torch.arange(width)
        positions = (starts[:, None] + column[None, :] - offset[:, None]).clamp(min=0)
        real = column[None, :] >= offset[:, None]  # (n, width)
        visible = torch.zeros((n, width, past + width), dtype=torch.bool)
        visible[:, :, :past] = (torch.arange(past)[None, :] < starts[:, None])[:, None, :]  # ancestors, not padding
        causal = torch.ones((width, width), dtype=torch.bool).tril()
        visible[:, :, past:] = causal[None] & real[:, None, :]  # earlier tokens of the segment, not padding
        visible[:, :, :past] &= real[:, :, None]
        visible[:, :, past:] |= torch.eye(width, dtype=torch.bool)[None] & ~real[:, :, None]  # padding sees itself
        key_positions = torch.cat([torch.arange(past).expand(n, past), positions], dim=1)
        return ids, positions, visible, key_positions, offset

    def _stack_kv(self, chains: list[list[int]], width: int, segment_kv, capacity: int) -> torch.Tensor:
        """The keys and values of rows, ``(layers, 2, rows, kv_heads, capacity, head_dim)``: each row's first slots
        the concatenation of its list of segments (a prompt's chain, or a decoding group's segments; ``width`` at
        most), the rest zeros (never visible)."""
        shape = self.shape
        out = torch.zeros((shape.layers, 2, len(chains), shape.kv_heads, capacity, shape.head_dim),
                          dtype=self.lm.model.dtype, device=self.lm.device)
        for r, chain in enumerate(chains):
            at = 0
            for k in chain:
                length = segment_kv[k].shape[3]
                out[:, :, r, :, at:at + length] = segment_kv[k]
                at += length
        return out

    @torch.inference_mode()
    def _decode(self, block: _Block) -> list[tuple[list[int], list[float]]]:
        """Greedy responses of a block's rows: argmax of the raw logits, ending after the first EOS (kept).

        A cache row is a group: its queries are its prompts (padded to the block's largest group), each seeing its
        own prompt's slots among the group's segments, then its own response's slots: step ``t``'s token of query
        ``q`` goes into slot ``keys + t * queries + q``."""
        n, device, keys = len(block.prompts), self.lm.device, block.keys
        queries = block.seen.shape[1]
        members = [group + [-1] * (queries - len(group)) for group in block.groups]  # -1: a padding query
        tokens, logprobs = [[] for _ in range(n)], [[] for _ in range(n)]
        done = [False] * n
        cache = self.lm.slot_cache(block.kv, keys)
        live = list(range(len(members)))  # the group of each cache row
        response = torch.arange(block.kv.shape[4] - keys, device=device)  # the response slots
        own = (response % queries)[None, :] == torch.arange(queries, device=device)[:, None]  # (queries, slots)
        step_of = response // queries
        # a padding query decodes as its group's first prompt would; nothing real sees it and its tokens are dropped
        lengths = block.lengths[torch.tensor([b if b >= 0 else group[0] for group in members for b in group],
                                             device=device)].view(len(members), queries)
        # a key slot's position: the prompt's own in a segment; a response token's after its prompt's end
        key_positions = torch.cat([block.key_positions, lengths.gather(1, (response % queries).expand(len(live), -1))
                                   + step_of], dim=1)
        seen = block.seen

        def real_queries(live: list[int]) -> tuple[list[int], torch.Tensor | None]:
            """The block row of each real query in cache order, and where they are among the cache's queries (None:
            everywhere, no padding)."""
            where = [(i * queries + q, b) for i, g in enumerate(live) for q, b in enumerate(members[g]) if b >= 0]
            at = None if len(where) == len(live) * queries else torch.tensor([i for i, _ in where], device=device)
            return [b for _, b in where], at

        real, at = real_queries(live)
        logits = block.first_logits  # rows are groups' prompts in order: the real queries
        constraint = self._constraint(block)  # None: free greedy decoding (every engine but the constrained one)
        for step in range(self.max_new_tokens):
            choice = (logits if constraint is None else constraint.mask(logits, real)).argmax(dim=-1)
            chosen = token_logprobs(logits, choice)  # the model's own probability of the token, before any mask
            # one transfer a step for every row's token and log-probability (float64 holds both exactly)
            choice_list, chosen_list = torch.stack([choice.double(), chosen.double()]).tolist()
            choice_list = [int(c) for c in choice_list]
            for k, b in enumerate(real):
                if not done[b]:
                    tokens[b].append(choice_list[k])
                    logprobs[b].append(chosen_list[k])
                    done[b] = tokens[b][-1] in self.lm.eos_ids or len(tokens[b]) == self.max_new_tokens
                    if constraint is not None:
                        constraint.accept(b, tokens[b][-1])
            going = [i for i, g in enumerate(live) if any(b >= 0 and not done[b] for b in members[g])]
            if not going:
                break
            if at is None:
                inputs = choice.view(len(live), queries)  # a finished row's input is never read by another row
            else:
                inputs = torch.full((len(live) * queries,), self.pad_id, dtype=choice.dtype, device=device)
                inputs = inputs.index_copy(0, at, choice).view(len(live), queries)
            if len(going) <= DROP_SHARE * len(live):  # drop finished groups once enough of them are idle
                kept = torch.tensor(going, device=device)
                cache.batch_select_indices(kept)
                live = [live[i] for i in going]
                inputs, lengths, key_positions, seen = inputs[kept], lengths[kept], key_positions[kept], seen[kept]
                real, at = real_queries(live)
            positions = lengths + step
            # the prompt's own tokens, then the response's so far (slot ``keys + t * queries + q`` is step t's)
            visible = torch.cat([seen, (own & (step_of <= step)[None, :]).expand(len(live), -1, -1)], dim=-1)
            logits = self.lm.forward_masked(inputs, positions, visible, key_positions, cache,
                                            fold_heads=queries > 1).flatten(0, 1)
            if at is not None:
                logits = logits[at]
            self._count(len(live) * queries, sum(not done[b] for b in real))
        return list(zip(tokens, logprobs))

    def _constraint(self, block: _Block):
        """What restricts a block's greedy tokens (``posixlab.structured.constrain``); None here: no restriction."""
        return None

    @torch.inference_mode()
    def _score(self, block: _Block, prompts: list[Ids], tries: dict[int, ResponseTrie], scores: dict,
               room: int, segment_kv=None) -> None:
        """log P(y | x) for every response each prompt of the block needs, into ``scores[(prompt, y)]``; each chunk
        of rows within ``room``. The prompts' caches come from the block's buffer or, where it was freed, from the
        wave's segments (``segment_kv``)."""
        owners = [(b, u, y) for b, u in enumerate(block.prompts) for y in tries[u].responses]
        if owners:  # every response's first token, read in one transfer
            picked = selected_logprobs(block.first_logits[:, None], torch.tensor([b for b, _, _ in owners]),
                                       torch.zeros(len(owners), dtype=torch.long),
                                       torch.tensor([y[0] for _, _, y in owners], device=self.lm.device),
                                       self.slice_bytes)
            for (_, u, y), value in zip(owners, picked.tolist()):
                scores[(u, y)] = value
        rows = sorted((b for b, u in enumerate(block.prompts) if len(tries[block.prompts[b]])),
                      key=lambda b: (-len(tries[block.prompts[b]]), b))
        cached = block.width
        start = 0
        while start < len(rows):
            width = len(tries[block.prompts[rows[start]]])  # longest first: the chunk's first row sets the width
            fit = memory_model.score_chunk(self.shape, width, cached, room, self.batch_tokens, self.fold_heads)
            chunk, real = rows[start:start + fit], 0
            for k, b in enumerate(chunk):  # tries shrink along the rows: cut before the padding stops paying
                real += len(tries[block.prompts[b]])
                if not padding_pays(width * (k + 1), real):
                    chunk = chunk[:max(1, k)]
                    break
            start += len(chunk)
            self._score_chunk(block, chunk, width, [tries[block.prompts[b]] for b in chunk],
                              [block.prompts[b] for b in chunk], scores, segment_kv)

    def _score_chunk(self, block: _Block, chunk: list[int], width: int, tries: list[ResponseTrie],
                     prompt_ids: list[int], scores: dict, segment_kv=None) -> None:
        """One pass of a chunk's response tries on their prompts' caches; every response's tokens after the first
        added to its score."""
        cache = self._chunk_cache(block, chunk, width, segment_kv)
        ids, positions, visible, key_positions = self._chunk_inputs(block, chunk, width, tries)
        logits = self.lm.forward_masked(ids, positions, visible, key_positions, cache, fold_heads=self.fold_heads)
        self._count(len(chunk) * width, sum(len(t) for t in tries))
        self._add_targets(logits, tries, prompt_ids, scores)

    def _chunk_cache(self, block: _Block, chunk: list[int], width: int, segment_kv=None):
        """The chunk's prompts' caches, with ``width`` free slots a row for the tries."""
        cached = block.width
        if block.kv is None:  # freed after decoding: the same caches, stacked again from the segments
            kv = self._stack_kv([block.chains[b] for b in chunk], cached, segment_kv, capacity=cached + width)
        else:
            kv = block.kv.new_empty(block.kv.shape[:2] + (len(chunk),) + block.kv.shape[3:4] + (cached + width,)
                                    + block.kv.shape[5:])
            for c, b in enumerate(chunk):  # row by row: a gather would hold a second copy of every row's cache
                kv[:, :, c, :, :cached] = block.kv[:, :, b, :, :cached]
        return self.lm.slot_cache(kv, cached)

    def _chunk_inputs(self, block: _Block, chunk: list[int], width: int, tries: list[ResponseTrie]):
        """Token ids, positions, the tree-attention mask and the keys' positions of a chunk's tries, each row's
        padded to ``width``: a node sees its prompt (never the prompt's padding) and its own path in the trie;
        padding queries see one real key and are discarded. Built in numpy, a row's slices at a time."""
        cached, n = block.width, len(chunk)
        nodes = np.array([len(trie) for trie in tries])
        lengths = np.array([int(block.lengths[b]) for b in chunk])
        real = np.arange(width) < nodes[:, None]  # (n, width): the queries that are trie nodes
        ids = np.full((n, width), self.pad_id, dtype=np.int64)
        ids[real] = np.concatenate([trie.tokens for trie in tries])
        positions = np.broadcast_to(lengths[:, None], (n, width)).copy()  # padding: just past the prompt
        positions[real] = np.concatenate([length - 1 + np.array(trie.depth) for length, trie in zip(lengths, tries)])
        visible = np.zeros((n, width, cached + width), dtype=bool)
        visible[:, :, :cached] = real[:, :, None] & (np.arange(cached) < lengths[:, None, None])
        visible[:, :, 0] |= ~real
        for c, trie in enumerate(tries):
            visible[c, :nodes[c], cached:cached + nodes[c]] = trie.ancestors().numpy()
        key_positions = np.concatenate([np.broadcast_to(np.arange(cached), (n, cached)), positions], axis=1)
        return tuple(torch.from_numpy(a) for a in (ids, positions, visible, key_positions))

    def _add_targets(self, logits: torch.Tensor, tries: list[ResponseTrie], prompt_ids: list[int],
                     scores: dict) -> None:
        """Every response's tokens after the first, read from its trie's pass (one transfer), added to its score."""
        arrays = [trie.target_arrays() for trie in tries]  # (nodes, tokens, counts) a row
        rows = np.concatenate([np.full(len(nodes), c) for c, (nodes, _, _) in enumerate(arrays)])
        if not len(rows):
            return
        nodes = torch.from_numpy(np.concatenate([a[0] for a in arrays]))
        targets = torch.from_numpy(np.concatenate([a[1] for a in arrays]))
        picked = selected_logprobs(logits, torch.from_numpy(rows), nodes, targets, self.slice_bytes).tolist()
        at = 0
        for c, (trie, (_, _, counts)) in enumerate(zip(tries, arrays)):
            for y, count in zip(trie.responses, counts):
                total = scores[(prompt_ids[c], y)]
                for value in picked[at:at + count]:  # in token order, so each sum runs first token to last
                    total += value
                scores[(prompt_ids[c], y)] = total
                at += count

    def _count(self, processed: int, real: int) -> None:
        self.processed_tokens += processed
        self.lm.forward_tokens += real

def selected_logprobs(logits: torch.Tensor, rows: torch.Tensor, queries: torch.Tensor, targets: torch.Tensor,
                      slice_bytes: int = 2**28) -> torch.Tensor:
    """``log P(targets[t])`` under ``logits[rows[t], queries[t]]``, in float32, computed a slice of targets at a
    time: only a slice's logits are copied and widened to float32 (``slice_bytes`` of them at most), never the
    pass's whole ``(rows, queries, vocab)`` block. Each value is its row's own log-softmax, so slicing changes nothing.

    >>> logits = torch.tensor([[[0.0, 1.0, 2.0]], [[1.0, 1.0, 1.0]]])
    >>> values = selected_logprobs(logits, torch.tensor([0, 1]), torch.tensor([0, 0]), torch.tensor([2, 0]),
    ...                            slice_bytes=1)
    >>> [round(v, 4) for v in values.tolist()]    # 2 - log(1 + e + e^2), then log(1/3)
    [-0.4076, -1.0986]
    """
    per_slice = max(1, slice_bytes // (logits.shape[-1] * (logits.element_size() + 8)))
    # the indices on the logits' device once: a host tensor indexing a device one is copied there slice by slice
    rows, queries, targets = (t.to(logits.device) for t in (rows, queries, targets))
    return torch.cat([token_logprobs(logits[rows[i:i + per_slice], queries[i:i + per_slice]],
                                     targets[i:i + per_slice]) for i in range(0, len(rows), per_slice)])


def is_out_of_memory(exc: BaseException) -> bool:
    """Whether ``exc`` is an allocation the device refused: torch's on a GPU, its CPU allocator's, or Python's.

    >>> is_out_of_memory(RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate 8 bytes"))
    True
    >>> is_out_of_memory(RuntimeError("shape mismatch"))
    False
    """
    return isinstance(exc, (torch.OutOfMemoryError, MemoryError)) or any(
        f"DefaultCPUAllocator: {words}" in str(exc) for words in ("can't allocate memory", "not enough memory"))


def distinct_prefixes(prompts) -> int:
    """The tokens a radix tree of ``prompts`` holds: every distinct prefix once (what their prefill's segments
    cache).

    >>> distinct_prefixes([(1, 2, 3), (1, 2, 4), (1, 5)])    # 1, 1-2, 1-2-3, 1-2-4, 1-5
    5
    """
    segments, _ = radix_segments(list(prompts))
    return sum(len(segment.tokens) for segment in segments)


def score_prompt_set(lm: CausalLM, prompt_ids: list[list[int]], max_new_tokens: int,
                     options: EngineOptions | None = None) -> SetScores:
    """The matrix of one prompt set (no disk cache): the engine on a single set."""
    (_, scores), = ScoringEngine(lm, max_new_tokens, options).score_sets([prompt_ids])
    return scores
