"""`poc generate --check-visibility`: every object of a partial scene shows CLEVR's 200 pixels."""

from __future__ import annotations

from clevr_game.asp.dataset import generate_poc_dataset
from clevr_game.render.renderer import CLEVR_MIN_PIXELS
from clevr_game.render.silhouettes import visible_pixels_geometric
from envs.items import load_items


def hidden_share(folder) -> float:
    items = load_items(folder)
    return sum(min(visible_pixels_geometric(item.scene)) < CLEVR_MIN_PIXELS for item in items) / len(items)


def test_checked_items_show_every_object_where_unchecked_ones_do_not(tmp_path):
    generate_poc_dataset(tmp_path / "plain", 3, 15, seed=100)
    generate_poc_dataset(tmp_path / "checked", 3, 15, seed=100, check_visibility=True)
    assert hidden_share(tmp_path / "plain") > 0  # the seed draws occluded scenes, so the check has work to do
    assert hidden_share(tmp_path / "checked") == 0
