"""Errors the command line reports as a single line naming what is wrong."""

from __future__ import annotations

from typing import Any

_MAX_SHOWN = 60  # characters of a bad value quoted in an error line


class ClevrGameError(Exception):
    """Base of every error meant for the user: the message is one line."""

    exit_status = 2  # the command line's status for it: bad input or usage


class RunFailed(ClevrGameError):
    """The inputs were fine but the run could not give a trustworthy result (a failing player)."""

    exit_status = 1


class InputError(ClevrGameError, ValueError):
    """A malformed input file or value; the message names file, item and field."""


def located(source: str | None, *parts: str) -> str:
    """Join a location prefix like `scenes.json: scene 12, object 3`."""
    where = ", ".join(p for p in parts if p)
    if source and where:
        return f"{source}: {where}"
    return source or where


def one_line(text: str, limit: int = 200) -> str:
    """`text` on a single line, shortened: error messages must stay one line."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def shown(value: Any) -> str:
    """A short repr of a bad value for an error line."""
    return one_line(repr(value), _MAX_SHOWN)
