"""The card's gallery: manipulations from manipulations.jsonl, the original scene beside the moved one.

Up to `size` manipulations, each of another item: fewer moved objects first, then by
item, adversary, size, mini-game, seed and moves, so the same file always gives the
same gallery. The pictures are benchmarks/gallery.py's: both scenes rendered by
Blender, the moved objects outlined and their moves drawn as arrows, or schematic top
views when Blender cannot start. The evaluation's referees (CLEVR's visibility rule
included) already judged every moved scene, so none is judged again here.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from benchmarks.gallery import SCHEMATIC, Candidate, draw_gallery
from clevr_game.errors import InputError, one_line
from clevr_game.render.presets import PRESETS
from clevr_game.scene import parse_scene

MANIPULATIONS_FILE = "manipulations.jsonl"
GALLERY_DIR = "gallery"
STEM = "manipulation"
GALLERY_PRESETS = (*PRESETS, SCHEMATIC)
_FIELDS = ("item_id", "adversary", "size", "minigame", "seed", "question", "original_scene", "moved_scene",
           "moves", "true_answer", "old_answer", "new_answer")


def read_manipulations(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The records of manipulations.jsonl, in file order; InputError names the file and line of a bad one."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no manipulations file (the evaluation writes one, empty when no move "
                         "broke a right answer)")
    records = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read ({one_line(exc, 120)})") from None
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except (json.JSONDecodeError, RecursionError) as exc:
            raise InputError(f"{path}: line {number}: not JSON ({one_line(exc, 80)})") from None
        if not isinstance(record, dict):
            raise InputError(f"{path}: line {number}: a manipulation is a JSON object")
        missing = [field for field in _FIELDS if field not in record]
        if missing:
            raise InputError(f"{path}: line {number}: no {', '.join(repr(f) for f in missing)}")
        record["moves"] = _moves(record["moves"], f"{path}: line {number}")
        records.append({**record, "line": number})
    return records


def _moves(moves: Any, where: str) -> tuple[tuple[int, float, float], ...]:
    """[[object, dx, dy], ...] summed per object, by object: one arrow per moved object.

    An object that stays (the adversary's stay bin, dx = dy = 0) is no move: it gets
    no outline and does not count among the moved objects.
    """
    if not isinstance(moves, list):
        raise InputError(f"{where}: 'moves' must be a list of [object index, dx, dy]")
    total: dict[int, tuple[float, float]] = {}
    for move in moves:
        if (not isinstance(move, list) or len(move) != 3 or isinstance(move[0], bool) or not isinstance(move[0], int)
                or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in move[1:])):
            raise InputError(f"{where}: a move must be [object index, dx, dy], got {one_line(repr(move), 60)}")
        dx, dy = total.get(move[0], (0.0, 0.0))
        total[move[0]] = (dx + float(move[1]), dy + float(move[2]))
    return tuple((obj, dx, dy) for obj, (dx, dy) in sorted(total.items()) if dx or dy)


def _order(record: dict) -> tuple:
    return (len(record["moves"]), str(record["item_id"]), str(record["adversary"]), str(record["size"]),
            str(record["minigame"]), str(record["seed"]), record["moves"])


def choose(records: list[dict], size: int) -> list[dict]:
    """Up to `size` records, each of another item, in the gallery's order (see the module docstring)."""
    chosen, seen = [], set()
    for record in sorted(records, key=_order):
        if len(chosen) >= size:
            break
        if str(record["item_id"]) not in seen:
            seen.add(str(record["item_id"]))
            chosen.append(record)
    return chosen


def candidate(record: dict, player: str, source: str) -> Candidate:
    """The gallery's view of one manipulation record (both scenes parsed; a bad one is named by file and line)."""
    where = f"{source} line {record['line']}"
    before = parse_scene(record["original_scene"], f"{where} original_scene")
    after = parse_scene(record["moved_scene"], f"{where} moved_scene", vocabulary=before.vocabulary)
    if len(before) != len(after):
        raise InputError(f"{where}: the moved scene has {len(after)} objects, the original {len(before)}")
    if any(not 0 <= obj < len(before) for obj, _, _ in record["moves"]):
        raise InputError(f"{where}: a move names an object the scene does not have ({len(before)} objects)")
    question = record["question"]
    text = question.get("question", "") if isinstance(question, dict) else question
    return Candidate(
        player=player, player_rank=0,
        trial=(f"{str(record['adversary']).replace('_', ' ')} adversary, size {record['size']}, "
               f"mini-game {record['minigame']}, seed {record['seed']}"),
        item_id=str(record["item_id"]), items_dir="", question=str(text),
        true_answer=str(record["true_answer"]), old_answer=str(record["old_answer"]),
        new_answer=str(record["new_answer"]), dropped=True, moves=record["moves"], before=before, after=after)


def _seen(record: dict) -> dict[str, str] | None:
    """The PNGs an image player saw, when the record names them as paths inside the card folder."""
    pair = {"before": record.get("original_image"), "after": record.get("moved_image")}
    if all(isinstance(p, str) and p and ":" not in p and not p.startswith(("/", "\\")) and ".." not in p.split("/")
           for p in pair.values()):
        return pair
    return None


def draw_card_gallery(folder: Path, records: list[dict], player: str, preset: str,
                      size: int) -> tuple[list[dict], str | None]:
    """Draw folder/gallery/manipulation_K.png; returns one caption per picture and the note of a fallback.

    Each caption is benchmarks.gallery's, its `image` relative to `folder`, with the
    record's adversary, size, mini-game and seed, and `seen` (the player's own images)
    for an image player.
    """
    chosen = choose(records, size)
    candidates = [candidate(record, player, MANIPULATIONS_FILE) for record in chosen]
    captions, note = draw_gallery(candidates, folder / GALLERY_DIR, preset, stem=STEM)
    entries = []
    for caption, record in zip(captions, chosen, strict=True):
        entries.append({**caption, "image": f"{GALLERY_DIR}/{caption['image']}",
                        "adversary": str(record["adversary"]).replace("_", " "), "size": record["size"],
                        "minigame": record["minigame"], "seed": record["seed"], "seen": _seen(record)})
    return entries, note
