"""One writer per output folder: a second run into a folder that is being written is refused.

A benchmark's `trials.jsonl`, a study's records and an attack's run files are each
written by one process; two runs into one folder at once would lose or mix records.
The lock is a file in the folder held with the operating system's lock (filelock),
so a run that dies frees it with its process and no stale lock is left to clear.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from clevr_game.errors import InputError

LOCK_FILE = ".clevr-game.lock"
"""The writer lock of a run or results folder (ignored by git, left in place after a run)."""


@contextlib.contextmanager
def sole_writer(folder: str | os.PathLike[str], what: str, *, lock_name: str = LOCK_FILE,
                advice: str = "wait for it to end, or choose another --out") -> Iterator[None]:
    """Hold `folder`'s lock for the block; InputError (one line) when another process holds it."""
    from filelock import FileLock, Timeout

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    lock = FileLock(folder / lock_name)
    try:
        lock.acquire(timeout=0)
    except Timeout:
        raise InputError(f"--out {folder}: another {what} is writing there ({folder / lock_name} is held); "
                         f"{advice}") from None
    try:
        yield
    finally:
        lock.release()
