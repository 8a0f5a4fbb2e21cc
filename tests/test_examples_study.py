"""The examples study: splits by scene, early stopping, a tiny study end to end and resumed, pixel players too."""

from __future__ import annotations

import contextlib
import io
import json
import multiprocessing
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from clevr_game.cli import main
from clevr_game.errors import InputError
from clevr_game.exhaustive import ExhaustiveOptions, build_exhaustive
from clevr_game.text import WordVocabulary, default_word_vocabulary
from experiments.examples_study import (
    LOCK_FILE,
    RESULTS_FILE,
    SUPERSEDED_FILE,
    StudyOptions,
    budget_bound,
    load_dataset,
    precision_note,
    questions_of,
    read_records,
    resumable,
    run_study,
    run_trial,
    runs_as_under_min_steps,
    split_scenes,
    trial_key,
    write_records,
    write_report,
)
from experiments.examples_study import runner as study_runner
from experiments.examples_study.runner import _check_models
from experiments.examples_study.trials import _remember_detections
from players.pixel.checkpoint import build_model as build_pixel_model
from players.pixel.checkpoint import load_player_file
from players.pixel.data import load_pixel_data, select_scenes
from players.pixel.images import STACK_FILE, ImageSpec, image_folder
from players.pixel.object_training import ObjectTransformerTask, fresh_network
from players.pixel.object_transformer import ObjectTransformerNetwork, perception_state
from players.pixel.training import (
    DEFAULT_PERCEPTION_FILE,
    AnsweringTask,
    PixelTrainingOptions,
    PreparedPixelData,
    train_pixel,
)
from players.state.checkpoint import shipped_path
from players.state.features import ANSWERS
from players.state.models import build_model
from players.state.training import EarlyStopping, PreparedData, TrainingOptions, train

TINY = {"width": 16, "layers": 1, "heads": 2, "feedforward": 32, "fourier_bands": 2}
TINY_FILM = {"stem_channels": 8, "width": 8, "blocks": 1, "question_width": 16, "classifier_width": 16}
TINY_PIXEL_RN = {"channels": 8, "word_width": 8, "question_width": 16, "g_width": 16, "g_layers": 2, "f_width": 16}
TINY_OBJECT_TRANSFORMER = {"width": 16, "layers": 1, "heads": 2, "feedforward": 32, "fourier_bands": 2}
FEW_SCENES = 30
"""Scenes of the pixel tests' dataset: a few seconds of Blender rendering, once (then the render cache)."""


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    out = tmp_path_factory.mktemp("study") / "2-one"
    build_exhaustive(ExhaustiveOptions(objects=2, hops="one", seed=0, out=str(out)))
    return str(out)


@pytest.fixture(scope="module")
def dataset(folder):
    return load_dataset(folder)


