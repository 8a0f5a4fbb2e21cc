"""How many manipulated scenes must a player train on to answer every unseen one? (the paper's Figure 2)

For each dataset (a `clevr-game exhaustive` folder), player, training fraction
and trial: a random split of the dataset's *scenes* (all questions of a scene
on one side), a fresh model trained on the train part with its player's trainer
(`players.state.training.train` or `players.pixel.training.train_pixel`: a step
budget, early stopping on a validation slice of the train part, the best
validation weights kept), and its accuracy on the unseen scenes. The splits
depend on (seed, fraction, trial) only, so every player sees the same ones.

Pixel players see the dataset's images, rendered once per dataset and image
spec into the dataset's image cache (`players.pixel.images`) and read back by
every later trial and run.

    clevr-game study examples --data runs/exhaustive/2-mix,runs/exhaustive/3-mix \
        --players state-transformer --fractions 0.01,0.05,0.1,0.25,0.5,0.75,0.9 --trials 10 \
        --out results/examples-study
    clevr-game study examples --data runs/exhaustive/2-one --players film,pixel-rn,object-transformer \
        --fractions 0.1,0.5 --trials 3 --out results/examples-study-pixel

RESULTS/study.jsonl holds one record per (dataset, player, fraction, trial),
rewritten atomically after each; a rerun skips the recorded ones (and refuses
other training settings). RESULTS/figure.png plots unseen accuracy against the
training fraction and against the scenes trained on, with 95% intervals over
trials; RESULTS/report.md has the table and the smallest fraction whose mean
unseen accuracy reaches 99%.
`--max-minutes` bounds the whole run: the trial cut by the limit is not
recorded yet; its checkpoint stays in RESULTS/work, and the same command
continues it from there (as it does a trial whose run was killed, from its
last checkpoint, taken every TRIAL_CHECKPOINT_MINUTES). A resumed trial's
record is the one an uncut run gives; its `seconds` add the training time of
the runs before.

A trial's record does not depend on the process that ran it (only `seconds`
does), so one study can be shared out: several processes or machines run the
same command with different `--data` into their own folders, and
`--merge-from FOLDER` adds their records to RESULTS (refusing other settings,
or a trial recorded twice with different results). One run at a time writes a
results folder (LOCK_FILE).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import asdict, dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from clevr_game.atomic import atomic_path, write_text_atomic
from clevr_game.errors import InputError, RunFailed

if TYPE_CHECKING:
    from players.pixel.images import ImageSpec

RESULTS_FILE = "study.jsonl"
SUPERSEDED_FILE = "superseded.jsonl"
"""Records taken out of a study by a change of its protocol (kept, never read by the study)."""
LOCK_FILE = ".study.lock"
"""Held by the run writing a results folder: `study.jsonl` is rewritten from the records one run holds, so a
second writer (another run, or a merge) would drop the first one's trials. The system frees it when the run
ends, however it ends."""
REPORT_FILE = "report.md"
FIGURE_FILE = "figure.png"
TARGET_ACCURACY = 0.99
"""The paper's bar: a player 'needs' the smallest fraction whose unseen accuracy reaches this."""

STATE_PLAYERS = ("state-transformer", "state-rn")
PIXEL_PLAYERS = ("film", "pixel-rn", "object-transformer")
REFUSED_PLAYERS = {
    "neuro-symbolic": "it learns perception from scene annotations and a parser from programs, "
                      "not from the answers the study trains on",
}
"""Players the study does not train, with the reason."""

STUDY_PIXEL_CONFIGS: dict[str, dict[str, Any]] = {
    "film": {"backbone": "perception"},
    "pixel-rn": {"backbone": "perception", "relation_precision": "bfloat16"},
}
"""The study's film and pixel-rn read the frozen neuro-symbolic perception's features, as the shipped players
do: a trial trains what the shipped player trained, and film's step costs half of learning from pixels.
pixel-rn's g over its 2,304 cell pairs runs in bfloat16: 1.8 times faster on the same 1,000-step trial, which
reached 0.7385 against float32's 0.7444 (docs/exhaustive.md, "pixel-rn in bfloat16").
`--pixel-config` is laid over these (`{"film": {"backbone": "none"}}` learns from pixels)."""

