"""Answer balancing per template across a whole dataset, in the spirit of CLEVR's rejection rules.

Counts start at zero for every answer a template can give. An answer is
refused while its count exceeds RATIO times the highest count among the
template's other answers, or MEDIAN_FACTOR times the median count (at least
MEDIAN_FLOOR). Because an answer is only counted when it was accepted, the
bound that holds at any time is:

    most frequent count <= RATIO * second most frequent count + 1.
"""

from __future__ import annotations

from collections.abc import Iterable

from clevr_game.vocab import Vocabulary

RATIO = 1.1
MEDIAN_FACTOR = 5.0
MEDIAN_FLOOR = 5
MAX_COUNT_ANSWER = 10


def answer_universe(answer_type: str, vocabulary: Vocabulary) -> tuple[str, ...]:
    """Every answer a template with this final type can give (CLEVR counts go 0..10)."""
    if answer_type == "boolean":
        return ("yes", "no")
    if answer_type == "integer":
        return tuple(str(i) for i in range(MAX_COUNT_ANSWER + 1))
    return vocabulary.values(answer_type)


class AnswerBalancer:
    """Answer counts per template key, kept across scenes and calls."""

    def __init__(self) -> None:
        self.counts: dict[int, dict[str, int]] = {}

    def start(self, key: int, universe: Iterable[str]) -> None:
        self.counts.setdefault(key, dict.fromkeys(universe, 0))

    def accepts(self, key: int, answer: str) -> bool:
        counts = self.counts[key]
        count = counts.get(answer, 0)
        highest_other = max((c for a, c in counts.items() if a != answer), default=0)
        if count > RATIO * highest_other:
            return False
        ordered = sorted(counts.values())
        median = max(ordered[len(ordered) // 2], MEDIAN_FLOOR)
        return count <= MEDIAN_FACTOR * median

    def record(self, key: int, answer: str) -> None:
        counts = self.counts[key]
        counts[answer] = counts.get(answer, 0) + 1
