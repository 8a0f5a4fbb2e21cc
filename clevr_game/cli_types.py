"""argparse `type=` checks for every numeric and output-path option of every command.

A bad value stops the parser with one line naming the option (`argument --batch:
must be an integer in 1..16384, got '0'`) before any work starts, instead of a
traceback deep in the run, a zero silently read as "use the default", or a huge
value that overflows, crashes torch or fills the memory. Every numeric option has
an upper bound; where two options together size an allocation, the command's
handler calls `check_memory` before allocating.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
from collections.abc import Callable
from pathlib import Path

from clevr_game.errors import InputError

MAX_SEED = 2**32 - 1
"""The largest seed numpy, torch and Python's random all accept."""

MAX_THREADS = 256
"""torch threads: `torch.set_num_threads(100000)` crashes the process (exit 139), and no machine here has more cores."""
MAX_WORKERS = 256
"""Worker processes running trials side by side."""
MAX_BLENDER_WORKERS = 64
"""Blender processes: each holds a scene and its renderer, a few hundred MB."""
MAX_STEPS = 100_000_000
"""Training steps: the paper's largest budget is 100_000; an update's history entry is kept for every step batch."""
MAX_TRAINING_BATCH = 4_096
"""Examples in one optimiser step (the shipped players train with 16..128)."""
MAX_ANSWER_BATCH = 16_384
"""Questions or moves put to a player at once (defaults 64..512); a pixel player holds each one's image."""
MOVE_BYTES = 4_000
"""Memory of one played move kept until the run ends: its outcome and moved scene (3.1 KB measured with tracemalloc)."""
MAX_ITEMS = 10_000_000
"""Items, questions or scenes counted or indexed by a limit or offset; CLEVR has about a million questions."""
MAX_IMAGE_SIDE = 4_096
"""Pixels of an image's width or height (CLEVR's are 480 x 320; the pixel players see 128 x 96)."""
MAX_LEARNING_RATE = 10.0
MAX_MINUTES = 14_400.0
"""Ten days: a time limit in minutes."""
MAX_SECONDS = 86_400.0
"""A day: a timeout in seconds."""


def _integer(text: str, kind: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be {kind}, got {text!r}") from None


def _finite(text: str, kind: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be {kind}, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be {kind}, got {text!r}")
    return value


def positive_int(text: str) -> int:
    """An integer >= 1: counts, sizes, batches, steps, workers, threads."""
    value = _integer(text, "a positive integer")
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return value


def non_negative_int(text: str) -> int:
    """An integer >= 0: indices, and counts where zero means none."""
    value = _integer(text, "an integer >= 0")
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be an integer >= 0, got {text!r}")
    return value


def random_seed(text: str) -> int:
    """A random seed in 0..2**32-1."""
    value = _integer(text, f"an integer seed in 0..{MAX_SEED}")
    if not 0 <= value <= MAX_SEED:
        raise argparse.ArgumentTypeError(f"must be an integer seed in 0..{MAX_SEED}, got {text!r}")
    return value


def finite_float(text: str) -> float:
    """Any finite number (not nan or inf)."""
    return _finite(text, "a finite number")


def positive_float(text: str) -> float:
    """A finite number > 0: learning rates, time limits."""
    value = _finite(text, "a positive number")
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text!r}")
    return value


def non_negative_float(text: str) -> float:
    """A finite number >= 0: coefficients where zero switches a term off."""
    value = _finite(text, "a number >= 0")
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a number >= 0, got {text!r}")
    return value


def positive_int_list(text: str) -> str:
    """Comma-separated positive integers (`10,100`), returned as written for the handler to split."""
    parts = text.split(",")
    for part in parts:
        try:
            positive_int(part.strip())
        except argparse.ArgumentTypeError:
            raise argparse.ArgumentTypeError(
                f"must be comma-separated positive integers such as 10,100, got {text!r}"
            ) from None
    return text


def probability(text: str) -> float:
    """A share or probability in 0..1."""
    value = _finite(text, "a number in 0..1")
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be a number in 0..1, got {text!r}")
    return value


def int_in(lo: int, hi: int) -> Callable[[str], int]:
    """An integer in lo..hi; the message names the range (`must be an integer in 1..256, got '100000'`)."""
    kind = f"an integer in {lo}..{hi}"

    def check(text: str) -> int:
        value = _integer(text, kind)
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"must be {kind}, got {text!r}")
        return value

    check.__name__ = f"int_in({lo}, {hi})"
    return check