STUDY_MIN_STEP_SHARES: dict[str, float] = {"pixel-rn": 0.5}
"""Share of the step budget a player's trials train before early stopping may end them. pixel-rn sits on a
plateau near the majority answers' accuracy for hundreds of steps before it learns (2-one at 75%: validation
0.24-0.37 until step 600, 0.74 at 700); with patience 5 alone, three of its first ten trials stopped on the
plateau at steps 700-800 and scored 0.42-0.50 on unseen scenes, below trials with less data that had left it
(docs/exhaustive.md, "Plateaus and a minimum of steps")."""

TRIAL_FILE = "trial.json"
"""In a trial's run folder (RESULTS/work/KEY): what the checkpoint beside it belongs to."""
TRIAL_CHECKPOINT_MINUTES = 10.0
"""A trial's trainer checkpoints this often (and at the --max-minutes cut), so a trial cut by the limit, or
whose run was killed, continues from its last checkpoint in the next run of the same command."""
_VOLATILE_TRAINING_OPTIONS = ("max_minutes", "resume", "command")
"""Trainer options that may differ between the runs of one trial."""

_SETTINGS = ("steps", "batch_size", "learning_rate", "warmup_steps", "eval_every", "patience",
             "validation_share", "max_validation_scenes", "model_config", "seed")
"""Options a recorded trial depends on: a rerun into the same results must use the same."""
_PIXEL_SETTINGS = ("preset", "image_width", "image_height")
"""What a pixel player's trial depends on besides _SETTINGS (state records leave them out, so they stay
comparable with those recorded before pixel players joined the study)."""


@dataclass
class StudyOptions:
    """One study: every dataset x player x fraction x trial.

    :param data: dataset folders written by `clevr-game exhaustive`
    :param players: state and pixel players (see STATE_PLAYERS, PIXEL_PLAYERS)
    :param fractions: shares of the scenes trained on, each in (0, 1)
    :param trials: random splits per fraction
    :param out: the results folder
    :param steps: the step budget of each training run
    :param max_minutes: the whole run's time limit (None: no limit)
    """

    data: list[str]
    players: list[str]
    fractions: list[float]
    trials: int
    out: str
    steps: int = 4000
    """3-mix at half its scenes needs about 4,000 steps of batch 128 to pass 99% (2,000 left it at 0.93)."""
    max_minutes: float | None = None
    batch_size: int = 128
    learning_rate: float = 1e-3
    warmup_steps: int = 200
    eval_every: int = 100
    patience: int = 10
    """Validation evaluations without a better accuracy before a run stops: five stopped 3-mix runs on the
    noise of a validation curve that was still climbing."""
    validation_share: float = 0.1
    """Share of the train part's scenes held out for early stopping (at least one scene)."""
    max_validation_scenes: int = 500
    """At most this many validation scenes: a slice of 3,400 scenes would cost more than the training."""
    model_config: dict[str, Any] = field(default_factory=dict)
    """The state players' model config."""
    seed: int = 0
    threads: int = 1
    """Torch threads of each trial."""
    workers: int = 1
    """Trials run side by side, each in its own process with `threads` threads and its own copy of its dataset."""
    command: str = ""
    preset: str = "fast"
    """Render preset of the pixel players' images."""
    image_width: int = 128
    image_height: int = 96
    render_workers: int = 2
    """Blender workers rendering a dataset's missing images."""
    pixel_config: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Model config per pixel player (`{"film": {"width": 32}}`), laid over STUDY_PIXEL_CONFIGS."""
    report_only: bool = False
    """Run no trial: rewrite the report and figure from the recorded trials."""
    merge_from: list[str] = field(default_factory=list)
    """Results folders of other runs of this study whose records are added to `out`'s first."""

    def __post_init__(self) -> None:
        supported = (*STATE_PLAYERS, *PIXEL_PLAYERS)
        for player in self.players:
            if player in REFUSED_PLAYERS:
                raise InputError(f"--players {player}: not supported by the study ({REFUSED_PLAYERS[player]}); "
                                 f"supported: {', '.join(supported)}")
            if player not in supported:
                raise InputError(f"--players {player!r}: expected some of {', '.join(supported)}")
        for player, config in self.pixel_config.items():
            if player not in PIXEL_PLAYERS or player not in self.players:
                raise InputError(f"--pixel-config: {player!r} is not a pixel player of --players")
            if not isinstance(config, dict):
                raise InputError(f"--pixel-config: {player}'s config must be a JSON object, got {config!r}")
        if self.pixel_players:
            self.image_spec.checked()
        for fraction in self.fractions:
            if not 0.0 < fraction < 1.0:
                raise InputError(f"--fractions: {fraction:g} is not a share strictly between 0 and 1")
        if not 0.0 < self.validation_share < 1.0:
            raise InputError(f"validation share {self.validation_share:g}: expected a number strictly between 0 and 1")
        names = [dataset_name(d) for d in self.data]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise InputError(f"--data: two folders are named {twice[0]!r} (records are keyed by folder name)")

    @property
    def pixel_players(self) -> list[str]:
        return [player for player in self.players if player in PIXEL_PLAYERS]

    @property
    def image_spec(self) -> ImageSpec:
        """The pixel players' render preset and image size."""
        from players.pixel.images import ImageSpec

        return ImageSpec(self.preset, self.image_width, self.image_height)

    def pixel_model_config(self, player: str) -> dict[str, Any]:
        """A pixel player's model config: the study's (STUDY_PIXEL_CONFIGS) with `pixel_config`'s laid over it."""
        return {**STUDY_PIXEL_CONFIGS.get(player, {}), **self.pixel_config.get(player, {})}

    def min_steps(self, player: str) -> int:
        """The step before which `player`'s trials do not stop early (STUDY_MIN_STEP_SHARES)."""
        return int(round(STUDY_MIN_STEP_SHARES.get(player, 0.0) * self.steps))

    def settings(self, player: str | None = None) -> dict[str, Any]:
        """The settings `player`'s trials depend on (None: a state player's)."""
        settings = {key: getattr(self, key) for key in _SETTINGS}
        if player in PIXEL_PLAYERS:
            settings["model_config"] = self.pixel_model_config(player)
            settings.update({key: getattr(self, key) for key in _PIXEL_SETTINGS})
            if self.min_steps(player):  # absent at 0, as in the records made before minimums existed
                settings["min_steps"] = self.min_steps(player)
        return settings


