"""`blind`, the question-only floor: loads by name, is sent no scene, and answers the same whatever the scene."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch

from clevr_game.cli import main
from clevr_game.dataset import dataset_files, load_dataset
from clevr_game.generate import generate_dataset
from players import registry
from players.protocol import KNOWN_NEEDS, NEED_IMAGE, NEED_SCENE, Query
from players.state.blind import BlindPlayer

torch.set_num_threads(1)  # one thread is several times faster than two on a busy shared machine


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("blind") / "data"
    generate_dataset(folder, 8, 5, seed=303, progress=False)
    return folder


@pytest.fixture(scope="module")
def blind() -> BlindPlayer:
    player = registry.load("blind")
    assert isinstance(player, BlindPlayer)
    return player


def test_blind_is_registered_and_sent_nothing_but_the_question(blind: BlindPlayer, data: Path) -> None:
    assert "blind" in registry.available()
    assert blind.name == "blind"
    assert NEED_SCENE not in blind.needs and NEED_IMAGE not in blind.needs
    assert blind.needs <= KNOWN_NEEDS
    _, questions, scenes = load_dataset(*dataset_files(data))
    sent = Query("q", questions[0].text, scene=scenes[0], program=questions[0].program).restricted_to(blind.needs)
    assert sent.scene is None and sent.image_path is None and sent.program is None


def test_the_answers_do_not_depend_on_the_scene(blind: BlindPlayer, data: Path) -> None:
    _, questions, scenes = load_dataset(*dataset_files(data))
    others = scenes[len(scenes) // 2 :] + scenes[: len(scenes) // 2]  # every question paired with another scene
    assert any(a is not b for a, b in zip(scenes, others, strict=True))
    texts = [q.text for q in questions]

    def answers(paired: list) -> list[str | None]:
        queries = [Query(f"q{i}", text, scene=scene) for i, (text, scene) in enumerate(zip(texts, paired, strict=True))]
        return [answer.text for answer in blind.answer_batch(queries)]

    own = answers(scenes)
    assert all(text is not None for text in own)
    assert own == answers(others)
    assert own == answers([dataclasses.replace(scene, objects=[]) for scene in scenes])
    assert own == answers([None] * len(texts))


def test_a_player_file_of_the_question_only_kind_loads_as_blind() -> None:
    path = Path(registry.weights_file("blind") or "")
    assert path.is_file() and path.stat().st_size < 4 << 20
    player = registry.load(f"file:{path}")
    assert isinstance(player, BlindPlayer) and not player.needs


def test_players_eval_reproduces_the_accuracy_computed_directly(
    blind: BlindPlayer, data: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, questions, scenes = load_dataset(*dataset_files(data))
    queries = [Query(f"q{i}", q.text, scene=s) for i, (q, s) in enumerate(zip(questions, scenes, strict=True))]
    right = sum(a.text == str(q.answer) for a, q in zip(blind.answer_batch(queries), questions, strict=True))
    assert main(["players", "eval", "--player", "blind", "--data", str(data), "--threads", "1", "--no-progress"]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1] == f"accuracy: {right / len(questions):.4f}"
