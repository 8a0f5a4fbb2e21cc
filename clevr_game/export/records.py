"""Manipulations an attack recorded: read from result.json or RUN/manipulations.jsonl, and written.

A manipulation is one valid move the game accepted for one item: the moves, the
player's answers before and after, the true answer and the moved scene (CLEVR
scene JSON). `result.json` keeps the best manipulation per item; an attack that
also writes `manipulations.jsonl` (one `manipulation_record` per line) keeps every
valid move it evaluated.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clevr_game.errors import InputError
from clevr_game.jsonl import json_lines
from clevr_game.scene import Scene

Move = tuple[int, float, float]
"""(object index in the scene, dx, dy): how far the move shifted one object on the ground."""


@dataclass(frozen=True)
class Manipulation:
    item_id: str
    moves: tuple[Move, ...]
    old_answer: str | None
    new_answer: str | None
    true_answer: str
    changed: bool
    dropped: bool
    scene: dict[str, Any]
    where: str
    """Where the record came from, for messages: `RUN/result.json: items[3]`."""


def manipulation_record(
    item_id: str,
    moves: Sequence[Sequence[float]],
    old_answer: str | None,
    new_answer: str | None,
    true_answer: str,
    changed: bool,
    dropped: bool,
    scene: Scene,
) -> dict[str, Any]:
    """One line of manipulations.jsonl: what an attack should write for each valid move it evaluated."""
    return {
        "item_id": item_id,
        "moves": [[int(m[0]), float(m[1]), float(m[2])] for m in moves],
        "old_answer": old_answer,
        "new_answer": new_answer,
        "true_answer": true_answer,
        "changed": bool(changed),
        "dropped": bool(dropped),
        "scene": scene.to_json(),
    }


# ------------------------------------------------------------------ checking fields


def _text(data: dict[str, Any], key: str, where: str, *, optional: bool = False) -> str | None:
    if key not in data:
        raise InputError(f"{where}: missing field '{key}'")
    value = data[key]
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise InputError(f"{where}: {key} must be a string, got {value!r}")
    return value


def _flag(data: dict[str, Any], key: str, where: str) -> bool:
    value = data.get(key)
    if not isinstance(value, bool):
        raise InputError(f"{where}: {key} must be true or false, got {value!r}")
    return value


def _moves(value: Any, where: str) -> tuple[Move, ...]:
    if not isinstance(value, list):
        raise InputError(f"{where}: moves must be a list of [object, dx, dy], got {value!r}")
    moves = []
    for move in value:
        if (
            not isinstance(move, list)
            or len(move) != 3
            or isinstance(move[0], bool)
            or not isinstance(move[0], int)
            or not all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
                       for x in move[1:])
        ):
            raise InputError(f"{where}: moves must be a list of [object, dx, dy], got {move!r}")
        moves.append((move[0], float(move[1]), float(move[2])))
    return tuple(moves)


def _scene(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InputError(f"{where}: scene must be a CLEVR scene (JSON dict), got {type(value).__name__}")
    return value


# ------------------------------------------------------------------ reading


def best_manipulations(items: Any, source: str) -> Iterator[Manipulation]:
    """The best manipulation of every item of result.json's `items` that has one.

    The attack keeps the move that changed the answer (preferring a drop); whether
    it changed or dropped follows from the answers it stores.
    """
    if not isinstance(items, list):
        raise InputError(f"{source}: 'items' must be a list")
    for position, item in enumerate(items):
        where = f"{source}: items[{position}]"
        if not isinstance(item, dict):
            raise InputError(f"{where}: expected a JSON object")
        best = item.get("best_manipulation")
        if best is None:
            continue
        if not isinstance(best, dict):
            raise InputError(f"{where}: best_manipulation must be a JSON object or null")
        if best.get("scene") is None:
            continue  # an invalid move has no scene; nothing to export
        old = _text(item, "old_answer", where, optional=True)
        new = _text(best, "new_answer", f"{where}.best_manipulation", optional=True)
        true = _text(item, "true_answer", where)
        changed = old is not None and new is not None and new != old
        yield Manipulation(
            item_id=_text(item, "item_id", where),
            moves=_moves(best.get("moves"), f"{where}.best_manipulation"),
            old_answer=old,
            new_answer=new,
            true_answer=true,
            changed=changed,
            dropped=changed and old == true,
            scene=_scene(best["scene"], f"{where}.best_manipulation"),
            where=where,
        )


def parse_manipulation(data: Any, where: str) -> Manipulation:
    """One manipulations.jsonl record (see `manipulation_record`) -> Manipulation."""
    if not isinstance(data, dict):
        raise InputError(f"{where}: expected a JSON object")
    return Manipulation(
        item_id=_text(data, "item_id", where),
        moves=_moves(data.get("moves"), where),
        old_answer=_text(data, "old_answer", where, optional=True),
        new_answer=_text(data, "new_answer", where, optional=True),
        true_answer=_text(data, "true_answer", where),
        changed=_flag(data, "changed", where),
        dropped=_flag(data, "dropped", where),
        scene=_scene(data.get("scene"), where),
        where=where,
    )


def read_manipulations(path: Path) -> Iterator[Manipulation]:
    """Every record of a manipulations.jsonl file; InputError names the file and line."""
    for where, data in json_lines(path):
        yield parse_manipulation(data, where)
