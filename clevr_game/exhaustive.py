"""Exhaustive manipulation datasets: every placement of a fixed set of objects on the game's 7 x 7 grid.

The paper's second experiment (its Figure 2) asks how many manipulated scenes a
player must train on before it answers every unseen manipulation right. Its
datasets hold *every* placement of a few objects on a discrete board:

- base objects: attributes (and the positions of the stationary ones) drawn
  from the seed, all with distinct descriptions;
- placements: every assignment of the moving objects to the cells of the
  board's 7 x 7 grid (`layout.grid_centres`, the adversary's absolute moves), 49^m for
  m moving objects, enumerated in chunks and judged by `layout.judge_batch`
  (CLEVR's distances and margins); the invalid ones are counted and left out;
- questions: the template engine restricted to the one-hop and/or two-hop
  families, instantiated on the base objects, so a question names objects by
  attributes that never change and the same questions are asked of every scene.
  Kept are questions whose answer varies with the placement, those defined on
  every scene first. A two-hop question ("the sphere [that is] left of the
  cube") is never defined on every scene while its middle object moves: where
  its referent is missing or not unique CLEVR asks no such question, and no
  entry is written for that (scene, question) pair (the manifest counts them);
- answers: the base scene compiled once, its facts moved to each placement
  (`SceneFacts.with_coords`, the game's own path) and every program run on them.

Files (each written atomically): `scenes.json`, `questions.json` (one entry per
defined (scene, question) pair, scene by scene, as CLEVR does) and
`manifest.json` (base objects, grid, counts, questions, the command).
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from clevr_game.atomic import open_atomic, write_json_atomic
from clevr_game.errors import InputError, RunFailed
from clevr_game.layout import grid_centres, judge_batch
from clevr_game.programs import (
    INVALID_ANSWER,
    SceneFacts,
    compile_program,
    compile_scene,
    program_to_json,
)
from clevr_game.programs.facts import RELATION_COUNT, Relations
from clevr_game.programs.program import Program
from clevr_game.questions import Instance, QuestionGenerator, default_templates
from clevr_game.scene import (
    DEFAULT_DIRECTIONS,
    RELATION_THRESHOLD,
    Scene,
    SceneObject,
    project_to_pixels,
)
from clevr_game.vocab import ATTRIBUTES, CLEVR, RELATIONS

OBJECT_COUNTS = (2, 3, 4)
HOPS: dict[str, tuple[str, ...]] = {"one": ("one_hop",), "two": ("two_hop",), "mix": ("one_hop", "two_hop")}
"""--hops -> the template families asked."""

DEFAULT_STATIONARY = {2: 0, 3: 0, 4: 1}
"""Stationary objects by object count: the paper keeps one of four in place, so every dataset has 49^3 placements or fewer."""

QUESTIONS_PER_FAMILY = 4
JUDGE_CHUNK = 1 << 16
"""Placements judged per judge_batch call: bounded memory, still one numpy pass per chunk."""

SPLIT = "exhaustive"
CANDIDATE_SCENES = 64
"""Valid scenes the template engine is run on to propose questions."""
CANDIDATES_PER_SCENE = 20


@dataclass(frozen=True)
class ExhaustiveOptions:
    """What `clevr-game exhaustive` builds.

    :param objects: objects per scene (2, 3 or 4)
    :param hops: `one`, `two` or `mix` (see HOPS)
    :param seed: draws the base objects and the questions
    :param out: the dataset folder
    :param stationary: objects that keep one drawn cell (default: DEFAULT_STATIONARY)
    :param questions_per_family: questions chosen per template family
    :param command: the command line, kept in the manifest
    """

    objects: int
    hops: str
    seed: int
    out: str
    stationary: int | None = None
    questions_per_family: int = QUESTIONS_PER_FAMILY
    command: str = ""

    def __post_init__(self) -> None:
        if self.objects not in OBJECT_COUNTS:
            raise InputError(f"--objects {self.objects}: expected one of {', '.join(map(str, OBJECT_COUNTS))}")
        if self.hops not in HOPS:
            raise InputError(f"--hops {self.hops!r}: expected one of {', '.join(HOPS)}")
        if not 0 <= self.stationary_count < self.objects:
            raise InputError(f"--stationary {self.stationary}: expected 0..{self.objects - 1} "
                             f"(at least one of the {self.objects} objects must move)")
        if self.questions_per_family < 1:
            raise InputError(f"--questions-per-family {self.questions_per_family}: expected at least 1")

    @property
    def stationary_count(self) -> int:
        """The number of stationary objects, the default filled in."""
        return DEFAULT_STATIONARY[self.objects] if self.stationary is None else self.stationary


def grid_cells() -> np.ndarray:
    """(49, 2) cell centres, cell c = (x index c // 7, y index c % 7)."""
    centres = grid_centres()
    return np.stack(np.meshgrid(centres, centres, indexing="ij"), axis=-1).reshape(-1, 2)


# ------------------------------------------------------------------ base objects and placements


@dataclass(frozen=True)
class BaseObjects:
    """The objects every scene of a dataset shares; `cells[i]` is the stationary cell of object i, or -1."""

    objects: tuple[SceneObject, ...]
    cells: tuple[int, ...]

    @property
    def moving(self) -> tuple[int, ...]:
        return tuple(i for i, cell in enumerate(self.cells) if cell < 0)

    @property
    def stationary(self) -> tuple[int, ...]:
        return tuple(i for i, cell in enumerate(self.cells) if cell >= 0)

    @property
    def radii(self) -> np.ndarray:
        return np.array([CLEVR.radius(o.size) for o in self.objects], dtype=np.float64)

    def scene(self) -> Scene:
        """The objects as a scene (moving objects wherever they were drawn): what questions are compiled on."""
        return Scene(list(self.objects))

    def to_json(self) -> list[dict[str, Any]]:
        return [{"size": o.size, "color": o.color, "material": o.material, "shape": o.shape,
                 "rotation": o.rotation, "stationary_cell": cell if cell >= 0 else None,
                 "3d_coords": list(o.coords) if cell >= 0 else None}
                for o, cell in zip(self.objects, self.cells, strict=True)]


def draw_base(objects: int, stationary: int, seed: int) -> BaseObjects:
    """Objects with distinct descriptions; the last `stationary` ones get cells that are valid together."""
    rng = np.random.default_rng(seed)
    descriptions: list[tuple[str, ...]] = []
    while len(descriptions) < objects:
        drawn = tuple(CLEVR.values(a)[int(rng.integers(len(CLEVR.values(a))))] for a in ATTRIBUTES)
        if drawn not in descriptions:
            descriptions.append(drawn)
    rotations = rng.uniform(0.0, 360.0, objects)
    radii = np.array([CLEVR.radius(d[0]) for d in descriptions])
    cells = grid_cells()
    kept_in_place = list(range(objects - stationary, objects))
    chosen = np.zeros(0, dtype=np.int64)
    while stationary:
        chosen = rng.choice(len(cells), stationary, replace=False)
        if judge_batch(cells[chosen][None], radii[kept_in_place][None], np.ones((1, stationary), dtype=bool)).ok[0]:
            break
    cell_of = [-1] * objects
    for i, cell in zip(kept_in_place, chosen.tolist(), strict=True):
        cell_of[i] = cell
    built = []
    for i, (description, rotation) in enumerate(zip(descriptions, rotations.tolist(), strict=True)):
        x, y = cells[cell_of[i]] if cell_of[i] >= 0 else cells[24]  # moving objects: the centre until placed
        built.append(SceneObject(*description, coords=(float(x), float(y), float(radii[i])), rotation=rotation))
    return BaseObjects(tuple(built), tuple(cell_of))


@dataclass(frozen=True)
class Placements:
    """The valid placements of a base: `cells` (V, m) grid cells of the moving objects, in enumeration order."""

    cells: np.ndarray
    total: int
    rejected: dict[str, int]
    """Invalid placements by the first rule they break (overlap, margin, bounds)."""

    @property
    def valid(self) -> int:
        return int(self.cells.shape[0])


def placement_xy(base: BaseObjects, cells: np.ndarray) -> np.ndarray:
    """(B, N, 2) ground positions of every object for (B, m) moving-object cells."""
    grid = grid_cells()
    xy = np.empty((cells.shape[0], len(base.objects), 2), dtype=np.float64)
    for i in base.stationary:
        xy[:, i] = grid[base.cells[i]]
    xy[:, list(base.moving)] = grid[cells]
    return xy


def placement_coords(base: BaseObjects, cells: np.ndarray) -> np.ndarray:
    """(B, N, 3) world coordinates (z = radius, as CLEVR places objects on the ground)."""
    xy = placement_xy(base, cells)
    z = np.broadcast_to(base.radii, xy.shape[:2])[..., None]
    return np.concatenate([xy, z], axis=-1)


def enumerate_placements(base: BaseObjects, chunk: int = JUDGE_CHUNK) -> Placements:
    """Every assignment of the moving objects to grid cells, judged by CLEVR's rules chunk by chunk."""
    moving = len(base.moving)
    cell_count = len(grid_cells())
    total = cell_count ** moving
    radii = base.radii
    kept: list[np.ndarray] = []
    rejected = Counter()
    names = {1: "bounds", 2: "overlap", 3: "margin"}
    for start in range(0, total, chunk):
        flat = np.arange(start, min(start + chunk, total))
        cells = np.stack(np.unravel_index(flat, (cell_count,) * moving), axis=1)
        verdict = judge_batch(placement_xy(base, cells), np.broadcast_to(radii, (len(flat), len(radii))),
                              np.ones((len(flat), len(radii)), dtype=bool))
        kept.append(cells[verdict.ok])
        kinds, counts = np.unique(verdict.kind[~verdict.ok], return_counts=True)
        rejected.update({names[int(k)]: int(c) for k, c in zip(kinds, counts, strict=True)})
    return Placements(np.concatenate(kept), total, dict(sorted(rejected.items())))


# ------------------------------------------------------------------ questions


@dataclass
class ChosenQuestion:
    """A question asked of every scene, with its answer on each valid placement (INVALID_ANSWER: not asked)."""

    instance: Instance
    answers: list[str] = field(default_factory=list)

    @property
    def family(self) -> str:
        return self.instance.template.family

    @property
    def defined(self) -> int:
        return sum(a != INVALID_ANSWER for a in self.answers)

    def to_json(self) -> dict[str, Any]:
        counts = Counter(a for a in self.answers if a != INVALID_ANSWER)
        return {"question": self.instance.text, "program": program_to_json(self.instance.program),
                "family": self.family, "question_family_index": self.instance.template.family_index,
                "template_filename": self.instance.template.filename, "defined_scenes": self.defined,
                "answers": dict(sorted(counts.items()))}


@dataclass(frozen=True)
class RelationPatterns:
    """The distinct relation patterns of a set of scenes.

    A program reads positions only through the four relations, so scenes of one
    pattern share every answer. The margin rule orders every pair of objects along
    the left and the front axes, so N objects have at most (N!)^2 patterns.
    """

    masks: np.ndarray
    """(P, 4N) relation_masks rows, flattened."""
    first: np.ndarray
    """(P,) a scene of each pattern (its first)."""
    of_scene: np.ndarray
    """(B,) each scene's pattern."""

    @property
    def counts(self) -> np.ndarray:
        """(P,) scenes per pattern."""
        return np.bincount(self.of_scene, minlength=len(self.masks))


def relation_patterns(coords: np.ndarray, chunk: int = JUDGE_CHUNK) -> RelationPatterns:
    """The relation patterns of the scenes of `coords` (B, N, 3)."""
    n = coords.shape[1]
    masks = np.concatenate([relation_masks(coords[start:start + chunk]).reshape(-1, RELATION_COUNT * n)
                            for start in range(0, len(coords), chunk)])
    if RELATION_COUNT * n * n > 64:
        _, first, of_scene = np.unique(masks, axis=0, return_index=True, return_inverse=True)
    else:
        # One 64-bit key per scene (4N masks of N bits side by side): unique on a vector is far quicker than on rows.
        shifts = np.arange(RELATION_COUNT * n, dtype=np.uint64) * np.uint64(n)
        keys = np.bitwise_or.reduce(masks.astype(np.uint64) << shifts, axis=1)
        _, first, of_scene = np.unique(keys, return_index=True, return_inverse=True)
    return RelationPatterns(masks[first], first, of_scene.reshape(-1))


def pattern_facts(base: BaseObjects, coords: np.ndarray, patterns: RelationPatterns) -> list[SceneFacts]:
    """The base scene compiled once, its facts moved (as `SceneFacts.with_coords` does) to one scene per pattern."""
    facts = compile_scene(base.scene())
    keys = [RELATION_COUNT * i + r for r in range(RELATION_COUNT) for i in range(facts.count)]  # relation_masks' order
    moved = []
    for masks, scene in zip(patterns.masks.tolist(), patterns.first.tolist(), strict=True):
        related = Relations(zip(keys, masks, strict=True))
        related.coords, related.directions = coords[scene], facts.directions
        moved.append(SceneFacts((facts.masks, facts.values), related, facts.vocabulary, facts.directions))
    return moved


def pattern_answers(programs: list[Program], facts: list[SceneFacts]) -> list[np.ndarray]:
    """Per program, its answer on each pattern's facts: a (P,) object array."""
    return [np.array([compile_program(p).answer(f) for f in facts], dtype=object) for p in programs]


def answer_programs(programs: list[Program], base: BaseObjects, coords: np.ndarray) -> list[list[str]]:
    """Per program, its answer on every scene of `coords` (B, N, 3), each pattern answered once."""
    patterns = relation_patterns(coords)
    answers = pattern_answers(programs, pattern_facts(base, coords, patterns))
    return [per_pattern[patterns.of_scene].tolist() for per_pattern in answers]


def _partition(answers: np.ndarray) -> bytes:
    """Which patterns share an answer, whatever the answers are: questions alike up to relabelling collide."""
    labels: dict[str, int] = {}
    return np.array([labels.setdefault(a, len(labels)) for a in answers.tolist()], dtype=np.int32).tobytes()


def _defined_share_and_entropy(answers: np.ndarray, counts: np.ndarray) -> tuple[float, float]:
    """Over scenes (patterns weighted by their scene counts): the share where the answer is defined, and the
    entropy of the defined answers."""
    defined = answers != INVALID_ANSWER
    by_answer: Counter[str] = Counter()
    for answer, count in zip(answers[defined].tolist(), counts[defined].tolist(), strict=True):
        by_answer[answer] += count
    shares = np.array(list(by_answer.values()), dtype=np.float64) / max(1, counts[defined].sum())
    return float(counts[defined].sum() / counts.sum()), float(-(shares * np.log(shares)).sum())


def propose_questions(base: BaseObjects, coords: np.ndarray, families: tuple[str, ...], seed: int) -> list[Instance]:
    """Distinct programs of the families' templates, instantiated on a sample of the valid scenes."""
    templates = [t for t in default_templates() if t.family in families]
    generator = QuestionGenerator(templates, seed=seed)
    rng = np.random.default_rng(seed)
    scene = base.scene()
    found: dict[Program, Instance] = {}
    for row in rng.choice(len(coords), min(CANDIDATE_SCENES, len(coords)), replace=False):
        for instance in generator.generate_instances(scene.with_coords(coords[row]), CANDIDATES_PER_SCENE):
            found.setdefault(instance.program, instance)
    return list(found.values())


def choose_questions(candidates: list[Instance], base: BaseObjects, coords: np.ndarray, families: tuple[str, ...],
                     per_family: int) -> list[ChosenQuestion]:
    """Per family, up to `per_family` questions whose answer varies, answered on every scene.

    Picked one at a time, best first by: the share of scenes where the question is
    defined (every scene first); a split of the scenes no chosen question makes; a
    template used least so far (count, exist and query questions in turn); answer
    entropy. A question with the same answers as a chosen one is never taken.
    """
    patterns = relation_patterns(coords)
    counts = patterns.counts
    answers = pattern_answers([c.program for c in candidates], pattern_facts(base, coords, patterns))
    chosen: list[tuple[Instance, np.ndarray]] = []
    for family in families:
        pool = []
        for order, (candidate, per_pattern) in enumerate(zip(candidates, answers, strict=True)):
            if candidate.template.family == family and len(set(per_pattern.tolist()) - {INVALID_ANSWER}) > 1:
                defined, entropy = _defined_share_and_entropy(per_pattern, counts)
                pool.append((defined, entropy, order, candidate, per_pattern, _partition(per_pattern)))
        if not pool:
            raise RunFailed(f"no {family} question's answer varies over these placements; try another --seed")
        partitions: set[bytes] = set()
        exact: set[tuple[str, ...]] = set()
        template_uses: Counter[int] = Counter()
        for _ in range(per_family):
            fresh = [c for c in pool if tuple(c[4].tolist()) not in exact]
            if not fresh:
                break
            defined, entropy, order, candidate, per_pattern, partition = min(
                fresh, key=lambda c: (-c[0], c[5] in partitions, template_uses[c[3].template.family_index], -c[1], c[2]))
            chosen.append((candidate, per_pattern))
            partitions.add(partition)
            exact.add(tuple(per_pattern.tolist()))
            template_uses[candidate.template.family_index] += 1
    return [ChosenQuestion(instance, per_pattern[patterns.of_scene].tolist()) for instance, per_pattern in chosen]


# ------------------------------------------------------------------ files


def image_filename(index: int) -> str:
    return f"CLEVR_{SPLIT}_{index:06d}.png"


def relation_masks(coords: np.ndarray) -> np.ndarray:
    """(B, 4, N) bit sets: bit j of [b, r, i] when object j is RELATIONS[r] of object i (CLEVR's 0.2 rule).

    Differences first, then the dot product summed left to right: the executor's own
    float arithmetic (`programs.facts.Relations`), element by element.
    """
    delta = coords[:, None, :, :] - coords[:, :, None, :]  # [b, i, j] = c_j - c_i
    bits = 1 << np.arange(coords.shape[1])
    rows = []
    for relation in RELATIONS:
        dx, dy, dz = (float(v) for v in DEFAULT_DIRECTIONS[relation])
        along = delta[..., 0] * dx + delta[..., 1] * dy + delta[..., 2] * dz
        rows.append(((along > RELATION_THRESHOLD) * bits).sum(-1))
    return np.stack(rows, axis=1)


def write_scenes(path: Path, base: BaseObjects, coords: np.ndarray, info: dict[str, Any]) -> None:
    """CLEVR's scenes file: objects, relationships, pixel coordinates, one scene per valid placement."""
    n = len(base.objects)
    pixels = project_to_pixels(coords.reshape(-1, 3)).reshape(coords.shape).tolist()
    # A relationship row is one of 2^N index lists: shared, not rebuilt per scene.
    rows = [[j for j in range(n) if mask >> j & 1] for mask in range(1 << n)]
    masks = relation_masks(coords).tolist()
    directions = {k: list(v) for k, v in DEFAULT_DIRECTIONS.items()}
    fixed = [{"color": o.color, "size": o.size, "rotation": o.rotation, "shape": o.shape} for o in base.objects]
    with open_atomic(path) as handle:
        handle.write(f'{{"info": {json.dumps(info)}, "scenes": [')
        for index, (row, pixel_row, mask_row) in enumerate(zip(coords.tolist(), pixels, masks, strict=True)):
            objects = [{**fixed[i], "3d_coords": row[i], "material": base.objects[i].material,
                        "pixel_coords": [int(pixel_row[i][0]), int(pixel_row[i][1]), pixel_row[i][2]]}
                       for i in range(n)]
            scene = {"image_index": index, "objects": objects,
                     "relationships": {r: [rows[m] for m in masks_r] for r, masks_r in zip(RELATIONS, mask_row, strict=True)},
                     "image_filename": image_filename(index), "split": SPLIT, "directions": directions}
            handle.write((", " if index else "") + json.dumps(scene))
        handle.write("]}")


def write_questions(path: Path, questions: list[ChosenQuestion], scenes: int, info: dict[str, Any]) -> int:
    """One CLEVR question entry per defined (scene, question) pair, scene by scene; returns how many."""
    # Everything but the scene, the answer and the running index is the same for a question in every scene.
    middles = [json.dumps({"question": q.instance.text, "program": program_to_json(q.instance.program)})[1:-1]
               for q in questions]
    tails = [json.dumps({"question_family_index": q.instance.template.family_index,
                         "template_filename": q.instance.template.filename})[1:-1] for q in questions]
    quoted: dict[str, str] = {}
    written = 0
    with open_atomic(path) as handle:
        handle.write(f'{{"info": {json.dumps(info)}, "questions": [')
        for index in range(scenes):
            head = f'"image_index": {index}, "image_filename": "{image_filename(index)}", "split": "{SPLIT}"'
            for question, middle, tail in zip(questions, middles, tails, strict=True):
                answer = question.answers[index]
                if answer == INVALID_ANSWER:
                    continue
                text = quoted.get(answer) or quoted.setdefault(answer, json.dumps(answer))
                handle.write(f'{", " if written else ""}{{{head}, {middle}, "answer": {text}, {tail}, '
                             f'"question_index": {written}}}')
                written += 1
        handle.write("]}")
    return written


# ------------------------------------------------------------------ the command


@dataclass(frozen=True)
class ExhaustiveSummary:
    valid: int
    total: int
    questions: int
    entries: int
    undefined_pairs: int
    seconds: dict[str, float]

    def last_line(self) -> str:
        return f"scenes: {self.valid} valid of {self.total} placements"


def build_exhaustive(options: ExhaustiveOptions, log: Callable[[str], None] | None = None) -> ExhaustiveSummary:
    """Enumerate, judge, ask and write one exhaustive dataset (see the module doc)."""
    from clevr_game.generate import dataset_info

    log = log or (lambda line: None)
    seconds: dict[str, float] = {}
    started = time.perf_counter()
    base_seed, question_seed = (int(s.generate_state(1)[0]) for s in np.random.SeedSequence(options.seed).spawn(2))
    base = draw_base(options.objects, options.stationary_count, base_seed)
    placements = enumerate_placements(base)
    seconds["judge"] = time.perf_counter() - started
    log(f"judged {placements.total} placements in {seconds['judge']:.2f} s: {placements.valid} valid")
    if not placements.valid:
        raise RunFailed(f"no valid placement of these {options.objects} objects; try another --seed")
    coords = placement_coords(base, placements.cells)

    mark = time.perf_counter()
    families = HOPS[options.hops]
    candidates = propose_questions(base, coords, families, question_seed)
    questions = choose_questions(candidates, base, coords, families, options.questions_per_family)
    seconds["questions"] = time.perf_counter() - mark
    log(f"chose {len(questions)} of {len(candidates)} proposed questions, answered on every scene, "
        f"in {seconds['questions']:.2f} s")

    mark = time.perf_counter()
    out = Path(options.out)
    info = dataset_info(SPLIT, options.seed)
    write_scenes(out / "scenes.json", base, coords, info)
    entries = write_questions(out / "questions.json", questions, placements.valid, info)
    undefined = placements.valid * len(questions) - entries
    grid = grid_centres()
    write_json_atomic(out / "manifest.json", {
        "objects": options.objects, "hops": options.hops, "families": list(families), "seed": options.seed,
        "base_objects": base.to_json(), "moving": list(base.moving), "stationary": list(base.stationary),
        "grid": {"cells_per_axis": len(grid), "centres": grid.tolist(),
                 "cell": "index = 7 * (x index) + (y index), x and y along the world axes"},
        "placements": placements.total, "valid": placements.valid,
        "invalid": placements.total - placements.valid, "invalid_by_rule": placements.rejected,
        "questions": [q.to_json() for q in questions], "question_entries": entries, "undefined_pairs": undefined,
        "command": options.command,
    }, indent=1)
    seconds["write"] = time.perf_counter() - mark
    log(f"wrote {entries} question entries ({undefined} undefined pairs left out) in {seconds['write']:.2f} s")
    return ExhaustiveSummary(placements.valid, placements.total, len(questions), entries, undefined, seconds)
