"""argparse `type=` checks for every numeric option of every command.

A bad value stops the parser with one line naming the option (`argument --batch:
must be a positive integer, got '0'`) before any work starts, instead of a
traceback deep in the run or a zero silently read as "use the default".
"""

from __future__ import annotations

import argparse
import math

MAX_SEED = 2**32 - 1
"""The largest seed numpy, torch and Python's random all accept."""


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
