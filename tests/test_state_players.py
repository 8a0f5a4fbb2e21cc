"""State-input players: shapes, batching, a tiny run that learns, resume, shipped weights, bad input."""

from __future__ import annotations

import copy
import dataclasses
import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch

import players
from clevr_game.cli import main
from clevr_game.dataset import dataset_files, load_dataset
from clevr_game.errors import InputError
from clevr_game.generate import generate_dataset
from clevr_game.scene import SceneObject
from clevr_game.text import UNKNOWN, default_word_vocabulary
from clevr_game.vocab import CLEVR, CLEVR_POC
from players.loop import learning_rate_factor
from players.protocol import Query
from players.state.checkpoint import (
    load_player_file,
    player_file_from,
    save_player_file,
    shipped_path,
)
from players.state.data import tensorise
from players.state.evaluation import evaluate_player
from players.state.features import ANSWERS, ATTRIBUTE_TABLE_SIZES, MAX_OBJECTS, scene_arrays
from players.state.models import RelationNetworkConfig, StateBatch, build_model, config_dict
from players.state.player import StateRelationNetworkPlayer, StateTransformerPlayer
from players.state.training import TrainingOptions, train

torch.set_num_threads(1)  # one thread is several times faster than two on a busy 2-core machine

TINY_TRANSFORMER = {"width": 48, "layers": 2, "heads": 4, "feedforward": 96, "fourier_bands": 4}
LEARNING_TRANSFORMER = {"width": 32, "layers": 2, "heads": 4, "feedforward": 64, "fourier_bands": 4}
TINY_RN = {"width": 32, "word_width": 16, "question_width": 32, "g_layers": 2, "f_width": 32, "fourier_bands": 2}
MODEL_CARD_TOLERANCE = 0.06
"""About 3 standard errors of an accuracy near 0.9 measured on 300 questions."""


@pytest.fixture(scope="module")
def small_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("state") / "train"
    generate_dataset(folder, 300, 8, seed=101, progress=False)
    return folder


@pytest.fixture(scope="module")
def heldout_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("state") / "heldout"
    generate_dataset(folder, 60, 5, seed=202, progress=False)
    return folder


@pytest.fixture(scope="module")
def items(heldout_data: Path) -> list[tuple[str, object]]:
    _, questions, scenes = load_dataset(*dataset_files(heldout_data))
    return [(q.text, s) for q, s in zip(questions, scenes, strict=True)]


def _random_player_file(tmp_path: Path, kind: str, config: dict) -> Path:
    torch.manual_seed(0)
    vocabulary = default_word_vocabulary()
    model = build_model(kind, config, len(vocabulary), len(ANSWERS))
    path = tmp_path / f"{kind}.pt"
    save_player_file(path, player_file_from(model, kind, vocabulary, list(ANSWERS), {"note": "untrained"}))
    return path


def _queries(items: list, count: int) -> list[Query]:
    return [Query(f"q{i}", text, scene=scene) for i, (text, scene) in enumerate(items[:count])]


# ---------------------------------------------------------------- shapes and batching


@pytest.mark.parametrize("kind, config", [("transformer", TINY_TRANSFORMER), ("relation-network", TINY_RN)])
def test_models_give_one_logit_row_per_question(kind: str, config: dict, items: list) -> None:
    vocabulary = default_word_vocabulary()
    model = build_model(kind, config, len(vocabulary), len(ANSWERS)).eval()
    scenes = [scene for _, scene in items[:5]]
    arrays = scene_arrays(scenes)
    assert arrays.positions.shape == (5, MAX_OBJECTS, 2)
    assert arrays.present.sum(axis=1).tolist() == [len(s) for s in scenes]
    for length in (1, 7, 30):
        words = torch.randint(2, len(vocabulary), (5, length))
        batch = StateBatch(torch.from_numpy(arrays.positions), torch.from_numpy(arrays.attributes),
                           torch.from_numpy(arrays.present), words)
        logits = model(batch)
        assert logits.shape == (5, len(ANSWERS))
        assert torch.isfinite(logits).all()


