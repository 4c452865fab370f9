"""A prompt race in a POSIX run (``task.race_sets``, with ``task.psi=false`` on a template or format pool): the sets
in rounds, and which prompts each round asks. The decisions are ``posixlab.metrics.race``'s looks (``race_look``,
one a round) on the answers of the rounds already recorded (``results.race_row``); the summary replays every look
with ``race_prompts`` on the records (``results.race_summary``), so what a run asked and what its summary reports are
one computation."""

from __future__ import annotations

import numpy as np

from posixlab.metrics.race import race_look
from posixlab.results import race_row
from posixlab.variants import PromptSet


class PromptRace:
    """The rounds of a run's sets (consecutive slices of ``round_sets``) and the answers recorded so far, read by
    ``reading`` (options, greedy)."""

    def __init__(self, sets: list[PromptSet], round_sets: int, confidence: float, reading: str = "greedy"):
        self.round_sets, self.confidence, self.reading = round_sets, confidence, reading
        width = max((len(s.prompts) for s in sets), default=0)
        self.rounds = [list(range(start, min(start + round_sets, len(sets))))
                       for start in range(0, len(sets), round_sets)]
        self.position = {s.set_id: n for n, s in enumerate(sets)}
        self.grid = np.full((len(sets), width), np.nan)  # the answers recorded, by set position (NaN: not asked)
        self.recorded = np.zeros(len(sets), dtype=bool)
        self._racing: dict[int, list[int]] = {0: list(range(width))}

    def racing(self, number: int) -> list[int]:
        """The prompts round ``number`` asks: those left by the rounds before it, one look after each. Before those
        are recorded (the check of every request before the first answer), every prompt."""
        if number not in self._racing:
            seen = number * self.round_sets
            if not self.recorded[:seen].all():
                return self._racing[0]
            alive, _ = race_look(self.grid[:seen], self.racing(number - 1), number, len(self.rounds), self.confidence)
            self._racing[number] = sorted(alive)
        return self._racing[number]

    def asked(self, prompt_set: PromptSet) -> list[int]:
        return self.racing(self.position[prompt_set.set_id] // self.round_sets)

    def answered(self, prompt_set: PromptSet, record: dict) -> None:
        n = self.position[prompt_set.set_id]
        self.grid[n] = [np.nan if c is None else c for c in race_row(record, self.reading)]
        self.recorded[n] = True
