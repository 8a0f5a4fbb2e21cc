"""What the envs play on when given nothing, and how their `items` / `player` arguments are read.

With no arguments, `gymnasium.make("clevr_game/Adversarial-v0")` plays the shipped
sample (`clevr_game/data/sample`: 20 generated scenes, 60 questions; its README
has the command that made it) against the shipped state transformer.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path
from typing import TypeAlias

from clevr_game.errors import InputError
from envs.items import ItemPool, ItemsLike, item_pool
from players.protocol import Player, shown
from players.registry import check_spec, load

DEFAULT_ITEMS = Path(str(files("clevr_game") / "data" / "sample"))
"""A CLEVR-format folder the package ships, so the envs run on a fresh install."""

DEFAULT_PLAYER = "state-transformer"
"""The shipped player that is strongest on state input; it loads in about two seconds."""

PlayerLike: TypeAlias = "Player | str"
"""What an env accepts as `player`: a Player, or a spec for `players.registry.load`."""


def default_items(items: ItemsLike | None) -> ItemPool:
    """`items` as a pool, the shipped sample when None; InputError names `items=` and the value."""
    return item_pool(DEFAULT_ITEMS if items is None else items, "items")


def default_player(player: PlayerLike | None) -> tuple[Player, bool]:
    """`player` as a Player, the shipped default when None, and whether the caller made it (and closes it).

    A string is a player spec: a registered name (`oracle`, `state-transformer`, ...),
    `subprocess:<command line>`, `file:PATH` or an http(s) URL.
    """
    if isinstance(player, Player):
        return player, False
    if player is None:
        player = DEFAULT_PLAYER
    if not isinstance(player, str):
        raise InputError(f"player={shown(player)}: expected a Player or a player spec string "
                         f"(e.g. 'oracle', 'state-transformer', 'subprocess:CMD', an http URL), "
                         f"got {type(player).__name__}")
    try:
        check_spec(player)
        return load(player), True
    except InputError as exc:
        raise InputError(f"player={shown(player)}: {exc}") from None
