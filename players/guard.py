"""Counting a player's failures, and giving up on a player that keeps failing.

Every query a run puts to a player goes through one `PlayerGuard`: it counts the
queries and the error answers (so a trial can report `player_errors` and
`player_error_rate`), keeps the first error for the record, and raises
`PlayerGaveUp` once `max_failures` of the last `window` queries failed. A player
that hangs on every third query then costs a run `max_failures` time-outs, not
one time-out per query for ever.
"""

from __future__ import annotations

import argparse
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from clevr_game.cli_types import non_negative_int, positive_float, probability
from clevr_game.errors import InputError, RunFailed
from players.protocol import Answer, Player, Query

DEFAULT_MAX_FAILURES = 20
DEFAULT_FAILURE_WINDOW = 100
DEFAULT_MAX_ERROR_RATE = 0.05
"""A trial whose share of failed queries is above this is recorded as failed, not finished."""

MAX_PLAYER_TIMEOUT_S = 3600.0
"""The longest --player-timeout / --player-startup-timeout: an hour per answer is no time-out at all,
and far larger numbers overflow the waits they set."""


class PlayerGaveUp(RunFailed):
    """The player failed too often in a window of recent queries; the message is one line."""


@dataclass(frozen=True)
class FailureCount:
    """How many of a run's queries failed, and the first failure's text."""

    queries: int = 0
    errors: int = 0
    first_error: str | None = None

    @property
    def error_rate(self) -> float:
        return self.errors / self.queries if self.queries else 0.0

    def failure(self, max_error_rate: float) -> str | None:
        """Why a run with this count is failed, or None when its error rate is within the limit."""
        if self.queries and self.error_rate > max_error_rate:
            return (f"{self.errors} of {self.queries} player queries failed ({self.error_rate:.1%}, "
                    f"above --max-error-rate {max_error_rate:g}); first error: {self.first_error}")
        return None

    def to_json(self) -> dict[str, Any]:
        return {"player_queries": self.queries, "player_errors": self.errors,
                "player_error_rate": self.error_rate, "first_player_error": self.first_error}


class PlayerGuard(Player):
    """A player seen through a failure count; answers pass through unchanged.

    `max_failures` failed answers among the last `window` queries raise PlayerGaveUp
    (None: never give up). Attributes other than the protocol's come from the
    wrapped player.
    """

    def __init__(self, player: Player, *, max_failures: int | None = DEFAULT_MAX_FAILURES,
                 window: int = DEFAULT_FAILURE_WINDOW):
        if max_failures is not None and max_failures < 1:
            raise ValueError("max_failures must be at least 1 (or None)")
        if window < 1 or (max_failures is not None and max_failures > window):
            raise ValueError("window must be at least 1 and at least max_failures")
        self.player = player
        self.name = player.name
        self.needs = player.needs
        self.image_spec = player.image_spec
        self.max_failures = max_failures
        self.window = window
        self._recent: deque[bool] = deque()
        self._recent_failures = 0
        self._queries = 0
        self._errors = 0
        self._first_error: str | None = None

    def __getattr__(self, name: str) -> Any:
        # Only reached for attributes this wrapper lacks (a player's own extras).
        if name == "player":
            raise AttributeError(name)
        return getattr(self.player, name)

    @property
    def count(self) -> FailureCount:
        return FailureCount(self._queries, self._errors, self._first_error)

    def answer_batch(self, queries: Sequence[Query]) -> list[Answer]:
        answers = self.player.answer_batch(queries)
        for answer in answers:
            self._record(answer)
        if self.max_failures is not None and self._recent_failures >= self.max_failures:
            raise PlayerGaveUp(
                f"gave up on player {self.name!r}: {self._recent_failures} of its last {len(self._recent)} "
                f"queries failed (--max-player-failures {self.max_failures}); first error: {self._first_error}"
            )
        return answers

    def _record(self, answer: Answer) -> None:
        self._queries += 1
        failed = not answer.ok
        if failed:
            self._errors += 1
            if self._first_error is None:
                self._first_error = answer.error
        if len(self._recent) == self.window:
            self._recent_failures -= self._recent.popleft()
        self._recent.append(failed)
        self._recent_failures += failed

    def close(self) -> None:
        self.player.close()


def player_seconds(text: str) -> float:
    """A time limit of an external player: a number of seconds in (0, MAX_PLAYER_TIMEOUT_S]."""
    value = positive_float(text)
    if value > MAX_PLAYER_TIMEOUT_S:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_PLAYER_TIMEOUT_S:g} seconds, got {text!r}")
    return value


def add_limit_options(p: argparse.ArgumentParser) -> None:
    """--player-timeout, --player-startup-timeout, --max-player-failures, --max-error-rate: how much failure a run tolerates."""
    p.add_argument("--player-timeout", type=player_seconds, default=None, metavar="SECONDS",
                   help="seconds an external player may take per answer (subprocess) or per request (http: "
                        "a request carries a batch, up to 128 queries during an attack and 64 in a card's "
                        f"accuracy passes), at most {MAX_PLAYER_TIMEOUT_S:g} (default: its own, 10 s / 30 s)")
    p.add_argument("--player-startup-timeout", type=player_seconds, default=None, metavar="SECONDS",
                   help="seconds an external player may take for its first answer (a subprocess: of each fresh "
                        "process; http: until a request is answered), never less than --player-timeout, at most "
                        f"{MAX_PLAYER_TIMEOUT_S:g} (default: a subprocess waits 30 s, http the per-answer time)")
    p.add_argument("--max-player-failures", type=non_negative_int, default=DEFAULT_MAX_FAILURES, metavar="N",
                   help=f"give up on the player after N failed answers among its last {DEFAULT_FAILURE_WINDOW} "
                        f"(0: never; default {DEFAULT_MAX_FAILURES})")
    p.add_argument("--max-error-rate", type=probability, default=DEFAULT_MAX_ERROR_RATE, metavar="SHARE",
                   help=f"a run whose share of failed answers is above this fails (default {DEFAULT_MAX_ERROR_RATE})")


def limits_from_args(args: argparse.Namespace) -> dict:
    """The checked values of the player-limit options, as keyword arguments of `load_guarded`."""
    if args.max_player_failures > DEFAULT_FAILURE_WINDOW:
        raise InputError(f"--max-player-failures {args.max_player_failures}: at most {DEFAULT_FAILURE_WINDOW}, "
                         "the window it counts in")
    return {"timeout_s": args.player_timeout, "startup_timeout_s": args.player_startup_timeout,
            "max_failures": args.max_player_failures or None}
