"""The image reliance check: every question sees another scene, and a player that reads the scene loses by it."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from clevr_game.errors import InputError
from clevr_game.generate import generate_dataset
from experiments.image_reliance import main, measure, other_scenes
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