def dataset_name(folder: str) -> str:
    return Path(folder).resolve().name


# ------------------------------------------------------------------ splits


@dataclass(frozen=True)
class SceneSplit:
    """Scene rows (positions in the dataset's scenes) of each part; disjoint, together every scene with a question."""

    train: np.ndarray
    validation: np.ndarray
    test: np.ndarray


def split_scenes(scenes: np.ndarray, fraction: float, trial: int, seed: int, validation_share: float,
                 max_validation_scenes: int | None = None) -> SceneSplit:
    """`fraction` of `scenes` to train on (a `validation_share` slice of them for early stopping), the rest unseen."""
    # Seeded by (seed, fraction, trial) only: every player and every rerun gets the same split.
    rng = np.random.default_rng([seed, round(fraction * 1_000_000), trial])
    order = rng.permutation(scenes)
    trained = int(round(fraction * len(scenes)))
    if trained < 2 or trained >= len(scenes):
        raise InputError(f"--fractions {fraction:g}: {trained} of {len(scenes)} scenes to train on "
                         "(need at least 2, one of them for validation, and one unseen scene)")
    validation = min(max(1, int(round(validation_share * trained))), trained - 1)
    if max_validation_scenes is not None:
        validation = min(validation, max_validation_scenes)
    return SceneSplit(np.sort(order[validation:trained]), np.sort(order[:validation]), np.sort(order[trained:]))


def questions_of(tensors: Any, scene_rows: np.ndarray) -> Any:
    """The questions of `tensors` (players.state.data.QuestionTensors) asked about `scene_rows`, all of them."""
    import torch

    from players.state.data import QuestionTensors

    chosen = torch.from_numpy(np.flatnonzero(np.isin(tensors.scene_of.numpy(), scene_rows)))
    return QuestionTensors(tensors.positions, tensors.attributes, tensors.present, tensors.scene_of[chosen],
                           tensors.words[chosen], tensors.lengths[chosen], tensors.answers[chosen],
                           tensors.families[chosen], tensors.family_names)


# ------------------------------------------------------------------ records


def trial_key(dataset: str, player: str, fraction: float, trial: int) -> str:
    return f"{dataset}__{player}__f{fraction:g}__t{trial}"


def read_records(out: str | os.PathLike[str]) -> dict[str, dict[str, Any]]:
    """Recorded trials by key."""
    from benchmarks.runner import read_keyed_lines

    return read_keyed_lines(Path(out) / RESULTS_FILE, "key")


