"""A benchmark's trial records: `RESULTS/trials.jsonl`, appended by one writer and read strictly.

One line a trial, keyed by its id (a later line of an id wins: a failed trial
tried again is appended again). A damaged line is an InputError naming the file,
line and field (`check_trial_record`), never a silent change of the report's
numbers; only an unfinished last line (a run killed mid-append) is skipped, with
a warning (clevr_game.jsonl).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from clevr_game.atomic import open_atomic
from clevr_game.errors import InputError
from clevr_game.jsonl import append_json_line, json_lines
from clevr_game.run_files import TRIALS_FILE

__all__ = ["FINISHED_FIELDS", "TRIALS_FILE", "append_trial", "check_trial_record", "read_keyed_lines", "read_trials",
           "write_trials"]


_TEXT_FIELDS = ("player", "adversary", "run", "player_weights", "error", "first_player_error")
_INTEGER_FIELDS = ("size", "minigame", "seed", "steps", "player_queries", "player_errors", "items_left_out",
                   "eval_queries", "eval_player_errors", "unscored_items")
_SHARE_FIELDS = ("consistency", "drop", "invalid", "clean_accuracy", "random_consistency", "random_drop",
                 "random_valid_consistency", "random_valid_drop", "random_valid_invalid", "player_error_rate")
FINISHED_FIELDS = ("consistency", "drop")
"""What every finished (error-free) trial record holds; the report refuses one without them."""


def check_trial_record(record: dict[str, Any], where: str) -> None:
    """InputError naming `where` and the field when a trial record has a field of the wrong type or range.

    What the report reads is checked, so a damaged record stops the report in one
    line instead of changing its numbers or raising deep inside it.
    """
    def bad(field: str, wanted: str) -> InputError:
        return InputError(f"{where}: field {field!r} must be {wanted}, got {record[field]!r:.60}")

    for field in _TEXT_FIELDS:
        if field in record and record[field] is not None and not isinstance(record[field], str):
            raise bad(field, "a string")
    for field in _INTEGER_FIELDS:
        value = record.get(field)
        if field in record and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
            raise bad(field, "an integer >= 0")
    for field in _SHARE_FIELDS:
        value = record.get(field)
        if value is None:
            continue
        if not isinstance(value, int | float) or isinstance(value, bool) or not 0.0 <= value <= 1.0:
            raise bad(field, "a number in 0..1")
    rows = record.get("item_results")
    if rows is not None and not (isinstance(rows, list) and all(
            isinstance(row, list) and len(row) == 5 and all(isinstance(v, int | float) and not isinstance(v, bool)
                                                            and 0.0 <= v <= 1.0 for v in row[3:])
            for row in rows)):
        raise InputError(f"{where}: field 'item_results' must be rows of [item, family, kind, changed share, "
                         "dropped share]")


def read_keyed_lines(path: str | os.PathLike[str], key: str,
                     check: Callable[[dict, str], None] | None = None) -> dict[str, dict]:
    """JSON-lines records by their `key` field, the later line of a key winning.

    InputError names the file and line of a line that is not JSON, not an object,
    lacks a string `key` or fails `check`; only an unfinished last line (a kill
    mid-append) is skipped, with a warning.
    """
    path = Path(path)
    records: dict[str, dict] = {}
    if not path.is_file():
        return records
    for where, record in json_lines(path, unfinished_tail_ok=True):
        if not isinstance(record, dict):
            raise InputError(f"{where}: expected a JSON object, got {type(record).__name__}")
        if not isinstance(record.get(key), str):
            raise InputError(f"{where}: field {key!r} must be a string")
        if check is not None:
            check(record, where)
        records[record[key]] = record
    return records


def read_trials(results: str | os.PathLike[str]) -> dict[str, dict]:
    """Recorded trials by id; InputError names the file, line and field of a damaged record."""
    return read_keyed_lines(Path(results) / TRIALS_FILE, "trial", check_trial_record)


def write_trials(results: str | os.PathLike[str], records: dict[str, dict]) -> None:
    """Rewrite the whole file, sorted by trial id (atomically)."""
    with open_atomic(Path(results) / TRIALS_FILE, durable=True) as handle:
        for trial_id in sorted(records):
            handle.write(json.dumps(records[trial_id], sort_keys=True) + "\n")


def append_trial(results: str | os.PathLike[str], record: dict) -> None:
    append_json_line(Path(results) / TRIALS_FILE, record)


