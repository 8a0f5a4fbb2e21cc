"""The card's clean and blind accuracy: every question asked about its own scene, then about another one.

Blind accuracy says how much of a player's accuracy comes from its input at all: each
question is asked about the scene (or image) of another item, one from another scene,
and scored against its own true answer. A player that answers from the question's
wording alone scores the same both ways; its drops say little about robustness.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from envs.items import Item

CONFIDENCE = 0.95


@dataclass(frozen=True)
class Accuracy:
    correct: int
    answered: int
    errors: int
    """Questions whose answer failed: not counted as answered, reported beside the figure."""

    @property
    def value(self) -> float:
        return self.correct / self.answered if self.answered else 0.0

    def interval(self) -> tuple[float, float]:
        """Wilson's 95% score interval (scipy's), (0, 1) when nothing was answered."""
        from scipy.stats import binomtest

        if not self.answered:
            return 0.0, 1.0
        ci = binomtest(self.correct, self.answered).proportion_ci(CONFIDENCE, method="wilson")
        return float(ci.low), float(ci.high)

    def to_json(self) -> dict[str, Any]:
        low, high = self.interval()
        return {"value": round(self.value, 6), "low": round(low, 6), "high": round(high, 6),
                "correct": self.correct, "answered": self.answered, "errors": self.errors}


def other_scene_items(items: list[Item], seed: int) -> list[int]:
    """For each item, the index of another item whose scene is another scene (seeded, reproducible).

    Each item is offered the items of a seeded permutation after its own place in
    it, the first one on another scene taken; InputError when every item shares one scene.
    """
    from clevr_game.errors import InputError

    order = np.random.default_rng(seed).permutation(len(items)).tolist()
    place = {index: position for position, index in enumerate(order)}
    scene_of = [id(item.scene) for item in items]
    chosen = []
    for index in range(len(items)):
        start = place[index]
        for step in range(1, len(items)):
            other = order[(start + step) % len(items)]
            if scene_of[other] != scene_of[index]:
                chosen.append(other)
                break
        else:
            raise InputError("the blind pass needs items of at least two scenes")
    return chosen


def clean_and_blind(game: Any, blind_game: Any, items: list[Item], seed: int) -> tuple[Accuracy, Accuracy]:
    """Accuracy of the player on `items` with their own scenes (`game`), and with other items' scenes.

    A question asked about another scene may have no answer there (it names an object
    that scene lacks): a player that says so, as the reference executor does, has not
    failed. So the blind pass goes through `blind_game` (the player without its failure
    limit) and a failed blind answer counts as a wrong one, reported in `errors`.
    """
    own = game.answers_about(items, [item.scene for item in items])
    swapped = other_scene_items(items, seed)
    blind = blind_game.answers_about(items, [items[j].scene for j in swapped])
    return _accuracy(items, own), _accuracy(items, blind, failed_is_wrong=True)


def _accuracy(items: list[Item], answers: list[Any], *, failed_is_wrong: bool = False) -> Accuracy:
    answered = [(item, answer) for item, answer in zip(items, answers, strict=True) if answer.ok]
    correct = sum(answer.text == item.answer for item, answer in answered)
    errors = len(items) - len(answered)
    return Accuracy(correct, len(items) if failed_is_wrong else len(answered), errors)