def write_records(out: str | os.PathLike[str], records: dict[str, dict[str, Any]]) -> None:
    lines = [json.dumps(records[key], sort_keys=True) for key in sorted(records)]
    write_text_atomic(Path(out) / RESULTS_FILE, "".join(f"{line}\n" for line in lines))


def _check_settings(records: dict[str, dict[str, Any]], options: StudyOptions, out: Path) -> None:
    for record in records.values():
        wanted = options.settings(record.get("player"))
        for key, value in record.get("settings", {}).items():
            if key != "min_steps" and key in wanted and wanted[key] != value:
                raise InputError(f"{out / RESULTS_FILE}: recorded with {key}={value!r}, not {wanted[key]!r} "
                                 "(a study continues with its own settings; use another --out)")
        minimum = wanted.get("min_steps", 0)
        if not runs_as_under_min_steps(record, minimum):
            raise InputError(f"{out / RESULTS_FILE}: trial {record['key']} was recorded with min_steps="
                             f"{record.get('settings', {}).get('min_steps', 0)} and stopped at step {record['steps']}; its "
                             f"player's trials now train at least {minimum} steps (move its line out of "
                             f"{RESULTS_FILE}, into {SUPERSEDED_FILE} say, and the study runs it again)")


def runs_as_under_min_steps(record: dict[str, Any], minimum: int) -> bool:
    """Whether `record`'s trial is the one a run with early stopping held off until step `minimum` gives.

    A run recorded under a lower minimum that did not stop before `minimum` is: the
    minimum only holds back stops, and this run met none before it.
    """
    recorded = record.get("settings", {}).get("min_steps", 0)
    if recorded == minimum:
        return True
    return recorded < minimum and (not record["stopped_early"] or record["steps"] >= minimum)


_RUN_FIELDS = ("seconds", "data")
"""What may differ between two runs of the same trial: its time and where its dataset folder lay."""


def merge_records(records: dict[str, dict[str, Any]], folder: str | os.PathLike[str],
                  options: StudyOptions) -> int:
    """Add `folder`'s recorded trials (another run of this study) to `records`; the number added.

    A trial recorded on both sides must agree in everything but `_RUN_FIELDS`: a
    difference means the two runs did not train the same thing.
    """
    folder = Path(folder)
    if not (folder / RESULTS_FILE).is_file():
        raise InputError(f"--merge-from {folder}: no {RESULTS_FILE} there")
    theirs = read_records(folder)
    _check_settings(theirs, options, folder)
    added = 0
    for key, record in theirs.items():
        ours = records.get(key)
        if ours is None:
            records[key] = record
            added += 1
            continue
        differing = sorted(name for name in ours.keys() | record.keys()
                           if name not in _RUN_FIELDS and ours.get(name) != record.get(name))
        if differing:
            raise InputError(f"--merge-from {folder / RESULTS_FILE}: trial {key} is recorded there with another "
                             f"{', '.join(differing)} than in {options.out} (not the same study)")
    return added


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
        "training": {k: v for k, v in asdict(training).items() if k not in _VOLATILE_TRAINING_OPTIONS},
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


# ------------------------------------------------------------------ the study


@dataclass(frozen=True)
class StudyOutcome:
    planned: int
    recorded: int
    ran: int
    complete: bool
    report: Path


def run_study(options: StudyOptions, log: Callable[[str], None] = print) -> StudyOutcome:
    """Every pending trial, trial by trial (then dataset, player, fraction), then the figure and the report.

    Trial-major order: a study cut by --max-minutes already covers every dataset and
    fraction with the trials it finished, and a later run adds the next ones.
    """
    from clevr_game.dataset import dataset_files

    for folder in options.data:  # a typo fails now, not after hours of other datasets' trials
        dataset_files(folder)
    _check_models(options)
    out = Path(options.out)
    out.mkdir(parents=True, exist_ok=True)
    with sole_writer(out):
        return _run_study(options, out, log)


def sole_writer(out: Path) -> contextlib.AbstractContextManager[None]:
    """Hold `out`'s LOCK_FILE for the block; refuse in one line when another run holds it."""
    from clevr_game.folder_lock import sole_writer as folder_writer

    return folder_writer(out, "study run", lock_name=LOCK_FILE,
                         advice="wait for it to end, or run into another folder and --merge-from it afterwards")


