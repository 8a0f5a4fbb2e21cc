"""CLEVR-POC items: partial scenes, a hidden object, set answers, read from a `poc generate` folder.

A folder holds `items.json` and `environments/<id>.lp`; each item keeps its
environment's text, its hidden object and the ASP rule of its question. Set
answers are written as their values sorted and joined by ',' (the player
protocol's canonical form). The game's referee of these items is `envs.poc_items.PocRules`.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from clevr_game.errors import InputError, shown
from clevr_game.items import Item, answer_kind_problem, check_item_scenes
from clevr_game.programs import parse_program
from clevr_game.scene import parse_object, parse_scene, read_json
from clevr_game.vocab import CLEVR_POC, SET_SEPARATOR


def canonical_set(values: list[str]) -> str:
    return SET_SEPARATOR.join(sorted(set(values)))


def _field(entry: dict, key: str, kind: type, where: str) -> Any:
    value = entry.get(key)
    if not isinstance(value, kind):
        raise InputError(f"{where}: missing or malformed field '{key}'")
    return value


_ENVIRONMENT_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,199}")
"""An environment id names `environments/<id>.lp`: a plain file name, so a read never leaves the dataset."""


def _environment_file(folder: Path, env_id: str, where: str) -> Path:
    if not _ENVIRONMENT_ID.fullmatch(env_id) or ".." in env_id:
        raise InputError(f"{where}: field 'environment' {shown(env_id)} is not a plain environment name "
                         "(letters, digits, '_', '-', '.'; it names environments/<name>.lp inside the dataset)")
    env_file = folder / "environments" / f"{env_id}.lp"
    if not env_file.is_file():
        raise InputError(f"{where}: environment file {env_file} not found")
    return env_file


def _environment_text(path: Path, where: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise InputError(f"{where}: environment file {path} is not UTF-8 text") from None


def poc_items(folder: str | os.PathLike[str]) -> list[Item]:
    """Items of a folder written by `clevr-game poc generate` (items.json + environments/)."""
    folder = Path(folder)
    data = read_json(folder / "items.json")
    entries = data.get("items") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise InputError(f"{folder / 'items.json'}: expected a CLEVR-POC items file with an 'items' list")
    items = []
    environment_texts: dict[Path, str] = {}
    for position, entry in enumerate(entries):
        where = f"items.json: item {position}"
        if not isinstance(entry, dict):
            raise InputError(f"{where}: expected a dict")
        env_id = _field(entry, "environment", str, where)
        env_file = _environment_file(folder, env_id, where)
        if env_file not in environment_texts:
            environment_texts[env_file] = _environment_text(env_file, where)
        hidden = _field(entry, "hidden_object", dict, where)
        hidden_index = hidden.get("index", 0)
        if isinstance(hidden_index, bool) or not isinstance(hidden_index, int) or hidden_index < 0:
            raise InputError(f"{where}: hidden_object.index must be an integer >= 0, got {shown(hidden_index)}")
        answer = _field(entry, "answer", list, where)
        if not answer or not all(isinstance(v, str) for v in answer):
            raise InputError(f"{where}: field 'answer' must be a non-empty list of values, got {shown(answer)}")
        items.append(Item(
            item_id=f"poc:{entry.get('item_index', position)}",
            scene=parse_scene(_field(entry, "scene", dict, where), "items.json", position, CLEVR_POC),
            question=_field(entry, "question", str, where),
            program=parse_program(_field(entry, "program", list, where), f"{where}, "),
            answer=canonical_set(answer),
            environment=env_id,
            extra={
                "asp": _field(entry, "asp", str, where),
                "hidden_object": parse_object(hidden, CLEVR_POC, f"{where}, hidden_object"),
                "hidden_index": hidden_index,
                "environment_file": str(env_file),
                "environment_text": environment_texts[env_file],
                "query_attribute": entry.get("query_attribute"),
            },
        ))
    return items


def check_game_items(items: list[Item]) -> None:
    """InputError for the first item of `poc_items` the game cannot play: a visible scene that breaks
    CLEVR's placement rules, or a stored answer no scene could give its question.

    Tools that judge the stored answers themselves (`poc solve`) read items without this check.
    """
    for position, item in enumerate(items):
        problem = answer_kind_problem(item.program, item.answer, item.scene)
        if problem is not None:
            raise InputError(f"items.json: item {position}: field 'answer' is {shown(item.answer.split(SET_SEPARATOR))}, "
                             f"but {problem}")
    check_item_scenes([item.scene for item in items], [f"items.json: item {i}, scene" for i in range(len(items))])
