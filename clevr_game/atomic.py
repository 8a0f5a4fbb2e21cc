"""Files written whole or not at all: a temporary file in the same folder, then a rename.

A reader (a resumed run, a report rebuilt while trials finish, `clevr-game export`
reading a run) never sees half a file, and a run killed while writing leaves the
previous version. The new file gets the user's usual permissions (0666 less the
umask), not the owner-only 0600 of a temporary file from mkstemp.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def new_file_mode() -> int:
    """The mode `open(path, "w")` gives a new file (0666 less the umask); mkstemp's files get 0600."""
    return 0o666 & ~_umask()


@contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """A temporary path beside `path`, to write by any means (matplotlib, torch.save, a copy).

    It becomes `path` when the block ends without an error and is removed
    otherwise. It ends with `path`'s suffix, so a writer that picks the format
    by the suffix (matplotlib's savefig) still does.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=f".tmp{path.suffix}")
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, new_file_mode())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


@contextmanager
def open_atomic(path: str | os.PathLike[str], *, durable: bool = False) -> Iterator[IO[str]]:
    """A UTF-8 text handle for output written piece by piece; its text replaces `path` when the block ends.

    `durable`: flush to the disk before the rename, for records that must
    survive a machine that stops (a benchmark's finished trials).
    """
    with atomic_path(path) as tmp, tmp.open("w", encoding="utf-8") as handle:
        yield handle
        if durable:
            handle.flush()
            os.fsync(handle.fileno())


def write_text_atomic(path: str | os.PathLike[str], text: str, *, durable: bool = False) -> None:
    """Write `text` to `path` through a temporary file and a rename (see `open_atomic`)."""
    with open_atomic(path, durable=durable) as handle:
        handle.write(text)


def write_json_atomic(path: str | os.PathLike[str], data: Any, **json_options: Any) -> None:
    """`json.dumps(data, **json_options)` through `write_text_atomic` (no trailing newline, as json.dump)."""
    write_text_atomic(path, json.dumps(data, **json_options))
