"""Adversarial training of a pixel player: `players train --init/--extra` for film, `file:` pixel player files,
the whole loop at tiny scale on real renders, and the players it refuses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from PIL import Image

from clevr_game.cli import main
from clevr_game.dataset import dataset_files, load_dataset
from clevr_game.generate import generate_dataset
from clevr_game.text import default_word_vocabulary
from experiments.adversarial_training import source_player
from players.pixel.checkpoint import load_player_file
from players.pixel.images import ImageSpec
from players.pixel.player import FiLMPlayer
from players.pixel.training import PixelTrainingOptions, train_pixel
from players.registry import load
from players.state.checkpoint import player_file_from, save_player_file, shipped_path
from players.state.features import ANSWERS
from players.state.models import build_model

pytestmark = pytest.mark.usefixtures("own_render_cache")

torch.set_num_threads(1)  # one thread is several times faster than two on a busy 2-core machine

SPEC = ImageSpec("fast", 64, 48)  # tiny renders: about 0.1 s each here
TINY_FILM = {"stem_channels": 12, "stem_layers": 2, "width": 24, "blocks": 2, "word_width": 16,
             "question_width": 48, "classifier_width": 48}
TINY_ADVERSARY_RN = {"width": 32, "word_width": 16, "question_width": 32, "g_layers": 2, "f_width": 32,
                     "dropout": 0.0}


def _questions(folder: Path) -> int:
    return len(load_dataset(*dataset_files(folder))[1])


def _tree(folder: Path) -> dict[str, int]:
    """Every file under `folder` with its modification time: what "left untouched" means."""
    return {str(path.relative_to(folder)): path.stat().st_mtime_ns for path in sorted(folder.rglob("*"))}


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("adv-pixel")
    made = {"train": root / "train", "heldout": root / "heldout", "items": root / "items"}
    generate_dataset(made["train"], 20, 4, seed=31, progress=False)
    generate_dataset(made["heldout"], 10, 3, seed=34, progress=False)
    # 15 scenes x 2 questions: room for two disjoint mini-games of 10 (one before, one fresh after).
    generate_dataset(made["items"], 15, 2, seed=35, min_objects=3, max_objects=5, progress=False)
    return made


@pytest.fixture(scope="module")
def tiny_film(folders: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A film player trained a few seconds on 64 x 48 renders: weak, but not constant."""
    out = tmp_path_factory.mktemp("film") / "tiny-film.pt"
    train_pixel(PixelTrainingOptions(
        player="film", data=str(folders["train"]), out=str(out), preset=SPEC.preset, width=SPEC.width,
        height=SPEC.height, render_workers=1, steps=60, batch_size=16, learning_rate=3e-3, warmup_steps=5,
        model_config=TINY_FILM, log_dir="", progress=False, seed=7,
    ))
    return out


@pytest.fixture(scope="module")
def adversary_weights(tmp_path_factory: pytest.TempPathFactory) -> Path:
    torch.manual_seed(0)
    words = default_word_vocabulary()
    network = build_model("relation-network", TINY_ADVERSARY_RN, len(words), len(ANSWERS)).eval()
    path = tmp_path_factory.mktemp("adversary") / "rn.pt"
    save_player_file(path, player_file_from(network, "relation-network", words, list(ANSWERS), {}))
    return path


@pytest.fixture(scope="module")
def experiment(folders: dict[str, Path], tiny_film: Path, adversary_weights: Path,
               tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, int]]:
    """The whole loop on the tiny film; returns EXP and the items folder's files as they were before."""
    out = tmp_path_factory.mktemp("experiment") / "exp"
    items_before = _tree(folders["items"])
    args = ["adversarial-training", "--player", f"file:{tiny_film}", "--items", str(folders["items"]),
            "--out", str(out), "--heldout", str(folders["heldout"]), "--size", "10", "--minigames", "1",
            "--seeds", "1", "--steps", "256", "--num-envs", "32", "--eval-samples", "4",
            "--finetune-steps", "4", "--finetune-batch-size", "8", "--finetune-learning-rate", "0.01",
            "--select", "all", "--adversary-weights", str(adversary_weights), "--no-progress"]
    assert main(args) == 0
    return out, items_before


# ---------------------------------------------------------------- the pieces


