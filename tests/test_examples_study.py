"""The examples study: splits by scene, early stopping, a tiny study end to end and resumed."""

from __future__ import annotations

import contextlib
import io
import json

import numpy as np
import pytest
import torch

from benchmarks.examples_study import (
    RESULTS_FILE,
    StudyOptions,
    load_dataset,
    questions_of,
    read_records,
    run_study,
    split_scenes,
)
from clevr_game.cli import main
from clevr_game.errors import InputError
from clevr_game.exhaustive import ExhaustiveOptions, build_exhaustive
from players.state.models import build_model
from players.state.training import EarlyStopping, PreparedData, TrainingOptions, train

TINY = {"width": 16, "layers": 1, "heads": 2, "feedforward": 32, "fourier_bands": 2}


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    out = tmp_path_factory.mktemp("study") / "2-one"
    build_exhaustive(ExhaustiveOptions(objects=2, hops="one", seed=0, out=str(out)))
    return str(out)


@pytest.fixture(scope="module")
def dataset(folder):
    return load_dataset(folder)


def test_fractions_split_scenes_never_questions(dataset):
    scene_of = dataset.tensors.scene_of.numpy()
    per_scene = np.bincount(scene_of, minlength=int(scene_of.max()) + 1)
    for fraction in (0.05, 0.5, 0.9):
        split = split_scenes(dataset.scenes, fraction, trial=3, seed=0, validation_share=0.1)
        parts = [split.train, split.validation, split.test]
        assert sum(len(p) for p in parts) == len(dataset.scenes)
        assert len(np.unique(np.concatenate(parts))) == len(dataset.scenes)
        assert len(split.train) + len(split.validation) == round(fraction * len(dataset.scenes))
        for part in parts:
            questions = questions_of(dataset.tensors, part)
            # Every question of a part's scenes is in the part, and no question of another scene.
            assert set(questions.scene_of.tolist()) == set(part.tolist())
            assert len(questions) == per_scene[part].sum()
    same = split_scenes(dataset.scenes, 0.5, trial=3, seed=0, validation_share=0.1)
    other = split_scenes(dataset.scenes, 0.5, trial=4, seed=0, validation_share=0.1)
    assert np.array_equal(same.test, split_scenes(dataset.scenes, 0.5, 3, 0, 0.1).test)
    assert not np.array_equal(same.test, other.test)


def test_a_fraction_leaving_too_few_scenes_is_refused(dataset):
    with pytest.raises(InputError, match="--fractions 0.0001: 0 of 1680 scenes to train on"):
        split_scenes(dataset.scenes, 0.0001, trial=0, seed=0, validation_share=0.1)


def test_pixel_players_are_refused_in_one_line(folder, tmp_path, capsys):
    status = main(["study", "examples", "--data", folder, "--players", "pixel-rn", "--out", str(tmp_path / "r")])
    assert status == 2
    assert capsys.readouterr().err.strip() == (
        "clevr-game: error: --players pixel-rn: pixel players are not supported by the study yet "
        "(supported: state-transformer, state-rn)")


def test_early_stopping_keeps_the_best_weights():
    model = build_model("transformer", TINY, 10, 4)
    stopping = EarlyStopping(patience=2)
    assert not stopping.update(0.5, model)
    best = {k: v.clone() for k, v in model.state_dict().items()}
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(1.0)
    assert not stopping.update(0.5, model)  # not better: one stale evaluation
    assert stopping.update(0.4, model)  # two: stop
    stopping.restore(model)
    assert all(torch.equal(best[k], v) for k, v in model.state_dict().items())


def test_training_stops_after_patience_evaluations_without_gain(dataset, tmp_path):
    # A zero learning rate never improves the first evaluation: evaluations at 5 (best), 10, 15 -> stop.
    split = split_scenes(dataset.scenes, 0.5, trial=0, seed=0, validation_share=0.1)
    options = TrainingOptions(player="state-transformer", data="in memory", out=str(tmp_path / "p.pt"), steps=1000,
                              batch_size=16, learning_rate=0.0, warmup_steps=1, eval_every=5, model_config=TINY,
                              log_dir="", progress=False, patience=2, checkpoint_minutes=1e9)
    prepared = PreparedData(questions_of(dataset.tensors, split.train), dataset.vocabulary,
                            questions_of(dataset.tensors, split.validation))
    with contextlib.redirect_stdout(io.StringIO()):
        result = train(options, prepared)
    assert result.step == 15
    assert [point["step"] for point in result.curve] == [5, 10, 15]


