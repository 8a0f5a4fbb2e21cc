"""The referees of a move: boundary, visibility, ASP constraints, question relevance.

Each enforcer gives a Verdict with a human-readable reason. The `Referee` applies
them to a batch of moved layouts cheapest first and stops at a scene's first
rejection, so a rejected scene is never rendered nor shown to a player. Every
rule is enforced in every mode (the paper's code checked scene validity only
when rendering). The referee reads arrays, as an item pool holds them, so the
world knows nothing of the game's envs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from clevr_game.layout import BatchVerdict, first_violation, judge_batch
from clevr_game.programs import Program, SceneFacts, compile_scene, execute
from clevr_game.scene import Scene


@dataclass(frozen=True)
class Verdict:
    enforcer: str
    ok: bool
    reason: str = ""

    def to_json(self) -> dict:
        return {"enforcer": self.enforcer, "ok": self.ok, "reason": self.reason}


class JudgedItem(Protocol):
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

    def judge(self, scene: Scene, item: JudgedItem | None = None) -> Verdict:
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

    def judge(self, scene: Scene, item: JudgedItem) -> Verdict:
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

    def new_answer(self, scene: Scene, item: JudgedItem, facts: SceneFacts | None = None) -> str:
        if item.environment is not None and self.rules is not None:
            return self.rules.true_answer(item, scene)
        return execute(item.program, facts if facts is not None else compile_scene(scene))

    def judge(self, scene: Scene, item: JudgedItem, facts: SceneFacts | None = None) -> Verdict:
        new = self.new_answer(scene, item, facts)
        if new == item.answer:
            return Verdict(self.name, True)
        return Verdict(self.name, False, f"answer changed from {item.answer} to {new}")


@dataclass(frozen=True)
class MoveBatch:
    """B moved layouts as arrays (what an item pool holds), with the items behind them.

    `keys` name each row's item for the referee's per-item caches (the pool index);
    positions are (B, N, 2) ground coordinates, `z` their heights, `axes` each
    scene's left and front axes (B, 2, 2) and `descriptions` each object's words.
    """

    items: Sequence[JudgedItem]
    keys: Sequence[int]
    scenes: Sequence[Scene]
    start: np.ndarray
    moved: np.ndarray
    z: np.ndarray
    radii: np.ndarray
    present: np.ndarray
    axes: np.ndarray
    num_objects: np.ndarray
    descriptions: Sequence[Sequence[str]]

    def coords(self, row: int) -> np.ndarray:
        """(n, 3) moved coordinates of row's objects."""
        n = int(self.num_objects[row])
        return np.column_stack([self.moved[row, :n], self.z[row, :n]])


@dataclass
class Rulings:
    """The referee's verdicts on a MoveBatch.

    `valid` (B,) every referee accepted; `unmoved` (B,) no object moved (such a scene
    is judged once per item and never rendered to judge). Verdict lists and their
    reasons are built on demand: a batch's rejections are read only when an
    outcome's info is.
    """

    batch: MoveBatch
    layout: BatchVerdict
    valid: np.ndarray
    unmoved: np.ndarray
    judged: dict[int, list[Verdict]]
    """Verdicts of the rows whose layout fits (the others are the layout's)."""
    scenes: dict[int, Scene]
    """Moved scenes a referee had to build (CLEVR-POC, visibility), by row."""

    def verdicts(self, row: int) -> list[Verdict]:
        found = self.judged.get(row)
        if found is not None:
            return found
        return [Verdict(BoundaryEnforcer.name, False, self.layout.reason(row, self.batch.descriptions[row]))]

    def reason(self, row: int) -> str:
        return next((v.reason for v in self.verdicts(row) if not v.ok), "")


class Referee:
    """Every referee of a move, for a whole batch, cheapest first.

    1. boundary: CLEVR's bounds, gaps and margins, for the batch in one vectorised pass;
    2. an optional per-scene visibility hook (reported as boundary, like CLEVR's own check);
    3. ASP constraints of items with an environment (CLEVR-POC);
    4. relevance: the question re-executed on the moved scene keeps its answer;
    5. visibility: every object keeps enough pixels, for the accepted moved scenes
       at once, since counting pixels is the dearest verdict.
    A scene where nothing moved is judged once per item and then taken from a cache.
    """

    def __init__(self, rules: ConstraintRules | None = None, visibility_hook: VisibilityCheck | None = None,
                 visibility: VisibilityEnforcer | None = None):
        self.boundary = BoundaryEnforcer(visibility_hook)
        self.asp = AspEnforcer(rules)
        self.relevance = RelevanceEnforcer(rules)
        self.visibility = visibility
        self._facts: dict[int, SceneFacts] = {}
        self._unmoved: dict[int, list[Verdict]] = {}

    def judge(self, batch: MoveBatch) -> Rulings:
        layout = judge_batch(batch.moved, batch.radii, batch.present, axes=batch.axes)
        unmoved = ~np.any(batch.moved != batch.start, axis=(1, 2))
        judged: dict[int, list[Verdict]] = {}
        scenes: dict[int, Scene] = {}
        to_see: list[int] = []
        for row in np.flatnonzero(layout.ok).tolist():
            key = batch.keys[row]
            if unmoved[row]:
                verdicts = self._unmoved.get(key)
                if verdicts is None:
                    verdicts = self._unmoved[key] = self._judge_fitting(batch, row, {})
                judged[row] = verdicts
                continue
            judged[row] = verdicts = self._judge_fitting(batch, row, scenes)
            if verdicts[-1].ok:
                to_see.append(row)
        if to_see and self.visibility is not None:
            for row in to_see:
                if row not in scenes:
                    scenes[row] = batch.scenes[row].with_coords(batch.coords(row))
            for row, verdict in zip(to_see, self.visibility.judge_many([scenes[r] for r in to_see]), strict=True):
                judged[row] = [*judged[row], verdict]
        valid = np.zeros(len(batch.keys), dtype=bool)
        valid[[row for row, verdicts in judged.items() if verdicts[-1].ok]] = True
        return Rulings(batch, layout, valid, unmoved, judged, scenes)

    def _judge_fitting(self, batch: MoveBatch, row: int, scenes: dict[int, Scene]) -> list[Verdict]:
        """Hook, ASP constraints and relevance of a scene whose layout fits."""
        item, coords = batch.items[row], batch.coords(row)
        verdicts = [Verdict(BoundaryEnforcer.name, True)]
        scene = None
        if self.boundary.visibility is not None or item.environment is not None:
            scene = scenes[row] = batch.scenes[row].with_coords(coords)
        if self.boundary.visibility is not None:
            verdict = self.boundary.judge_visibility(scene)
            if not verdict.ok:
                return [verdict]
        facts = None
        if item.environment is not None:
            verdicts.append(self.asp.judge(scene, item))
            if not verdicts[-1].ok:
                return verdicts
        else:
            facts = self._facts.get(batch.keys[row])
            if facts is None:
                facts = self._facts[batch.keys[row]] = compile_scene(batch.scenes[row])
            facts = facts.with_coords(coords)
        verdicts.append(self.relevance.judge(scene, item, facts))
        return verdicts
