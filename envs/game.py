"""One move of the game for a batch of items at once (DESIGN.md, "One move of the game").

A move is three public stages, each for the whole batch:

1. `Game.judge(indices, heads, actions) -> Judged`: the actions become moved
   positions with numpy and the `Referee` judges them cheapest first (boundary for
   the batch in one vectorised pass, then ASP constraints and question relevance
   per surviving scene, then visibility for the accepted scenes at once);
2. `Game.ask(judged) -> Answers`: the only place the player is called. The old
   answer of each item is asked once and cached (successes only); the valid moved
   scenes are asked in one batch; an unmoved scene is answered from the cache;
3. `Game.score(judged, old, new) -> Outcomes`: rewards and flags from the rules,
   as arrays, with one `Outcome` per move built when it is read.

`Game.play` is those three calls. The single env, the vector env and the
adversary's evaluation are thin shells over it; the two-player env uses `judge`
and `score` with the learning player's answer.
"""

from __future__ import annotations

import shutil
import tempfile
import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, overload

import numpy as np

from clevr_game.enforcers import (
    ConstraintRules,
    MoveBatch,
    Referee,
    Rulings,
    Verdict,
    VisibilityEnforcer,
)
from clevr_game.errors import InputError
from clevr_game.scene import Scene, project_to_pixels
from envs.items import Item, ItemPool
from envs.moves import MoveSpace
from players.protocol import NEED_IMAGE, NEED_PROGRAM, NEED_SCENE, Answer, Player, Query

VISIBILITY_COUNTERS = ("geometric", "index")
"""How Game.visibility counts an object's pixels: ray casting in numpy, or Blender's object-index pass."""

Move = tuple[int, float, float]
"""(object index, dx, dy) of one moved object."""


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

    INFO_KEYS = ("item_id", "valid", "reason", "verdicts", "true_answer", "old_answer", "new_answer", "changed",
                 "dropped", "moves", "new_scene", "player_error")
    """The keys of `info()`, in order: the single env's step info, and the vector env's final_info arrays."""

    def info(self) -> dict:
        """Plain values a user can log (docs/game.md): the moved scene as CLEVR scene JSON."""
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
            "new_scene": self.new_scene.to_json() if self.new_scene is not None else None,
            "player_error": self.player_error,
        }


@dataclass
class Judged:
    """The referee's rulings on one batch of moves, with what the later stages need.

    `moved` (B, 10, 2) are the positions after the move; `valid` and `unmoved` (B,)
    come from the referee. `verdicts(row)`, `moves(row)` and `scene(row)` are built
    on demand, so a batch whose outcomes are only counted formats no reasons.
    """

    indices: np.ndarray
    heads: np.ndarray
    start: np.ndarray
    moved: np.ndarray
    rulings: Rulings
    move_space: MoveSpace
    items: Sequence[Item]
    _scenes: dict[int, Scene] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.indices)

    @property
    def valid(self) -> np.ndarray:
        return self.rulings.valid

    @property
    def unmoved(self) -> np.ndarray:
        return self.rulings.unmoved

    def verdicts(self, row: int) -> list[Verdict]:
        return self.rulings.verdicts(row)

    def moves(self, row: int) -> list[Move]:
        """The objects row's move displaced, as the grid gives the displacements (for display and export)."""
        shifts = self.moved[row] - self.start[row]
        objects = np.flatnonzero(np.any(shifts != 0.0, axis=-1))
        exact = self.move_space.exact_shifts(shifts[objects])
        return [(obj, dx, dy) for obj, (dx, dy) in zip(objects.tolist(), exact.tolist(), strict=True)]

    def scene(self, row: int) -> Scene | None:
        """The scene a player is asked about after row's move (None when the move is invalid)."""
        if not self.valid[row]:
            return None
        if self.unmoved[row]:
            return self.items[row].scene
        scene = self._scenes.get(row) or self.rulings.scenes.get(row)
        if scene is None:
            self.prepare_scenes([row])
            scene = self._scenes[row]
        return scene

    def prepare_scenes(self, rows: Sequence[int]) -> None:
        """Build the moved scenes of `rows` together: one camera projection for all their objects."""
        missing = [r for r in rows if r not in self._scenes and r not in self.rulings.scenes]
        if not missing:
            return
        batch = self.rulings.batch
        coords = [batch.coords(r) for r in missing]
        pixels = project_to_pixels(np.concatenate(coords))
        bounds = np.cumsum([0] + [len(c) for c in coords])
        for k, row in enumerate(missing):
            # Players read coordinates; the relationships lists are built only if the scene is written.
            self._scenes[row] = self.items[row].scene.with_coords(
                coords[k], pixel_coords=pixels[bounds[k]:bounds[k + 1]], compute_relationships=False)


