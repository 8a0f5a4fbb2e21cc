"""Attack runs to export: one run folder (result.json) or a benchmark results folder (trials.jsonl).

A relative path in a results file is relative to where its command ran; when the
folders were moved since, the path is also tried relative to the results folder
and the run folder.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clevr_game.errors import InputError
from clevr_game.export.records import (
    Manipulation,
    best_manipulations,
    read_manipulations,
)
from clevr_game.jsonl import json_lines
from clevr_game.run_files import (
    CHECKPOINT_FILE,
    MANIPULATIONS_FILE,
    MINIGAMES_FILE,
    RESULT_FILE,
    TRIALS_FILE,
)
from clevr_game.scene import read_json

UNFINISHED_MARKS = (MINIGAMES_FILE, CHECKPOINT_FILE)
"""Files an attack writes before it finishes: their presence without result.json means interrupted."""


def _existing(candidates: list[Path]) -> Path | None:
    return next((path for path in candidates if path.exists()), None)


def _trial_runs(results: Path) -> Iterator[Path]:
    """The run folder of every finished trial in RESULTS/trials.jsonl (failed trials have 'error')."""
    latest: dict[Any, tuple[str, dict]] = {}  # a trial retried after a failure is appended again: the last counts
    for where, record in json_lines(results / TRIALS_FILE, unfinished_tail_ok=True):
        if not isinstance(record, dict):
            raise InputError(f"{where}: expected a JSON object")
        trial = record.get("trial")
        latest[trial if isinstance(trial, str) else where] = (where, record)
    for where, record in latest.values():
        if "error" in record:
            continue
        run = record.get("run")
        if not isinstance(run, str) or not run:
            raise InputError(f"{where}: missing field 'run' (the trial's run folder)")
        given = Path(run)
        found = given if given.is_absolute() else _existing(
            [given, results / given, results / "runs" / given.name])
        if found is None:
            raise InputError(f"{where}: run folder {run!r} not found")
        yield found


def _unfinished(folder: Path) -> InputError:
    """Why `folder`, which has no result.json, cannot be exported."""
    if any((folder / mark).exists() for mark in UNFINISHED_MARKS):
        return InputError(f"{folder}: no {RESULT_FILE} (the attack did not finish; rerun it to resume)")
    return InputError(f"{folder}: not an attack run (no {RESULT_FILE}) nor a results folder (no {TRIALS_FILE})")


def run_folders(path: str | os.PathLike[str]) -> list[Path]:
    """The finished attack run folders behind `path`: itself, or every finished trial of a results folder."""
    path = Path(path)
    if not path.is_dir():
        raise InputError(f"{path}: no such folder (expected an attack run or a results folder)")
    if (path / RESULT_FILE).is_file():
        return [path]
    if not (path / TRIALS_FILE).is_file():
        raise _unfinished(path)
    folders = list(_trial_runs(path))
    unfinished = next((f for f in folders if not (f / RESULT_FILE).is_file()), None)
    if unfinished is not None:
        raise _unfinished(unfinished)
    return folders


@dataclass
class AttackRun:
    folder: Path
    player: str
    items: Path
    result: dict[str, Any]

    @property
    def result_path(self) -> Path:
        return self.folder / RESULT_FILE

    @property
    def manipulations_path(self) -> Path:
        return self.folder / MANIPULATIONS_FILE

    def best(self) -> Iterator[Manipulation]:
        return best_manipulations(self.result.get("items"), str(self.result_path))

    def every_valid_move(self) -> Iterator[Manipulation] | None:
        """Every valid move the attack recorded, or None when it recorded only the best ones."""
        if not self.manipulations_path.is_file():
            return None
        return read_manipulations(self.manipulations_path)


def _items_folder(run: Path, given: str, override: str | os.PathLike[str] | None, where: str) -> Path:
    if override is not None:
        return Path(override)
    path = Path(given)
    if path.is_absolute():
        return path
    # Where the attack ran, else beside the run, else beside one of its parents (a moved results folder).
    candidates = [path, run / path] + [parent / path.name for parent in list(run.parents)[:3]]
    marks = ("scenes.json", "items.json")
    found = next((c for c in candidates if any((c / m).is_file() for m in marks)), None)
    if found is None:
        raise InputError(f"{where}: options.items {given!r} not found (run the export where the attack ran, or pass --items)")
    return found


def load_run(folder: Path, items: str | os.PathLike[str] | None = None) -> AttackRun:
    """A finished run's result.json, its player and its items folder (`items` overrides the recorded one)."""
    where = str(folder / RESULT_FILE)
    result = read_json(folder / RESULT_FILE)
    if not isinstance(result, dict):
        raise InputError(f"{where}: expected a JSON object")
    options = result.get("options")
    if not isinstance(options, dict):
        raise InputError(f"{where}: missing field 'options'")
    player, given_items = options.get("player"), options.get("items")
    if not isinstance(player, str):
        raise InputError(f"{where}: options.player must be a string, got {player!r}")
    if not isinstance(given_items, str):
        raise InputError(f"{where}: options.items must be a string, got {given_items!r}")
    if not isinstance(result.get("items"), list):
        raise InputError(f"{where}: missing field 'items' (the per-item results)")
    return AttackRun(folder, player, _items_folder(folder, given_items, items, where), result)
