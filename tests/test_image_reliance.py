"""The image reliance check: every question sees another scene, and a player that reads the scene loses by it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

import players
from clevr_game.errors import InputError
from clevr_game.generate import generate_dataset
from experiments.image_reliance import main, measure, measure_player, other_scenes, shown_positions
from players.state.checkpoint import shipped_path

pytestmark = pytest.mark.usefixtures("own_render_cache")

torch.set_num_threads(1)


def test_no_question_keeps_its_own_scene_and_the_seed_fixes_the_others() -> None:
    scene_of = torch.arange(500) % 7
    moved = other_scenes(scene_of, 7, seed=3)
    assert not (moved == scene_of).any()
    assert ((moved >= 0) & (moved < 7)).all()
    assert torch.equal(moved, other_scenes(scene_of, 7, seed=3))
    assert not torch.equal(moved, other_scenes(scene_of, 7, seed=4))
    with pytest.raises(InputError, match="at least two scenes"):
        other_scenes(torch.zeros(3, dtype=torch.long), 1, seed=0)


@pytest.mark.skipif(not shipped_path("neuro-symbolic.pt").is_file(), reason="no shipped neuro-symbolic.pt")
def test_the_neuro_symbolic_player_loses_most_of_its_accuracy_on_another_scenes_image(tmp_path: Path, capsys) -> None:
    folder = tmp_path / "data"
    generate_dataset(folder, 20, 10, seed=33, progress=False)
    result = measure(str(shipped_path("neuro-symbolic.pt")), str(folder))
    assert result.questions == 200
    assert result.own_image > 0.8
    assert result.from_image > 0.25, result  # it answers from the scene it sees, not from the wording
    assert main(["--player", "neuro-symbolic", "--data", str(folder)]) == 0
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line.startswith("neuro-symbolic on ") and f"own image {result.own_image:.4f}" in line


@pytest.fixture(scope="module")
def state_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("reliance") / "data"
    generate_dataset(folder, 30, 5, seed=34, progress=False)
    return folder


def test_a_player_that_ignores_the_scene_takes_nothing_from_it(state_data: Path, capsys) -> None:
    with players.load("blind") as blind:
        result = measure_player(blind, str(state_data), seed=1)
    assert result.questions == 150
    assert 0.2 < result.own_image < 0.8
    assert result.from_image == 0.0
    assert main(["--player", "blind", "--data", str(state_data), "--seed", "1"]) == 0
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line.endswith(f"own scene {result.own_image:.4f}, another scene {result.own_image:.4f}, from the scene +0.0000")


def test_the_oracle_takes_nearly_all_its_accuracy_from_the_scene(state_data: Path) -> None:
    with players.load("oracle") as oracle:
        result = measure_player(oracle, str(state_data), seed=1)
        again = measure_player(oracle, str(state_data), seed=1)
        other_seed = measure_player(oracle, str(state_data), seed=2)
    assert result.own_image == 1.0
    assert result.from_image > 0.7, result  # another scene's answer is right only by chance
    assert again == result and other_seed.other_image != result.other_image


def test_a_question_about_a_missing_scene_is_named(state_data: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "scenes.json").write_text((state_data / "scenes.json").read_text())
    data = json.loads((state_data / "questions.json").read_text())
    data["questions"][4]["image_index"] = 999
    (broken / "questions.json").write_text(json.dumps(data))
    with pytest.raises(InputError, match="question 4: image_index 999 has no scene"):
        shown_positions(str(broken), seed=0)