@dataclass(frozen=True)
class Answers:
    """The player's answers on the original scenes (`old`) and after the move (`new`, None if invalid)."""

    old: list[Answer]
    new: list[Answer | None]


class Outcomes(Sequence[Outcome]):
    """The outcomes of one batch of moves: arrays for counting, an `Outcome` per move when read."""

    def __init__(self, judged: Judged, old: Sequence[Answer], new: Sequence[Answer | None], rewards: Rewards):
        self.judged, self.old, self.new = judged, list(old), list(new)
        count = len(self.new)
        self.valid = np.zeros(count, dtype=bool)
        self.changed = np.zeros(count, dtype=bool)
        self.dropped = np.zeros(count, dtype=bool)
        self.errors: list[str | None] = [o.error for o in self.old]
        for row, (o, n, item) in enumerate(zip(self.old, self.new, judged.items, strict=True)):
            if n is None:
                continue
            self.valid[row] = True
            if n.error is not None and self.errors[row] is None:
                self.errors[row] = n.error
            if self.errors[row] is None and n.text != o.text:
                self.changed[row] = True
                self.dropped[row] = o.text == item.answer
        # Unchanged, or the player failed to answer: no reward above "nothing changed",
        # so an adversary never learns to make the player fail instead of flip.
        self.rewards = np.select([~self.valid, self.dropped, self.changed], [rewards.isr, rewards.dr, rewards.cr],
                                 rewards.fr).astype(np.float64)
        self._built: dict[int, Outcome] = {}

    def __len__(self) -> int:
        return len(self.new)

    @overload
    def __getitem__(self, row: int) -> Outcome: ...

    @overload
    def __getitem__(self, row: slice) -> list[Outcome]: ...

    def __getitem__(self, row: int | slice) -> Outcome | list[Outcome]:
        if isinstance(row, slice):
            return [self[i] for i in range(*row.indices(len(self)))]
        if row < 0:
            row += len(self)
        if not 0 <= row < len(self):
            raise IndexError(row)
        outcome = self._built.get(row)
        if outcome is None:
            outcome = self._built[row] = self._build(row)
        return outcome

    def __iter__(self) -> Iterator[Outcome]:
        return (self[i] for i in range(len(self)))

    @property
    def counted(self) -> np.ndarray:
        """(B,) the player answered both scenes: the move is a success or a failure."""
        return np.array([e is None for e in self.errors], dtype=bool)

    def _build(self, row: int) -> Outcome:
        judged, old, new = self.judged, self.old[row], self.new[row]
        item, valid = judged.items[row], bool(self.valid[row])
        return Outcome(
            item.item_id, valid, judged.verdicts(row), item.answer, old.text, new.text if new is not None else None,
            float(self.rewards[row]), [] if judged.unmoved[row] else judged.moves(row),
            judged.scene(row) if valid else None, self.errors[row], bool(self.changed[row]), bool(self.dropped[row]),
        )


ANSWER_BATCH = 64
"""Queries per request of `answers_about`."""