def test_file_spec_loads_a_pixel_player_file(tiny_film: Path) -> None:
    with load(f"file:{tiny_film}") as player:
        assert isinstance(player, FiLMPlayer) and player.image_spec == SPEC
        assert player.name == f"file:{tiny_film}"


def test_shipped_and_file_pixel_players_resolve_to_their_trainer_and_image_spec(tiny_film: Path) -> None:
    shipped = source_player("film")
    assert (shipped.trainer, shipped.path, shipped.pixel) == ("film", shipped_path("film.pt"), True)
    assert shipped.image == load_player_file(shipped_path("film.pt")).image
    assert source_player("pixel-rn").trainer == "pixel-rn"
    from_file = source_player(f"file:{tiny_film}")
    assert (from_file.trainer, from_file.image) == ("film", SPEC)
    assert not source_player("state-rn").pixel


def test_film_init_starts_from_the_file_and_extra_folders_join(folders: dict[str, Path], tiny_film: Path,
                                                              tmp_path: Path) -> None:
    # With a zero learning rate the steps change no weight: they are the file's, the new words' rows copies
    # of UNKNOWN's. (Batch norm's running statistics do follow the new data: they are buffers, not weights.)
    out = tmp_path / "started.pt"
    assert main(["players", "train", "--player", "film", "--data", str(folders["items"]), "--extra",
                 str(folders["heldout"]), "--init", str(tiny_film), "--out", str(out), "--steps", "2",
                 "--batch-size", "8", "--learning-rate", "0", "--warmup-steps", "1", "--image-size", "64x48",
                 "--render-workers", "1", "--log-dir", "", "--no-progress", "--seed", "99"]) == 0
    source, copy = load_player_file(tiny_film), load_player_file(out)
    assert (copy.kind, copy.config, copy.image, copy.answers) == (source.kind, source.config, source.image,
                                                                  source.answers)
    assert copy.words[: len(source.words)] == source.words
    assert copy.state_dict.keys() == source.state_dict.keys()
    weights = [name for name, _ in source.build().named_parameters()]
    assert "question.words.weight" in weights and len(weights) > 10
    for name in weights:
        tensor = source.state_dict[name]
        if name == "question.words.weight":
            grown = copy.state_dict[name]
            assert torch.equal(grown[: len(tensor)], tensor)
            assert all(torch.equal(row, tensor[1]) for row in grown[len(tensor):])
        else:
            assert torch.equal(copy.state_dict[name], tensor), name
    assert copy.info["init"] == str(tiny_film) and copy.info["extra_data"] == [str(folders["heldout"])]
    assert copy.info["data_questions"] == _questions(folders["items"]) + _questions(folders["heldout"])
    with load(f"file:{out}") as player:
        assert isinstance(player, FiLMPlayer) and player.image_spec == SPEC


