"""The object-transformer pixel player: its slots are the neuro-symbolic perception's objects, a small run
learns on real renders, it loads by name and answers through the protocol; pixel players read each image
of a batch once.

Images are real Blender renders (fast preset) at 128 x 96, the size the shipped neuro-symbolic perception
was trained at, into a temporary render cache.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import players
from clevr_game.cli import main
from clevr_game.dataset import dataset_files, load_dataset
from clevr_game.errors import InputError
from clevr_game.generate import generate_dataset
from clevr_game.text import default_word_vocabulary
from clevr_game.vocab import CLEVR
from players.pixel.checkpoint import (
    build_model,
    load_player_file,
    player_file_from,
    save_player_file,
)
from players.pixel.images import ImageSpec, dataset_images, ensure_images
from players.pixel.object_player import ObjectTransformerPlayer
from players.pixel.object_training import (
    perception_source,
    reasoning_source,
    start_config,
    start_weights,
)
from players.pixel.object_transformer import ObjectTransformerNetwork
from players.pixel.perception import ATTRIBUTE_SIZES, decode_maps
from players.pixel.player import FiLMPlayer, PixelRelationNetworkPlayer
from players.protocol import Query
from players.state.checkpoint import shipped_path
from players.state.features import ANSWERS, scene_arrays
from players.state.models import StateBatch
from players.state.player import StateTransformerPlayer

pytestmark = pytest.mark.usefixtures("own_render_cache")

torch.set_num_threads(1)

SPEC = ImageSpec("fast", 128, 96)
TINY = {"width": 48, "layers": 2, "heads": 4, "feedforward": 96}
TINY_FILM = {"stem_channels": 8, "stem_layers": 2, "width": 16, "blocks": 1, "word_width": 8,
             "question_width": 16, "classifier_width": 16}
TINY_RN = {"channels": 8, "conv_layers": 3, "word_width": 8, "question_width": 16, "g_width": 16,
           "g_layers": 2, "f_width": 16}


@pytest.fixture(scope="module")
def train_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("object-transformer") / "train"
    generate_dataset(folder, 48, 8, seed=41, progress=False)
    ensure_images(folder, SPEC)
    return folder


@pytest.fixture(scope="module")
def heldout_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("object-transformer") / "heldout"
    generate_dataset(folder, 20, 8, seed=42, progress=False)
    ensure_images(folder, SPEC)
    return folder


@pytest.fixture(scope="module")
def trained(train_data: Path, heldout_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("trained") / "ot.pt"
    code = main(["players", "train", "--player", "object-transformer", "--data", str(train_data),
                 "--eval-data", str(heldout_data), "--out", str(out), "--steps", "300", "--batch-size", "32",
                 "--learning-rate", "2e-3", "--warmup-steps", "30", "--eval-every", "1000",
                 "--config", '{"width": 48, "layers": 2, "heads": 4, "feedforward": 96}', "--log-dir", "",
                 "--no-progress"])
    assert code == 0
    return out


def _network(initial_file: Path | None = None) -> tuple[ObjectTransformerNetwork, list[str]]:
    """A fresh network on the shipped perception (and the reasoning of `initial_file` when given)."""
    perception_config, perception_weights = perception_source(None)
    initial = reasoning_source(initial_file) if initial_file else None
    vocabulary = initial.vocabulary() if initial else default_word_vocabulary()
    config = start_config({} if initial else TINY, perception_config, initial)
    model = build_model("object-transformer", config, len(vocabulary), len(ANSWERS))
    assert isinstance(model, ObjectTransformerNetwork)
    start_weights(model, perception_weights, initial, len(vocabulary))
    return model.eval(), list(vocabulary.words)


def _queries(folder: Path, count: int) -> list[Query]:
    scenes, paths = ensure_images(folder, SPEC)
    _, questions, _ = load_dataset(*dataset_files(folder))
    path_of = {s.image_index: str(p) for s, p in zip(scenes, paths, strict=True)}
    return [Query(f"q{i}", q.text, image_path=path_of[q.image_index], vocabulary=CLEVR)
            for i, q in enumerate(questions[:count])]


# ---------------------------------------------------------------- slots and the state transformer


def test_slots_are_the_objects_the_neuro_symbolic_perception_decodes(heldout_data: Path) -> None:
    model, _ = _network()
    _, stack = dataset_images(heldout_data, SPEC)
    images = torch.from_numpy(stack[:10])
    with torch.no_grad():
        slots = model.detect(images)
        perceived = decode_maps(model.perception(images), model.config.perception.threshold, SPEC.width, SPEC.height)
    for row, seen in enumerate(perceived):
        present = slots.scores[row] > model.config.perception.threshold
        count = len(seen.scores)
        assert 3 <= count <= 10 and bool(present[:count].all()) and not bool(present[count:].any())
        arrays = scene_arrays([seen.to_scene()])  # the state players' frame: (right, behind) / 3
        np.testing.assert_allclose(slots.positions[row, :count].numpy(), arrays.positions[0, :count], atol=1e-5)
        chosen = torch.stack([part.argmax(-1) for part in slots.attributes[row].split(ATTRIBUTE_SIZES, -1)], -1)
        assert chosen[:count].tolist() == seen.attributes.tolist()


def test_started_from_a_state_transformer_it_answers_as_that_player_on_the_perceived_scene(
        heldout_data: Path) -> None:
    model, words = _network(shipped_path("state-transformer.pt"))
    state_player = StateTransformerPlayer()
    assert words == list(state_player.vocabulary.words)
    _, stack = dataset_images(heldout_data, SPEC)
    _, questions, _ = load_dataset(*dataset_files(heldout_data))
    questions = [q for q in questions if q.image_index < 6]
    images = torch.from_numpy(stack[:6])
    image_of = torch.tensor([q.image_index for q in questions])
    encoded = torch.from_numpy(np.stack([state_player.vocabulary.encode(q.text, 48) for q in questions]))
    with torch.no_grad():
        slots = model.detect(images)
        # With one-hot attributes the slot encoding is exactly the state transformer's object encoding.
        one_hot = torch.cat([torch.nn.functional.one_hot(part.argmax(-1), part.shape[-1]).float()
                             for part in slots.attributes.split(ATTRIBUTE_SIZES, -1)], -1)
        ours = model.reason(slots._replace(attributes=one_hot).select(image_of), encoded)
        perceived = decode_maps(model.perception(images), model.config.perception.threshold, SPEC.width, SPEC.height)
        arrays = scene_arrays([perceived[i].to_scene() for i in image_of.tolist()])
        theirs = state_player.model(StateBatch(torch.from_numpy(arrays.positions), torch.from_numpy(arrays.attributes),
                                               torch.from_numpy(arrays.present), encoded))
    torch.testing.assert_close(ours, theirs, atol=1e-4, rtol=1e-4)


# ---------------------------------------------------------------- training


def test_a_small_training_run_learns_above_the_majority_answer_with_perception_frozen(trained: Path) -> None:
    info = load_player_file(trained).info
    assert info["step"] == 300
    assert info["heldout"]["accuracy"] > info["majority"]["heldout_accuracy"] + 0.1, (info["heldout"], info["majority"])
    shipped = load_player_file(shipped_path("neuro-symbolic.pt")).state_dict
    trained_state = load_player_file(trained).state_dict
    perception = [name for name in shipped if name.startswith("perception.")]
    assert perception and all(torch.equal(trained_state[name], shipped[name]) for name in perception)


def test_resume_continues_and_eval_prints_families(trained: Path, train_data: Path, heldout_data: Path,
                                                   tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "ot.pt"
    common = ["players", "train", "--player", "object-transformer", "--data", str(train_data), "--out", str(out),
              "--batch-size", "16", "--config", '{"width": 32, "layers": 1, "heads": 2, "feedforward": 32}',
              "--log-dir", "", "--no-progress"]
    assert main([*common, "--steps", "6"]) == 0
    assert main([*common, "--steps", "10", "--resume"]) == 0
    assert load_player_file(out).info["step"] == 10
    capsys.readouterr()
    code = main(["players", "eval", "--player", "object-transformer", "--weights", str(trained), "--data",
                 str(heldout_data), "--no-progress"])
    lines = capsys.readouterr().out.strip().splitlines()
    assert code == 0 and lines[-1].startswith("accuracy: ")
    assert {line.split(":")[0] for line in lines[:-1]} <= {"compare_integer", "comparison", "one_hop", "same_relate",
                                                          "single_and", "single_or", "three_hop", "two_hop",
                                                          "zero_hop"}


def test_init_takes_a_state_transformer_only(train_data: Path, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    common = ["players", "train", "--data", str(train_data), "--out", str(tmp_path / "x.pt"), "--steps", "2",
              "--log-dir", "", "--no-progress"]
    state_transformer, state_rn = str(shipped_path("state-transformer.pt")), str(shipped_path("state-rn.pt"))
    for arguments, message in [
        (["--player", "object-transformer", "--init", state_rn], "starts from a state-transformer file"),
        (["--player", "film", "--init", state_transformer], f"--init: {state_transformer}: not a pixel player file"),
        (["--player", "object-transformer", "--init", state_transformer, "--config", '{"layers": 2}'],
         "--config: layers differ from the files the object-transformer starts from"),
    ]:
        assert main([*common, *arguments]) == 2
        errors = capsys.readouterr().err.strip().splitlines()
        assert len(errors) == 1 and message in errors[0], errors
    assert not (tmp_path / "x.pt").exists()


# ---------------------------------------------------------------- the player


def test_loads_by_name_and_answers_a_batch_like_one_query_at_a_time(trained: Path, heldout_data: Path) -> None:
    with players.load("object-transformer", path=str(trained), batch_size=16) as player:
        assert player.needs == frozenset({"image"}) and player.image_spec == ImageSpec("fast", 128, 96)
        queries = _queries(heldout_data, 40)
        together = player.answer_batch(queries)
        assert all(a.ok and a.text in CLEVR.answer_values for a in together)
        assert [a.text for a in together] == [player.answer(q).text for q in queries]
        assert len({a.text for a in together}) > 1
        gone = player.answer_batch([Query("gone", "Is there a cube?", image_path="/nonexistent.png", vocabulary=CLEVR)])
        assert not gone[0].ok and "no such image" in gone[0].error


def test_missing_shipped_weights_is_one_line_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                   heldout_data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr("players.pixel.object_player.shipped_path", lambda name: tmp_path / name)
    with pytest.raises(InputError, match="no object-transformer weights are shipped yet; train them with") as caught:
        players.load("object-transformer")
    assert "\n" not in str(caught.value)
    code = main(["players", "eval", "--player", "object-transformer", "--data", str(heldout_data), "--no-progress"])
    errors = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(errors) == 1 and "players train --player object-transformer" in errors[0]


def _pixel_file(tmp_path: Path, kind: str, config: dict) -> Path:
    vocabulary = default_word_vocabulary()
    model = build_model(kind, config, len(vocabulary), len(ANSWERS))
    path = tmp_path / f"{kind}.pt"
    save_player_file(path, player_file_from(model, kind, vocabulary, list(ANSWERS), SPEC))
    return path


@pytest.mark.parametrize("player_class, kind, config, image_layers", [
    (PixelRelationNetworkPlayer, "relation-network", TINY_RN, "cnn"),
    (FiLMPlayer, "film", TINY_FILM, "stem"),
])
def test_pixel_players_read_each_image_of_a_batch_once(tmp_path: Path, heldout_data: Path, player_class: type,
                                                        kind: str, config: dict, image_layers: str) -> None:
    # Eight questions about each image: the question-blind layers must run once per image, not per question.
    player = player_class(_pixel_file(tmp_path, kind, config), batch_size=64)
    seen: list[int] = []
    getattr(player.model, image_layers).register_forward_hook(lambda module, inputs, output: seen.append(len(output)))
    queries = _queries(heldout_data, 32)
    together = player.answer_batch(queries)
    assert sum(seen) == len({q.image_path for q in queries}) == 4
    assert [a.text for a in together] == [player.answer(q).text for q in queries]


def test_object_transformer_perceives_each_image_of_a_batch_once(trained: Path, heldout_data: Path) -> None:
    player = ObjectTransformerPlayer(trained)
    seen: list[int] = []
    player.model.perception.early.register_forward_hook(lambda module, inputs, output: seen.append(len(output)))
    player.answer_batch(_queries(heldout_data, 32))
    assert seen == [4]


# ---------------------------------------------------------------- the shipped weights


def _real_clevr_folder(clevr_real: Path, folder: Path) -> Path:
    folder.mkdir()
    (folder / "scenes.json").write_text((clevr_real / "CLEVR_val_scenes_sample11.json").read_text())
    (folder / "questions.json").write_text((clevr_real / "CLEVR_val_questions_sample9.json").read_text())
    return folder


def test_shipped_player_loads_by_name_and_answers_real_clevr_files(clevr_real: Path, tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    folder = _real_clevr_folder(clevr_real, tmp_path / "real")
    code = main(["players", "eval", "--player", "object-transformer", "--data", str(folder), "--render-workers", "1",
                 "--no-progress"])
    lines = capsys.readouterr().out.strip().splitlines()
    assert code == 0 and lines[-1].startswith("accuracy: ")
    assert float(lines[-1].split()[-1]) >= 7 / 9, lines  # 8 of CLEVR's 9 sample questions when this was written


@pytest.mark.slow
def test_shipped_weights_reach_the_model_cards_figure_on_real_val_scenes(clevr_real: Path, clevr_templates_dir: Path,
                                                                          tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    # The card's real-val set: CLEVR-template questions on the 500 real val scenes, drawn as CLEVR's generator
    # draws them (`runs/rv-pixel`), rendered here (about 2 min).
    folder = tmp_path / "real-val"
    generate_dataset(folder, 0, 4, seed=5, templates="clevr", clevr_templates=clevr_templates_dir,
                     scenes_file=clevr_real / "CLEVR_val_scenes_500.json", progress=False, sampling="clevr")
    assert main(["players", "eval", "--player", "object-transformer", "--data", str(folder), "--no-progress"]) == 0
    accuracy = float(capsys.readouterr().out.strip().splitlines()[-1].split()[-1])
    card = load_player_file(shipped_path("object-transformer.pt")).info["clevr_heldout"]["accuracy"]
    assert accuracy == pytest.approx(card, abs=0.01)