def _run_study(options: StudyOptions, out: Path, log: Callable[[str], None]) -> StudyOutcome:
    import torch

    records = read_records(out)
    _check_settings(records, options, out)
    merged = 0
    for folder in options.merge_from:
        added = merge_records(records, folder, options)
        log(f"merged {added} trials from {folder}")
        merged += added
    if merged:
        write_records(out, records)
    torch.set_num_threads(options.threads)
    planned = [(folder, player, fraction, trial) for trial in range(options.trials) for folder in options.data
               for player in options.players for fraction in options.fractions]
    pending = [p for p in planned if trial_key(dataset_name(p[0]), *p[1:]) not in records]
    log(f"{len(planned)} trials planned, {len(planned) - len(pending)} recorded, {len(pending)} to run"
        f"{' (--report-only: none now)' if options.report_only and pending else ''}")
    if options.report_only:
        pending = []
    if pending:
        log(plan_estimate([player for _, player, _, _ in pending], list(records.values())))
    note = precision_note({player for _, player, _, _ in pending}, options)
    if note:
        log(note)
    work = out / "work"
    deadline = None if options.max_minutes is None else time.time() + options.max_minutes * 60
    ran, complete = 0, True
    from tqdm import tqdm

    bar = tqdm(total=len(pending), desc="study", unit="trial", disable=None, leave=False)  # off when not a terminal
    for record in _pending_records(pending, options, work, deadline, log):
        if record is None:
            complete = False
            continue  # the trials still running meet the same deadline; their records are kept
        records[record["key"]] = record
        write_records(out, records)
        ran += 1
        bar.update()
        log(f"[{ran}/{len(pending)}] {record['dataset']} {record['player']} fraction {record['fraction']:g} "
            f"trial {record['trial']}: unseen accuracy {record['accuracy']:.4f} ({record['train_scenes']} train "
            f"scenes, {record['steps']} steps{', early stop' if record['stopped_early'] else ''}, "
            f"{record['seconds']:.0f} s)")
    bar.close()
    if complete:
        shutil.rmtree(work, ignore_errors=True)  # a cut run keeps its cut trials' checkpoints for the next
    if not complete:
        log(f"stopped at the --max-minutes limit ({options.max_minutes:g}); the same command continues the study")
    report = write_report(out, list(records.values()), options.command)
    done = sum(trial_key(dataset_name(p[0]), *p[1:]) in records for p in planned)
    return StudyOutcome(len(planned), done, ran, complete, report)


MEASURED_TRIAL_SECONDS = {"state-transformer": 189, "object-transformer": 280, "film": 378, "pixel-rn": 2423}
"""Mean seconds per trial of each player in the committed studies (results/examples-study*/study.jsonl, one
core per trial on this project's 2-core machines): the estimate before a folder has records of its own."""


def plan_estimate(pending_players: list[str], records: list[dict]) -> str:
    """One line: the trials to run and about how long, from this folder's own mean per player, else the committed one."""
    from collections import Counter

    own: dict[str, list[float]] = {}
    for record in records:
        own.setdefault(record.get("player", ""), []).append(float(record.get("seconds", 0.0)))
    parts, total, unknown = [], 0.0, []
    for player, count in sorted(Counter(pending_players).items()):
        measured = own.get(player)
        each = sum(measured) / len(measured) if measured else MEASURED_TRIAL_SECONDS.get(player)
        if each is None:
            unknown.append(player)
            continue
        total += each * count
        parts.append(f"{player} {count} x ~{each:.0f} s")
    line = f"plan: {len(pending_players)} trials, about {total / 3600:.1f} h of one core ({'; '.join(parts)})"
    return line + (f"; no measured time yet for {', '.join(unknown)}" if unknown else "")


def precision_note(players: set[str], options: StudyOptions) -> str | None:
    """A line for the log when a player's bfloat16 relations run as float32 products, on a CPU without bfloat16
    instructions (`players.pixel.models.bfloat16_linear`)."""
    import torch

    from players.pixel.models import cpu_computes_bfloat16

    low = sorted(player for player in players & set(options.pixel_players)
                 if options.pixel_model_config(player).get("relation_precision") == "bfloat16")
    if not low or cpu_computes_bfloat16():
        return None
    return (f"note: this CPU has no bfloat16 instructions ({torch.backends.cpu.get_cpu_capability()}): "
            f"{', '.join(low)} rounds its relations to bfloat16 as autocast does, with float32 products "
            "(docs/exhaustive.md, \"pixel-rn in bfloat16\")")