def test_a_tiny_study_runs_end_to_end_and_resumes(folder, tmp_path, capsys):
    out = tmp_path / "results"
    common = ["study", "examples", "--data", folder, "--players", "state-transformer", "--fractions", "0.05,0.5",
              "--out", str(out), "--steps", "30", "--eval-every", "10", "--batch-size", "32",
              "--config", json.dumps(TINY)]
    assert main([*common, "--trials", "1"]) == 0
    first = capsys.readouterr().out.splitlines()
    assert first[-1] == f"trials: 2 of 2 recorded; report: {out / 'report.md'}"
    records = read_records(out)
    assert sorted(r["fraction"] for r in records.values()) == [0.05, 0.5]
    for record in records.values():
        assert record["train_scenes"] + record["validation_scenes"] + record["unseen_scenes"] == 1680
        assert record["unseen_questions"] == 4 * record["unseen_scenes"]  # every question of every unseen scene
        assert 0.0 <= record["accuracy"] <= 1.0 and record["steps"] <= 30
    report = (out / "report.md").read_text()
    assert "| 2-one | state-transformer | 0.5 |" in report and (out / "figure.png").stat().st_size > 0
    assert not (out / "work").exists()

    assert main([*common, "--trials", "2"]) == 0  # resumed: only trial 1 of each fraction runs
    second = capsys.readouterr().out.splitlines()
    assert second[0] == "4 trials planned, 2 recorded, 2 to run"
    assert sum(" trial 1: unseen accuracy " in line for line in second) == 2
    again = read_records(out)
    assert len(again) == 4 and all(again[key] == record for key, record in records.items())
    assert len((out / RESULTS_FILE).read_text().splitlines()) == 4

    with pytest.raises(InputError, match="recorded with steps=30, not 31"):
        run_study(StudyOptions(data=[folder], players=["state-transformer"], fractions=[0.05], trials=1,
                               out=str(out), steps=31, eval_every=10, batch_size=32, model_config=TINY),
                  log=lambda line: None)


def test_the_time_limit_stops_the_study_without_recording_a_cut_trial(folder, tmp_path):
    lines: list[str] = []
    options = StudyOptions(data=[folder], players=["state-transformer"], fractions=[0.5], trials=1,
                           out=str(tmp_path / "r"), steps=100_000, eval_every=10, batch_size=32, model_config=TINY,
                           max_minutes=0.02, patience=10**6)  # only the clock can end it, on any machine
    outcome = run_study(options, log=lines.append)
    assert not outcome.complete and outcome.recorded == 0 and read_records(tmp_path / "r") == {}
    assert lines[-1] == "stopped at the --max-minutes limit (0.02); the same command continues the study"
    assert not (tmp_path / "r" / "work").exists()


def test_a_missing_dataset_folder_is_named_before_any_trial(folder, tmp_path):
    options = StudyOptions(data=[folder, str(tmp_path / "nowhere")], players=["state-transformer"], fractions=[0.5],
                           trials=1, out=str(tmp_path / "r"))
    with pytest.raises(InputError, match="nowhere"):
        run_study(options, log=lambda line: None)
    assert not (tmp_path / "r").exists()


def test_a_config_the_model_does_not_take_is_one_line(folder, tmp_path, capsys):
    status = main(["study", "examples", "--data", folder, "--config", '{"widht": 64}', "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err.strip()
    assert status == 2 and "\n" not in err
    assert err.startswith("clevr-game: error: --config for state-transformer: ") and "widht" in err


def test_the_validation_slice_is_capped_in_scenes(dataset):
    capped = split_scenes(dataset.scenes, 0.9, trial=0, seed=0, validation_share=0.5, max_validation_scenes=3)
    uncapped = split_scenes(dataset.scenes, 0.9, trial=0, seed=0, validation_share=0.5)
    assert len(capped.validation) == 3 < len(uncapped.validation)
    assert np.array_equal(capped.test, uncapped.test)  # the unseen part does not depend on the cap
    assert len(capped.train) + 3 == len(uncapped.train) + len(uncapped.validation)
