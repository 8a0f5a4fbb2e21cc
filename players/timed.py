"""A player seen through a stopwatch: the seconds and queries spent inside it (for speed measurements)."""

from __future__ import annotations

import time
from collections.abc import Sequence

from players.protocol import Answer, Player, Query


class TimedPlayer(Player):
    """Forwards to a player and adds up the seconds and queries spent inside it."""

    def __init__(self, inner: Player):
        self.inner, self.name, self.needs, self.image_spec = inner, inner.name, inner.needs, inner.image_spec
        self.seconds = 0.0
        self.queries = 0

    def answer_batch(self, queries: Sequence[Query]) -> list[Answer]:
        start = time.perf_counter()
        try:
            return self.inner.answer_batch(queries)
        finally:
            self.seconds += time.perf_counter() - start
            self.queries += len(queries)

    def close(self) -> None:
        self.inner.close()