Planned = tuple[str, str, float, int]
"""(dataset folder, player, fraction, trial)."""

_loaded: LoadedDataset | None = None
"""The dataset of the last trial this process ran: trials run dataset by dataset, so it is loaded once per run."""


def run_planned(planned: Planned, options: StudyOptions, work: Path, deadline: float | None,
                log: Callable[[str], None] = print) -> dict[str, Any] | None:
    """One trial, in this process or a pool worker; None when `deadline` (time.time()) passes first."""
    global _loaded
    import torch

    def minutes_left() -> float | None:
        return None if deadline is None else (deadline - time.time()) / 60

    left = minutes_left()
    if left is not None and left <= 0:
        return None
    folder, player, fraction, trial = planned
    torch.set_num_threads(options.threads)
    if _loaded is None or _loaded.folder != folder:
        _loaded = None  # one dataset in memory at a time
        _loaded = load_dataset(folder, options.image_spec if options.pixel_players else None,
                               options.render_workers, log)
    left = minutes_left()  # again: rendering a dataset's images can take longer than the time left
    if left is not None and left <= 0:
        return None
    return run_trial(_loaded, player, fraction, trial, options, work, left)


def _pending_records(pending: list[Planned], options: StudyOptions, work: Path, deadline: float | None,
                     log: Callable[[str], None]) -> Iterator[dict[str, Any] | None]:
    """The pending trials' records (None for one cut by the deadline), in order or, with workers, as they end.

    Every trial is seeded by its own (seed, fraction, trial), so which process runs it
    changes nothing in its record but the seconds.
    """
    global _loaded
    if options.workers > 1 and options.pixel_players:
        from players.pixel.images import dataset_images

        # Rendered (and stacked) here, once: workers rendering the same missing images would race.
        for folder in dict.fromkeys(planned[0] for planned in pending):
            dataset_images(folder, options.image_spec, workers=options.render_workers, progress=True)
    try:
        if options.workers <= 1:
            for planned in pending:
                yield run_planned(planned, options, work, deadline, log)
            return
        # spawn: a forked child of a process that imported torch can hang.
        with ProcessPoolExecutor(options.workers, mp_context=get_context("spawn")) as pool:
            futures = {pool.submit(run_planned, planned, options, work, deadline): planned for planned in pending}
            failure: BaseException | None = None
            for future in as_completed(futures):
                if future.cancelled():
                    continue
                try:
                    record = future.result()
                except BrokenProcessPool:
                    failure = failure or _worker_died(futures)
                    continue
                except Exception as exc:
                    # Stop as one process would, but keep the trials already running: their records are kept.
                    if failure is None:
                        failure = exc
                        for queued in futures:
                            queued.cancel()
                    continue
                yield record
            if failure is not None:
                raise failure
    finally:
        _loaded = None


def _worker_died(futures: dict[Future, Planned]) -> RunFailed:
    """The one-line error of a pool whose worker was killed (the system's out-of-memory killer, most often)."""
    broken = [planned for future, planned in futures.items()
              if future.done() and not future.cancelled() and isinstance(future.exception(), BrokenProcessPool)]
    folder, player, fraction, trial = broken[0] if broken else next(iter(futures.values()))
    return RunFailed(f"{dataset_name(folder)} {player} fraction {fraction:g} trial {trial}: a study worker process "
                     "died running it or a trial beside it (killed from outside, most likely for memory: see dmesg); "
                     "the finished trials are recorded: rerun with --workers 1 to continue")


