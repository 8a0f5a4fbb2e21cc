"""JSON-lines files that are appended to by one writer and read strictly by everyone.

A record file (a benchmark's `trials.jsonl`, an attack's `manipulations.jsonl`, a
study's records) holds the numbers a report publishes, so a damaged line is never
skipped in silence: a line that is not UTF-8 or not JSON is an InputError naming
the file and line. The one exception is an unfinished last line (no newline at the
end of the file): that is what a run killed in the middle of an append leaves, so
it is skipped with a warning on stderr, and the next append cuts it off first.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from clevr_game.errors import InputError


def json_lines(path: str | os.PathLike[str], *, unfinished_tail_ok: bool = False) -> Iterator[tuple[str, Any]]:
    """(`FILE: line N`, value) for every non-blank line; InputError names the file and line of a bad one.

    With `unfinished_tail_ok`, a last line without its newline that does not parse
    is skipped with a warning (a writer killed mid-append) instead of refused.
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{path}: a folder, not a JSON-lines file") from None
    lines = data.split(b"\n")
    last = len(lines) - 1  # the piece after the final newline: b"" for a whole file
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        where = f"{path}: line {number}"
        unfinished = number - 1 == last
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            if unfinished and unfinished_tail_ok:
                _warn_unfinished(where)
                continue
            raise InputError(f"{where}: not UTF-8 text (byte {exc.start + 1} of the line)") from None
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            if unfinished and unfinished_tail_ok:
                _warn_unfinished(where)
                continue
            raise InputError(f"{where}: invalid JSON at column {exc.colno}: {exc.msg}") from None
        except RecursionError:
            raise InputError(f"{where}: JSON nested too deeply") from None
        yield where, value


def _warn_unfinished(where: str) -> None:
    print(f"clevr-game: warning: {where}: an unfinished record (a run stopped while writing it) is skipped",
          file=sys.stderr)


def append_json_line(path: str | os.PathLike[str], record: Any) -> None:
    """Append one record as a line and flush it to disk, so a kill right after loses nothing.

    An unfinished last line left by an earlier writer is cut off first, so the new
    record starts a line of its own.
    """
    path = Path(path)
    line = (json.dumps(record, sort_keys=True) + "\n").encode("utf-8")
    with open(path, "ab+") as handle:
        size = handle.seek(0, os.SEEK_END)
        if size:
            handle.seek(size - 1)
            if handle.read(1) != b"\n":
                handle.seek(0)
                data = handle.read()
                handle.truncate(data.rfind(b"\n") + 1)
                handle.seek(0, os.SEEK_END)
        handle.write(line)
        handle.flush()
        os.fsync(handle.fileno())
