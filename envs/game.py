"""One move of the game for a batch of items at once (DESIGN.md, "One move of the game").

The single env and the vector env are both thin shells over `Game.play`: it turns
actions into moved positions with numpy, judges them cheapest first (boundary for
the whole batch in one vectorised call, then ASP constraints and question
relevance per surviving scene), asks the player once for every valid scene of the
batch, and computes the rewards. The old answer of each item is asked once and
cached; a move that leaves every object in place is answered from that cache.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from clevr_game.enforcers import (
    AspEnforcer,
    BoundaryEnforcer,
    ConstraintRules,
    RelevanceEnforcer,
    Verdict,
    VisibilityEnforcer,
)
from clevr_game.errors import InputError
from clevr_game.layout import judge_batch
from clevr_game.programs import SceneFacts, compile_scene
from clevr_game.scene import Scene, project_to_pixels
from envs.items import Item, ItemPool
from envs.moves import MoveSpace
from players.protocol import NEED_IMAGE, Answer, Player, Query

VISIBILITY_COUNTERS = ("geometric", "index")
"""How Game.visibility counts an object's pixels: ray casting in numpy, or Blender's object-index pass."""


@dataclass(frozen=True)
class Rewards:
    """dr: a right answer broken; cr: another change; fr: nothing changed; isr: invalid scene."""

    dr: float = 1.0
    cr: float = 0.1
    fr: float = -0.1
    isr: float = -0.8


@dataclass(slots=True)
class Outcome:
    """What one move did: verdicts, answers, reward and the new scene (when valid)."""

    item_id: str
    valid: bool
    verdicts: list[Verdict]
    true_answer: str
    old_answer: str | None
    new_answer: str | None
    reward: float
    moves: list[tuple[int, float, float]]
    new_scene: Scene | None = None
    player_error: str | None = None
    changed: bool = False
    dropped: bool = False
    extra: dict = field(default_factory=dict)

    @property
    def counted(self) -> bool:
        """False when the player failed to answer: such a move is neither a success nor a failure."""
        return self.player_error is None

    @property
    def reason(self) -> str:
        return next((v.reason for v in self.verdicts if not v.ok), "")

    def info(self) -> dict:
        return {
            "item_id": self.item_id,
            "valid": self.valid,
            "reason": self.reason,
            "verdicts": [v.to_json() for v in self.verdicts],
            "true_answer": self.true_answer,
            "old_answer": self.old_answer,
            "new_answer": self.new_answer,
            "changed": self.changed,
            "dropped": self.dropped,
            "moves": self.moves,
            "new_scene": self.new_scene,
            "player_error": self.player_error,
        }


class Game:
    """The rules, the referees and the player for a pool of items."""

    def __init__(
        self,
        pool: ItemPool,
        player: Player,
        *,
        moves: MoveSpace | None = None,
        rewards: Rewards | None = None,
        rules: ConstraintRules | None = None,
        visibility: Callable[[Scene], list[int]] | None = None,
        renderer: Any = None,
        image_dir: str | None = None,
        old_answer_attempts: int = 3,
        check_visibility: bool | None = None,
        visibility_counter: str = "geometric",
    ):
        self.pool = pool
        self.player = player
        self.moves = moves or MoveSpace()
        self.rewards = rewards or Rewards()
        if rules is None and any(it.environment is not None for it in pool.items):
            from envs.poc_items import PocRules

            rules = PocRules()
        self.renderer = renderer
        self.image_dir = image_dir
        self.boundary = BoundaryEnforcer(visibility)
        self.asp = AspEnforcer(rules)
        self.relevance = RelevanceEnforcer(rules)
        self.old_answer_attempts = old_answer_attempts
        # CLEVR's rule that every object shows at least 200 pixels: on by default for
        # players that see images, where a hidden object fools a human too.
        self.check_visibility = NEED_IMAGE in player.needs if check_visibility is None else check_visibility
        if visibility_counter not in VISIBILITY_COUNTERS:
            raise InputError(f"visibility_counter must be one of {', '.join(VISIBILITY_COUNTERS)}, "
                             f"got {visibility_counter!r}")
        self.visibility_counter = visibility_counter
        self._visibility: VisibilityEnforcer | None = None
        self._old_answers: dict[int, Answer] = {}  # successes, and failures that used up their attempts
        self._old_attempts: dict[int, int] = {}
        self._facts: dict[int, SceneFacts] = {}
        self._unmoved_verdicts: dict[int, list[Verdict]] = {}  # per item: attributes never move, only relations change

    # ------------------------------------------------------------------ answers

    def _queries(self, items: list[Item], scenes: list[Scene]) -> list[Query]:
        """Queries restricted to what the player needs; images rendered (and cached) only for pixel players."""
        paths: list[str | None] = [None] * len(scenes)
        if NEED_IMAGE in self.player.needs:
            paths = [str(p) for p in self._images(scenes)]
        return [
            Query(item.item_id, item.question, scene=scene, image_path=path, program=item.program,
                  vocabulary=scene.vocabulary,
                  environment=item.extra.get("environment_text")).restricted_to(self.player.needs)
            for item, scene, path in zip(items, scenes, paths, strict=True)
        ]

    def _renderer(self) -> Any:
        if self.renderer is None:
            from clevr_game.render import Renderer

            # A pixel player is shown images as it was trained on them: its preset and size.
            width, height = getattr(self.player, "image_size", (None, None))
            self.renderer = Renderer(getattr(self.player, "render_preset", "fast"), width=width, height=height)
        return self.renderer

    @property
    def visibility(self) -> VisibilityEnforcer | None:
        """The visibility referee, when this game checks it.

        Pixels per object are counted by ray casting against the exact shapes (`geometric`,
        milliseconds, no Blender; docs/rendering.md gives its agreement with the index pass)
        or by the renderer's object-index render (`index`), at the renderer's index size.
        """
        if self.check_visibility and self._visibility is None:
            if self.visibility_counter == "index":
                renderer = self._renderer()
                self._visibility = VisibilityEnforcer(renderer.visible_pixels_many, renderer.pixel_threshold)
            else:
                from clevr_game.render.renderer import CLEVR_INDEX_SIZE, CLEVR_MIN_PIXELS
                from clevr_game.render.silhouettes import geometric_counter

                size = getattr(self.renderer, "index_size", CLEVR_INDEX_SIZE)
                threshold = getattr(self.renderer, "pixel_threshold", CLEVR_MIN_PIXELS)
                self._visibility = VisibilityEnforcer(geometric_counter(*size), threshold)
        return self._visibility

    def _images(self, scenes: list[Scene]) -> list[Path]:
        self._renderer()
        if self.image_dir is None:
            self.image_dir = tempfile.mkdtemp(prefix="clevr-game-images-")
        names = [f"{self.renderer.image_key(scene)}.png" for scene in scenes]
        return self.renderer.render_many(scenes, self.image_dir, names=names)

    def old_answers(self, indices: Sequence[int]) -> list[Answer]:
        """The player's answers on the original scenes, asked once per item and cached.

        A failed unmoved answer is asked again at once, up to `old_answer_attempts`
        tries in all; only then does its failure stand for the run, so one transient
        fault is not repeated on every episode of the item.
        """
        missing = sorted({int(i) for i in indices} - self._old_answers.keys())
        while missing:
            items = [self.pool.items[i] for i in missing]
            answers = self.player.answer_batch(self._queries(items, [it.scene for it in items]))
            for index, answer in zip(missing, answers, strict=True):
                self._old_attempts[index] = self._old_attempts.get(index, 0) + 1
                if answer.ok or self._old_attempts[index] >= self.old_answer_attempts:
                    self._old_answers[index] = answer
            missing = [i for i in missing if i not in self._old_answers]
        return [self._old_answers[int(i)] for i in indices]

    def adopt_old_answers(self, other: Game) -> None:
        """Take over `other`'s successful unmoved answers for the items both pools hold."""
        index_of = {item.item_id: i for i, item in enumerate(self.pool.items)}
        for j, answer in other._old_answers.items():
            i = index_of.get(other.pool.items[j].item_id)
            if i is not None and answer.ok:
                self._old_answers[i] = answer

    # ------------------------------------------------------------------ judging

    def _moved_facts(self, item: Item, index: int, coords: np.ndarray) -> SceneFacts:
        facts = self._facts.get(index)
        if facts is None:
            facts = self._facts[index] = compile_scene(item.scene)
        return facts.with_coords(coords)

    def _judge_valid_layout(
        self, item: Item, index: int, coords: np.ndarray
    ) -> tuple[list[Verdict], Scene | None, SceneFacts | None]:
        """Visibility, ASP constraints and relevance of a scene whose layout is valid."""
        verdicts = [Verdict("boundary", True)]
        scene = facts = None
        if self.boundary.visibility is not None or item.environment is not None:
            scene = item.scene.with_coords(coords)
        if self.boundary.visibility is not None:
            verdict = self.boundary.judge_visibility(scene)
            if not verdict.ok:
                return [verdict], scene, None
        if item.environment is not None:
            verdicts.append(self.asp.judge(scene, item))
            if not verdicts[-1].ok:
                return verdicts, scene, None
        else:
            facts = self._moved_facts(item, index, coords)
        verdicts.append(self.relevance.judge(scene, item, facts))
        return verdicts, scene, facts

    def _unmoved_outcome(self, item: Item, index: int, old: Answer) -> Outcome:
        verdicts = self._unmoved_verdicts.get(index)
        if verdicts is None:
            n = int(self.pool.num_objects[index])
            coords = np.column_stack([self.pool.xy[index, :n], self.pool.z[index, :n]])
            verdicts = self._unmoved_verdicts[index] = self._judge_valid_layout(item, index, coords)[0]
        scene = item.scene if verdicts[-1].ok else None
        return self._finish(item, verdicts, old, old if scene is not None else None, [], scene)

    # ------------------------------------------------------------------ the move

    def _moved_layout(self, indices: np.ndarray, heads: np.ndarray, actions: np.ndarray
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray, Any]:
        """(indices, start and moved positions (B, 10, 2), the batch's layout verdicts)."""
        indices = np.asarray(indices, dtype=np.int64)
        pool = self.pool
        start = pool.xy[indices]
        present = pool.present[indices]
        moved = self.moves.apply(start, heads, np.asarray(actions, dtype=np.int64))
        moved = np.where(present[..., None], moved, start)
        return indices, start, moved, judge_batch(moved, pool.radii[indices], present, axes=pool.margin_axes[indices])

    def judge_moves(self, indices: np.ndarray, heads: np.ndarray, actions: np.ndarray) -> np.ndarray:
        """(B,) whether each move passes every referee `play` would ask, without asking the player.

        The same verdicts as `play` (boundary, visibility, ASP, relevance), so a
        baseline can reject invalid moves before they cost a query.
        """
        indices, start, moved, layout = self._moved_layout(indices, heads, actions)
        pool = self.pool
        ok = np.zeros(len(indices), dtype=bool)
        accepted: list[tuple[int, Scene]] = []
        for row, (index, fits) in enumerate(zip(indices.tolist(), layout.ok.tolist(), strict=True)):
            if not fits:
                continue
            item, n = pool.items[index], int(pool.num_objects[index])
            coords = np.column_stack([moved[row, :n], pool.z[index, :n]])
            verdicts, scene, _ = self._judge_valid_layout(item, index, coords)
            if not verdicts[-1].ok:
                continue
            if not np.any(moved[row] != start[row]):  # as in `play`: an unmoved scene is not rendered to judge
                ok[row] = True
                continue
            accepted.append((row, scene if scene is not None else item.scene.with_coords(coords)))
        if accepted and self.visibility is not None:
            verdicts = self.visibility.judge_many([scene for _, scene in accepted])
            accepted = [a for a, verdict in zip(accepted, verdicts, strict=True) if verdict.ok]
        ok[[row for row, _ in accepted]] = True
        return ok

    def play(self, indices: np.ndarray, heads: np.ndarray, actions: np.ndarray) -> list[Outcome]:
        """Play one move on each of B items: `heads` (B, 10) maps head -> object slot."""
        indices, start, moved, layout = self._moved_layout(indices, heads, actions)
        pool = self.pool
        old = self.old_answers(indices)
        shifts = moved - start
        moves_by_row: dict[int, list[tuple[int, float, float]]] = {}
        rows, objs = np.nonzero(np.any(shifts != 0.0, axis=-1))
        # Moves are shown and exported: give the grid's displacement (0.6), not the sum's noise (0.6000000000000001).
        exact = shifts[rows, objs]
        if self.moves.mode == "displacement":
            exact = np.round(exact / self.moves.step) * self.moves.step
        exact = np.round(exact, 10)
        for row, obj, (dx, dy) in zip(rows.tolist(), objs.tolist(), exact.tolist(), strict=True):
            moves_by_row.setdefault(row, []).append((obj, dx, dy))

        outcomes: list[Outcome | None] = [None] * len(indices)
        accepted: list[tuple[int, int, np.ndarray, list[Verdict], Scene | None]] = []
        for row, (index, ok) in enumerate(zip(indices.tolist(), layout.ok.tolist(), strict=True)):
            item = pool.items[index]
            if not ok:
                reason = layout.reason(row, pool.descriptions[index])
                outcomes[row] = self._finish(item, [Verdict("boundary", False, reason)], old[row], None,
                                             moves_by_row.get(row, []))
                continue
            if row not in moves_by_row:  # nothing moved: judged once per item, the old answer stands
                outcomes[row] = self._unmoved_outcome(item, index, old[row])
                continue
            n = int(pool.num_objects[index])
            coords = np.column_stack([moved[row, :n], pool.z[index, :n]])
            verdicts, scene, _ = self._judge_valid_layout(item, index, coords)
            if verdicts[-1].ok:
                accepted.append((row, index, coords, verdicts, scene))
            else:
                outcomes[row] = self._finish(item, verdicts, old[row], None, moves_by_row.get(row, []))
        if accepted and self.visibility is not None:
            accepted = self._visible(accepted, outcomes, indices, moves_by_row)
        if not accepted:
            return outcomes  # type: ignore[return-value]

        # Accepted scenes are built together: one projection for all their objects.
        pixels = project_to_pixels(np.concatenate([a[2] for a in accepted]))
        bounds = np.cumsum([0] + [len(a[2]) for a in accepted])
        to_ask: list[tuple[int, Scene]] = []
        for k, (row, index, coords, verdicts, scene) in enumerate(accepted):
            item = pool.items[index]
            move_list = moves_by_row[row]
            if scene is None:
                # Players read coordinates; the relationships lists are built only if the scene is written.
                scene = item.scene.with_coords(coords, pixel_coords=pixels[bounds[k]:bounds[k + 1]],
                                               compute_relationships=False)
            outcomes[row] = Outcome(item.item_id, True, verdicts, item.answer, None, None, 0.0, move_list, scene)
            to_ask.append((row, scene))
        if to_ask:
            queries = self._queries([pool.items[indices[row]] for row, _ in to_ask], [scene for _, scene in to_ask])
            for (row, scene), answer in zip(to_ask, self.player.answer_batch(queries), strict=True):
                pending = outcomes[row]
                outcomes[row] = self._finish(pool.items[indices[row]], pending.verdicts, old[row], answer,
                                             pending.moves, scene)
        return outcomes  # type: ignore[return-value]

    def _visible(self, accepted: list, outcomes: list, indices: np.ndarray,
                 moves_by_row: dict[int, list[tuple[int, float, float]]]) -> list:
        """The accepted moves whose every object stays visible; the others get their verdict."""
        scenes = [scene if scene is not None else self.pool.items[index].scene.with_coords(coords)
                  for _, index, coords, _, scene in accepted]
        kept = []
        for (row, index, coords, verdicts, _), scene, verdict in zip(
                accepted, scenes, self.visibility.judge_many(scenes), strict=True):
            if verdict.ok:
                kept.append((row, index, coords, [*verdicts, verdict], scene))
            else:
                outcomes[row] = self._finish(self.pool.items[index], [*verdicts, verdict],
                                             self._old_answers[index], None, moves_by_row.get(row, []))
        return kept

    def _finish(
        self,
        item: Item,
        verdicts: list[Verdict],
        old: Answer,
        new: Answer | None,
        moves: list[tuple[int, float, float]],
        scene: Scene | None = None,
    ) -> Outcome:
        r = self.rewards
        valid = new is not None
        error = old.error or (new.error if new is not None else None)
        changed = valid and error is None and new.text != old.text
        dropped = changed and old.text == item.answer
        if not valid:
            reward = r.isr
        elif dropped:
            reward = r.dr
        elif changed:
            reward = r.cr
        else:
            # Unchanged, or the player failed to answer: no reward above "nothing changed",
            # so an adversary never learns to make the player fail instead of flip.
            reward = r.fr
        return Outcome(
            item.item_id, valid, verdicts, item.answer, old.text, new.text if new is not None else None,
            reward, moves, scene, error, bool(changed), bool(dropped),
        )