@pytest.mark.parametrize("player_class, kind, config", [
    (StateTransformerPlayer, "transformer", TINY_TRANSFORMER),
    (StateRelationNetworkPlayer, "relation-network", TINY_RN),
])
def test_a_batch_answers_like_one_query_at_a_time(tmp_path: Path, items: list, player_class: type,
                                                   kind: str, config: dict) -> None:
    player = player_class(_random_player_file(tmp_path, kind, config), batch_size=7)
    queries = _queries(items, 40)
    together = player.answer_batch(queries)
    alone = [player.answer(q) for q in queries]
    assert [a.item_id for a in together] == [q.item_id for q in queries]
    assert all(a.ok for a in together)
    assert [a.text for a in together] == [a.text for a in alone]
    arrays = scene_arrays([q.scene for q in queries[:3]])
    words = np.stack([player.vocabulary.encode(q.question, 48) for q in queries[:3]])
    batched = player._logits(arrays.positions, arrays.attributes, arrays.present, words)
    single = player._logits(arrays.positions[:1], arrays.attributes[:1], arrays.present[:1], words[:1])
    np.testing.assert_allclose(batched[0], single[0], atol=1e-4)


def test_positions_change_the_answer_scores(tmp_path: Path, items: list) -> None:
    player = StateTransformerPlayer(_random_player_file(tmp_path, "transformer", TINY_TRANSFORMER))
    scene = items[0][1]
    arrays = scene_arrays([scene, scene.with_coords(scene.coords()[::-1].copy())])
    words = np.stack([player.vocabulary.encode("Is the cube left of the sphere?", 48)] * 2)
    logits = player._logits(arrays.positions, arrays.attributes, arrays.present, words)
    assert not np.allclose(logits[0], logits[1], atol=1e-5)


# ---------------------------------------------------------------- bad and unusual input


def test_unknown_words_become_the_unknown_token_and_still_answer(tmp_path: Path, items: list) -> None:
    player = StateTransformerPlayer(_random_player_file(tmp_path, "transformer", TINY_TRANSFORMER))
    text = "Is the florble zorp the same colour as the cube?"
    ids = player.vocabulary.encode(text, 48).tolist()
    assert ids[2] == player.vocabulary.ids[UNKNOWN] == 1
    answer = player.answer(Query("u", text, scene=items[0][1]))
    assert answer.ok and answer.text in CLEVR.answer_values


def test_clevr_poc_values_answer_and_too_many_objects_is_an_error_answer(tmp_path: Path, items: list) -> None:
    player = StateRelationNetworkPlayer(_random_player_file(tmp_path, "relation-network", TINY_RN))
    scene = copy.deepcopy(items[0][1])
    scene.objects[0].shape, scene.objects[0].size = "cone", "medium"
    poc = dataclasses.replace(scene, vocabulary=CLEVR_POC)
    crowded = copy.deepcopy(items[0][1])
    crowded.objects = [
        SceneObject("small", "red", "metal", "cube", (float(i) * 0.5 - 2.5, 0.0, 0.35)) for i in range(11)
    ]
    answers = player.answer_batch([
        Query("poc", "What shape is the medium thing?", scene=poc),
        Query("crowded", "How many cubes are there?", scene=crowded),
        Query("blind", "How many cubes are there?"),
        Query("plain", items[1][0], scene=items[1][1]),
    ])
    assert answers[0].ok and answers[0].text in CLEVR_POC.answer_values
    assert not answers[1].ok and "11 objects" in answers[1].error and "\n" not in answers[1].error
    assert not answers[2].ok and "no scene" in answers[2].error
    assert answers[3].ok and answers[3].text in CLEVR.answer_values  # never `cone` on a CLEVR scene


def test_a_file_that_is_not_a_player_file_is_one_line_input_error(tmp_path: Path) -> None:
    foreign = tmp_path / "foreign.pt"
    torch.save({"weights": torch.zeros(2)}, foreign)
    with pytest.raises(InputError, match="foreign.pt: not a state player file"):
        load_player_file(foreign)
    with pytest.raises(InputError, match="missing.pt: no such player file"):
        StateTransformerPlayer(tmp_path / "missing.pt")
    rn_file = _random_player_file(tmp_path, "relation-network", TINY_RN)
    with pytest.raises(InputError, match="not a 'transformer' one"):
        StateTransformerPlayer(rn_file)