def float_in(lo: float, hi: float, *, above_lo: bool = False) -> Callable[[str], float]:
    """A finite number in lo..hi, or in (lo, hi] with `above_lo` (a learning rate or a time limit of 0 is no run)."""
    kind = f"a number above {lo:g}, at most {hi:g}" if above_lo else f"a number in {lo:g}..{hi:g}"

    def check(text: str) -> float:
        value = _finite(text, kind)
        if not (lo < value <= hi if above_lo else lo <= value <= hi):
            raise argparse.ArgumentTypeError(f"must be {kind}, got {text!r}")
        return value

    check.__name__ = f"float_in({lo:g}, {hi:g})"
    return check


def int_list_in(lo: int, hi: int) -> Callable[[str], str]:
    """Comma-separated integers in lo..hi (`10,100`), returned as written for the handler to split."""
    one = int_in(lo, hi)

    def check(text: str) -> str:
        for part in text.split(","):
            try:
                one(part.strip())
            except argparse.ArgumentTypeError:
                raise argparse.ArgumentTypeError(
                    f"must be comma-separated integers in {lo}..{hi} such as 10,100, got {text!r}"
                ) from None
        return text

    check.__name__ = f"int_list_in({lo}, {hi})"
    return check


def image_size(text: str) -> str:
    """`WIDTHxHEIGHT` (`128x96`), each side in 1..MAX_IMAGE_SIDE; returned as written for the handler to split."""
    parts = text.lower().split("x")
    if len(parts) != 2 or not all(part.isascii() and part.isdigit() and len(part) <= len(str(MAX_IMAGE_SIDE))
                                  and 1 <= int(part) <= MAX_IMAGE_SIDE for part in parts):
        raise argparse.ArgumentTypeError(
            f"must be WIDTHxHEIGHT such as 128x96, each in 1..{MAX_IMAGE_SIDE}, got {text!r}")
    return text


def output_folder(text: str) -> str:
    """A folder to write into: absent (it is made) or a folder, never an existing file nor a path below one."""
    _check_parents(text)
    return text


def output_file(text: str) -> str:
    """A file to write: absent or a file, never an existing folder nor a path below a file."""
    if Path(text).is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is an existing folder, not a file")
    _check_parents(text, below_only=True)
    return text


def _check_parents(text: str, *, below_only: bool = False) -> None:
    path = Path(text)
    for place in (path.parents if below_only else (path, *path.parents)):
        if place.is_dir():
            return
        if place.exists():
            named = f"{text!r}" if place == path else f"{text!r}: {str(place)!r}"
            raise argparse.ArgumentTypeError(f"{named} is an existing file, not a folder")


def memory_bytes() -> int | None:
    """This machine's memory, or its container's limit when lower; None where neither can be read."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None
    for limit in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        with contextlib.suppress(OSError, ValueError):  # absent, or "max"
            total = min(total, int(Path(limit).read_text().strip()))
    return total


def check_memory(needed_bytes: float, what: str) -> None:
    """InputError before a run allocates more than the machine has; `what` names the options that size it."""
    total = memory_bytes()
    if total is not None and needed_bytes > total:
        raise InputError(f"{what} would hold about {needed_bytes / 2**30:.1f} GiB in memory; "
                         f"this machine has {total / 2**30:.1f} GiB")
