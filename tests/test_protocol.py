"""The frozen protocol clevr-robust-v1: its items load, its mini-games are disjoint, its files are guarded."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from benchmarks.card.make_protocol import make_protocol
from benchmarks.card.protocol import (
    DEFAULT_PROTOCOL,
    PROTOCOLS,
    Protocol,
    load_protocol,
    load_protocol_folder,
)
from clevr_game.dataset import load_dataset
from clevr_game.errors import InputError
from clevr_game.item_folders import load_items
from clevr_game.layout import judge_scenes
from clevr_game.programs import reference_execute
from envs.minigames import MiniGames, pool_fingerprint


@pytest.fixture(scope="module")
def protocol() -> Protocol:
    return load_protocol()


@pytest.fixture(scope="module")
def items(protocol: Protocol) -> list:
    return load_items(protocol.items_folder)


def test_the_protocol_loads_with_its_budgets(protocol: Protocol) -> None:
    assert PROTOCOLS == (DEFAULT_PROTOCOL,) == (protocol.name,)
    assert protocol.made_by == "python -m benchmarks.card.make_protocol --out clevr_game/data/protocols/clevr-robust-v1"
    quick, standard = protocol.budgets["quick"], protocol.budgets["standard"]
    assert [(s.size, s.minigames, s.seeds) for s in quick.sizes] == [(10, 4, 1), (100, 2, 1)]
    assert [(s.size, s.minigames, s.seeds) for s in standard.sizes] == [(10, 10, 2), (100, 5, 2)]
    assert (quick.search_budget, quick.pixel_adversary, standard.search_budget, standard.pixel_adversary) == (
        20, False, 50, True)
    for budget in (quick, standard):
        assert (budget.steps_per_item, budget.eval_samples) == (500, 16)
    assert quick.steps(10) == 5_000 and quick.steps(100) == 50_000


def test_items_scenes_and_budget_ids(protocol: Protocol, items: list) -> None:
    assert len(items) == 600
    assert len({item.scene.image_index for item in items}) == 350
    ids = [item.item_id for item in items]
    assert len(set(ids)) == 600
    quick, standard = protocol.item_ids("quick"), protocol.item_ids("standard")
    assert len(quick) == 4 * 10 + 2 * 100 and len(standard) == 600
    assert set(standard) == set(ids) and set(quick) <= set(ids)
    manifests = {size: MiniGames.load(protocol.manifest(size)) for size in (10, 100)}
    assert quick == [i for game in manifests[10].games[:4] for i in game] + [
        i for game in manifests[100].games[:2] for i in game]
    with pytest.raises(InputError, match="budgets: smoke, quick, standard"):
        protocol.item_ids("huge")


def test_minigames_share_no_item_and_no_scene(protocol: Protocol, items: list) -> None:
    scene_of = {item.item_id: item.scene.image_index for item in items}
    fingerprint = pool_fingerprint([item.item_id for item in items])
    games = []
    for size, count in ((10, 10), (100, 5)):
        manifest = MiniGames.load(protocol.manifest(size))
        assert (manifest.size, len(manifest), manifest.fingerprint) == (size, count, fingerprint)
        assert all(len(game) == size for game in manifest.games)
        games += manifest.games
    all_items = [i for game in games for i in game]
    assert len(all_items) == len(set(all_items)) == 600
    scenes = [{scene_of[i] for i in game} for game in games]
    assert sum(len(s) for s in scenes) == len(set().union(*scenes)) == 350
    assert [len(s) for s in scenes] == [10] * 10 + [50] * 5


def test_every_scene_keeps_clevrs_rules(items: list) -> None:
    scenes = list({item.scene.image_index: item.scene for item in items}.values())
    assert judge_scenes(scenes) == [None] * len(scenes)


def test_every_answer_is_the_reference_executors(protocol: Protocol) -> None:
    folder = protocol.items_folder
    raw = {s["image_index"]: s for s in json.loads((folder / "scenes.json").read_text())["scenes"]}
    _, questions, _ = load_dataset(folder / "scenes.json", folder / "questions.json")
    assert len(questions) == 600
    for question in questions:
        assert reference_execute(question.program, raw[question.image_index]) == question.answer, question.index
        assert question.raw["template_filename"].endswith(".json")


def test_an_altered_file_is_refused_naming_it(protocol: Protocol, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(protocol.folder, copy)
    assert load_protocol_folder(copy).item_ids("standard") == protocol.item_ids("standard")
    questions = copy / "questions.json"
    data = bytearray(questions.read_bytes())
    data[-3] = ord("x") if data[-3] != ord("x") else ord("y")
    questions.write_bytes(bytes(data))
    with pytest.raises(InputError) as error:
        load_protocol_folder(copy)
    message = str(error.value)
    assert "\n" not in message and "questions.json" in message and "sha256" in message


def test_a_missing_file_is_refused_naming_it(protocol: Protocol, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(protocol.folder, copy)
    (copy / "minigames" / "size_100.json").unlink()
    with pytest.raises(InputError, match="size_100.json: missing"):
        load_protocol_folder(copy)


def test_an_unknown_name_is_one_line_naming_the_known_ones() -> None:
    with pytest.raises(InputError) as error:
        load_protocol("clevr-robust-v0")
    message = str(error.value)
    assert "\n" not in message and "clevr-robust-v0" in message and "known: clevr-robust-v1" in message


def test_remaking_the_folder_gives_the_same_bytes(protocol: Protocol, tmp_path: Path) -> None:
    make_protocol(tmp_path)
    shipped = sorted(p.relative_to(protocol.folder) for p in protocol.folder.rglob("*") if p.is_file())
    made = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    assert made == shipped
    for relative in shipped:
        assert (tmp_path / relative).read_bytes() == (protocol.folder / relative).read_bytes(), relative


def test_a_changed_budget_in_the_shipped_protocol_is_refused(protocol: Protocol, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    copy = tmp_path / DEFAULT_PROTOCOL
    shutil.copytree(protocol.folder, copy)
    path = copy / "protocol.json"
    path.write_text(path.read_text().replace('"search_budget": 50', '"search_budget": 5'))
    assert load_protocol_folder(copy).budgets["standard"].search_budget == 5
    monkeypatch.setattr("benchmarks.card.protocol.PROTOCOLS_DIR", tmp_path)
    with pytest.raises(InputError, match="protocol.json: sha256 differs"):
        load_protocol()