def _check_models(options: StudyOptions) -> None:
    """Each player's model config builds, and the frozen perception of the players that read it was trained on
    the study's images."""
    from players.pixel.checkpoint import PLAYER_KINDS as PIXEL_KINDS
    from players.pixel.checkpoint import build_model as build_pixel_model
    from players.state.models import build_model
    from players.state.training import PLAYER_KINDS

    for player in options.players:
        try:
            if player in PIXEL_PLAYERS:
                build_pixel_model(PIXEL_KINDS[player], options.pixel_model_config(player), 4, 2)
            else:
                build_model(PLAYER_KINDS[player], options.model_config, 4, 2)
        except TypeError as exc:
            option = "--pixel-config" if player in PIXEL_PLAYERS else "--config"
            raise InputError(f"{option} for {player}: {exc}") from None
    perceiving = [player for player in options.pixel_players
                  if player == "object-transformer" or options.pixel_model_config(player).get("backbone") == "perception"]
    if perceiving:
        from players.pixel.checkpoint import load_player_file
        from players.pixel.object_training import DEFAULT_PERCEPTION_FILE
        from players.state.checkpoint import shipped_path

        perception = load_player_file(shipped_path(DEFAULT_PERCEPTION_FILE))
        if perception.image != options.image_spec:
            raise InputError(f"--players {perceiving[0]}: its perception (shipped {DEFAULT_PERCEPTION_FILE}) "
                             f"reads {perception.image.label} images, not {options.image_spec.label} "
                             "(--preset, --image-size)")


# ------------------------------------------------------------------ figure and report


@dataclass(frozen=True)
class Point:
    fraction: float
    mean: float
    low: float
    high: float
    trials: int
    scenes: int = 0
    """Scenes trained on at this fraction (the train part and its validation slice), the same in every trial."""


def summarise(records: list[dict[str, Any]]) -> dict[tuple[str, str], list[Point]]:
    """(dataset, player) -> per fraction the mean unseen accuracy and its 95% bootstrap interval over trials."""
    from benchmarks.stats import bootstrap_ci

    groups: dict[tuple[str, str], dict[float, list[float]]] = defaultdict(lambda: defaultdict(list))
    scenes: dict[tuple[str, float], int] = {}
    for record in records:
        groups[(record["dataset"], record["player"])][record["fraction"]].append(record["accuracy"])
        scenes[(record["dataset"], record["fraction"])] = record["train_scenes"] + record["validation_scenes"]
    return {
        line: [Point(fraction, float(np.mean(values)), *bootstrap_ci(values), len(values), scenes[(line[0], fraction)])
               for fraction, values in sorted(by_fraction.items())]
        for line, by_fraction in sorted(groups.items())
    }


def budget_bound(records: list[dict[str, Any]]) -> dict[tuple[str, str, float], int]:
    """(dataset, player, fraction) -> trials that ran their whole step budget without early stopping.

    Such a run was still improving within its patience window when the budget ended, so
    its unseen accuracy is a lower bound set by the budget, not by the data.
    """
    counts: dict[tuple[str, str, float], int] = defaultdict(int)
    for record in records:
        if not record.get("stopped_early", True):
            counts[(record["dataset"], record["player"], record["fraction"])] += 1
    return counts


def smallest_fraction(points: list[Point], target: float = TARGET_ACCURACY) -> float | None:
    """The smallest training fraction whose mean unseen accuracy reaches `target`."""
    return next((p.fraction for p in points if p.mean >= target), None)


def plot(lines: dict[tuple[str, str], list[Point]], path: Path) -> None:
    """Unseen accuracy against the share of placements trained on (the paper's axis) and against the scenes."""
    import matplotlib
    import matplotlib.ticker

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (by_share, by_scenes) = plt.subplots(1, 2, figsize=(11.0, 4.2), sharey=True)
    # A colour per dataset and a line style per player: eleven or more lines would repeat the colour cycle.
    datasets = sorted({dataset for dataset, _ in lines})
    players = sorted({player for _, player in lines})
    colours = plt.get_cmap("tab10" if len(datasets) <= 10 else "tab20")
    styles = ["-", "--", ":", "-."]
    for (dataset, player), points in lines.items():
        look = {"color": colours(datasets.index(dataset)), "linestyle": styles[players.index(player) % len(styles)]}
        mean = np.array([p.mean for p in points])
        low, high = np.array([p.low for p in points]), np.array([p.high for p in points])
        # One (2, N) array: a list of two arrays makes matplotlib convert 1-element arrays to scalars (deprecated).
        whiskers = np.vstack([mean - low, high - mean])
        label = f"{dataset} ({player})"
        by_share.errorbar([p.fraction for p in points], mean, yerr=whiskers, marker="o", capsize=3, label=label,
                          **look)
        by_scenes.errorbar([p.scenes for p in points], mean, yerr=whiskers, marker="o", capsize=3, label=label,
                           **look)
    for ax in (by_share, by_scenes):
        ax.axhline(TARGET_ACCURACY, color="gray", linestyle=":", linewidth=1)
        ax.grid(alpha=0.3)
    # A logit axis spreads both ends of the fractions (1% and 5%, 75% and 90%) apart.
    by_share.set_xscale("logit")
    ticks = sorted({p.fraction for points in lines.values() for p in points})
    by_share.set_xticks(ticks, [f"{t * 100:g}%" for t in ticks])
    by_share.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    by_share.set_xlabel("scenes trained on (% of the dataset's valid placements)")
    by_share.set_ylabel("accuracy on unseen placements")
    by_scenes.set_xscale("log")
    by_scenes.set_xlabel("scenes trained on")
    by_scenes.legend(fontsize=7)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=100)
    plt.close(fig)


