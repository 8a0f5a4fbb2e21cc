"""The pretrained, frozen perception backbone option of `film` and `pixel-rn` (config `backbone`).

Existing player files (no `backbone` in their config) answer exactly as before; with
`backbone="perception"` the backbone is the shipped neuro-symbolic perception's, does not train,
travels inside the player file, and the trainable layers above it learn on real renders.

`tests/data/pixel_legacy_players.pt` was written by the code before the option existed (commit
7da9d7e): two small player files in the existing format (film and pixel-rn, random weights and
batch-norm statistics), an input batch, and the logits that code gave for it.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from clevr_game.cli import main
from clevr_game.errors import InputError
from clevr_game.generate import generate_dataset
from clevr_game.text import default_word_vocabulary
from clevr_game.vocab import CLEVR
from players.loop import decoupled_optimizer
from players.pixel.checkpoint import (
    build_model,
    from_dict,
    load_player_file,
    player_file_from,
    save_player_file,
)
from players.pixel.data import PixelData, load_pixel_data
from players.pixel.images import ImageSpec, ensure_images, load_image
from players.pixel.models import FiLMConfig, PerceptionBackbone, PixelRNConfig
from players.pixel.object_transformer import perception_state
from players.pixel.player import FiLMPlayer, PixelRelationNetworkPlayer
from players.pixel.training import AnsweringTask, BatchSchedule, PixelTrainingOptions, train_pixel
from players.protocol import Query
from players.state.checkpoint import shipped_path
from players.state.features import ANSWERS

pytestmark = pytest.mark.usefixtures("own_render_cache")

torch.set_num_threads(1)

SPEC = ImageSpec("fast", 128, 96)  # the shipped perception's images: the backbone is only copied for these
LEGACY = Path(__file__).parent / "data" / "pixel_legacy_players.pt"
FILM = {"width": 24, "blocks": 2, "word_width": 16, "question_width": 48, "classifier_width": 48,
        "backbone": "perception"}
RN = {"channels": 16, "conv_layers": 4, "word_width": 16, "question_width": 32, "g_width": 32, "g_layers": 2,
      "f_width": 32, "backbone": "perception"}
KINDS = {"film": ("film", FILM, FiLMPlayer), "pixel-rn": ("relation-network", RN, PixelRelationNetworkPlayer)}
"""Player name -> (model kind, small config, player class)."""
CONFIGS = {kind: config for kind, config, _ in KINDS.values()}


def _rendered(folder: Path, scenes: int, questions: int, seed: int) -> Path:
    generate_dataset(folder, scenes, questions, seed=seed, progress=False)
    ensure_images(folder, SPEC, workers=1)
    return folder


@pytest.fixture(scope="module")
def train_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _rendered(tmp_path_factory.mktemp("backbone") / "train", 80, 10, seed=41)


@pytest.fixture(scope="module")
def heldout_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _rendered(tmp_path_factory.mktemp("backbone") / "heldout", 30, 10, seed=42)


@pytest.fixture(scope="module")
def loaded_train(train_data: Path) -> PixelData:
    data, _ = load_pixel_data(train_data, default_word_vocabulary(), list(ANSWERS), SPEC)
    return data


@pytest.fixture(scope="module")
def shipped_perception() -> dict[str, torch.Tensor]:
    return perception_state(load_player_file(shipped_path("neuro-symbolic.pt")).state_dict)


def _with_backbone(kind: str, perception: dict[str, torch.Tensor], seed: int = 0,
                   backbone: str = "perception") -> torch.nn.Module:
    torch.manual_seed(seed)
    model = build_model(kind, {**CONFIGS[kind], "backbone": backbone}, len(default_word_vocabulary()), len(ANSWERS))
    model.backbone.load_perception(perception)
    return model


def _options(data: Path, out: Path, player: str, **changes) -> PixelTrainingOptions:
    settings = dict(player=player, data=str(data), out=str(out), preset=SPEC.preset, width=SPEC.width,
                    height=SPEC.height, steps=20, batch_size=32, learning_rate=3e-3, warmup_steps=10,
                    model_config=KINDS[player][1], log_dir="", progress=False)
    return PixelTrainingOptions(**{**settings, **changes})


# ---------------------------------------------------------------- existing player files


@pytest.mark.parametrize("kind", ["film", "relation-network"])
def test_an_existing_player_file_loads_and_gives_the_logits_it_gave_before(kind: str) -> None:
    legacy = torch.load(LEGACY, weights_only=True)
    player_file = from_dict(legacy["players"][kind], str(LEGACY))
    assert "backbone" not in player_file.config
    model = player_file.build()  # strict: the file's weights are exactly the model's
    assert model.backbone is None
    with torch.no_grad():
        logits = model(legacy["images"], legacy["words"], legacy["image_of"])
    # Equal to the last bits the thread count decides (the fixture was computed with 2 threads, these with 1).
    torch.testing.assert_close(logits, legacy["logits"][kind], rtol=0.0, atol=1e-6)


def test_an_unknown_backbone_is_a_one_line_input_error() -> None:
    with pytest.raises(InputError, match="backbone 'resnet'"):
        FiLMConfig(backbone="resnet")
    with pytest.raises(InputError, match="at least 3"):
        PixelRNConfig(backbone="perception", conv_layers=2)


# ---------------------------------------------------------------- the frozen backbone


def test_the_backbone_gives_the_perceptions_own_feature_map(loaded_train: PixelData) -> None:
    from players.pixel.neuro_symbolic import NeuroSymbolicNetwork

    shipped = load_player_file(shipped_path("neuro-symbolic.pt")).build()
    assert isinstance(shipped, NeuroSymbolicNetwork)
    backbone = PerceptionBackbone()
    backbone.load_perception(perception_state(shipped.state_dict()))
    images = loaded_train.images[:3]
    perception = shipped.perception
    with torch.no_grad():
        features = backbone(images)
        heat = perception.heat(features)[:, 0]
        expected = perception(images).heat
    assert features.shape == (3, 64, 24, 32)
    torch.testing.assert_close(heat, expected)  # the perception's heads read it as their own map


def test_the_attribute_maps_are_the_perceptions_reading_of_each_cell(loaded_train: PixelData,
                                                                     shipped_perception: dict) -> None:
    from players.pixel.models import AttributeMapsBackbone
    from players.pixel.perception import ATTRIBUTE_SIZES, PerceptionConfig, PerceptionNetwork

    backbone = AttributeMapsBackbone()
    backbone.load_perception(shipped_perception)
    perception = PerceptionNetwork(PerceptionConfig())
    perception.load_state_dict(shipped_perception)
    perception.eval()
    images = loaded_train.images[:3]
    with torch.no_grad():
        maps, expected = backbone(images), perception(images)
    assert maps.shape == (3, AttributeMapsBackbone.channels, 24, 32) and AttributeMapsBackbone.channels == 18
    objectness = torch.sigmoid(expected.heat)
    torch.testing.assert_close(maps[:, 0], objectness)
    torch.testing.assert_close(maps[:, 1:3], expected.offsets)
    # Each attribute's probabilities sum to the cell's objectness: one full reading where an object is seen.
    for start, size in zip(torch.tensor((0, *ATTRIBUTE_SIZES)).cumsum(0)[:-1].tolist(), ATTRIBUTE_SIZES, strict=True):
        torch.testing.assert_close(maps[:, 3 + start : 3 + start + size].sum(1), objectness)
    assert (objectness.flatten(1).amax(1) > 0.5).all()  # every training image shows objects it finds
    with pytest.raises(InputError, match="does not fit the attribute-maps backbone"):
        backbone.load_perception({k: v for k, v in shipped_perception.items() if not k.startswith("heat.")})


@pytest.mark.parametrize("cached", [True, False])
@pytest.mark.parametrize("kind", ["film", "relation-network"])
@pytest.mark.parametrize("backbone", ["perception", "attributes"])
def test_optimiser_steps_change_the_head_and_never_the_backbone(loaded_train: PixelData, shipped_perception: dict,
                                                                kind: str, cached: bool, backbone: str) -> None:
    model = _with_backbone(kind, shipped_perception, backbone=backbone)
    backbone_before = {k: v.clone() for k, v in model.backbone.state_dict().items()}  # buffers too
    head_before = {k: v.clone() for k, v in model.state_dict().items() if not k.startswith("backbone.")}
    task = AnsweringTask(model, torch.device("cpu"), cache_features=cached)
    optimizer = decoupled_optimizer(model, 3e-3, 1e-2)  # weight decay too: it must not reach the backbone
    schedule = BatchSchedule(loaded_train.questions.lengths, 16, seed=0)
    model.train()
    assert not model.backbone.training  # its batch norm keeps the perception's statistics
    for step in range(3):
        loss, _ = task.loss(loaded_train, schedule.indices(step))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    for name, tensor in model.backbone.state_dict().items():
        assert torch.equal(tensor, backbone_before[name]), name
    for name, tensor in backbone_before.items():  # the attribute maps' backbone holds the whole perception
        assert torch.equal(tensor, shipped_perception[name.removeprefix("perception.")]), name
    changed = [k for k, v in model.state_dict().items() if k in head_before and not torch.equal(v, head_before[k])]
    trainable = [k for k, p in model.named_parameters() if p.requires_grad]
    assert trainable and set(trainable) <= set(changed)
    assert not any(p.requires_grad for p in model.backbone.parameters())


def test_cached_features_give_the_logits_of_the_whole_network(loaded_train: PixelData,
                                                              shipped_perception: dict) -> None:
    model = _with_backbone("film", shipped_perception).eval()
    indices = torch.arange(40)
    with torch.no_grad():
        cached = AnsweringTask(model, torch.device("cpu")).logits(loaded_train, indices)
        whole = AnsweringTask(model, torch.device("cpu"), cache_features=False).logits(loaded_train, indices)
    torch.testing.assert_close(cached, whole, atol=1e-5, rtol=1e-5)


# ---------------------------------------------------------------- player files


def _image_queries(folder: Path, count: int) -> list[Query]:
    from clevr_game.dataset import dataset_files, load_dataset

    scenes, paths = ensure_images(folder, SPEC)
    _, questions, _ = load_dataset(*dataset_files(folder))
    path_of = {s.image_index: p for s, p in zip(scenes, paths, strict=True)}
    return [Query(f"q{i}", q.text, image_path=str(path_of[q.image_index]), vocabulary=CLEVR)
            for i, q in enumerate(questions[:count])]


@pytest.mark.parametrize("player", ["film", "pixel-rn"])
def test_a_backbone_player_reloads_without_its_source_file_with_identical_logits(
        train_data: Path, heldout_data: Path, loaded_train: PixelData, tmp_path: Path, player: str) -> None:
    kind, _, player_class = KINDS[player]
    source = tmp_path / "perception-source.pt"
    shutil.copy(shipped_path("neuro-symbolic.pt"), source)
    source_perception = perception_state(load_player_file(source).state_dict)
    trained_out = tmp_path / f"{player}.pt"
    train_pixel(_options(train_data, trained_out, player, steps=4, perception_from=str(source)))
    model = _with_backbone(kind, source_perception)  # and a few steps in memory, to compare with
    task = AnsweringTask(model, torch.device("cpu"))
    optimizer = decoupled_optimizer(model, 3e-3, 1e-4)
    model.train()
    for step in range(3):
        loss, _ = task.loss(loaded_train, BatchSchedule(loaded_train.questions.lengths, 16, seed=0).indices(step))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    model.eval()
    vocabulary = default_word_vocabulary()
    memory_out = tmp_path / "memory.pt"
    save_player_file(memory_out, player_file_from(model, kind, vocabulary, list(ANSWERS), SPEC))
    source.unlink()

    queries = _image_queries(heldout_data, 12)
    images = torch.from_numpy(np.stack([load_image(q.image_path, SPEC) for q in queries]))
    words = torch.from_numpy(np.stack([vocabulary.encode(q.question, 40) for q in queries]))
    reloaded = load_player_file(memory_out).build()
    with torch.no_grad():
        assert torch.equal(reloaded(images, words), model(images, words))
    trained = load_player_file(trained_out)
    assert trained.config["backbone"] == "perception" and trained.info["backbone_from"] == str(source)
    for name, tensor in trained.build().backbone.state_dict().items():  # the backbone travels inside the file
        assert torch.equal(tensor, source_perception[name]), name
    with torch.no_grad():
        logits = trained.build()(images, words)
    allowed = set(CLEVR.answer_values)
    best = [next(ANSWERS[i] for i in row.argsort(descending=True).tolist() if ANSWERS[i] in allowed)
            for row in logits]
    answers = player_class(trained_out).answer_batch(queries)  # the player as the game loads it
    assert all(a.ok for a in answers) and [a.text for a in answers] == best


def test_the_backbone_must_come_from_a_neuro_symbolic_file_for_the_same_images(train_data: Path, heldout_data: Path,
                                                                              tmp_path: Path) -> None:
    with pytest.raises(InputError, match="holds a 'film' model"):
        train_pixel(_options(train_data, tmp_path / "a.pt", "film", perception_from=str(shipped_path("film.pt"))))
    with pytest.raises(InputError, match="reads fast-128x96 images, not fast-64x48"):
        train_pixel(_options(heldout_data, tmp_path / "b.pt", "film", width=64, height=48))


# ---------------------------------------------------------------- training


def test_film_with_the_backbone_learns_above_the_majority_answer(train_data: Path, heldout_data: Path,
                                                                 tmp_path: Path) -> None:
    out = tmp_path / "film.pt"
    result = train_pixel(_options(train_data, out, "film", eval_data=str(heldout_data), steps=300,
                                  eval_every=1000))
    assert result.step == 300
    info = load_player_file(out).info
    heldout, majority = info["heldout"], info["majority"]
    assert heldout["accuracy"] > majority["heldout_accuracy"] + 0.12, (heldout, majority)  # measured: 0.373 vs 0.193


def test_resume_keeps_the_backbone_and_its_source(train_data: Path, tmp_path: Path) -> None:
    out = tmp_path / "rn.pt"
    train_pixel(_options(train_data, out, "pixel-rn", steps=4))
    first = load_player_file(out)
    resumed = train_pixel(_options(train_data, out, "pixel-rn", steps=8, resume=True,
                                   perception_from="/nonexistent/unused-on-resume.pt"))
    second = load_player_file(out)
    assert resumed.step == 8 and second.info["step"] == 8
    assert second.info["backbone_from"] == first.info["backbone_from"] == str(shipped_path("neuro-symbolic.pt"))
    for name, tensor in first.state_dict.items():
        if name.startswith("backbone."):
            assert torch.equal(second.state_dict[name], tensor), name
    with pytest.raises(InputError, match="resume needs the same model_config"):
        train_pixel(_options(train_data, out, "pixel-rn", steps=12, resume=True,
                             model_config={**RN, "backbone": "none"}))


def test_commands_train_resume_and_eval_a_backbone_player(train_data: Path, heldout_data: Path, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "film.pt"
    common = ["players", "train", "--player", "film", "--data", str(train_data), "--out", str(out),
              "--batch-size", "8", "--config", '{"backbone": "perception", "width": 16, "blocks": 1}',
              "--log-dir", "", "--no-progress", "--threads", "1"]
    assert main([*common, "--steps", "3"]) == 0
    assert main([*common, "--steps", "5", "--resume"]) == 0
    assert load_player_file(out).info["step"] == 5
    code = main(["players", "eval", "--player", "film", "--weights", str(out), "--data", str(heldout_data),
                 "--limit", "30", "--no-progress"])
    lines = capsys.readouterr().out.strip().splitlines()
    assert code == 0 and lines[-1].startswith("accuracy: ")
