"""Adversarial training: `players train --extra/--init`, the `file:` player spec, the whole loop at tiny scale."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from clevr_game.cli import main
from clevr_game.dataset import dataset_files, load_dataset
from clevr_game.generate import generate_dataset
from clevr_game.text import default_word_vocabulary
from envs.minigames import MiniGames
from players.registry import load
from players.state.checkpoint import load_player_file, player_file_from, save_player_file
from players.state.evaluation import evaluate_player
from players.state.features import ANSWERS
from players.state.models import build_model
from players.state.training import TrainingOptions, train

torch.set_num_threads(1)  # one thread is several times faster than two on a busy 2-core machine

TINY_TRANSFORMER = {"width": 32, "layers": 1, "heads": 4, "feedforward": 64, "fourier_bands": 4}
TINY_ADVERSARY_RN = {"width": 32, "word_width": 16, "question_width": 32, "g_layers": 2, "f_width": 32,
                     "dropout": 0.0}


def _questions(folder: Path) -> int:
    return len(load_dataset(*dataset_files(folder))[1])


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("adv")
    made = {"train": root / "train", "extra_a": root / "extra_a", "extra_b": root / "extra_b",
            "heldout": root / "heldout", "items": root / "items"}
    generate_dataset(made["train"], 40, 4, seed=31, progress=False)
    generate_dataset(made["extra_a"], 10, 3, seed=32, progress=False)
    generate_dataset(made["extra_b"], 6, 2, seed=33, progress=False)
    generate_dataset(made["heldout"], 30, 3, seed=34, progress=False)
    # 15 scenes x 2 questions: room for two disjoint mini-games of 10 (one before, one fresh after).
    generate_dataset(made["items"], 15, 2, seed=35, min_objects=3, max_objects=5, progress=False)
    return made


@pytest.fixture(scope="module")
def tiny_player(folders: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A state transformer trained a few steps: weak, so the adversary finds moves that change its answers."""
    out = tmp_path_factory.mktemp("player") / "tiny.pt"
    train(TrainingOptions(player="state-transformer", data=str(folders["train"]), out=str(out), steps=30,
                          batch_size=16, warmup_steps=5, model_config=TINY_TRANSFORMER, log_dir="",
                          progress=False, seed=7))
    return out


@pytest.fixture(scope="module")
def adversary_weights(tmp_path_factory: pytest.TempPathFactory) -> Path:
    torch.manual_seed(0)
    words = default_word_vocabulary()
    network = build_model("relation-network", TINY_ADVERSARY_RN, len(words), len(ANSWERS)).eval()
    path = tmp_path_factory.mktemp("adversary") / "rn.pt"
    save_player_file(path, player_file_from(network, "relation-network", words, list(ANSWERS), {}))
    return path


def _train_args(folders: dict[str, Path], out: Path, *extra: str) -> list[str]:
    return ["players", "train", "--player", "state-transformer", "--data", str(folders["train"]),
            "--out", str(out), "--batch-size", "16", "--warmup-steps", "1", "--log-dir", "",
            "--no-progress", *extra]


# ---------------------------------------------------------------- players train --extra / --init


