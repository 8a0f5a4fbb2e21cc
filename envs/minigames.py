"""Mini-games: a pool of items split, with a seed, into mutually exclusive subsets of one size.

A manifest (small JSON) records the split by item id, so benchmarks compare
players on the very same mini-games, and refuses a pool it was not made from.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from clevr_game.errors import InputError
from clevr_game.scene import read_json, write_json_atomic


def pool_fingerprint(item_ids: list[str]) -> str:
    return hashlib.sha256("\n".join(item_ids).encode()).hexdigest()[:16]


@dataclass
class MiniGames:
    size: int
    seed: int
    fingerprint: str
    games: list[list[str]]

    def __len__(self) -> int:
        return len(self.games)

    def indices(self, item_ids: list[str], k: int) -> list[int]:
        """Positions in `item_ids` of the items of mini-game k."""
        if not 0 <= k < len(self.games):
            raise InputError(f"mini-game {k} does not exist ({len(self.games)} mini-games of size {self.size})")
        if pool_fingerprint(item_ids) != self.fingerprint:
            raise InputError("the item pool is not the one these mini-games were split from (fingerprint differs)")
        position = {item_id: i for i, item_id in enumerate(item_ids)}
        return [position[i] for i in self.games[k]]

    def to_json(self) -> dict:
        return {"size": self.size, "seed": self.seed, "pool_fingerprint": self.fingerprint, "minigames": self.games}

    def save(self, path: str | os.PathLike[str]) -> None:
        write_json_atomic(path, self.to_json(), indent=1)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> MiniGames:
        data = read_json(path)
        name = Path(path).name
        try:
            return cls(int(data["size"]), int(data["seed"]), str(data["pool_fingerprint"]),
                       [[str(i) for i in game] for game in data["minigames"]])
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"{name}: not a mini-game manifest ({type(exc).__name__}: {exc})") from None


def split_minigames(item_ids: list[str], size: int, seed: int, count: int | None = None) -> MiniGames:
    """As many disjoint mini-games of `size` as the pool holds (or the first `count`)."""
    if size < 1:
        raise InputError(f"mini-game size must be >= 1, got {size}")
    available = len(item_ids) // size
    if available == 0:
        raise InputError(f"a pool of {len(item_ids)} items holds no mini-game of size {size}")
    if count is not None and count > available:
        raise InputError(f"asked for {count} mini-games of size {size}; a pool of {len(item_ids)} items holds {available}")
    order = np.random.default_rng(seed).permutation(len(item_ids))
    games = [[item_ids[i] for i in order[k * size:(k + 1) * size]] for k in range(count or available)]
    return MiniGames(size, seed, pool_fingerprint(item_ids), games)
