"""Exhaustive datasets: placements judged and questions answered per second, batched against per scene.

Baselines, measured in the same run on the same placements:
- judging: `layout.first_violation` once per placement (the rule check `BoundaryEnforcer.judge` runs);
- answering: per scene, the moved Scene built (no relationships or pixels), `compile_scene`, then `execute`.
Ours: `exhaustive.enumerate_placements` (judge_batch over chunks of 65,536) and
`exhaustive.answer_programs` (one compiled scene, its facts moved to one scene per
relation pattern). The game's path in between, `SceneFacts.with_coords` per scene,
is shown too.

Run: python -m perf.exhaustive [--quick]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from clevr_game.exhaustive import (
    HOPS,
    answer_programs,
    draw_base,
    enumerate_placements,
    grid_cells,
    placement_coords,
    placement_xy,
    propose_questions,
    relation_patterns,
)
from clevr_game.layout import first_violation
from clevr_game.programs import compile_scene, execute
from perf.timing import print_table, rate, row

OBJECTS = 3
"""Three moving objects: 49^3 = 117,649 placements, the paper's largest datasets."""


def run(quick: bool = False) -> list[dict]:
    base = draw_base(OBJECTS, 0, seed=0)
    radii = base.radii

    # Judging: every placement at once against one placement at a time.
    grid_cells()  # the grid comes from envs.game: imported before the clock starts
    started = time.perf_counter()
    placements = enumerate_placements(base)
    whole = time.perf_counter() - started
    batched = placements.total / whole
    cells = np.stack(np.unravel_index(np.arange(placements.total), (49,) * OBJECTS), axis=1)
    xy = placement_xy(base, cells)
    sample = xy[np.random.default_rng(0).choice(len(xy), 500 if quick else 3000, replace=False)]

    def judge_one_by_one() -> int:
        for layout in sample:
            first_violation(layout, radii)
        return len(sample)

    per_scene = rate(judge_one_by_one, repeats=1 if quick else 3)

    # Answering: the same questions on the same valid scenes.
    coords = placement_coords(base, placements.cells)
    programs = [q.program for q in propose_questions(base, coords, HOPS["mix"], seed=0)[:8]]
    patterns = len(relation_patterns(coords).masks)
    scene = base.scene()
    facts = compile_scene(scene)
    sample = coords[:1000]

    def compiled_per_scene() -> int:
        for moved in sample:
            moved_facts = compile_scene(scene.with_coords(moved, pixel_coords=False, compute_relationships=False))
            for program in programs:
                execute(program, moved_facts)
        return len(sample) * len(programs)

    def moved_per_scene() -> int:
        for moved in sample:
            moved_facts = facts.with_coords(moved)
            for program in programs:
                execute(program, moved_facts)
        return len(sample) * len(programs)

    def by_pattern() -> int:
        answer_programs(programs, base, coords)
        return len(coords) * len(programs)

    repeats = 1 if quick else 3
    baseline = rate(compiled_per_scene, repeats=repeats)
    return [
        row(f"placements judged ({placements.total:,} in {whole:.2f} s)", "placements/s", per_scene, batched),
        row("answers, facts moved per scene (with_coords)", "answers/s", baseline, rate(moved_per_scene, repeats)),
        row(f"answers, once per relation pattern ({patterns} for {len(coords):,} scenes)", "answers/s", baseline,
            rate(by_pattern, repeats, min_seconds=0.0)),
    ]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer scenes and repetitions")
    print_table(run(quick=parser.parse_args().quick))