def test_extra_folders_join_the_training_questions(folders: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "extra.pt"
    assert main(_train_args(folders, out, "--steps", "2", "--config", json.dumps(TINY_TRANSFORMER),
                            "--extra", str(folders["extra_a"]), "--extra", str(folders["extra_b"]))) == 0
    info = load_player_file(out).info
    expected = sum(_questions(folders[name]) for name in ("train", "extra_a", "extra_b"))
    assert info["data_questions"] == expected > _questions(folders["train"])
    assert info["extra_data"] == [str(folders["extra_a"]), str(folders["extra_b"])]


def test_init_starts_from_the_given_weights(folders: dict[str, Path], tiny_player: Path, tmp_path: Path) -> None:
    # With a zero learning rate the steps change nothing: the result must be the source player exactly.
    started = tmp_path / "started.pt"
    assert main(_train_args(folders, started, "--steps", "2", "--learning-rate", "0", "--init", str(tiny_player),
                            "--eval-data", str(folders["heldout"]), "--seed", "99")) == 0
    source, copy = load_player_file(tiny_player), load_player_file(started)
    assert copy.words == source.words and copy.config == source.config
    assert all(torch.equal(copy.state_dict[k], source.state_dict[k]) for k in source.state_dict)
    accuracy = {}
    for path in (tiny_player, started):
        with load(f"file:{path}") as player:
            accuracy[path] = evaluate_player(player, folders["heldout"]).accuracy
    assert accuracy[started] == accuracy[tiny_player]
    assert copy.info["init"] == str(tiny_player)

    # Without --init the same run starts from fresh weights of the seed instead.
    fresh = tmp_path / "fresh.pt"
    assert main(_train_args(folders, fresh, "--steps", "2", "--learning-rate", "0", "--seed", "99",
                            "--config", json.dumps(TINY_TRANSFORMER))) == 0
    fresh_weights = load_player_file(fresh).state_dict
    assert not all(torch.equal(fresh_weights[k], source.state_dict[k]) for k in source.state_dict)


def test_init_of_another_model_kind_is_one_line_error(folders: dict[str, Path], tiny_player: Path,
                                                     tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = _train_args(folders, tmp_path / "x.pt", "--steps", "1", "--init", str(tiny_player))
    args[args.index("state-transformer")] = "state-rn"
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--init" in err and "'transformer'" in err
    assert not (tmp_path / "x.pt").exists()


# ---------------------------------------------------------------- the experiment


@pytest.fixture(scope="module")
def experiment(folders: dict[str, Path], tiny_player: Path, adversary_weights: Path,
               tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("experiment") / "exp"
    args = ["adversarial-training", "--player", f"file:{tiny_player}", "--items", str(folders["items"]),
            "--out", str(out), "--heldout", str(folders["heldout"]), "--size", "10", "--minigames", "1",
            "--seeds", "1", "--steps", "256", "--num-envs", "32", "--eval-samples", "4",
            "--finetune-steps", "4", "--finetune-batch-size", "8", "--finetune-learning-rate", "0.01", "--select", "all",
            "--adversary-weights", str(adversary_weights), "--no-progress"]
    assert main(args) == 0
    return out


def test_the_loop_reports_before_and_after_rows(experiment: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = (experiment / "report.md").read_text()
    assert "| before | original | 0..0 |" in report
    assert "| after | original | 1..1 |" in report and "| after | fine-tuned | 1..1 |" in report
    rows = json.loads((experiment / "summary.json").read_text())["rows"]
    assert [(r["stage"], r["player"]) for r in rows] == [("before", "original"), ("after", "original"),
                                                         ("after", "fine-tuned")]
    for row in rows:
        assert row["trials"] == 1
        for key in ("clean_heldout", "clean_items", "clean_minigames"):
            assert 0.0 <= row[key] <= 1.0
        for metric in ("consistency", "drop"):
            low, high = row[metric]["ci95"]
            assert 0.0 <= low <= row[metric]["mean"] <= high <= 1.0
    # The original player is measured once: both of its rows carry the same clean accuracies.
    assert rows[0]["clean_heldout"] == rows[1]["clean_heldout"]


def test_the_after_minigames_are_fresh(experiment: Path) -> None:
    before = MiniGames.load(experiment / "before" / "minigames" / "size_10.json")
    after = MiniGames.load(experiment / "after" / "minigames" / "size_10.json")
    assert before.fingerprint == after.fingerprint and len(before) >= 1 and len(after) == 1
    assert not set(before.games[0]) & set(after.games[0])
    exported = {entry["item_id"] for entry in json.loads((experiment / "export" / "manifest.json").read_text())["entries"]}
    assert exported and exported <= set(before.games[0])


def test_the_fine_tune_starts_from_the_player_and_adds_the_export(experiment: Path, folders: dict[str, Path],
                                                                  tiny_player: Path) -> None:
    finetuned, source = load_player_file(experiment / "finetuned.pt"), load_player_file(tiny_player)
    info = finetuned.info
    assert info["init"] == str(tiny_player) and info["step"] == 4
    assert finetuned.words == source.words  # fine-tuning keeps the vocabulary, so the weights stay compatible
    assert not all(torch.equal(finetuned.state_dict[k], source.state_dict[k]) for k in source.state_dict)
    assert info["data_questions"] == _questions(folders["items"]) + _questions(experiment / "export")


def test_a_rerun_resumes_every_step_and_rewrites_the_same_table(experiment: Path, folders: dict[str, Path],
                                                                tiny_player: Path, adversary_weights: Path) -> None:
    summary = json.loads((experiment / "summary.json").read_text())
    weights = (experiment / "finetuned.pt").stat().st_mtime_ns
    options = summary["options"]
    args = ["adversarial-training", "--player", options["player"], "--items", options["items"],
            "--out", str(experiment), "--heldout", options["heldout"], "--size", "10", "--minigames", "1",
            "--seeds", "1", "--steps", "256", "--num-envs", "32", "--eval-samples", "4",
            "--finetune-steps", "4", "--finetune-batch-size", "8", "--finetune-learning-rate", "0.01", "--select", "all",
            "--adversary-weights", str(adversary_weights), "--no-progress"]
    assert main(args) == 0
    assert json.loads((experiment / "summary.json").read_text())["rows"] == summary["rows"]
    assert (experiment / "finetuned.pt").stat().st_mtime_ns == weights


def test_bad_experiment_input_is_one_line_error(folders: dict[str, Path], tiny_player: Path, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    base = ["adversarial-training", "--items", str(folders["items"]), "--out", str(tmp_path / "exp"),
            "--heldout", str(folders["heldout"]), "--no-progress"]
    assert main([*base, "--player", "oracle"]) == 2
    assert "fine-tuning needs a state player" in capsys.readouterr().err
    # 30 items hold three mini-games of 10: two before and two fresh after do not fit.
    assert main([*base, "--player", f"file:{tiny_player}", "--minigames", "2"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "needs 4" in err
    assert not (tmp_path / "exp" / "before").exists()
