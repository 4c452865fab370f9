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
    children: list[dict[int, int]] = [{}]
    token, ends = [-1], [[]]
    for u, prompt in enumerate(prompts):
        node = 0
        for t in prompt:
            nxt = children[node].get(t)
            if nxt is None:
                nxt = children[node][t] = len(token)
                children.append({}), token.append(t), ends.append([])
            node = nxt
        ends[node].append(u)
    segments, end = [], [0] * len(prompts)
    queue = [(child, -1, 0, 0) for child in children[0].values()]
    while queue:  # breadth first, so parents come first and levels are contiguous
        node, parent, start, level = queue.pop(0)
        segment = Segment([], parent, start, level)
        segments.append(segment)
        while True:  # extend while the path neither branches nor ends a prompt
            segment.tokens.append(token[node])
            if len(children[node]) != 1 or ends[node]:
                break
            node = next(iter(children[node].values()))
        for u in ends[node]:
            end[u] = len(segments) - 1
        queue += [(child, len(segments) - 1, start + len(segment.tokens), level + 1)
                  for child in children[node].values()]
    return segments, end


def path(segments: list[Segment], last: int) -> list[int]:
    """Segment indices from the root to ``last``."""
    chain = []
    while last >= 0:
        chain.append(last)
        last = segments[last].parent
    return chain[::-1]
