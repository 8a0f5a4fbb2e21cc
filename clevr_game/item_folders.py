"""An item folder of either kind: CLEVR (`scenes.json` + `questions.json`) or CLEVR-POC (`items.json`).

Apart from both readers so that neither imports the other: CLEVR-POC items are built
and checked with the CLEVR item's own tools (`clevr_game.items`).
"""

from __future__ import annotations

import os
from pathlib import Path

from clevr_game.asp.items import check_game_items, poc_items
from clevr_game.errors import InputError
from clevr_game.items import Item, clevr_items


def load_items(path: str | os.PathLike[str]) -> list[Item]:
    """Items of a dataset folder: CLEVR (`scenes.json` + `questions.json`) or CLEVR-POC (`items.json`).

    InputError (one line, naming file, item and field) for a scene that breaks CLEVR's placement
    rules or a stored answer of the wrong kind: the game could not play such an item fairly.
    """
    folder = Path(path)
    if (folder / "items.json").is_file():
        items = poc_items(folder)
        check_game_items(items)
        return items
    scenes, questions = folder / "scenes.json", folder / "questions.json"
    if scenes.is_file() and questions.is_file():
        return clevr_items(scenes, questions)
    raise InputError(
        f"{folder}: not an item folder (expected scenes.json + questions.json, or a CLEVR-POC items.json)"
    )