def test_film_init_of_another_kind_or_image_size_is_one_line_error(folders: dict[str, Path], tiny_film: Path,
                                                                  tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    base = ["players", "train", "--data", str(folders["items"]), "--init", str(tiny_film), "--out",
            str(tmp_path / "x.pt"), "--steps", "1", "--log-dir", "", "--no-progress"]
    assert main([*base, "--player", "pixel-rn", "--image-size", "64x48"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--init" in err and "'film'" in err
    assert main([*base, "--player", "film"]) == 2  # the default 128x96 is not the file's 64x48
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "fast-64x48" in err
    assert not (tmp_path / "x.pt").exists()


# ---------------------------------------------------------------- the experiment


def test_the_pixel_loop_reports_before_and_after_rows(experiment: tuple[Path, dict[str, int]]) -> None:
    out, _ = experiment
    report = (out / "report.md").read_text()
    assert "| before | original | 0..0 |" in report
    assert "| after | original | 1..1 |" in report and "| after | fine-tuned | 1..1 |" in report
    assert "fast-64x48" in report
    summary = json.loads((out / "summary.json").read_text())
    assert summary["player_kind"] == "pixel" and summary["image"] == SPEC.as_dict()
    rows = summary["rows"]
    assert [(r["stage"], r["player"]) for r in rows] == [("before", "original"), ("after", "original"),
                                                         ("after", "fine-tuned")]
    for row in rows:
        assert row["trials"] == 1
        for key in ("clean_heldout", "clean_items", "clean_minigames"):
            assert 0.0 <= row[key] <= 1.0
        for metric in ("consistency", "drop"):
            low, high = row[metric]["ci95"]
            assert 0.0 <= low <= row[metric]["mean"] <= high <= 1.0
    assert rows[0]["clean_heldout"] == rows[1]["clean_heldout"]


def test_every_benchmark_trial_checked_visibility(experiment: tuple[Path, dict[str, int]]) -> None:
    out, _ = experiment
    records = [json.loads(line) for stage in ("before", "after")
               for line in (out / stage / "trials.jsonl").read_text().splitlines()]
    assert len(records) == 3 and all("error" not in r for r in records)
    assert all(r["visibility_checked"] is True for r in records)


def test_images_are_rendered_at_the_players_spec_inside_the_experiment(
        experiment: tuple[Path, dict[str, int]], folders: dict[str, Path]) -> None:
    out, items_before = experiment
    assert _tree(folders["items"]) == items_before  # the pool is only read
    summary = json.loads((out / "summary.json").read_text())
    assert summary["read_from"] == {"items": str(out / "pixel-data" / "items"),
                                    "heldout": str(out / "pixel-data" / "heldout")}
    for folder, scenes in ((out / "pixel-data" / "items", 15), (out / "pixel-data" / "heldout", 10),
                           (out / "export", None)):
        (images,) = (folder / "cache" / "images").glob(f"{SPEC.label}-*")
        pngs = sorted(images.glob("*.png"))
        expected = scenes if scenes is not None else len(json.loads((folder / "scenes.json").read_text())["scenes"])
        assert len(pngs) == expected > 0
        with Image.open(pngs[0]) as image:
            assert image.size == (SPEC.width, SPEC.height)


def test_the_pixel_fine_tune_starts_from_the_player_and_adds_the_export(
        experiment: tuple[Path, dict[str, int]], tiny_film: Path) -> None:
    out, _ = experiment
    finetuned, source = load_player_file(out / "finetuned.pt"), load_player_file(tiny_film)
    info = finetuned.info
    assert finetuned.kind == "film" and finetuned.image == SPEC and finetuned.config == source.config
    assert info["init"] == str(tiny_film) and info["step"] == 4
    assert info["extra_data"] == [str(out / "export")]
    assert info["data_questions"] == _questions(out / "pixel-data" / "items") + _questions(out / "export")
    assert not all(torch.equal(finetuned.state_dict[k], source.state_dict[k]) for k in source.state_dict
                   if k != "question.words.weight")
    assert "--init" in info["command"] and "--image-size 64x48" in info["command"]


def test_a_pixel_rerun_resumes_every_step(experiment: tuple[Path, dict[str, int]], folders: dict[str, Path],
                                         adversary_weights: Path) -> None:
    out, _ = experiment
    summary = json.loads((out / "summary.json").read_text())
    weights = (out / "finetuned.pt").stat().st_mtime_ns
    options = summary["options"]
    assert main(["adversarial-training", "--player", options["player"], "--items", options["items"],
                 "--out", str(out), "--heldout", options["heldout"], "--size", "10", "--minigames", "1",
                 "--seeds", "1", "--steps", "256", "--num-envs", "32", "--eval-samples", "4",
                 "--finetune-steps", "4", "--finetune-batch-size", "8", "--finetune-learning-rate", "0.01",
                 "--select", "all", "--adversary-weights", str(adversary_weights), "--no-progress"]) == 0
    assert json.loads((out / "summary.json").read_text())["rows"] == summary["rows"]
    assert (out / "finetuned.pt").stat().st_mtime_ns == weights


# ---------------------------------------------------------------- refused players


def test_players_that_cannot_be_fine_tuned_are_one_line_errors(folders: dict[str, Path], tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    garbage = tmp_path / "garbage.pt"
    garbage.write_bytes(b"not a player file")
    base = ["adversarial-training", "--items", str(folders["items"]), "--out", str(tmp_path / "exp"),
            "--heldout", str(folders["heldout"]), "--no-progress"]
    for player, says in (("oracle", "fine-tuning needs a state player or a pixel player"),
                         ("neuro-symbolic", "fine-tuning needs"),
                         (f"file:{shipped_path('neuro-symbolic.pt')}", "'neuro-symbolic' pixel model"),
                         (f"file:{garbage}", "cannot read player file"),
                         (f"file:{tmp_path / 'absent.pt'}", "no such player file")):
        assert main([*base, "--player", player]) == 2, player
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and says in err, (player, err)
    assert not (tmp_path / "exp").exists()
