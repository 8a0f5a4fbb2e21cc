"""The card's `manipulations.jsonl`: every distinct move that made a right answer wrong, whole.

Each trial's run folder holds the evaluation's moves (`manipulations.jsonl`: every valid
move the trained adversary played, with the moved scene) and, on a mini-game's first
seed, the greedy search's flips. A line of the card's file is one distinct break (a
move the evaluation sampled again is one line): the CLEVR question with its program,
the original and the moved scene as CLEVR scene JSON, the moves, the three answers and,
for image players, the two PNGs the player saw (rendered again with its preset and size
into DIR/images; rendering is deterministic, docs/rendering.md).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from clevr_game.run_files import MANIPULATIONS_FILE, SEARCH_MANIPULATIONS_FILE
from clevr_game.scene import Scene, parse_scene, read_json

CARD_MANIPULATIONS_FILE = "manipulations.jsonl"
IMAGES_FOLDER = "images"


def question_records(items_folder: Path) -> dict[str, dict[str, Any]]:
    """The CLEVR question JSON of every item id (`image_index:question_index`), as the file has it."""
    questions = read_json(items_folder / "questions.json")["questions"]
    return {f"{q['image_index']}:{q['question_index']}": q for q in questions}


def scene_records(items_folder: Path) -> dict[int, dict[str, Any]]:
    """The CLEVR scene JSON of every image index, as the file has it."""
    return {s["image_index"]: s for s in read_json(items_folder / "scenes.json")["scenes"]}


def _moved_objects(moves: list[list[float]]) -> list[int]:
    return sorted({int(o) for o, dx, dy in moves if dx or dy})


def _move_key(record: dict[str, Any]) -> tuple:
    return tuple(sorted((int(o), round(float(dx), 6), round(float(dy), 6))
                        for o, dx, dy in record["moves"] if dx or dy))


def breaks_of_trial(record: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(adversary, manipulation record) of every break in a finished trial's run folder."""
    from clevr_game.jsonl import json_lines

    run = Path(record["run"])
    found = []
    sources = [(record.get("adversary", "state"), run / MANIPULATIONS_FILE), ("search", run / SEARCH_MANIPULATIONS_FILE)]
    for adversary, path in sources:
        if path.is_file():
            found += [(adversary, line) for _, line in json_lines(path) if line.get("dropped")]
    return found


def collect(records: list[dict[str, Any]], items_folder: Path) -> list[dict[str, Any]]:
    """The manipulation lines of the finished trials, distinct and sorted (player, adversary, size, mini-game,
    seed, item, moves); a benchmark's results folder keeps the same lines for every player."""
    questions, scenes = question_records(items_folder), scene_records(items_folder)
    lines: dict[tuple, dict[str, Any]] = {}
    for record in records:
        if "error" in record:
            continue
        for adversary, move in breaks_of_trial(record):
            key = (record["player"], adversary, record["size"], record["minigame"], record["seed"], move["item_id"],
                   _move_key(move))
            if key in lines:
                continue
            question = questions[move["item_id"]]
            lines[key] = {
                "item_id": move["item_id"], "trial": record["trial"], "player": record["player"], "adversary": adversary, "size": record["size"],
                "minigame": record["minigame"], "seed": record["seed"],
                "question": question, "original_scene": scenes[question["image_index"]],
                "moved_scene": move["scene"],
                "moves": [[int(o), float(dx), float(dy)] for o, dx, dy in move["moves"]],
                "moved_objects": _moved_objects(move["moves"]),
                "true_answer": move["true_answer"], "old_answer": move["old_answer"],
                "new_answer": move["new_answer"],
            }
    return [lines[key] for key in sorted(lines, key=lambda k: (*k[:5], _id_order(k[5]), k[6]))]


def _id_order(item_id: str) -> tuple[int, ...]:
    return tuple(int(part) for part in item_id.split(":"))


def add_images(lines: list[dict[str, Any]], folder: Path, image_spec: Any) -> None:
    """Render the original and moved scene of every line as the player saw them; set the relative paths."""
    if not lines:
        return
    from clevr_game.render import Renderer

    images = folder / IMAGES_FOLDER
    images.mkdir(parents=True, exist_ok=True)
    scenes: dict[str, Scene] = {}
    with Renderer(image_spec.preset, width=image_spec.width, height=image_spec.height) as renderer:
        for line in lines:
            for field, scene_json in (("original_image", line["original_scene"]), ("moved_image", line["moved_scene"])):
                scene = parse_scene(scene_json, f"manipulation of {line['item_id']}")
                name = f"{renderer.image_key(scene)}.png"
                scenes[name] = scene
                line[field] = f"{IMAGES_FOLDER}/{name}"
        missing = sorted(name for name in scenes if not (images / name).is_file())
        if missing:
            renderer.render_many([scenes[name] for name in missing], images, names=missing)


def write_lines(lines: list[dict[str, Any]], path: Path) -> None:
    from clevr_game.atomic import open_atomic

    with open_atomic(path) as handle:
        for line in lines:
            handle.write(json.dumps(line, sort_keys=True) + "\n")


def update_results_folder(out: Path, records: list[dict[str, Any]], items_folder: Path) -> int:
    """OUT/manipulations.jsonl of a benchmark: every dropped move of its finished trials, whole; returns the count.

    Run folders are not committed: a trial whose folder is gone keeps the lines the file
    already holds for it, so a resumed benchmark never loses the records of earlier runs.
    """
    from clevr_game.jsonl import json_lines

    if not (items_folder / "questions.json").is_file():
        return 0  # CLEVR-POC items: their records stay in the run folders
    path = out / CARD_MANIPULATIONS_FILE
    earlier = [line for _, line in json_lines(path)] if path.is_file() else []
    present = [r for r in records if (Path(r["run"]) / MANIPULATIONS_FILE).is_file()]
    kept_trials = {r["trial"] for r in records} - {r["trial"] for r in present}
    lines = collect(present, items_folder) + [line for line in earlier if line.get("trial") in kept_trials]
    lines.sort(key=lambda line: (line["player"], line["adversary"], line["size"], line["minigame"], line["seed"],
                                 _id_order(line["item_id"]), _move_key(line)))
    write_lines(lines, path)
    return len(lines)