def test_train_command_rejects_a_bad_config_in_one_line(small_data: Path, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["players", "train", "--player", "state-rn", "--data", str(small_data),
                 "--out", str(tmp_path / "x.pt"), "--config", '{"depth": 3}', "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "--config" in err


# ---------------------------------------------------------------- training


def test_learning_rate_warms_up_stays_flat_then_decays() -> None:
    factors = [learning_rate_factor(s, 10, 100, 20) for s in range(100)]
    assert factors[0] == pytest.approx(0.1) and factors[9] == 1.0
    assert factors[50] == 1.0 and factors[79] == 1.0
    assert factors[80] < 1.0 and factors[99] == pytest.approx(0.02)
    assert all(a >= b for a, b in zip(factors[80:], factors[81:], strict=False))


def test_a_tiny_training_run_learns_well_above_the_majority_answer(small_data: Path, heldout_data: Path,
                                                                    tmp_path: Path) -> None:
    out = tmp_path / "tiny.pt"
    options = TrainingOptions(
        player="state-transformer", data=str(small_data), out=str(out), eval_data=str(heldout_data),
        steps=200, batch_size=64, learning_rate=3e-3, warmup_steps=20, eval_every=100,
        model_config=LEARNING_TRANSFORMER, log_dir=str(tmp_path / "logs"), progress=False, seed=3,
    )
    result = train(options)
    _, questions, _ = load_dataset(*dataset_files(heldout_data))
    majority = Counter(q.answer for q in questions).most_common(1)[0][1] / len(questions)
    assert [point["step"] for point in result.curve] == [100, 200]
    assert result.curve[-1]["accuracy"] > majority + 0.12
    assert result.final_loss < 0.6 * math.log(len(ANSWERS))  # uniform guessing scores log(classes)
    assert any((tmp_path / "logs").iterdir())  # TensorBoard events written
    # The written player file answers through the protocol with the accuracy measured in training.
    player = players.load("state-transformer", path=out)
    measured = evaluate_player(player, heldout_data).accuracy
    assert measured == pytest.approx(load_player_file(out).info["heldout"]["accuracy"], abs=1e-3)


def test_an_interrupted_run_resumes_to_the_same_weights(small_data: Path, tmp_path: Path) -> None:
    def options(out: Path, **overrides: object) -> TrainingOptions:
        base = TrainingOptions(
            player="state-rn", data=str(small_data), out=str(out), steps=12, batch_size=32,
            warmup_steps=4, decay_steps=4, model_config=TINY_RN, log_dir="", progress=False, seed=5,
        )
        return dataclasses.replace(base, **overrides)

    train(options(tmp_path / "straight.pt"))
    stopped = train(options(tmp_path / "resumed.pt", max_minutes=0.0))
    assert stopped.step == 1
    resumed = train(options(tmp_path / "resumed.pt", resume=True))
    assert resumed.step == 12
    straight_weights = load_player_file(tmp_path / "straight.pt").state_dict
    resumed_weights = load_player_file(tmp_path / "resumed.pt").state_dict
    assert straight_weights.keys() == resumed_weights.keys()
    for name, tensor in straight_weights.items():
        torch.testing.assert_close(resumed_weights[name], tensor, rtol=0, atol=0, msg=name)
    with pytest.raises(InputError, match="seed"):
        train(options(tmp_path / "resumed.pt", resume=True, seed=6))


def test_tensorise_rejects_an_answer_outside_the_vocabulary(small_data: Path, tmp_path: Path) -> None:
    import json

    scenes_path, questions_path = dataset_files(small_data)
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "scenes.json").write_text(scenes_path.read_text())
    data = json.loads(questions_path.read_text())
    data["questions"][3]["answer"] = "banana"
    (broken / "questions.json").write_text(json.dumps(data))
    with pytest.raises(InputError, match="question 3: answer 'banana'"):
        tensorise(broken, default_word_vocabulary(), list(ANSWERS))


# ---------------------------------------------------------------- commands and shipped weights


def test_eval_command_prints_families_then_accuracy(heldout_data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["players", "eval", "--player", "oracle", "--data", str(heldout_data), "--no-progress"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[-1] == "accuracy: 1.0000"
    assert any(line.startswith("one_hop: 1.0000") for line in lines)


@pytest.mark.parametrize("name, file_name", [("state-transformer", "state-transformer.pt"), ("state-rn", "state-rn.pt")])
def test_shipped_weights_reach_their_model_card_accuracy(name: str, file_name: str, tmp_path: Path) -> None:
    assert shipped_path(file_name).stat().st_size < 10_000_000
    card = load_player_file(shipped_path(file_name)).info["heldout"]
    fresh = tmp_path / "fresh"
    generate_dataset(fresh, 60, 5, seed=90_001, progress=False)
    with players.load(name) as player:
        result = evaluate_player(player, fresh)
    assert result.errors == 0
    assert abs(result.accuracy - card["accuracy"]) < MODEL_CARD_TOLERANCE, (result.accuracy, card["accuracy"])


# ---------------------------------------------------------------- relation network g options

G_OPTIONS = [{"g_activation": "leaky_relu"}, {"g_norm": "layer"}, {"g_activation": "leaky_relu", "g_norm": "layer"}]
DEFAULT_RN_REFERENCE = [-0.358639, -0.336319, -0.354686, -1.277323, -2.087335, -0.785635, -1.96026, -2.496825, -0.905255]
"""First three logits of each of three questions from TINY_RN at seed 0 on `_fixed_state_batch`, computed with the
relation network as it was before g had options (commit 78bc098), so the shipped state-rn.pt still answers the same."""


def _fixed_state_batch(vocabulary_size: int) -> StateBatch:
    generator = torch.Generator().manual_seed(1)
    positions = torch.rand(3, MAX_OBJECTS, 2, generator=generator) * 2 - 1
    attributes = torch.stack([torch.randint(0, n, (3, MAX_OBJECTS), generator=generator)
                              for n in ATTRIBUTE_TABLE_SIZES], dim=-1)
    present = torch.arange(MAX_OBJECTS) < torch.tensor([3, 7, 10])[:, None]
    words = torch.randint(2, vocabulary_size, (3, 9), generator=generator)
    words[0, 5:] = 0  # one padded question, so the last-real-word read is covered
    return StateBatch(positions, attributes, present, words)


def test_the_default_relation_network_answers_as_before_g_had_options() -> None:
    outputs = []
    for config in (TINY_RN, {**TINY_RN, "g_activation": "relu", "g_norm": "none"}):
        torch.manual_seed(0)
        model = build_model("relation-network", config, 40, len(ANSWERS)).eval()
        with torch.no_grad():
            outputs.append(model(_fixed_state_batch(40)))
        # The default g keeps its module indices, so older state dicts load; the file stores no new keys.
        assert sorted(k for k in model.state_dict() if k.startswith("g_rest.")) == ["g_rest.1.bias", "g_rest.1.weight"]
        assert config_dict(model).keys() == dataclasses.asdict(RelationNetworkConfig()).keys() - {"g_activation", "g_norm"}
    torch.testing.assert_close(outputs[0][:, :3].flatten(), torch.tensor(DEFAULT_RN_REFERENCE), rtol=0, atol=1e-5)
    torch.testing.assert_close(outputs[1], outputs[0], rtol=0, atol=0)


def test_train_command_rejects_an_unknown_g_option_in_one_line(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["players", "train", "--player", "state-rn", "--data", str(tmp_path), "--out", str(tmp_path / "x.pt"),
                 "--config", '{"g_norm": "batch"}', "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "g_norm 'batch'" in err


@pytest.mark.parametrize("options", G_OPTIONS, ids=lambda o: "+".join(o.values()))
def test_a_relation_network_with_g_options_trains_and_its_file_round_trips(options: dict, heldout_data: Path,
                                                                           items: list, tmp_path: Path) -> None:
    out = tmp_path / "rn.pt"
    config = {**TINY_RN, **options}
    result = train(TrainingOptions(
        player="state-rn", data=str(heldout_data), out=str(out), steps=5, batch_size=16, warmup_steps=2,
        model_config=config, log_dir="", progress=False, seed=0,
    ))
    assert result.step == 5 and math.isfinite(result.final_loss)
    player_file = load_player_file(out)
    assert {k: player_file.config[k] for k in options} == options
    model = player_file.build()
    if "g_norm" in options:
        assert any(isinstance(m, torch.nn.LayerNorm) for m in model.g_rest)
    again = tmp_path / "again.pt"
    save_player_file(again, player_file_from(model, "relation-network", player_file.vocabulary(),
                                             player_file.answers, player_file.info))
    reloaded = load_player_file(again)
    assert reloaded.config == player_file.config
    batch = _fixed_state_batch(len(player_file.words))
    with torch.no_grad():
        torch.testing.assert_close(reloaded.build()(batch), model(batch), rtol=0, atol=0)
    with players.load("state-rn", path=out) as player:
        assert player.answer(_queries(items, 1)[0]).ok
