"""The referees of a move: boundary, ASP constraints, question relevance.

Each enforcer gives a Verdict with a human-readable reason. `judge` applies them
cheapest first and stops at the first rejection, so a rejected scene is never
rendered nor shown to a player. Every rule is enforced in every mode (the
paper's code checked scene validity only when rendering). The game judges the
boundary of a whole batch at once with `clevr_game.layout.judge_batch` (same
rules, same reasons) and then calls these enforcers per surviving scene.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from clevr_game.layout import first_violation
from clevr_game.programs import Program, SceneFacts, compile_scene, execute
from clevr_game.scene import Scene


@dataclass(frozen=True)
class Verdict:
    enforcer: str
    ok: bool
    reason: str = ""

    def to_json(self) -> dict:
        return {"enforcer": self.enforcer, "ok": self.ok, "reason": self.reason}


class Judged(Protocol):
    """What the enforcers need to know of the item behind a moved scene."""

    program: Program
    answer: str
    environment: str | None


class ConstraintRules(Protocol):
    """The referee of items with an environment (CLEVR-POC): constraints and set answers."""

    def check(self, item: Any, visible: Scene) -> Any:
        """An object with `ok` and `failed` (the English sentences of broken constraints)."""

    def true_answer(self, item: Any, visible: Scene) -> str: ...


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
        return self.judge_visibility(scene)

    def judge_visibility(self, scene: Scene) -> Verdict:
        if self.visibility is not None:
            hidden = self.visibility(scene)
            if hidden:
                what = scene.objects[hidden[0]].describe()
                return Verdict(self.name, False, f"object {hidden[0]} ({what}) is not visible")
        return Verdict(self.name, True)


PixelCounter = Callable[[Sequence[Scene]], list[list[int]]]
"""Given scenes, the visible pixels of each object in each (an object-index render)."""


class VisibilityEnforcer:
    """Every object keeps at least `min_pixels` visible pixels, as CLEVR requires of its images.

    Judged for whole batches, since each scene costs a render: the game asks it
    last, for the scenes every cheaper referee accepted.
    """

    name = "visibility"

    def __init__(self, count_pixels: PixelCounter, min_pixels: float):
        self.count_pixels = count_pixels
        self.min_pixels = min_pixels

    def judge_many(self, scenes: Sequence[Scene]) -> list[Verdict]:
        verdicts = []
        for scene, counts in zip(scenes, self.count_pixels(scenes), strict=True):
            hidden = next((i for i, count in enumerate(counts) if count < self.min_pixels), None)
            if hidden is None:
                verdicts.append(Verdict(self.name, True))
            else:
                verdicts.append(Verdict(self.name, False, (
                    f"object {hidden} ({scene.objects[hidden].describe()}) is hidden: {counts[hidden]} pixels "
                    f"(at least {self.min_pixels:g} must show)")))
        return verdicts


class AspEnforcer:
    """An item's environment must still hold; regions follow from the new coordinates."""

    name = "asp"

    def __init__(self, rules: ConstraintRules | None = None):
        self.rules = rules

    def judge(self, scene: Scene, item: Judged) -> Verdict:
        if item.environment is None:
            return Verdict(self.name, True)
        if self.rules is None:
            return Verdict(self.name, False, f"no rules to check environment {item.environment!r}")
        result = self.rules.check(item, scene)
        if result.ok:
            return Verdict(self.name, True)
        return Verdict(self.name, False, result.failed[0] if result.failed else "environment violated")


class RelevanceEnforcer:
    """Re-execute the question on the moved scene: the true answer must not change.

    CLEVR items run their program (on `facts` when the caller has them, e.g. the
    relations of a moved scene computed in bulk); CLEVR-POC items ask the rules.
    """

    name = "relevance"

    def __init__(self, rules: ConstraintRules | None = None):
        self.rules = rules

    def new_answer(self, scene: Scene, item: Judged, facts: SceneFacts | None = None) -> str:
        if item.environment is not None and self.rules is not None:
            return self.rules.true_answer(item, scene)
        return execute(item.program, facts if facts is not None else compile_scene(scene))

    def judge(self, scene: Scene, item: Judged, facts: SceneFacts | None = None) -> Verdict:
        new = self.new_answer(scene, item, facts)
        if new == item.answer:
            return Verdict(self.name, True)
        return Verdict(self.name, False, f"answer changed from {item.answer} to {new}")


Enforcer = BoundaryEnforcer | AspEnforcer | RelevanceEnforcer


def default_enforcers(rules: ConstraintRules | None = None,
                      visibility: VisibilityCheck | None = None) -> list[Enforcer]:
    """Cheapest first: geometry, then constraints, then re-answering the question."""
    return [BoundaryEnforcer(visibility), AspEnforcer(rules), RelevanceEnforcer(rules)]


def judge(scene: Scene, item: Judged, enforcers: Sequence[Enforcer]) -> list[Verdict]:
    """Verdicts in order until the first rejection."""
    verdicts = []
    for enforcer in enforcers:
        verdict = enforcer.judge(scene, item)
        verdicts.append(verdict)
        if not verdict.ok:
            break
    return verdicts
