"""Program execution speed: the fast executor against the reference, side by side in one run.

    python -m perf.programs [--quick]

Rows (value / baseline = ratio, higher is better):
- programs/s on real CLEVR val scenes, for the 9 real questions' programs and for
  random programs of the same shape (primitive only, and with template composites).
  Baseline: `reference_execute` on the scene dicts with their stored relationships;
  fast: facts compiled once per scene and programs once (not timed), `execute` on
  them with the generated code a program gets once it is hot.
- programs/s for one-shot programs, each new and run once: the fast side pays its
  type check, on the cold path (checked and answered in one walk, nothing built).
- moves/s for the game's case, a moved scene each time. Baseline: relationships
  recomputed the plain-Python way (CLEVR's loop), then `reference_execute`; fast:
  `SceneFacts.from_arrays` + `execute`, and `facts.with_coords` + `execute` (what
  the game does, the attributes being fixed).
- questions/s of the `clevr-game answer` command, whole process (start-up, reading,
  answering), on 50,000 questions: CLEVR's templates asked 4 times on each of the
  500 real val scenes (2,000 questions, as the project's generator asks them with
  --templates clevr), repeated 25 times. Baseline: a plain script around CLEVR's own
  question engine (perf/clevr_engine_baseline.py), timed as a subprocess the
  same way. A second row times both on an empty questions file: the start-up alone.
Every row checks first that both sides give the same answers.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from clevr_game.datafiles import CLEVR_REAL_DIR, CLEVR_TEMPLATE_DIR
from clevr_game.programs import (
    SceneFacts,
    compile_program,
    compile_scene_dict,
    execute,
    parse_program,
    reference_execute,
)
from clevr_game.programs.facts import relation_directions
from clevr_game.programs.random_programs import random_program
from clevr_game.scene import RELATION_THRESHOLD, parse_scene
from clevr_game.vocab import RELATIONS

DATA = CLEVR_REAL_DIR
CLEVR_TEMPLATES = CLEVR_TEMPLATE_DIR
ENGINE_BASELINE = Path(__file__).resolve().with_name("clevr_engine_baseline.py")
CHUNK = 100
"""Items per timed chunk: short timings are rarely hit by a burst of load elsewhere."""

Work = Callable[[int, int], None]
"""work(repetition, chunk): run one chunk of a side's items."""


def _chunks(items: Sequence[Any]) -> list[Sequence[Any]]:
    return [items[start:start + CHUNK] for start in range(0, len(items), CHUNK)]


def _rates(sides: Sequence[Work], chunk_sizes: Sequence[int], repeats: int) -> list[float]:
    """Items per second of each side: the sum over chunks of each chunk's fastest time.

    The sides take turns chunk by chunk, so a slow phase of the (shared) machine
    hits them alike; keeping each chunk's best of `repeats` drops the disturbed runs.
    """
    best = [[math.inf] * len(chunk_sizes) for _ in sides]
    for repetition in range(repeats):
        for chunk in range(len(chunk_sizes)):
            for position, work in enumerate(sides):
                start = time.perf_counter()
                work(repetition, chunk)
                best[position][chunk] = min(best[position][chunk], time.perf_counter() - start)
    return [sum(chunk_sizes) / sum(times) for times in best]


def _row(name: str, unit: str, baseline: float, value: float) -> dict[str, Any]:
    return {"name": name, "unit": unit, "baseline": baseline, "value": value, "ratio": value / baseline}


def python_relationships(objects: Sequence[dict[str, Any]], directions: dict[str, Any]) -> dict[str, list[list[int]]]:
    """CLEVR's own way: a dot product per ordered pair, in plain Python."""
    relationships = {}
    for rel in RELATIONS:
        dx, dy, dz = directions[rel]
        rows = []
        for i, first in enumerate(objects):
            x, y, z = first["3d_coords"]
            rows.append([
                j for j, second in enumerate(objects)
                if j != i and (second["3d_coords"][0] - x) * dx + (second["3d_coords"][1] - y) * dy
                + (second["3d_coords"][2] - z) * dz > RELATION_THRESHOLD
            ])
        relationships[rel] = rows
    return relationships