def few_scenes(source: str, out: Path, count: int = FEW_SCENES) -> str:
    """A dataset folder of `count` evenly spaced scenes of `source` and all their questions."""
    scenes = json.loads((Path(source) / "scenes.json").read_text())
    questions = json.loads((Path(source) / "questions.json").read_text())
    chosen = scenes["scenes"][:: len(scenes["scenes"]) // count][:count]
    kept = {scene["image_index"] for scene in chosen}
    out.mkdir(parents=True)
    (out / "scenes.json").write_text(json.dumps({**scenes, "scenes": chosen}))
    (out / "questions.json").write_text(json.dumps(
        {**questions, "questions": [q for q in questions["questions"] if q["image_index"] in kept]}))
    return str(out)


@pytest.fixture(scope="module")
def few_pixels(folder, tmp_path_factory):
    """(folder, PixelData of every scene at the default image spec, vocabulary): real renders."""
    few = few_scenes(folder, tmp_path_factory.mktemp("few") / "2-one-few")
    data, vocabulary = load_pixel_data(few, default_word_vocabulary(), list(ANSWERS), ImageSpec(),
                                       extend_vocabulary=True)
    return few, data, vocabulary


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


def test_the_neuro_symbolic_player_is_refused_in_one_line(folder, tmp_path, capsys):
    status = main(["study", "examples", "--data", folder, "--players", "film,neuro-symbolic",
                   "--out", str(tmp_path / "r")])
    assert status == 2
    assert capsys.readouterr().err.strip() == (
        "clevr-game: error: --players neuro-symbolic: not supported by the study (it learns perception from scene "
        "annotations and a parser from programs, not from the answers the study trains on); "
        "supported: state-transformer, state-rn, film, pixel-rn, object-transformer")
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("player", ["object-transformer", "film", "pixel-rn"])
def test_the_players_reading_the_perception_need_its_images(folder, tmp_path, capsys, player):
    status = main(["study", "examples", "--data", folder, "--players", player, "--image-size", "64x48",
                   "--out", str(tmp_path / "r")])
    assert status == 2 and capsys.readouterr().err.strip() == (
        f"clevr-game: error: --players {player}: its perception (shipped neuro-symbolic.pt) reads "
        "fast-128x96 images, not fast-64x48 (--preset, --image-size)")
    assert not (tmp_path / "r").exists()


def test_film_and_pixel_rn_read_the_perception_unless_their_config_says_otherwise(folder, tmp_path):
    options = StudyOptions(data=[folder], players=["film", "pixel-rn", "object-transformer"], fractions=[0.5],
                           trials=1, out=str(tmp_path), pixel_config={"film": {"width": 8}})
    assert options.settings("film")["model_config"] == {"backbone": "perception", "width": 8}
    assert options.settings("pixel-rn")["model_config"] == {"backbone": "perception",
                                                            "relation_precision": "bfloat16"}
    assert options.settings("object-transformer")["model_config"] == {}
    pixels = StudyOptions(data=[folder], players=["film"], fractions=[0.5], trials=1, out=str(tmp_path),
                          image_width=64, image_height=48, pixel_config={"film": {"backbone": "none"}})
    assert pixels.settings("film")["model_config"] == {"backbone": "none"}
    _check_models(pixels)  # learning from pixels, film takes any image size


def test_bfloat16_relations_on_a_cpu_without_bfloat16_instructions_are_noted(folder, tmp_path, monkeypatch):
    import players.pixel.models as models

    study = StudyOptions(data=[folder], players=["film", "pixel-rn"], fractions=[0.5], trials=1, out=str(tmp_path))
    exact = StudyOptions(data=[folder], players=["pixel-rn"], fractions=[0.5], trials=1, out=str(tmp_path),
                         pixel_config={"pixel-rn": {"relation_precision": "float32"}})
    monkeypatch.setattr(models, "cpu_computes_bfloat16", lambda: False)
    note = precision_note({"film", "pixel-rn"}, study)
    assert note is not None and note.startswith("note: this CPU has no bfloat16 instructions")
    assert note.endswith("pixel-rn rounds its relations to bfloat16 as autocast does, with float32 products "
                         '(docs/exhaustive.md, "pixel-rn in bfloat16")')
    assert precision_note({"film"}, study) is None  # pixel-rn's trials are all recorded
    assert precision_note({"pixel-rn"}, exact) is None
    monkeypatch.setattr(models, "cpu_computes_bfloat16", lambda: True)
    assert precision_note({"film", "pixel-rn"}, study) is None


def test_a_pixel_config_is_keyed_by_a_chosen_pixel_player(folder, tmp_path):
    with pytest.raises(InputError, match="--pixel-config: 'pixel-rn' is not a pixel player of --players"):
        StudyOptions(data=[folder], players=["film"], fractions=[0.5], trials=1, out=str(tmp_path),
                     pixel_config={"pixel-rn": {}})
    with pytest.raises(InputError, match="--pixel-config for film: .*'widht'"):
        run_study(StudyOptions(data=[folder], players=["film"], fractions=[0.5], trials=1, out=str(tmp_path / "r"),
                               pixel_config={"film": {"widht": 8}}), log=lambda line: None)


def test_selected_scenes_keep_their_images_and_all_their_questions(few_pixels):
    _, data, _ = few_pixels
    rows = np.array([7, 2, 19])
    part = select_scenes(data, rows)
    assert torch.equal(part.images, data.images[rows])
    assert torch.equal(part.targets.points, data.targets.points[rows])
    for new_row, old_row in enumerate(rows):
        asked = torch.nonzero(data.questions.scene_of == int(old_row)).flatten()
        mine = torch.nonzero(part.questions.scene_of == new_row).flatten()
        assert len(mine) == len(asked) > 0  # every question of the scene, renumbered to its new row
        assert torch.equal(part.questions.words[mine], data.questions.words[asked])
        assert [part.answers_text[i] for i in mine] == [data.answers_text[i] for i in asked]
    assert len(part) == sum(int((data.questions.scene_of == int(r)).sum()) for r in rows)
    with pytest.raises(ValueError, match="distinct"):
        select_scenes(data, np.array([3, 3]))


def test_a_datasets_detections_are_sliced_into_its_parts_as_they_would_be_detected(few_pixels, tmp_path):
    few, _, _ = few_pixels
    dataset = load_dataset(few, ImageSpec(), log=lambda line: None)
    options = StudyOptions(data=[few], players=["object-transformer"], fractions=[0.5], trials=1, out=str(tmp_path),
                           pixel_config={"object-transformer": TINY_OBJECT_TRANSFORMER})
    _remember_detections(dataset, options)
    (key, whole), = dataset.pixels.detections.items()
    rows = np.array([17, 3, 25, 4, 11, 29, 0, 8])
    part = select_scenes(dataset.pixels, rows)
    assert set(part.detections) == {key}

    def task_for(config: dict) -> ObjectTransformerTask:
        return ObjectTransformerTask(fresh_network(config, len(dataset.vocabulary)), torch.device("cpu"),
                                     detect_batch=3)  # other batches than the whole's

    assert task_for(TINY_OBJECT_TRANSFORMER).key == key
    bare = select_scenes(dataset.pixels, rows)
    bare.detections.clear()
    detected = task_for(TINY_OBJECT_TRANSFORMER).detections(bare)
    for sliced, own, full in zip(part.detections[key], detected, whole, strict=True):
        assert torch.equal(sliced, full[torch.as_tensor(rows)])
        # Batches under 64 images take other kernels: the same detections up to float rounding.
        torch.testing.assert_close(sliced, own, rtol=0.0, atol=1e-6)
    fewer = task_for({**TINY_OBJECT_TRANSFORMER, "slots": 4})
    assert fewer.key != key and fewer.detections(part).scores.shape == (len(rows), 4)  # not the cached ten


def test_object_transformer_trials_detect_each_image_of_a_dataset_once(few_pixels, tmp_path, monkeypatch):
    few, _, _ = few_pixels
    detected: list[int] = []
    original = ObjectTransformerNetwork.detect

    def counting(self, images):
        detected.append(len(images))
        return original(self, images)

    monkeypatch.setattr(ObjectTransformerNetwork, "detect", counting)
    dataset = load_dataset(few, ImageSpec(), log=lambda line: None)
    options = StudyOptions(data=[few], players=["object-transformer"], fractions=[0.5], trials=2, out=str(tmp_path),
                           steps=20, eval_every=10, batch_size=16,
                           pixel_config={"object-transformer": TINY_OBJECT_TRANSFORMER})
    records = [run_trial(dataset, "object-transformer", 0.5, trial, options, tmp_path / "work", None)
               for trial in (0, 1)]
    assert sum(detected) == FEW_SCENES  # the dataset once; neither trial's parts nor its evaluation again
    assert all(record is not None and 0.0 <= record["accuracy"] <= 1.0 for record in records)


def test_a_large_unseen_part_is_evaluated_in_chunks_with_the_cached_features_answers(few_pixels):
    _, data, vocabulary = few_pixels
    model = build_pixel_model("film", {**TINY_FILM, "backbone": "perception"}, len(vocabulary), len(ANSWERS)).eval()
    model.backbone.load_perception(perception_state(load_player_file(shipped_path(DEFAULT_PERCEPTION_FILE)).state_dict))
    cached = AnsweringTask(model, torch.device("cpu"), cache_batch=4)
    with torch.inference_mode():
        expected = cached.logits(data, torch.arange(len(data)))
    streaming = AnsweringTask(model, torch.device("cpu"), cache_batch=4, cache_limit=16)  # chunks of 4 scenes
    with torch.inference_mode():
        parts = list(streaming.streamed_logits(data, len(data), batch_size=7))
    asked = torch.cat([indices for indices, _ in parts])
    assert sorted(asked.tolist()) == list(range(len(data)))  # every question once
    assert len(parts) > len(data.images) // 4  # chunked by scene, not one pass
    streamed = torch.empty_like(expected)
    streamed[asked] = torch.cat([logits for _, logits in parts])
    torch.testing.assert_close(streamed, expected, rtol=1e-4, atol=1e-5)
    assert streaming.evaluate(data)[0].accuracy == cached.evaluate(data)[0].accuracy
    assert not streaming._features  # nothing kept: a large part's features are freed chunk by chunk


def test_pixel_training_stops_after_patience_evaluations_without_gain(few_pixels, tmp_path):
    # A zero learning rate never improves the first evaluation (the frozen perception's detections and a
    # dropout-free transformer: the same answers every time): evaluations at 5 (best), 10, 15 -> stop.
    few, data, vocabulary = few_pixels
    options = PixelTrainingOptions(player="object-transformer", data=few, out=str(tmp_path / "p.pt"), steps=1000,
                                   batch_size=16, learning_rate=0.0, warmup_steps=1, eval_every=5,
                                   model_config=TINY_OBJECT_TRANSFORMER, log_dir="", progress=False, patience=2,
                                   checkpoint_minutes=1e9)
    prepared = PreparedPixelData(select_scenes(data, np.arange(20)), vocabulary, select_scenes(data, np.arange(20, 30)))
    with contextlib.redirect_stdout(io.StringIO()):
        result = train_pixel(options, prepared)
    assert result.step == 15
    assert [point["step"] for point in result.curve] == [5, 10, 15]


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


def test_early_stopping_holds_off_until_the_minimum_step():
    model = build_model("transformer", TINY, 10, 4)
    stopping = EarlyStopping(patience=2, min_steps=30)
    assert not stopping.after_evaluation(0.5, model, 10, last_step=False)
    assert not stopping.after_evaluation(0.5, model, 20, last_step=False)
    assert not stopping.after_evaluation(0.4, model, 25, last_step=False)  # patience spent, the minimum not
    assert stopping.exhausted and not stopping.has_stopped(25)
    assert stopping.after_evaluation(0.5, model, 30, last_step=False) and stopping.has_stopped(30)


def test_pixel_training_with_a_minimum_step_stops_there_and_continues_there_when_cut(few_pixels, tmp_path):
    # The zero learning rate of the test above: patience is spent at step 15, the minimum holds the run to 25.
    few, data, vocabulary = few_pixels
    prepared = PreparedPixelData(select_scenes(data, np.arange(20)), vocabulary, select_scenes(data, np.arange(20, 30)))

    def run(out: str, **changes: Any) -> Any:
        options = PixelTrainingOptions(player="object-transformer", data=few, out=out, steps=1000, batch_size=16,
                                       learning_rate=0.0, warmup_steps=1, eval_every=5,
                                       model_config=TINY_OBJECT_TRANSFORMER, log_dir="", progress=False, patience=2,
                                       min_steps=25, checkpoint_minutes=1e9, **changes)
        with contextlib.redirect_stdout(io.StringIO()):
            return train_pixel(options, prepared)

    uncut = run(str(tmp_path / "uncut.pt"))
    assert uncut.step == 25 and [point["step"] for point in uncut.curve] == [5, 10, 15, 20, 25]
    cut = run(str(tmp_path / "cut.pt"), max_minutes=1e-9)  # one step, then cut
    for _ in range(15):
        cut = run(str(tmp_path / "cut.pt"), max_minutes=1e-9, resume=True)
    assert cut.step == 16 and cut.cut  # resumed past its spent patience, before the minimum: trained on
    assert run(str(tmp_path / "cut.pt"), resume=True).step == 25


def test_a_record_from_before_a_minimum_step_counts_when_its_run_met_no_stop_before_it(folder, tmp_path):
    def record(steps: int, stopped_early: bool, **settings: Any) -> dict[str, Any]:
        return {"key": "2-one__pixel-rn__f0.5__t0", "player": "pixel-rn", "steps": steps,
                "stopped_early": stopped_early, "settings": {"steps": 2000, **settings}}

    assert runs_as_under_min_steps(record(2000, False), 1000)  # ran the whole budget
    assert runs_as_under_min_steps(record(1300, True), 1000)  # stopped past the minimum: the same stop
    assert runs_as_under_min_steps(record(1000, True), 1000)
    assert not runs_as_under_min_steps(record(800, True), 1000)  # would have trained on
    assert runs_as_under_min_steps(record(800, True, min_steps=1000), 1000)
    assert not runs_as_under_min_steps(record(1300, True, min_steps=1000), 0)  # a lower minimum may stop sooner

    options = StudyOptions(data=[folder], players=["pixel-rn"], fractions=[0.5], trials=1,
                           out=str(tmp_path), steps=2000)
    assert options.settings("pixel-rn")["min_steps"] == 1000 and "min_steps" not in options.settings("film")
    write_records(tmp_path, {"2-one__pixel-rn__f0.5__t0": {**record(800, True), "accuracy": 0.5}})
    with pytest.raises(InputError, match=r"trial 2-one__pixel-rn__f0.5__t0 was recorded with min_steps=0 and "
                                         r"stopped at step 800; its player's trials now train at least 1000 steps"):
        run_study(replace(options, report_only=True), log=lambda line: None)


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


@pytest.mark.parametrize("player", ["state-transformer", "pixel-rn"])
def test_a_trial_cut_after_every_step_records_what_an_uncut_one_does(few_pixels, tmp_path, player):
    few, _, _ = few_pixels
    dataset = load_dataset(few, ImageSpec(), log=lambda line: None)
    options = StudyOptions(data=[few], players=[player], fractions=[0.5], trials=1, out=str(tmp_path), steps=12,
                           eval_every=4, batch_size=16, patience=2, model_config=TINY,
                           pixel_config={"pixel-rn": TINY_PIXEL_RN} if player == "pixel-rn" else {})
    # pixel-rn has dropout: the resumed runs must restore torch's RNG too
    uncut = run_trial(dataset, player, 0.5, 0, options, tmp_path / "uncut", None)
    assert uncut is not None
    runs, record = 0, None
    while record is None:  # a limit already passed: each run trains one step, checkpoints and is cut
        runs += 1
        record = run_trial(dataset, player, 0.5, 0, options, tmp_path / "cut", 1e-9)
        assert runs <= options.steps
    assert runs == uncut["steps"]
    assert {**record, "seconds": None} == {**uncut, "seconds": None}
    assert ("relation_products" in record) == (player == "pixel-rn")  # bfloat16 relations say which products
    assert not any((tmp_path / "cut").iterdir())  # a recorded trial leaves no checkpoint behind


def test_a_pixel_run_cut_after_every_step_ends_with_the_weights_of_an_uncut_one(few_pixels, tmp_path):
    few, data, vocabulary = few_pixels
    config = {**TINY_PIXEL_RN, "backbone": "perception", "dropout": 0.5}  # dropout: torch's RNG must be restored
    prepared = PreparedPixelData(select_scenes(data, np.arange(20)), vocabulary, select_scenes(data, np.arange(20, 30)))

    def run(out: str, **changes) -> Any:
        options = PixelTrainingOptions(player="pixel-rn", data=few, out=out, steps=6, batch_size=16, warmup_steps=1,
                                       eval_every=2, model_config=config, log_dir="", progress=False, patience=2,
                                       checkpoint_minutes=1e9, **changes)
        with contextlib.redirect_stdout(io.StringIO()):
            return train_pixel(options, prepared)

    uncut = run(str(tmp_path / "uncut.pt"))
    runs = [run(str(tmp_path / "cut.pt"), max_minutes=1e-9)]
    while runs[-1].cut:
        runs.append(run(str(tmp_path / "cut.pt"), max_minutes=1e-9, resume=True))
    assert len(runs) == uncut.step and without_minutes(runs[-1].curve) == without_minutes(uncut.curve)
    expected = load_player_file(str(tmp_path / "uncut.pt")).state_dict
    resumed = load_player_file(str(tmp_path / "cut.pt")).state_dict
    assert all(torch.equal(expected[name], resumed[name]) for name in expected)


def without_minutes(curve: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A learning curve without its wall-clock field, which depends on the machine's load, not on the run."""
    return [{key: value for key, value in point.items() if key != "minutes"} for point in curve]


def test_early_stopping_survives_a_resume(dataset, tmp_path):
    # As in the uncut run above: a zero learning rate never beats the evaluation at 5, so 10 and 15 are stale.
    split = split_scenes(dataset.scenes, 0.5, trial=0, seed=0, validation_share=0.1)
    options = TrainingOptions(player="state-transformer", data="in memory", out=str(tmp_path / "p.pt"), steps=40,
                              batch_size=16, learning_rate=0.0, warmup_steps=1, eval_every=5, model_config=TINY,
                              log_dir="", progress=False, patience=2, checkpoint_minutes=1e9, max_minutes=1e-9)
    prepared = PreparedData(questions_of(dataset.tensors, split.train), dataset.vocabulary,
                            questions_of(dataset.tensors, split.validation))
    runs = []
    with contextlib.redirect_stdout(io.StringIO()):
        runs.append(train(options, prepared))
        while runs[-1].cut:
            runs.append(train(replace(options, resume=True), prepared))
        after = train(replace(options, resume=True, max_minutes=None), prepared)  # already stopped: no step more
    assert len(runs) == 15 and runs[-1].step == 15 and after.step == 15
    assert [point["step"] for point in after.curve] == [5, 10, 15]
    assert runs[-1].resumed_seconds >= runs[-2].resumed_seconds > 0.0


def test_a_resume_on_data_with_other_words_is_one_line(dataset, tmp_path):
    split = split_scenes(dataset.scenes, 0.5, trial=0, seed=0, validation_share=0.1)
    options = TrainingOptions(player="state-transformer", data="in memory", out=str(tmp_path / "p.pt"), steps=4,
                              batch_size=16, model_config=TINY, log_dir="", progress=False, max_minutes=1e-9)
    fit = questions_of(dataset.tensors, split.train)
    with contextlib.redirect_stdout(io.StringIO()):
        assert train(options, PreparedData(fit, dataset.vocabulary)).cut
    other = WordVocabulary([*dataset.vocabulary.words[2:], "zebra"])
    with pytest.raises(InputError, match=r"p\.pt\.ckpt: was trained on another word list"):
        train(replace(options, resume=True), PreparedData(fit, other))


def test_a_run_folder_of_another_trial_or_setting_starts_afresh(tmp_path):
    run_dir = tmp_path / "work" / trial_key("2-one", "pixel-rn", 0.5, 0)
    training = PixelTrainingOptions(player="pixel-rn", data="d", out=str(run_dir / "player.pt"), steps=100)
    settings = {"steps": 100}
    assert not resumable(run_dir, training, settings)  # nothing there yet
    training.checkpoint_path.write_bytes(b"a checkpoint")
    assert resumable(run_dir, replace(training, max_minutes=3.0, command="again"), settings)
    assert not resumable(run_dir, replace(training, learning_rate=0.5), settings)
    assert not training.checkpoint_path.exists()  # cleared for the fresh start
    training.checkpoint_path.write_bytes(b"a checkpoint")
    assert not resumable(run_dir, training, {"steps": 200})


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

    (out / "report.md").unlink()
    assert main([*common, "--trials", "2", "--report-only"]) == 0  # the report again, and no trial
    only = capsys.readouterr().out.splitlines()
    assert only[0] == "4 trials planned, 2 recorded, 2 to run (--report-only: none now)"
    assert only[-1] == f"trials: 2 of 4 recorded; report: {out / 'report.md'}"
    assert read_records(out) == records and "| 2-one | state-transformer | 0.5 |" in (out / "report.md").read_text()

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


def test_workers_side_by_side_record_what_one_process_records(folder, tmp_path):
    def study(out: Path, workers: int) -> dict[str, dict]:
        run_study(StudyOptions(data=[folder], players=["state-transformer"], fractions=[0.05, 0.5], trials=2,
                               out=str(out), steps=30, eval_every=10, batch_size=32, model_config=TINY,
                               workers=workers), log=lambda line: None)
        return {key: {k: v for k, v in record.items() if k != "seconds"}
                for key, record in read_records(out).items()}

    alone, side_by_side = study(tmp_path / "one", 1), study(tmp_path / "two", 2)
    assert len(alone) == 4 and side_by_side == alone
    assert len({record["accuracy"] for record in alone.values()}) > 1  # four different trials, not one repeated
    assert not (tmp_path / "two" / "work").exists()


def test_a_study_shared_out_by_dataset_and_merged_records_what_one_run_records(folder, tmp_path, capsys):
    few = few_scenes(folder, tmp_path / "2-one-few")
    common = ["study", "examples", "--players", "state-transformer", "--fractions", "0.1,0.5", "--trials", "1",
              "--steps", "30", "--eval-every", "10", "--batch-size", "32", "--config", json.dumps(TINY)]

    def without_time(out: Path) -> dict[str, dict]:
        return {key: {k: v for k, v in record.items() if k != "seconds"} for key, record in read_records(out).items()}

    assert main([*common, "--data", f"{folder},{few}", "--out", str(tmp_path / "whole")]) == 0
    assert main([*common, "--data", folder, "--out", str(tmp_path / "a")]) == 0
    assert main([*common, "--data", few, "--out", str(tmp_path / "b")]) == 0
    capsys.readouterr()
    merge = [*common, "--data", f"{folder},{few}", "--out", str(tmp_path / "a"), "--merge-from", str(tmp_path / "b")]
    assert main([*merge, "--report-only"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"merged 2 trials from {tmp_path / 'b'}"
    assert lines[-1] == f"trials: 4 of 4 recorded; report: {tmp_path / 'a' / 'report.md'}"
    assert without_time(tmp_path / "a") == without_time(tmp_path / "whole")
    assert "| 2-one-few | state-transformer | 0.5 |" in (tmp_path / "a" / "report.md").read_text()
    assert main([*merge, "--report-only"]) == 0  # merging again adds nothing
    assert capsys.readouterr().out.splitlines()[0] == f"merged 0 trials from {tmp_path / 'b'}"

    theirs = read_records(tmp_path / "b")
    key = "2-one-few__state-transformer__f0.5__t0"
    theirs[key] = {**theirs[key], "accuracy": theirs[key]["accuracy"] / 2 + 0.01}
    write_records(tmp_path / "b", theirs)
    assert main([*merge, "--report-only"]) == 2
    assert capsys.readouterr().err.strip() == (
        f"clevr-game: error: --merge-from {tmp_path / 'b' / RESULTS_FILE}: trial {key} is recorded there with "
        f"another accuracy than in {tmp_path / 'a'} (not the same study)")

    other = ["--data", few, "--out", str(tmp_path / "c"), "--steps", "31"]
    assert main([*common, *other]) == 0
    capsys.readouterr()
    assert main([*common, "--data", folder, "--out", str(tmp_path / "d"), "--merge-from", str(tmp_path / "c")]) == 2
    assert "recorded with steps=31, not 30" in capsys.readouterr().err
    assert not (tmp_path / "d" / RESULTS_FILE).exists()  # refused before any trial ran
    assert main([*common, "--data", folder, "--out", str(tmp_path / "d"), "--merge-from",
                 str(tmp_path / "nowhere")]) == 2
    assert capsys.readouterr().err.strip() == (
        f"clevr-game: error: --merge-from {tmp_path / 'nowhere'}: no {RESULTS_FILE} there")


def test_a_results_folder_has_one_writer_at_a_time_and_a_dead_writer_frees_it(folder, tmp_path, capsys):
    out = tmp_path / "r"
    out.mkdir()
    command = ["study", "examples", "--data", folder, "--players", "state-transformer", "--fractions", "0.5",
               "--trials", "1", "--steps", "30", "--eval-every", "10", "--batch-size", "32",
               "--config", json.dumps(TINY), "--out", str(out)]
    holder = subprocess.Popen(  # another run writing the folder: it holds the lock until it dies
        [sys.executable, "-c", f"from filelock import FileLock; lock = FileLock({str(out / LOCK_FILE)!r}); "
         "lock.acquire(); print('held', flush=True); import time; time.sleep(600)"],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert main(command) == 2
        assert capsys.readouterr().err.strip() == (
            f"clevr-game: error: --out {out}: another study run is writing there ({out / LOCK_FILE} is held); "
            "wait for it to end, or run into another folder and --merge-from it afterwards")
        assert main([*command, "--report-only"]) == 2  # a merge or a report rewrites study.jsonl too
        assert not (out / RESULTS_FILE).exists()
    finally:
        holder.kill()
        holder.wait()
    assert main(command) == 0  # killed, not cleaned up: the system freed its lock
    assert len(read_records(out)) == 1
    assert main(command) == 0  # and a finished run frees its own


@pytest.mark.parametrize("workers", [1, 2])
def test_a_failing_trial_stops_the_study_and_keeps_the_finished_ones(folder, tmp_path, workers):
    options = StudyOptions(data=[folder], players=["state-transformer"], fractions=[0.5, 0.0001], trials=3,
                           out=str(tmp_path / "r"), steps=30, eval_every=10, batch_size=32, model_config=TINY,
                           workers=workers)  # 0.0001 of 1,680 scenes is none: that trial fails at its split
    with pytest.raises(InputError, match=r"--fractions 0.0001: 0 of 1680 scenes"):
        run_study(options, log=lambda line: None)
    recorded = read_records(tmp_path / "r")
    assert "2-one__state-transformer__f0.5__t0" in recorded  # finished beside the failure: kept
    assert not any("f0.0001" in key for key in recorded)


def test_a_killed_worker_is_one_line_and_the_finished_trials_stay_recorded(folder, tmp_path, capsys):
    out = tmp_path / "r"
    command = ["study", "examples", "--data", folder, "--players", "state-transformer", "--fractions", "0.05,0.5",
               "--trials", "2", "--out", str(out), "--steps", "400", "--eval-every", "10", "--batch-size", "32",
               "--patience", "1000", "--config", json.dumps(TINY), "--workers", "2"]
    status: list[int] = []
    study = threading.Thread(target=lambda: status.append(main(command)))
    study.start()
    deadline = time.monotonic() + 120
    while not multiprocessing.active_children() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(3)  # a trial under way: its worker has loaded the dataset
    victim = multiprocessing.active_children()[0]
    os.kill(victim.pid, signal.SIGKILL)  # what the system's out-of-memory killer does
    study.join(timeout=300)
    assert status == [1]
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "a study worker process died" in error[0] and "--workers 1" in error[0]
    assert error[0].startswith("clevr-game: error: 2-one state-transformer fraction ")
    recorded = read_records(out)  # whatever finished is intact and a rerun takes the rest
    assert main([*command[:-1], "1"]) == 0
    assert set(recorded) < set(read_records(out)) and len(read_records(out)) == 4


def test_a_tiny_pixel_study_renders_once_runs_end_to_end_and_resumes(folder, tmp_path, capsys):
    few = few_scenes(folder, tmp_path / "2-one-few")  # its own folder: no image of it rendered yet
    out = tmp_path / "results"
    common = ["study", "examples", "--data", few, "--players", "film,state-transformer", "--fractions", "0.5",
              "--out", str(out), "--steps", "20", "--eval-every", "10", "--batch-size", "16",
              "--config", json.dumps(TINY), "--pixel-config", json.dumps({"film": TINY_FILM})]
    assert main([*common, "--trials", "1"]) == 0
    first = capsys.readouterr().out.splitlines()
    images = image_folder(few, ImageSpec())
    ready = next(line for line in first if line.startswith("2-one-few: "))
    assert ready.startswith(f"2-one-few: {FEW_SCENES} images (fast-128x96; {FEW_SCENES} new, 0 already there), "
                            "ready in ") and ready.endswith(f" s ({images})")
    assert first[-1] == f"trials: 2 of 2 recorded; report: {out / 'report.md'}"
    records = read_records(out)
    film, state = records["2-one-few__film__f0.5__t0"], records["2-one-few__state-transformer__f0.5__t0"]
    for record in (film, state):
        assert record["train_scenes"] + record["validation_scenes"] + record["unseen_scenes"] == FEW_SCENES
        assert record["unseen_questions"] == 4 * record["unseen_scenes"]
        assert 0.0 <= record["accuracy"] <= 1.0 and 0 < record["steps"] <= 20
    assert film["train_scenes"] == state["train_scenes"]  # the same split for every player
    assert film["settings"] == {**state["settings"], "model_config": {"backbone": "perception", **TINY_FILM},
                                "preset": "fast",
                                "image_width": 128, "image_height": 96}
    assert state["settings"]["model_config"] == TINY and "preset" not in state["settings"]
    assert "| 2-one-few | film | 0.5 |" in (out / "report.md").read_text()
    rendered = {path.name: path.stat().st_mtime_ns for path in images.iterdir()}
    assert len(rendered) == FEW_SCENES + 1 and STACK_FILE in rendered  # the images and their stack

    assert main([*common, "--trials", "2"]) == 0  # resumed: trial 1 runs on the images of trial 0
    second = capsys.readouterr().out.splitlines()
    assert second[0] == "4 trials planned, 2 recorded, 2 to run"
    assert second[1].startswith("plan: 2 trials, about ") and "film 1 x ~" in second[1]
    assert second[2].startswith(f"2-one-few: {FEW_SCENES} images (fast-128x96; 0 new, {FEW_SCENES} already there)")
    assert not any(line.startswith("rendering ") for line in second)
    assert {path.name: path.stat().st_mtime_ns for path in images.iterdir()} == rendered  # nothing rewritten
    again = read_records(out)
    assert len(again) == 4 and again["2-one-few__film__f0.5__t0"] == film
    assert again["2-one-few__film__f0.5__t1"]["settings"] == film["settings"]

    with pytest.raises(InputError, match="recorded with image_height=96, not 48"):
        run_study(StudyOptions(data=[few], players=["film"], fractions=[0.5], trials=1, out=str(out), steps=20,
                               eval_every=10, batch_size=16, model_config=TINY,
                               pixel_config={"film": {**TINY_FILM, "backbone": "none"}},
                               image_width=64, image_height=48), log=lambda line: None)


@pytest.mark.parametrize("workers", [1, 2])
def test_the_time_limit_stops_the_study_without_recording_a_cut_trial(folder, tmp_path, workers, monkeypatch):
    # Loaded before each run's clock starts (a run forgets it at its end): on a busy machine the load alone can
    # outlast the limit, and no trial starts.
    loaded = load_dataset(folder, log=lambda line: None)
    monkeypatch.setattr(study_runner, "_loaded", loaded)
    lines: list[str] = []
    options = StudyOptions(data=[folder], players=["state-transformer"], fractions=[0.5], trials=3,
                           out=str(tmp_path / "r"), steps=100_000, eval_every=10, batch_size=32, model_config=TINY,
                           max_minutes=0.05, patience=10**6, workers=workers)  # only the clock can end it, on any machine
    outcome = run_study(options, log=lines.append)
    assert not outcome.complete and outcome.recorded == 0 and read_records(tmp_path / "r") == {}
    assert lines[-1] == "stopped at the --max-minutes limit (0.05); the same command continues the study"
    work = tmp_path / "r" / "work"
    kept = sorted(work.iterdir()) if work.exists() else []  # the cut trials' checkpoints, for the next run
    assert len(kept) <= workers
    assert all({"player.pt.ckpt", "trial.json"} <= {path.name for path in run_dir.iterdir()} for run_dir in kept)
    if workers > 1:
        return  # a pool's start can take the whole limit, before any trial starts

    assert [run_dir.name for run_dir in kept] == ["2-one__state-transformer__f0.5__t0"]
    marked = (kept[0] / "trial.json").stat().st_mtime_ns
    first = torch.load(kept[0] / "player.pt.ckpt", weights_only=False)["step"]
    monkeypatch.setattr(study_runner, "_loaded", loaded)
    run_study(replace(options, max_minutes=0.1), log=lines.append)  # continues trial 0 where the first run cut it
    assert (kept[0] / "trial.json").stat().st_mtime_ns == marked  # a fresh start would have marked it again
    assert torch.load(kept[0] / "player.pt.ckpt", weights_only=False)["step"] > first


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


def _record(fraction: float, accuracy: float, stopped_early: bool) -> dict:
    trained = round(fraction * 1000)  # a dataset of 1,000 scenes, a tenth of the trained ones for validation
    return {"dataset": "d", "player": "state-transformer", "fraction": fraction, "trial": 0, "accuracy": accuracy,
            "stopped_early": stopped_early, "seconds": 1.0, "train_scenes": trained - trained // 10,
            "validation_scenes": trained // 10}


def test_the_report_flags_fractions_whose_trials_ran_out_of_steps(tmp_path):
    records = [_record(0.1, 0.90, stopped_early=False), _record(0.5, 0.95, stopped_early=True),
               _record(0.9, 0.995, stopped_early=False)]
    assert dict(budget_bound(records)) == {("d", "state-transformer", 0.1): 1, ("d", "state-transformer", 0.9): 1}
    report = write_report(tmp_path, records, "").read_text()
    assert "| d | state-transformer | 0.9 (budget-bound below it: 0.1) | 900 (810 + 90) | 1 |" in report
    assert "| d | state-transformer | 0.1 | 0.9000 [0.9000, 0.9000] | 1 | 1 |" in report
    assert "| d | state-transformer | 0.5 | 0.9500 [0.9500, 0.9500] | 1 | 0 |" in report


def test_a_line_not_yet_measured_at_the_larger_shares_is_not_called_short(tmp_path):
    late = {**_record(0.1, 0.95, stopped_early=True), "dataset": "e"}  # only its smallest share so far
    report = write_report(tmp_path, [_record(0.1, 0.95, stopped_early=True), _record(0.9, 0.98, stopped_early=True),
                                     late], "").read_text()
    assert "| d | state-transformer | not reached |  | 1 |" in report  # measured throughout: short
    assert "| e | state-transformer | not reached up to 0.1 (no trials above it yet) |  | 1 |" in report


def test_the_report_says_which_players_train_a_minimum_of_steps_and_what_was_superseded(tmp_path):
    plain = _record(0.5, 0.95, stopped_early=True)
    held = {**_record(0.5, 0.7, stopped_early=True), "player": "pixel-rn", "settings": {"min_steps": 1000}}
    assert "minimum" not in write_report(tmp_path, [plain], "").read_text()
    (tmp_path / SUPERSEDED_FILE).write_text(json.dumps(held) + "\n" + json.dumps(held) + "\n")
    report = write_report(tmp_path, [plain, held], "").read_text()
    assert "pixel-rn's trials train at least 1,000 steps before early stopping may end them" in report
    assert "state-transformer's trials train" not in report
    assert f"2 records taken out by a change of protocol are kept in `{SUPERSEDED_FILE}`" in report
