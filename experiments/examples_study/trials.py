"""One trial: a fresh model trained on a split's train scenes, measured on its unseen ones (resumable)."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from clevr_game.atomic import write_text_atomic

if TYPE_CHECKING:
    from players.pixel.images import ImageSpec
from experiments.examples_study.options import (
    PIXEL_PLAYERS,
    TRIAL_CHECKPOINT_MINUTES,
    TRIAL_FILE,
    VOLATILE_TRAINING_OPTIONS,
    StudyOptions,
    dataset_name,
)
from experiments.examples_study.records import SceneSplit, questions_of, split_scenes, trial_key

# ------------------------------------------------------------------ one trial


@dataclass
class LoadedDataset:
    name: str
    folder: str
    tensors: Any  # QuestionTensors of every question
    vocabulary: Any  # the WordVocabulary the tensors use
    scenes: np.ndarray  # rows of scenes that have at least one question
    pixels: Any = None  # players.pixel.data.PixelData of every scene (its questions are `tensors`), for pixel players


def load_dataset(folder: str, image_spec: ImageSpec | None = None, render_workers: int = 2,
                 log: Callable[[str], None] = print) -> LoadedDataset:
    """The dataset's questions as tensors and, with an `image_spec`, its images (rendered when missing)."""
    from clevr_game.text import default_word_vocabulary
    from players.state.data import tensorise
    from players.state.features import ANSWERS

    if image_spec is None:
        tensors, vocabulary = tensorise(folder, default_word_vocabulary(), list(ANSWERS), extend_vocabulary=True)
        return LoadedDataset(dataset_name(folder), folder, tensors, vocabulary, np.unique(tensors.scene_of.numpy()))

    from players.pixel.data import load_pixel_data
    from players.pixel.images import image_folder

    images = image_folder(folder, image_spec)
    before = _image_count(images)
    started = time.monotonic()
    # The same tensorise call as above, so state players of the same run train on identical tensors.
    pixels, vocabulary = load_pixel_data(folder, default_word_vocabulary(), list(ANSWERS), image_spec,
                                         extend_vocabulary=True, render_workers=render_workers, progress=True)
    log(f"{dataset_name(folder)}: {len(pixels.images)} images ({image_spec.label}; {_image_count(images) - before} new, "
        f"{before} already there), ready in {time.monotonic() - started:.0f} s ({images})")
    tensors = pixels.questions
    return LoadedDataset(dataset_name(folder), folder, tensors, vocabulary, np.unique(tensors.scene_of.numpy()),
                         pixels)


def _image_count(folder: Path) -> int:
    return sum(1 for _ in folder.glob("*.png")) if folder.is_dir() else 0


