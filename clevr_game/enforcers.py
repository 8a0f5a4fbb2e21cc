"""The referees of a move: boundary, ASP constraints, question relevance.

Each enforcer gives a Verdict with a human-readable reason. `judge` applies them
cheapest first and stops at the first rejection, so a rejected scene is never
rendered nor shown to a player. Every rule is enforced in every mode (the
paper's code checked scene validity only when rendering).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from clevr_game.layout import first_violation
from clevr_game.programs import Program, execute_scene
from clevr_game.scene import Scene


@dataclass(frozen=True)
class Verdict:
    enforcer: str
    ok: bool
    reason: str = ""

    def to_json(self) -> dict:
        return {"enforcer": self.enforcer, "ok": self.ok, "reason": self.reason}


class Judged(Protocol):
    """What an enforcer needs to know of the item behind a moved scene."""

    program: Program
    answer: str


VisibilityCheck = Callable[[Scene], list[int]]
"""Given a scene, the indices of objects too hidden to count as visible (filled in by the renderer)."""


class BoundaryEnforcer:
    """Bounds, minimum distance and margins; visibility when images are rendered."""

    name = "boundary"

    def __init__(self, visibility: VisibilityCheck | None = None):
        self.visibility = visibility

    def judge(self, scene: Scene, item: Judged | None = None) -> Verdict:
        described = [o.describe() for o in scene.objects]
        violation = first_violation(scene.coords(), scene.radii(), scene.directions)
        if violation is not None:
            return Verdict(self.name, False, violation.reason(described))
        if self.visibility is not None:
            hidden = self.visibility(scene)
            if hidden:
                return Verdict(self.name, False, f"object {hidden[0]} ({described[hidden[0]]}) is not visible")
        return Verdict(self.name, True)


class ConstraintChecker(Protocol):
    """An environment's check of a complete scene (CLEVR-POC): ok, and the failed sentences."""

    def check(self, scene: Scene) -> object: ...


class AspEnforcer:
    """The item's environment must still hold; regions follow from the new coordinates."""

    name = "asp"

    def __init__(self, environments: dict[str, ConstraintChecker] | None = None):
        self.environments = environments or {}

    def judge(self, scene: Scene, item: Judged | None = None) -> Verdict:
        env_id = getattr(item, "environment", None)
        if env_id is None:
            return Verdict(self.name, True)
        environment = self.environments.get(env_id)
        if environment is None:
            return Verdict(self.name, False, f"unknown environment {env_id!r}")
        result = environment.check(scene)
        if result.ok:
            return Verdict(self.name, True)
        return Verdict(self.name, False, result.failed[0] if result.failed else "environment violated")


class RelevanceEnforcer:
    """Re-execute the question on the moved scene: the true answer must not change."""

    name = "relevance"

    def __init__(self, answer_of: Callable[[Scene, Judged], str] | None = None):
        # CLEVR-POC items answer through clingo; CLEVR items through the program executor.
        self.answer_of = answer_of or (lambda scene, item: execute_scene(item.program, scene))

    def judge(self, scene: Scene, item: Judged) -> Verdict:
        new = self.answer_of(scene, item)
        if new == item.answer:
            return Verdict(self.name, True)
        return Verdict(self.name, False, f"answer changed from {item.answer} to {new}")


Enforcer = BoundaryEnforcer | AspEnforcer | RelevanceEnforcer


def judge(scene: Scene, item: Judged, enforcers: Sequence[Enforcer]) -> list[Verdict]:
    """Verdicts in order until the first rejection (cheapest enforcers first)."""
    verdicts = []
    for enforcer in enforcers:
        verdict = enforcer.judge(scene, item)
        verdicts.append(verdict)
        if not verdict.ok:
            break
    return verdicts


def accepted(verdicts: Sequence[Verdict]) -> bool:
    return all(v.ok for v in verdicts)


def first_reason(verdicts: Sequence[Verdict]) -> str:
    return next((v.reason for v in verdicts if not v.ok), "")


def default_enforcers(
    environments: dict[str, ConstraintChecker] | None = None,
    visibility: VisibilityCheck | None = None,
    answer_of: Callable[[Scene, Judged], str] | None = None,
) -> list[Enforcer]:
    return [BoundaryEnforcer(visibility), AspEnforcer(environments), RelevanceEnforcer(answer_of)]


def positions_changed(before: np.ndarray, after: np.ndarray) -> list[int]:
    """Indices of objects whose ground position moved."""
    return np.flatnonzero(np.any(np.abs(before[:, :2] - after[:, :2]) > 1e-9, axis=1)).tolist()