def _program_rows(scenes: list[dict[str, Any]], repeats: int) -> list[dict[str, Any]]:
    questions = json.loads((DATA / "CLEVR_val_questions_sample9.json").read_text())["questions"]
    real_programs = [parse_program(q["program"]) for q in questions]
    facts = [compile_scene_dict(scene) for scene in scenes]
    rng = random.Random(0)
    suites = {
        "real question programs": [(p, i) for i in range(len(scenes)) for p in real_programs],
        "random primitive programs": [
            (random_program(rng, objects=scene["objects"], composites=False), i)
            for i, scene in enumerate(scenes) for _ in range(9)
        ],
        "random composite programs": [
            (random_program(rng, objects=scene["objects"], composites=True), i)
            for i, scene in enumerate(scenes) for _ in range(9)
        ],
    }
    rows = []
    for name, jobs in suites.items():
        for program, _ in jobs:
            compile_program(program).generate()  # once per program, as a hot program gets; not timed
        baseline_jobs = _chunks([(p, scenes[i]) for p, i in jobs])
        fast_jobs = _chunks([(p, facts[i]) for p, i in jobs])
        expected = [reference_execute(p, s) for chunk in baseline_jobs for p, s in chunk]
        if [execute(p, f) for chunk in fast_jobs for p, f in chunk] != expected:
            raise AssertionError(f"{name}: the fast executor disagrees with the reference")

        def baseline(repetition: int, chunk: int, jobs: list = baseline_jobs) -> None:
            for program, scene in jobs[chunk]:
                reference_execute(program, scene)

        def fast(repetition: int, chunk: int, jobs: list = fast_jobs) -> None:
            for program, scene_facts in jobs[chunk]:
                execute(program, scene_facts)

        nodes = statistics.mean(len(p) for p, _ in jobs)
        rows.append(_row(
            f"{name} ({len(jobs)} runs, {nodes:.1f} nodes avg)", "programs/s",
            *_rates([baseline, fast], [len(c) for c in fast_jobs], repeats),
        ))
    return rows


def _one_shot_row(scenes: list[dict[str, Any]], repeats: int) -> dict[str, Any]:
    """Programs never seen before, each run once: the fast side pays type check and steps."""
    facts = [compile_scene_dict(scene) for scene in scenes]
    rng = random.Random(2)
    # A fresh set of programs per repetition, so the fast side never finds one compiled.
    batches = [
        _chunks([(random_program(rng, objects=scene["objects"]), i) for i, scene in enumerate(scenes)])
        for _ in range(repeats + 1)
    ]
    check = [job for chunk in batches.pop() for job in chunk]
    if [execute(p, facts[i]) for p, i in check] != [reference_execute(p, scenes[i]) for p, i in check]:
        raise AssertionError("one-shot programs: the fast executor disagrees with the reference")

    def baseline(repetition: int, chunk: int) -> None:
        for program, index in batches[repetition][chunk]:
            reference_execute(program, scenes[index])

    def fast(repetition: int, chunk: int) -> None:
        for program, index in batches[repetition][chunk]:
            execute(program, facts[index])

    return _row(f"one-shot programs, compile included ({len(scenes)} per run)", "programs/s",
                *_rates([baseline, fast], [len(c) for c in batches[0]], repeats))


def _moved_rows(scenes: list[dict[str, Any]], repeats: int) -> list[dict[str, Any]]:
    rng = random.Random(1)
    np_rng = np.random.default_rng(1)
    parsed = [parse_scene(scene) for scene in scenes]
    ids = [scene.attribute_ids() for scene in parsed]
    directions = relation_directions(parsed[0].directions)
    start_facts = [compile_scene_dict(scene) for scene in scenes]
    programs = [random_program(rng, objects=scene["objects"], composites=rng.random() < 0.5) for scene in scenes]
    moves = []  # (scene index, moved coords array, moved object dicts)
    for index, scene in enumerate(parsed):
        steps = np_rng.integers(-3, 4, size=(len(scene), 2)) * 0.3  # the game's displacement bins
        coords = scene.coords()
        coords[:, :2] += steps
        objects = [dict(obj, **{"3d_coords": xyz}) for obj, xyz in zip(scenes[index]["objects"], coords.tolist(), strict=True)]
        moves.append((index, coords, objects))
    for program in programs:
        compile_program(program).generate()  # the game's programs are hot after a few moves

    def baseline_answer(index: int, objects: list[dict[str, Any]]) -> str:
        relationships = python_relationships(objects, scenes[index]["directions"])
        return reference_execute(programs[index], {"objects": objects, "relationships": relationships})

    def arrays_answer(index: int, coords: np.ndarray) -> str:
        return execute(programs[index], SceneFacts.from_arrays(ids[index], coords, directions, parsed[index].vocabulary))

    expected = [baseline_answer(i, objects) for i, _, objects in moves]
    by_arrays = [arrays_answer(i, c) for i, c, _ in moves]
    by_moving = [execute(programs[i], start_facts[i].with_coords(c)) for i, c, _ in moves]
    if not expected == by_arrays == by_moving:
        raise AssertionError("moved scenes: the fast executor disagrees with the reference")
    chunks = _chunks(moves)

    def baseline(repetition: int, chunk: int) -> None:
        for index, _, objects in chunks[chunk]:
            baseline_answer(index, objects)

    def from_arrays(repetition: int, chunk: int) -> None:
        for index, coords, _ in chunks[chunk]:
            execute(programs[index], SceneFacts.from_arrays(ids[index], coords, directions, parsed[index].vocabulary))

    def with_coords(repetition: int, chunk: int) -> None:
        for index, coords, _ in chunks[chunk]:
            execute(programs[index], start_facts[index].with_coords(coords))

    base, by_arrays_rate, by_moving_rate = _rates(
        [baseline, from_arrays, with_coords], [len(c) for c in chunks], repeats
    )
    objects = statistics.mean(len(scene) for scene in parsed)
    return [
        _row(f"moved scene: from_arrays + execute ({objects:.1f} objects avg)", "moves/s", base, by_arrays_rate),
        _row("moved scene: facts.with_coords + execute", "moves/s", base, by_moving_rate),
    ]