def _protocol_notes(out: Path, records: list[dict[str, Any]]) -> list[str]:
    """Report lines on the minimum steps players' trials train and on records a protocol change took out."""
    minimums = sorted({(r["player"], r["settings"]["min_steps"]) for r in records
                       if r.get("settings", {}).get("min_steps")})
    notes = [f"{player}'s trials train at least {steps:,} steps before early stopping may end them "
             "(its records made before that minimum stand where their runs met no stop before it)."
             for player, steps in minimums]
    superseded = out / SUPERSEDED_FILE
    if superseded.is_file():
        count = sum(1 for line in superseded.read_text().splitlines() if line.strip())
        notes.append(f"{count} records taken out by a change of protocol are kept in `{SUPERSEDED_FILE}` "
                     "(not read by the study, which runs their trials again).")
    return ["", *notes] if notes else []


def write_report(out: Path, records: list[dict[str, Any]], command: str) -> Path:
    """RESULTS/report.md (and figure.png when there is a record)."""
    lines = summarise(records)
    text = ["# How many examples are enough?", "",
            "Accuracy on unseen placements against the share of placements trained on: mean over trials "
            "and 95% bootstrap interval. Datasets from `clevr-game exhaustive`; each trial trains a fresh model.", ""]
    if command:
        text += ["```", command, "```", ""]
    if lines:
        plot(lines, out / FIGURE_FILE)
        text += [f"![unseen accuracy against training fraction]({FIGURE_FILE})", "",
                 f"## Smallest training fraction reaching {TARGET_ACCURACY:.0%} on unseen scenes", "",
                 "A trial that ran its whole step budget was still improving when it ended (early stopping "
                 "had not stopped it): its accuracy is a lower bound, and a fraction not reached where such "
                 "trials are is not evidence that the data falls short.", "",
                 "| dataset | player | smallest fraction | scenes trained on | trials per fraction |",
                 "|---|---|---|---|---|"]
        bound = budget_bound(records)
        top = max(p.fraction for points in lines.values() for p in points)
        for (dataset, player), points in lines.items():
            reached = smallest_fraction(points)
            shown = "not reached" if reached is None else f"{reached:g}"
            if reached is None and points[-1].fraction < top:  # a study under way: its larger shares are to come
                shown += f" up to {points[-1].fraction:g} (no trials above it yet)"
            below = [p for p in points if p.mean < TARGET_ACCURACY
                     and (reached is None or p.fraction < reached) and bound[(dataset, player, p.fraction)]]
            if below:
                shown += f" (budget-bound below it: {', '.join(f'{p.fraction:g}' for p in below)})"
            scenes = next((f"{p.scenes:,}" for p in points if p.fraction == reached), "")
            text.append(f"| {dataset} | {player} | {shown} | {scenes} | {min(p.trials for p in points)} |")
        text += ["", "## Unseen accuracy per fraction", "",
                 "| dataset | player | fraction | mean [95% CI] | trials | ran out of steps |", "|---|---|---|---|---|---|"]
        for (dataset, player), points in lines.items():
            for p in points:
                text.append(f"| {dataset} | {player} | {p.fraction:g} | {p.mean:.4f} [{p.low:.4f}, {p.high:.4f}] "
                            f"| {p.trials} | {bound[(dataset, player, p.fraction)]} |")
        seconds = sum(r.get("seconds", 0.0) for r in records)
        text += ["", f"{len(records)} trials, {seconds / 60:.1f} minutes of training and evaluation in all."]
        text += _protocol_notes(out, records)
    else:
        text.append("No trial recorded yet.")
    path = out / REPORT_FILE
    write_text_atomic(path, "\n".join(text) + "\n")
    return path
