"""Prompts as a radix tree, so the tokens several prompts share at their start are run once.

The prompts of a set share long beginnings: the multiple-choice header, the question up to its first misspelled word,
a few-shot block. A radix tree cuts the prompts into segments: a segment is a run of tokens that the same prompts
share; its children continue it in different ways. Running the segments level by level, each on the keys and values
of its ancestors, gives every prompt exactly the cache it would get alone, for fewer tokens.

>>> segments, end = radix_segments([(1, 2, 3, 4), (1, 2, 5), (1, 2, 3, 4), (1, 2)])
>>> [(s.tokens, s.parent, s.start, s.level) for s in segments]
[([1, 2], -1, 0, 0), ([3, 4], 0, 2, 1), ([5], 0, 2, 1)]
>>> end          # the segment each prompt ends with (at that segment's last token)
[1, 2, 1, 0]
>>> path(segments, 2)
[0, 2]
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass


@dataclass
class Segment:
    tokens: list[int]
    parent: int  # index of the parent segment, -1 for a root
    start: int  # position of the first token in every prompt that contains the segment
    level: int  # number of ancestors


def radix_segments(prompts, min_saving: int = 0) -> tuple[list[Segment], list[int]]:
    """The radix tree's segments (parents before children) and, per prompt, the segment it ends with.

    A shared segment saves ``(prompts below it - 1) * length`` tokens but costs one more sequential forward pass.
    With ``min_saving`` > 0, a segment that saves fewer tokens is not shared: each prompt below it gets its own
    copy of the rest of its tokens.

    >>> segments, end = radix_segments([(1, 2, 3, 4), (1, 2, 5), (1, 2, 3, 4), (1, 2)], min_saving=2)
    >>> [(s.tokens, s.parent) for s in segments], end
    ([([1, 2], -1), ([3, 4], 0), ([5], 0)], [1, 2, 1, 0])
    >>> segments, end = radix_segments([(1, 2, 3, 4), (1, 2, 3, 5), (1, 2, 6)], min_saving=2)
    >>> [(s.tokens, s.parent) for s in segments], end     # the lone shared 3 would save 1 token: not shared
    ([([1, 2], -1), ([3, 4], 0), ([3, 5], 0), ([6], 0)], [1, 2, 3])
    """
    segments, end = _full_tree(prompts)
    if min_saving <= 0:
        return segments, end
    below: list[list[int]] = [[] for _ in segments]
    for u, last in enumerate(end):
        for k in path(segments, last):
            below[k].append(u)
    kept: list[Segment] = []
    new_index: dict[int, int] = {}
    new_end = [-1] * len(prompts)
    for k, segment in enumerate(segments):  # parents first
        if segment.parent >= 0 and segment.parent not in new_index:
            continue  # inside a segment that was not shared: its prompts already have their own copies
        parent = new_index.get(segment.parent, -1)
        level = kept[parent].level + 1 if parent >= 0 else 0
        if parent < 0 or (len(below[k]) - 1) * len(segment.tokens) >= min_saving:
            new_index[k] = len(kept)
            kept.append(Segment(list(segment.tokens), parent, segment.start, level))
            continue
        for u in below[k]:
            new_end[u] = len(kept)
            kept.append(Segment(list(prompts[u][segment.start:]), parent, segment.start, level))
    for u, last in enumerate(end):
        if new_end[u] < 0:
            new_end[u] = new_index[last]
    return kept, new_end


def _full_tree(prompts) -> tuple[list[Segment], list[int]]:
    # A compressed trie: each node holds a run of tokens, split only where prompts part or one ends, so a prompt is
    # compared a run at a time (tuple slices, in C), never a token at a time in Python. Children keep the order in
    # which prompts first reached them.
    runs: list[tuple[int, ...]] = [()]  # node 0 is the root
    children: list[dict[int, int]] = [{}]
    ends: list[list[int]] = [[]]
    for u, prompt in enumerate(prompts):
        prompt, node, at = tuple(prompt), 0, 0
        while at < len(prompt):
            child = children[node].get(prompt[at])
            if child is None:  # a new branch: the rest of the prompt
                children[node][prompt[at]] = node = len(runs)
                runs.append(prompt[at:]), children.append({}), ends.append([])
                at = len(prompt)
                break
            run = runs[child]
            if prompt[at:at + len(run)] != run:  # the prompt leaves the run, or ends inside it: split the run there
                shared = _common_length(run, prompt, at)
                children[node][prompt[at]] = head = len(runs)
                runs.append(run[:shared]), children.append({run[shared]: child}), ends.append([])
                runs[child] = run[shared:]
                child, run = head, run[:shared]
            node, at = child, at + len(run)
        ends[node].append(u)
    segments, end = [], [0] * len(prompts)
    queue = deque((child, -1, 0, 0) for child in children[0].values())
    while queue:  # breadth first, so parents come first and levels are contiguous
        node, parent, start, level = queue.popleft()
        segments.append(Segment(list(runs[node]), parent, start, level))
        for u in ends[node]:
            end[u] = len(segments) - 1
        queue.extend((child, len(segments) - 1, start + len(runs[node]), level + 1)
                     for child in children[node].values())
    return segments, end


def _common_length(run: tuple, prompt: tuple, at: int) -> int:
    """How many first tokens of ``run`` ``prompt[at:]`` shares (fewer than all of them), by bisection on slices."""
    low, high = 0, min(len(run), len(prompt) - at)  # run[:low] is shared; run[:high + 1] is not
    while low < high:
        middle = (low + high + 1) // 2
        if run[:middle] == prompt[at:at + middle]:
            low = middle
        else:
            high = middle - 1
    return low


def path(segments: list[Segment], last: int) -> list[int]:
    """Segment indices from the root to ``last``."""
    chain = []
    while last >= 0:
        chain.append(last)
        last = segments[last].parent
    return chain[::-1]
