"""Every committed break is a real one: re-answered by the independent reference executor, record by record.

A line of a committed `manipulations.jsonl` (a robustness card's, or a benchmark results
folder's) claims that a move kept the question's true answer, kept every CLEVR rule
(inside the board, apart, no ambiguous relation, every object at least 200 pixels at
320 x 240) and turned the player's right answer wrong. Nothing here trusts the game that
wrote it: the moved scene is re-answered by `reference_execute` on its JSON and judged
by the gallery's rule check.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.gallery import breaks_a_clevr_rule
from clevr_game.programs import parse_program, reference_execute
from clevr_game.scene import parse_scene

RESULTS = Path(__file__).resolve().parents[1] / "results"
# Run folders (runs/, work/) are never committed; their files list every valid move, not only breaks.
COMMITTED = sorted(p for p in RESULTS.glob("**/manipulations.jsonl")
                   if not {"runs", "work"} & set(p.relative_to(RESULTS).parts))


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_the_leaderboard_commits_the_breaks_of_its_cards():
    cards = sorted((RESULTS / "leaderboard").glob("*/card.json"))
    assert cards, "results/leaderboard holds no card"
    for card_path in cards:
        card = json.loads(card_path.read_text())
        lines = _records(card_path.parent / "manipulations.jsonl")
        assert card["manipulations"] == len(lines), card_path


@pytest.mark.parametrize("path", COMMITTED, ids=[str(p.relative_to(RESULTS)) for p in COMMITTED])
def test_every_committed_break_keeps_the_true_answer_and_every_clevr_rule(path):
    for number, record in enumerate(_records(path), start=1):
        where = f"{path.relative_to(RESULTS)} line {number} ({record['item_id']}, {record['adversary']})"
        program = parse_program(record["question"]["program"])
        assert reference_execute(program, record["original_scene"]) == record["true_answer"], where
        assert reference_execute(program, record["moved_scene"]) == record["true_answer"], where
        assert record["old_answer"] == record["true_answer"] != record["new_answer"], where
        assert breaks_a_clevr_rule(parse_scene(record["moved_scene"])) is None, where
        original = [o["3d_coords"] for o in record["original_scene"]["objects"]]
        moved = [o["3d_coords"] for o in record["moved_scene"]["objects"]]
        changed = [i for i, (a, b) in enumerate(zip(original, moved, strict=True)) if a[:2] != b[:2]]
        assert changed == record["moved_objects"] and changed, where
        for field in ("original_image", "moved_image"):
            if field in record:
                assert (path.parent / record[field]).is_file(), where