def run_trial(dataset: LoadedDataset, player: str, fraction: float, trial: int, options: StudyOptions,
              work: Path, minutes_left: float | None) -> dict[str, Any] | None:
    """Train a fresh `player` on one split and score it on the unseen scenes; None when cut by the time limit."""
    if player in PIXEL_PLAYERS:
        return run_pixel_trial(dataset, player, fraction, trial, options, work, minutes_left)
    from players.state.checkpoint import load_player_file
    from players.state.training import PreparedData, TrainingOptions, evaluate_tensors, train

    started = time.monotonic()
    split = split_scenes(dataset.scenes, fraction, trial, options.seed, options.validation_share,
                         options.max_validation_scenes)
    fit, validation = questions_of(dataset.tensors, split.train), questions_of(dataset.tensors, split.validation)
    unseen = questions_of(dataset.tensors, split.test)
    run_dir = work / trial_key(dataset.name, player, fraction, trial)
    training = TrainingOptions(
        player=player, data=dataset.folder, out=str(run_dir / "player.pt"), steps=options.steps,
        batch_size=min(options.batch_size, len(fit)), learning_rate=options.learning_rate,
        warmup_steps=min(options.warmup_steps, max(1, options.steps // 10)), seed=options.seed * 1000 + trial,
        eval_every=options.eval_every, checkpoint_minutes=TRIAL_CHECKPOINT_MINUTES, max_minutes=minutes_left,
        model_config=dict(options.model_config), threads=options.threads, log_dir="", progress=False,
        patience=options.patience, command=options.command,
    )
    training.resume = resumable(run_dir, training, options.settings(player))
    with contextlib.redirect_stdout(io.StringIO()):  # the trainer's per-evaluation lines; the curve keeps them
        result = train(training, PreparedData(fit, dataset.vocabulary, validation))
    if result.cut:
        return None  # its checkpoint stays: the next run continues it
    model = load_player_file(training.out).build()
    scores = evaluate_tensors(model, unseen)
    shutil.rmtree(run_dir, ignore_errors=True)
    return _record(dataset, player, fraction, trial, split, len(fit), len(unseen), scores, result.step,
                   result.curve, started - result.resumed_seconds, options)


def run_pixel_trial(dataset: LoadedDataset, player: str, fraction: float, trial: int, options: StudyOptions,
                    work: Path, minutes_left: float | None) -> dict[str, Any] | None:
    """`run_trial` for a pixel player: the pixel trainer on the split's images and questions."""
    from players.pixel.checkpoint import load_player_file
    from players.pixel.data import select_scenes
    from players.pixel.training import (
        PixelTrainingOptions,
        PreparedPixelData,
        evaluate_pixel_player,
        train_pixel,
    )

    started = time.monotonic()
    if player == "object-transformer":
        _remember_detections(dataset, options)
    split = split_scenes(dataset.scenes, fraction, trial, options.seed, options.validation_share,
                         options.max_validation_scenes)
    # Each part holds copies of its own images only: the object-transformer perceives every image of a part.
    fit, validation = select_scenes(dataset.pixels, split.train), select_scenes(dataset.pixels, split.validation)
    run_dir = work / trial_key(dataset.name, player, fraction, trial)
    spec = options.image_spec
    training = PixelTrainingOptions(
        player=player, data=dataset.folder, out=str(run_dir / "player.pt"), preset=spec.preset, width=spec.width,
        height=spec.height, steps=options.steps, batch_size=min(options.batch_size, len(fit)),
        learning_rate=options.learning_rate, warmup_steps=min(options.warmup_steps, max(1, options.steps // 10)),
        seed=options.seed * 1000 + trial, eval_every=options.eval_every, eval_size=len(validation),
        checkpoint_minutes=TRIAL_CHECKPOINT_MINUTES, max_minutes=minutes_left,
        model_config=options.pixel_model_config(player), threads=options.threads, log_dir="", progress=False,
        patience=options.patience, min_steps=options.min_steps(player), command=options.command,
    )
    training.resume = resumable(run_dir, training, options.settings(player))
    with contextlib.redirect_stdout(io.StringIO()):  # the trainer's per-evaluation lines; the curve keeps them
        result = train_pixel(training, PreparedPixelData(fit, dataset.vocabulary, validation))
    train_questions = len(fit)
    del fit, validation  # their images; the unseen part's come next
    if result.cut:
        return None  # its checkpoint stays: the next run continues it
    unseen = select_scenes(dataset.pixels, split.test)
    scores, _ = evaluate_pixel_player(load_player_file(training.out), unseen)
    shutil.rmtree(run_dir, ignore_errors=True)
    return _record(dataset, player, fraction, trial, split, train_questions, len(unseen), scores, result.step,
                   result.curve, started - result.resumed_seconds, options)


def resumable(run_dir: Path, training: Any, settings: dict[str, Any]) -> bool:
    """True when `run_dir` holds the checkpoint of this very trial, left by a run that was cut or killed: the
    trial continues from it. Otherwise the folder is emptied and marked with the trial's identity (its trainer's
    options but the time limit, and the study settings its split depends on)."""
    identity = json.loads(json.dumps({
        "training": {k: v for k, v in asdict(training).items() if k not in VOLATILE_TRAINING_OPTIONS},
        "settings": settings,
    }, sort_keys=True))
    marker = run_dir / TRIAL_FILE
    try:
        same = json.loads(marker.read_text()) == identity
    except (OSError, ValueError):
        same = False
    if same and training.checkpoint_path.exists():
        return True
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    write_text_atomic(marker, json.dumps(identity, sort_keys=True))
    return False


def _remember_detections(dataset: LoadedDataset, options: StudyOptions) -> None:
    """The frozen perception's detections of every image of the dataset, once per loaded dataset: each trial's parts
    slice them instead of detecting their images again (the same detections up to float rounding: see
    `ObjectTransformerTask.detections`). A trial whose perception or slot count differs detects its own."""
    import torch

    from players.pixel.object_training import ObjectTransformerTask, fresh_network

    # What a fresh trial's trainer builds: the same perception and slot count, so the same key.
    model = fresh_network(options.pixel_model_config("object-transformer"), len(dataset.vocabulary))
    task = ObjectTransformerTask(model, torch.device("cpu"))
    if task.key not in dataset.pixels.detections:
        task.remember_detections(dataset.pixels)


def _record(dataset: LoadedDataset, player: str, fraction: float, trial: int, split: SceneSplit,
            train_questions: int, unseen_questions: int, scores: Any, steps: int, curve: list[dict[str, float]],
            started: float, options: StudyOptions) -> dict[str, Any]:
    """One trial's line of study.jsonl; `scores` (a FamilyScores) on the unseen questions; `started` the
    `time.monotonic()` of its start, moved back by the training seconds of the runs it resumed."""
    best = max(curve, key=lambda point: point["accuracy"]) if curve else {"step": 0, "accuracy": 0.0}
    return {
        "key": trial_key(dataset.name, player, fraction, trial), "dataset": dataset.name, "data": dataset.folder,
        "player": player, "fraction": fraction, "trial": trial,
        "train_scenes": int(len(split.train)), "validation_scenes": int(len(split.validation)),
        "unseen_scenes": int(len(split.test)), "train_questions": train_questions,
        "unseen_questions": unseen_questions, "accuracy": round(scores.accuracy, 6),
        "families": {name: round(value, 6) for name, value in scores.family_accuracy().items()},
        "steps": steps, "stopped_early": steps < options.steps, "best_step": best["step"],
        "best_validation": best["accuracy"], "seconds": round(time.monotonic() - started, 1),
        "settings": options.settings(player), **_relation_products(player, options),
    }


def _relation_products(player: str, options: StudyOptions) -> dict[str, str]:
    """For bfloat16 relations, which products computed them: bfloat16 ones (a CPU with bfloat16 instructions) or
    float32 ones of bfloat16 values (`players.pixel.models.bfloat16_linear`); the two agree within one bfloat16
    rounding, so a trial's record may differ slightly between the two kinds of CPU."""
    from players.pixel.models import cpu_computes_bfloat16

    if player not in options.pixel_players or options.pixel_model_config(player).get("relation_precision") != "bfloat16":
        return {}
    return {"relation_products": "bfloat16" if cpu_computes_bfloat16() else "float32"}


