"""A small committed slice of the real-val questions, and every shipped player's accuracy on it.

The players' real-val figures come from 2,000 to 5,000 questions, too many to re-answer in the
default test suite. This cuts a dataset folder down to its first `--scenes` scenes and their
questions, asks every named player `clevr-game players eval` on the slice, and writes the
figures to `expected.json` beside it. `tests/test_player_slices.py` answers the slice again and
requires the same figures, so a weights file that changes without its figures is caught.

    python -m experiments.real_val_slice --data runs/rv-pixel --scenes 50 --out tests/data/real-val-slice
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

from clevr_game.atomic import write_text_atomic
from clevr_game.dataset import dataset_files

SHIPPED_CLEVR_PLAYERS = ("state-transformer", "state-rn", "neuro-symbolic", "object-transformer", "film", "pixel-rn",
                         "blind", "oracle")


def cut(folder: str | Path, scenes: int, out: Path) -> int:
    """Write the first `scenes` scenes of the dataset in `folder` and their questions to `out`; the question count."""
    scenes_path, questions_path = dataset_files(folder)
    scene_data = json.loads(scenes_path.read_text())
    question_data = json.loads(questions_path.read_text())
    kept = scene_data["scenes"][:scenes]
    indexes = {scene["image_index"] for scene in kept}
    questions = [q for q in question_data["questions"] if q["image_index"] in indexes]
    out.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out / "scenes.json", json.dumps({**scene_data, "scenes": kept}))
    write_text_atomic(out / "questions.json", json.dumps({**question_data, "questions": questions}))
    return len(questions)


def accuracy_lines(player: str, folder: Path) -> list[str]:
    """`clevr-game players eval` output lines for `player` on `folder` (one torch thread, one Blender worker)."""
    from clevr_game.cli import main

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = main(["players", "eval", "--player", player, "--data", str(folder), "--threads", "1",
                     "--render-workers", "1", "--no-progress"])
    if code != 0:
        raise SystemExit(f"players eval --player {player} failed with exit code {code}")
    return printed.getvalue().strip().splitlines()


def measure(players: list[str], folder: Path) -> dict[str, Any]:
    """Each player's accuracy and per-family lines on the slice in `folder`, answered on a scratch copy
    (image players render into the dataset folder they are given)."""
    figures = {}
    with tempfile.TemporaryDirectory() as scratch:
        copy = Path(scratch) / folder.name
        copy.mkdir()
        for name in ("scenes.json", "questions.json"):
            shutil.copyfile(folder / name, copy / name)
        for player in players:
            lines = accuracy_lines(player, copy)
            figures[player] = {"accuracy": lines[-1].split()[-1], "lines": lines}
            print(f"{player}: {lines[-1]}")
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, help="the full real-val dataset folder")
    parser.add_argument("--scenes", type=int, default=50)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--players", nargs="+", default=list(SHIPPED_CLEVR_PLAYERS))
    args = parser.parse_args(argv)
    questions = cut(args.data, args.scenes, args.out)
    expected = {"source": str(args.data), "scenes": args.scenes, "questions": questions,
                "command": "clevr-game players eval --player NAME --data DIR --threads 1 --render-workers 1",
                "players": measure(args.players, args.out)}
    write_text_atomic(args.out / "expected.json", json.dumps(expected, indent=1) + "\n")
    print(f"wrote {args.out / 'expected.json'}: {len(args.players)} players, {questions} questions")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
