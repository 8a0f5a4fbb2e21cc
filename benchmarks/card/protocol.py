"""The frozen protocols a robustness card is measured on: their items, mini-games and budgets.

A protocol is a folder shipped in `clevr_game/data/protocols/NAME/` (made once by
`benchmarks.card.make_protocol`): the items (`scenes.json` + `questions.json`, an item
folder `clevr_game.item_folders.load_items` reads), one mini-game manifest per size
(`minigames/size_N.json`, `envs.minigames.MiniGames`) and `protocol.json` (the budgets
and the sha256 of every other file). Loading checks every file against its sha256, so
two cards of one protocol were measured on the very same items; a changed protocol is a
new name.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clevr_game.datafiles import DATA_DIR
from clevr_game.errors import InputError, shown
from clevr_game.scene import read_json
from envs.minigames import MiniGames

PROTOCOLS: tuple[str, ...] = ("clevr-robust-v1",)
DEFAULT_PROTOCOL = "clevr-robust-v1"
PROTOCOLS_DIR = DATA_DIR / "protocols"
PROTOCOL_FILE = "protocol.json"

_FROZEN_SHA256 = {
    "clevr-robust-v1": "554d6975e42a69024360afc2a95f0650e16951572a3ef26c810f9caf4724a3f3",
}
"""sha256 of each shipped protocol.json: its own hashes guard the other files, this guards it (and the budgets)."""


@dataclass(frozen=True)
class SizeDesign:
    """How many mini-games of one size a budget plays, and with how many seeds each."""

    size: int
    minigames: int
    seeds: int


@dataclass(frozen=True)
class Budget:
    """What a card of this budget runs: the mini-games per size and each trial's effort."""

    name: str
    sizes: tuple[SizeDesign, ...]
    steps_per_item: int
    eval_samples: int
    search_budget: int
    pixel_adversary: bool
    """Image players also face the pixel-input adversary."""

    def steps(self, size: int) -> int:
        """Training steps of a trial at `size`: the same per item at every size, so sizes compare."""
        return self.steps_per_item * size


@dataclass(frozen=True)
class Protocol:
    name: str
    folder: Path
    made_by: str
    budgets: dict[str, Budget]

    @property
    def items_folder(self) -> Path:
        """The folder holding `scenes.json` + `questions.json` (for `clevr_game.item_folders.load_items`)."""
        return self.folder

    def manifest(self, size: int) -> Path:
        """The mini-game manifest of `size` (for `envs.minigames.MiniGames.load`)."""
        path = self.folder / "minigames" / f"size_{size}.json"
        if not path.is_file():
            raise InputError(f"protocol {self.name} has no mini-games of size {size} ({path} is missing)")
        return path

    def item_ids(self, budget: str) -> list[str]:
        """Ids of the items `budget` plays: the first mini-games of each size, in manifest order."""
        if budget not in self.budgets:
            raise InputError(f"protocol {self.name} has no budget {shown(budget)} "
                             f"(budgets: {', '.join(self.budgets)})")
        ids = []
        for design in self.budgets[budget].sizes:
            for game in MiniGames.load(self.manifest(design.size)).games[:design.minigames]:
                ids += game
        return ids


def load_protocol(name: str = DEFAULT_PROTOCOL) -> Protocol:
    """The shipped protocol `name`, every file checked against its sha256 (InputError naming the file)."""
    if name not in PROTOCOLS:
        raise InputError(f"unknown protocol {shown(name)} (known: {', '.join(PROTOCOLS)})")
    folder = PROTOCOLS_DIR / name
    _check_sha256(folder / PROTOCOL_FILE, _FROZEN_SHA256[name])
    protocol = load_protocol_folder(folder)
    if protocol.name != name:
        raise InputError(f"{folder / PROTOCOL_FILE}: names protocol {shown(protocol.name)}, expected {name}")
    return protocol


def load_protocol_folder(folder: str | os.PathLike[str]) -> Protocol:
    """A protocol folder (shipped or a copy): its files checked against protocol.json's sha256."""
    folder = Path(folder)
    path = folder / PROTOCOL_FILE
    data = read_json(path)
    try:
        name, made_by, hashes = str(data["name"]), str(data["made_by"]), dict(data["sha256"])
        budgets = {key: _budget(key, value) for key, value in dict(data["budgets"]).items()}
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise InputError(f"{path}: not a protocol file ({type(exc).__name__}: {exc})") from None
    for required in ("scenes.json", "questions.json"):
        if required not in hashes:
            raise InputError(f"{path}: no sha256 for {required}")
    for relative, digest in sorted(hashes.items()):
        if Path(relative).is_absolute() or ".." in Path(relative).parts:
            raise InputError(f"{path}: {shown(relative)} is not a file inside the protocol folder")
        _check_sha256(folder / relative, str(digest))
    protocol = Protocol(name, folder, made_by, budgets)
    for budget in budgets.values():
        for design in budget.sizes:
            if f"minigames/size_{design.size}.json" not in hashes:
                raise InputError(f"{path}: budget {budget.name} plays size {design.size}, "
                                 f"whose manifest has no sha256")
            held = len(MiniGames.load(protocol.manifest(design.size)))
            if design.minigames > held:
                raise InputError(f"{path}: budget {budget.name} plays {design.minigames} mini-games of size "
                                 f"{design.size}, the manifest holds {held}")
    return protocol


def _budget(name: str, data: Any) -> Budget:
    sizes = tuple(SizeDesign(int(s["size"]), int(s["minigames"]), int(s["seeds"])) for s in data["sizes"])
    if not sizes or any(min(s.size, s.minigames, s.seeds) < 1 for s in sizes):
        raise ValueError(f"budget {name}: every size, mini-game count and seed count must be >= 1")
    if not isinstance(data["pixel_adversary"], bool):
        raise ValueError(f"budget {name}: pixel_adversary must be true or false")
    return Budget(name, sizes, int(data["steps_per_item"]), int(data["eval_samples"]),
                  int(data["search_budget"]), data["pixel_adversary"])


def _check_sha256(path: Path, expected: str) -> None:
    if not path.is_file():
        raise InputError(f"{path}: missing (the protocol is frozen: every file it lists must be there)")
    if hashlib.sha256(path.read_bytes()).hexdigest() != expected:
        raise InputError(f"{path}: sha256 differs from the one recorded (the protocol is frozen: "
                         f"this file was changed)")