class Game:
    """The rules, the referees and the player for a pool of items.

    `player` may be None for a game whose moves are only judged and scored with
    answers from elsewhere (the two-player env's learning player).
    """

    def __init__(
        self,
        pool: ItemPool,
        player: Player | None,
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
        self.old_answer_attempts = old_answer_attempts
        # CLEVR's rule that every object shows at least 200 pixels: on by default for
        # players that see images, where a hidden object fools a human too.
        sees_images = player is not None and NEED_IMAGE in player.needs
        self.check_visibility = sees_images if check_visibility is None else check_visibility
        if visibility_counter not in VISIBILITY_COUNTERS:
            raise InputError(f"visibility_counter must be one of {', '.join(VISIBILITY_COUNTERS)}, "
                             f"got {visibility_counter!r}")
        self.visibility_counter = visibility_counter
        self.referee = Referee(rules, visibility_hook=visibility)
        self._old_answers: dict[int, Answer] = {}  # successes, and failures that used up their attempts
        self._old_attempts: dict[int, int] = {}

    # ------------------------------------------------------------------ 1. judge

    def judge(self, indices: np.ndarray, heads: np.ndarray, actions: np.ndarray) -> Judged:
        """Move B items (`heads` (B, 10) maps head -> object slot) and judge every moved scene."""
        indices = np.asarray(indices, dtype=np.int64)
        heads = np.asarray(heads, dtype=np.int64)
        pool = self.pool
        start = pool.xy[indices]
        present = pool.present[indices]
        moved = self.moves.apply(start, heads, np.asarray(actions, dtype=np.int64))
        moved = np.where(present[..., None], moved, start)
        rows = indices.tolist()
        items = [pool.items[i] for i in rows]
        self.referee.visibility = self.visibility
        batch = MoveBatch(items, rows, [it.scene for it in items], start, moved, pool.z[indices],
                          pool.radii[indices], present, pool.margin_axes[indices], pool.num_objects[indices],
                          [pool.descriptions[i] for i in rows])
        return Judged(indices, heads, start, moved, self.referee.judge(batch), self.moves, items)

    def judge_moves(self, indices: np.ndarray, heads: np.ndarray, actions: np.ndarray) -> np.ndarray:
        """(B,) whether each move passes every referee `play` would ask, without asking the player."""
        return self.judge(indices, heads, actions).valid.copy()

    # ------------------------------------------------------------------ 2. ask

    def ask(self, judged: Judged) -> Answers:
        """The player's old answers of the batch's items and its answers on the valid moved scenes."""
        if self.player is None:
            raise InputError("this game has no player to ask; score its moves with answers from elsewhere")
        old = self.old_answers(judged.indices)
        new: list[Answer | None] = [None] * len(judged)
        for row in np.flatnonzero(judged.valid & judged.unmoved).tolist():
            new[row] = old[row]  # nothing moved: the old answer stands
        to_ask = np.flatnonzero(judged.valid & ~judged.unmoved).tolist()
        if to_ask:
            judged.prepare_scenes(to_ask)
            queries = self._queries([judged.items[r] for r in to_ask], [judged.scene(r) for r in to_ask])
            for row, answer in zip(to_ask, self.player.answer_batch(queries), strict=True):
                new[row] = answer
        return Answers(old, new)

    def old_answers(self, indices: Sequence[int] | np.ndarray) -> list[Answer]:
        """The player's answers on the original scenes, asked once per item and cached.

        A failed unmoved answer is asked again at once, up to `old_answer_attempts`
        tries in all; only then does its failure stand for the run, so one transient
        fault is not repeated on every episode of the item.
        """
        keys = indices.tolist() if isinstance(indices, np.ndarray) else [int(i) for i in indices]
        cached = self._old_answers
        missing = sorted({i for i in keys if i not in cached})
        while missing:
            items = [self.pool.items[i] for i in missing]
            answers = self.player.answer_batch(self._queries(items, [it.scene for it in items]))
            for index, answer in zip(missing, answers, strict=True):
                self._old_attempts[index] = self._old_attempts.get(index, 0) + 1
                if answer.ok or self._old_attempts[index] >= self.old_answer_attempts:
                    self._old_answers[index] = answer
            missing = [i for i in missing if i not in self._old_answers]
        return [cached[i] for i in keys]

    def answers_about(self, items: Sequence[Item], scenes: Sequence[Scene]) -> list[Answer]:
        """The player's answers to each item's question asked about the scene beside it, not cached.

        Any scene: the robustness card's blind pass asks each question about another item's scene.
        """
        if self.player is None:
            raise InputError("this game has no player to ask")
        items, scenes = list(items), list(scenes)
        answers: list[Answer] = []
        # In batches no larger than the game's own (an HTTP player's time limit bounds one request).
        for start in range(0, len(items), ANSWER_BATCH):
            chunk = slice(start, start + ANSWER_BATCH)
            answers += self.player.answer_batch(self._queries(items[chunk], scenes[chunk]))
        return answers

    def adopt_old_answers(self, other: Game) -> None:
        """Take over `other`'s successful unmoved answers for the items both pools hold."""
        index_of = {item.item_id: i for i, item in enumerate(self.pool.items)}
        for j, answer in other._old_answers.items():
            i = index_of.get(other.pool.items[j].item_id)
            if i is not None and answer.ok:
                self._old_answers[i] = answer

    def _queries(self, items: list[Item], scenes: list[Scene]) -> list[Query]:
        """Queries restricted to what the player needs; images rendered (and cached) only for pixel players."""
        needs = self.player.needs
        paths: list[str | None] = [None] * len(scenes)
        if NEED_IMAGE in needs:
            paths = [str(p) for p in self._images(scenes)]
        # Built as `Query(...).restricted_to(needs)` would make them, without the copy (a hot path).
        sees_scene, sees_program = NEED_SCENE in needs, NEED_PROGRAM in needs
        return [
            Query(item.item_id, item.question, scene=scene if sees_scene else None, image_path=path,
                  program=item.program if sees_program else None, vocabulary=scene.vocabulary,
                  environment=item.extra.get("environment_text"))
            for item, scene, path in zip(items, scenes, paths, strict=True)
        ]

    def _renderer(self) -> Any:
        if self.renderer is None:
            from clevr_game.render import Renderer

            # A pixel player is shown images as it was trained on them: its preset and size.
            spec = self.player.image_spec if self.player is not None else None
            if spec is None:
                self.renderer = Renderer("fast")
            else:
                self.renderer = Renderer(spec.preset, width=spec.width, height=spec.height)
        return self.renderer

    def _images(self, scenes: list[Scene]) -> list[Path]:
        self._renderer()
        if self.image_dir is None:
            self.image_dir = tempfile.mkdtemp(prefix="clevr-game-images-")
            # The game's own scratch folder goes with the game: runs left tens of MB each in /tmp.
            weakref.finalize(self, shutil.rmtree, self.image_dir, True)
        names = [f"{self.renderer.image_key(scene)}.png" for scene in scenes]
        return self.renderer.render_many(scenes, self.image_dir, names=names)

    @property
    def visibility(self) -> VisibilityEnforcer | None:
        """The visibility referee, when this game checks it.

        Pixels per object are counted by ray casting against the exact shapes (`geometric`,
        milliseconds, no Blender; docs/rendering.md gives its agreement with the index pass)
        or by the renderer's object-index render (`index`), at the renderer's index size.
        """
        if self.check_visibility and self.referee.visibility is None:
            if self.visibility_counter == "index":
                renderer = self._renderer()
                self.referee.visibility = VisibilityEnforcer(renderer.visible_pixels_many, renderer.pixel_threshold)
            else:
                from clevr_game.render.renderer import CLEVR_INDEX_SIZE, CLEVR_MIN_PIXELS
                from clevr_game.render.silhouettes import geometric_counter

                size = getattr(self.renderer, "index_size", CLEVR_INDEX_SIZE)
                threshold = getattr(self.renderer, "pixel_threshold", CLEVR_MIN_PIXELS)
                self.referee.visibility = VisibilityEnforcer(geometric_counter(*size), threshold)
        return self.referee.visibility

    # ------------------------------------------------------------------ 3. score

    def score(self, judged: Judged, old: Sequence[Answer], new: Sequence[Answer | None]) -> Outcomes:
        """Rewards and flags of each move from the rules: dr, cr, fr for a valid move, isr for an invalid one.

        `new[row]` is None exactly when the move is invalid. An error answer is
        neither a change nor a drop and earns fr.
        """
        return Outcomes(judged, old, new, self.rewards)

    # ------------------------------------------------------------------ the move

    def play(self, indices: np.ndarray, heads: np.ndarray, actions: np.ndarray) -> Outcomes:
        """Play one move on each of B items: judge, ask, score."""
        judged = self.judge(indices, heads, actions)
        answers = self.ask(judged)
        return self.score(judged, answers.old, answers.new)