def answer_workload(folder: Path, scene_count: int, copies: int) -> tuple[Path, Path]:
    """(scenes file, questions file): CLEVR's templates asked 4 times per real val scene, `copies` times over."""
    from clevr_game.generate import generate_dataset

    scenes_path = DATA / "CLEVR_val_scenes_500.json"
    if scene_count < 500:
        data = json.loads(scenes_path.read_text())
        scenes_path = folder / "scenes.json"
        scenes_path.write_text(json.dumps({"info": data["info"], "scenes": data["scenes"][:scene_count]}))
    _, generated = generate_dataset(folder / "generated", 0, 4, seed=5, templates="clevr",
                                    clevr_templates=CLEVR_TEMPLATES, scenes_file=scenes_path, progress=False)
    data = json.loads(generated.read_text())
    questions = [dict(q, question_index=copy * len(data["questions"]) + q["question_index"])
                 for copy in range(copies) for q in data["questions"]]
    questions_path = folder / f"questions_{len(questions)}.json"
    questions_path.write_text(json.dumps({"info": data["info"], "questions": questions}))
    return scenes_path, questions_path


def _timed(command: list[str]) -> tuple[float, str]:
    """Wall-clock seconds of a whole process, and its last line of output."""
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise AssertionError(f"{' '.join(command)} failed: {done.stderr.strip()}")
    return elapsed, done.stdout.strip().splitlines()[-1]


def answer_command_rows(scene_count: int = 500, copies: int = 25, repeats: int = 3) -> list[dict[str, Any]]:
    """`clevr-game answer` against the CLEVR-engine script, whole processes, best of `repeats` each."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        scenes_path, questions_path = answer_workload(folder, scene_count, copies)
        count = len(json.loads(questions_path.read_text())["questions"])
        empty_path = folder / "no_questions.json"
        empty_path.write_text(json.dumps({"info": {}, "questions": []}))

        def baseline(questions: Path, *out: str) -> list[str]:
            return [sys.executable, str(ENGINE_BASELINE), str(scenes_path), str(questions), *out]

        def ours(questions: Path, *out: str) -> list[str]:
            return [sys.executable, "-m", "clevr_game.cli", "answer", "--scenes", str(scenes_path),
                    "--questions", str(questions), *out]

        # Same accuracy line and the very same predictions file, once, untimed.
        _, expected = _timed(baseline(questions_path, "--out", str(folder / "baseline.json")))
        _, got = _timed(ours(questions_path, "--out", str(folder / "ours.json")))
        if got != expected or (folder / "ours.json").read_bytes() != (folder / "baseline.json").read_bytes():
            raise AssertionError(f"answer command: {got!r} and predictions differ from the engine's {expected!r}")
        rows = []
        for name, questions in ((f"answer command, {count:,} questions", questions_path),
                                ("answer command, start-up only", empty_path)):
            best = [math.inf, math.inf]
            for _ in range(repeats):  # the two take turns, so a slow phase of the machine hits both
                for side, command in enumerate((baseline(questions), ours(questions))):
                    best[side] = min(best[side], _timed(command)[0])
            unit = "questions/s" if questions is questions_path else "runs/s"
            work = count if questions is questions_path else 1
            rows.append(_row(f"{name}: {best[0]:.2f} s vs {best[1]:.2f} s", unit, work / best[0], work / best[1]))
        return rows


def run(quick: bool = False) -> list[dict[str, Any]]:
    """Measure every row; `quick` uses 100 scenes and 3 repetitions instead of 500 and 7.

    The answer command's rows: 100 scenes and 2 repetitions of each process when quick
    (10,000 questions), else the 500 scenes and 3 repetitions (50,000 questions).
    """
    scenes = json.loads((DATA / "CLEVR_val_scenes_500.json").read_text())["scenes"]
    if quick:
        scenes = scenes[:100]
    repeats = 3 if quick else 7
    rows = _program_rows(scenes, repeats) + [_one_shot_row(scenes, repeats)] + _moved_rows(scenes, repeats)
    return rows + answer_command_rows(len(scenes), 25, 2 if quick else 3)


def print_table(rows: list[dict[str, Any]]) -> None:
    header = f"{'benchmark':<62} {'baseline':>11} {'fast':>11} {'ratio':>7}  unit"
    print(header)
    print("-" * len(header))
    for row in rows:
        print(f"{row['name']:<62} {row['baseline']:>11.0f} {row['value']:>11.0f} {row['ratio']:>6.1f}x  {row['unit']}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="100 scenes, 3 repetitions")
    print_table(run(quick=parser.parse_args().quick))
