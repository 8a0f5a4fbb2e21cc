"""CLEVR-POC items in the game: the visible objects move, clingo referees.

The adversary moves the visible objects. A move must keep the complete scene (the
visible objects where they now are, the hidden object where it was) inside the
item's environment, and must leave the set answer, recomputed by brave reasoning
over the moved partial scene, unchanged. The items themselves are read in
`clevr_game.asp.items`.
"""

from __future__ import annotations

from typing import Any

from clevr_game.asp import Environment, brave_answers

# Reading the items is the world's; re-exported for the callers that import it from here.
from clevr_game.asp.items import canonical_set
from clevr_game.asp.items import check_game_items as check_game_items
from clevr_game.asp.items import poc_items as poc_items
from clevr_game.errors import InputError
from clevr_game.items import Item
from clevr_game.scene import Scene


class PocRules:
    """The ASP referee of CLEVR-POC items: environments grounded once, cached by file."""

    def __init__(self) -> None:
        self._environments: dict[str, Environment] = {}

    def environment(self, item: Item) -> Environment:
        path = item.extra["environment_file"]
        if path not in self._environments:
            self._environments[path] = Environment.load(path)
        return self._environments[path]

    def complete_scene(self, item: Item, visible: Scene) -> Scene:
        objects = list(visible.objects)
        objects.insert(min(item.extra["hidden_index"], len(objects)), item.extra["hidden_object"])
        return Scene(objects, visible.directions, visible.vocabulary)

    def check(self, item: Item, visible: Scene) -> Any:
        return self.environment(item).check(self.complete_scene(item, visible))

    def true_answer(self, item: Item, visible: Scene) -> str:
        try:
            values = brave_answers(self.environment(item), visible, item.extra["asp"], scene_name=item.item_id)
        except InputError:  # no completion of the moved scene satisfies the environment
            return ""
        return canonical_set(values)
