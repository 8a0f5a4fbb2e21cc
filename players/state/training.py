"""Training of the state players: tensorised data, AdamW with a warmup-stable-decay schedule, resumable.

The run is a pure function of its options: the initial weights come from the
seed, the batch order of epoch e from (seed, e), and dropout from the torch RNG
state stored in every checkpoint, so a resumed run continues exactly where the
interrupted one stopped. The checkpoint (`<out>.ckpt`) holds the player file,
optimiser, scheduler, RNG state, step, learning curve and training seconds;
the player file `<out>` is rewritten at every checkpoint, so it is always the
latest usable model.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from clevr_game.errors import InputError
from clevr_game.text import WordVocabulary, default_word_vocabulary
from players.loop import LoopOptions, Optimisation, decoupled_optimizer, run_loop
from players.state.checkpoint import (
    PlayerFile,
    from_dict,
    load_player_file,
    player_file_from,
    read_torch,
    save_player_file,
    to_dict,
    write_torch_atomic,
)
from players.state.data import QuestionTensors, concatenate, tensorise
from players.state.features import ANSWERS
from players.state.models import build_model, parameter_count

PLAYER_KINDS: dict[str, str] = {
    "state-transformer": "transformer", "state-rn": "relation-network", "blind": "question-only",
}
"""Player name -> model kind."""

BUCKET_BATCHES = 32
"""Batches whose questions are sorted by length together: less padding, still shuffled."""


@dataclass
class TrainingOptions(LoopOptions):
    player: str
    data: str
    out: str
    eval_data: str | None = None
    steps: int = 20000
    batch_size: int = 256
    learning_rate: float = 1e-3
    weight_decay: float = 0.01
    warmup_steps: int = 500
    decay_steps: int | None = None
    clip_norm: float = 1.0
    seed: int = 0
    eval_every: int = 1000
    eval_size: int = 5000
    checkpoint_minutes: float = 5.0
    max_minutes: float | None = None
    model_config: dict[str, Any] = field(default_factory=dict)
    threads: int = 1
    log_dir: str | None = None
    progress: bool = True
    resume: bool = False
    command: str = ""
    extra_data: list[str] = field(default_factory=list)
    """More dataset folders (e.g. `clevr-game export` output) trained on together with `data`."""
    init: str | None = None
    """A player file to start from (its weights, vocabulary and answers) instead of a fresh model."""
    patience: int | None = None
    """Early stopping: end the run after this many held-out evaluations without a better accuracy,
    keeping the best evaluation's weights (also at the end of the step budget); None trains every step."""

    @property
    def kind(self) -> str:
        try:
            return PLAYER_KINDS[self.player]
        except KeyError:
            raise InputError(f"--player {self.player!r}: expected one of {', '.join(PLAYER_KINDS)}") from None


@dataclass
class PreparedData:
    """Tensors the caller already built (one split of a dataset held in memory), trained on instead of
    reading `data` / `eval_data`: answers in ANSWERS order, words in `vocabulary`. Fresh runs, or resumed ones
    given the same data again."""

    train: QuestionTensors
    vocabulary: WordVocabulary
    held_out: QuestionTensors | None = None


@dataclass
class EarlyStopping:
    """The best held-out accuracy so far and its weights; `update` says when `patience` evaluations brought nothing better."""

    patience: int
    min_steps: int = 0
    """No stop before this step, however many evaluations brought nothing better: a model that sits on a plateau
    before it starts to learn (pixel-rn: docs/exhaustive.md, "Plateaus and a minimum of steps") is not stopped on it."""
    best: float = -1.0
    stale: int = 0
    weights: dict[str, torch.Tensor] | None = None

    def update(self, accuracy: float, model: nn.Module) -> bool:
        if accuracy > self.best:
            self.best, self.stale = accuracy, 0
            self.weights = {name: value.detach().clone() for name, value in model.state_dict().items()}
            return False
        self.stale += 1
        return self.exhausted

    def restore(self, model: nn.Module) -> None:
        if self.weights is not None:
            model.load_state_dict(self.weights)

    @property
    def exhausted(self) -> bool:
        """`patience` evaluations in a row brought nothing better."""
        return self.stale >= self.patience

    def has_stopped(self, step: int) -> bool:
        """Whether a run at `step` (its last evaluation's) has stopped: patience exhausted, past `min_steps`."""
        return self.exhausted and step >= self.min_steps

    def state_dict(self) -> dict[str, Any]:
        """What a checkpoint keeps, so a resumed run stops where an uncut one would, with the same best weights."""
        return {"best": self.best, "stale": self.stale, "weights": self.weights}

    def load_state_dict(self, saved: dict[str, Any]) -> None:
        self.best, self.stale, self.weights = saved["best"], saved["stale"], saved["weights"]

    def after_evaluation(self, accuracy: float, model: nn.Module, step: int, last_step: bool) -> bool:
        """Record one held-out evaluation; True when training should stop.

        At a stop, or at the step budget's end, the best evaluation's weights are put
        back into `model` (the loop saves right after).
        """
        from tqdm import tqdm

        stop = self.update(accuracy, model) and step >= self.min_steps
        if stop or last_step:
            self.restore(model)
        if stop:
            tqdm.write(f"stopping at step {step}: no better held-out accuracy in {self.stale} "
                       f"evaluations; kept the best ({self.best:.4f})")
        return stop


@dataclass
class FamilyScores:
    """Correct and total answers per question family."""

    correct: dict[str, int] = field(default_factory=dict)
    total: dict[str, int] = field(default_factory=dict)

    def add(self, family: str, correct: int, total: int) -> None:
        self.correct[family] = self.correct.get(family, 0) + correct
        self.total[family] = self.total.get(family, 0) + total

    @property
    def accuracy(self) -> float:
        total = sum(self.total.values())
        return sum(self.correct.values()) / total if total else 0.0

    def family_accuracy(self) -> dict[str, float]:
        return {f: self.correct[f] / self.total[f] for f in sorted(self.total)}


@dataclass
class TrainingResult:
    step: int
    train_seconds: float
    curve: list[dict[str, float]]
    final_loss: float
    resumed_seconds: float = 0.0
    """The training seconds of the runs before this one, carried by the checkpoint it resumed (0 when fresh)."""
    cut: bool = False
    """Ended by --max-minutes before its step budget and any early stop: `--resume` continues it."""


def resumed_stopping(patience: int | None, checkpoint: dict[str, Any] | None,
                     min_steps: int = 0) -> EarlyStopping | None:
    """The early stopping of a run: fresh, or as the resumed checkpoint left it."""
    if patience is None:
        return None
    stopping = EarlyStopping(patience, min_steps)
    if checkpoint is not None and "early_stopping" in checkpoint:
        stopping.load_state_dict(checkpoint["early_stopping"])
    return stopping


def check_prepared_words(prepared: WordVocabulary, saved: WordVocabulary, checkpoint: Path) -> None:
    """A resumed run's prepared words are the checkpoint's: its embedding rows are theirs."""
    if prepared.words != saved.words:
        raise InputError(f"{checkpoint}: was trained on another word list than the data given now "
                         "(resume needs the same data)")


def epoch_batches(lengths: torch.Tensor, batch_size: int, seed: int, epoch: int) -> list[torch.Tensor]:
    """The batches of one epoch: shuffled, then length-sorted within buckets; the last partial batch dropped."""
    generator = np.random.default_rng([seed, epoch])
    order = generator.permutation(len(lengths))
    order = order[: len(order) - len(order) % batch_size]
    bucket = batch_size * BUCKET_BATCHES
    lengths_np = lengths.numpy()
    batches: list[np.ndarray] = []
    for start in range(0, len(order), bucket):
        chunk = order[start : start + bucket]
        chunk = chunk[np.argsort(lengths_np[chunk], kind="stable")]
        batches.extend(chunk[i : i + batch_size] for i in range(0, len(chunk), batch_size))
    return [torch.from_numpy(batches[i]) for i in generator.permutation(len(batches))]


class BatchSchedule:
    """The batch of any step, recomputed from (seed, epoch) so resuming needs only the step."""

    def __init__(self, lengths: torch.Tensor, batch_size: int, seed: int):
        if len(lengths) < batch_size:
            raise InputError(f"the training data has {len(lengths)} questions, fewer than one batch of {batch_size}")
        self.lengths, self.batch_size, self.seed = lengths, batch_size, seed
        self.per_epoch = len(lengths) // batch_size
        self._epoch, self._batches = -1, []

    def indices(self, step: int) -> torch.Tensor:
        epoch = step // self.per_epoch
        if epoch != self._epoch:
            self._epoch, self._batches = epoch, epoch_batches(self.lengths, self.batch_size, self.seed, epoch)
        return self._batches[step % self.per_epoch]


class CurriculumSchedule:
    """Short questions first: for `steps` steps the batches come from the shortest questions only, a share
    growing linearly from `start_share` to all of them; then `BatchSchedule`'s epochs.

    Question length stands in for the number of reasoning steps (a zero-hop query is short, a
    three-hop comparison long), as curricula by program depth do. Every batch is drawn from
    (seed, step) alone, so a resumed run needs only its step.
    """

    def __init__(self, lengths: torch.Tensor, batch_size: int, seed: int, steps: int, start_share: float = 0.2):
        self.after = BatchSchedule(lengths, batch_size, seed)
        self.batch_size, self.seed, self.steps, self.start_share = batch_size, seed, steps, start_share
        self.by_length = torch.argsort(lengths, stable=True)

    def share(self, step: int) -> float:
        """The share of the questions, shortest first, the batch of `step` is drawn from."""
        if step >= self.steps:
            return 1.0
        return self.start_share + (1.0 - self.start_share) * step / self.steps

    def indices(self, step: int) -> torch.Tensor:
        if step >= self.steps:
            return self.after.indices(step - self.steps)
        allowed = max(self.batch_size, int(round(self.share(step) * len(self.by_length))))
        generator = np.random.default_rng((self.seed, 7_919, step))
        return self.by_length[torch.from_numpy(generator.choice(allowed, self.batch_size, replace=False))]


@torch.inference_mode()
def evaluate_tensors(model: nn.Module, tensors: QuestionTensors, batch_size: int = 1024) -> FamilyScores:
    """Accuracy per family of `model` on every question of `tensors` (model left in eval mode)."""
    model.eval()
    scores = FamilyScores()
    order = torch.argsort(tensors.lengths, stable=True)  # similar lengths together: less padding
    correct = torch.zeros(len(tensors), dtype=torch.bool)
    for start in range(0, len(tensors), batch_size):
        indices = order[start : start + batch_size]
        batch, answers = tensors.batch(indices)
        correct[indices] = model(batch).argmax(dim=1) == answers
    for family_id, name in enumerate(tensors.family_names):
        members = tensors.families == family_id
        scores.add(name, int(correct[members].sum()), int(members.sum()))
    return scores


def _player_info(options: TrainingOptions, tensors: QuestionTensors, step: int, seconds: float,
                 curve: list[dict[str, float]], model: nn.Module, heldout: dict[str, Any]) -> dict[str, Any]:
    return {
        "player": options.player,
        "data": str(options.data),
        "data_questions": len(tensors),
        "eval_data": options.eval_data,
        "seed": options.seed,
        "batch_size": options.batch_size,
        "step": step,
        "steps_planned": options.steps,
        "train_seconds": round(seconds, 1),
        "parameters": parameter_count(model),
        "curve": curve,
        "command": options.command,
        "heldout": heldout,
        "extra_data": list(options.extra_data),
        "init": options.init,
    }


@contextmanager
def denormals_flushed() -> Iterator[None]:
    """Flush denormal floats to zero while training, and restore the default after.

    Adam's second moments of rarely used embedding rows decay into denormal floats,
    which the CPU handles a hundred times slower; the setting is process-wide, so
    it must not outlive the training run (numpy and hypothesis rely on IEEE floats).
    """
    torch.set_flush_denormal(True)
    try:
        yield
    finally:
        torch.set_flush_denormal(False)


def train(options: TrainingOptions, prepared: PreparedData | None = None) -> TrainingResult:
    """Train (or resume) a state player; writes `options.out` and its checkpoint; returns the run's summary."""
    if prepared is not None and options.init:
        raise ValueError("prepared data is for fresh or resumed runs, not --init")
    with denormals_flushed():
        return _train(options, prepared)


def _train(options: TrainingOptions, prepared: PreparedData | None = None) -> TrainingResult:
    from tqdm import tqdm

    torch.set_num_threads(options.threads)
    kind = options.kind
    started = time.monotonic()
    checkpoint: dict[str, Any] | None = None
    initial: PlayerFile | None = None
    if options.resume and options.checkpoint_path.exists():
        checkpoint = read_torch(options.checkpoint_path, "training checkpoint")
    vocabulary = default_word_vocabulary()
    if checkpoint is not None:
        previous = from_dict(checkpoint["player"], str(options.checkpoint_path))
        vocabulary = WordVocabulary(previous.words[2:])
        answers = list(previous.answers)
        _check_resumable(checkpoint["options"], options)
    elif options.init:
        initial = _initial_player(options)
        vocabulary, answers = initial.vocabulary(), list(initial.answers)
    else:
        answers = list(ANSWERS)
    # A resumed run keeps its vocabulary (its optimiser state has the embedding's shape);
    # a fresh or --init run learns the data's new words (new rows start as UNKNOWN's).
    grow_vocabulary = checkpoint is None
    if prepared is not None:
        if checkpoint is not None:
            check_prepared_words(prepared.vocabulary, vocabulary, options.checkpoint_path)
        train_tensors, vocabulary, eval_tensors = prepared.train, prepared.vocabulary, prepared.held_out
    else:
        train_tensors, vocabulary = tensorise(options.data, vocabulary, answers, extend_vocabulary=grow_vocabulary)
    if options.extra_data:
        parts = [train_tensors]
        for folder in options.extra_data:
            # Growing appends words, so the ids of the folders read before stay valid.
            extra, vocabulary = tensorise(folder, vocabulary, answers, extend_vocabulary=grow_vocabulary)
            parts.append(extra)
        train_tensors = concatenate(parts)
    if prepared is None:
        eval_tensors = None
        if options.eval_data:
            eval_tensors, _ = tensorise(options.eval_data, vocabulary, answers, limit=options.eval_size)

    torch.manual_seed(options.seed)
    config = checkpoint["player"]["config"] if checkpoint else (initial.config if initial else options.model_config)
    model = build_model(kind, config, len(vocabulary), len(answers))
    if initial is not None:
        model.load_state_dict(with_new_words(initial.state_dict, len(vocabulary)))
    state = Optimisation(decoupled_optimizer(model, options.learning_rate, options.weight_decay, betas=(0.9, 0.98)),
                         options.warmup_steps, options.steps, options.decay)
    heldout: dict[str, Any] = {}
    if checkpoint is not None:
        model.load_state_dict(checkpoint["player"]["state_dict"])
        state.restore(checkpoint)
    schedule = BatchSchedule(train_tensors.lengths, options.batch_size, options.seed)
    writer = _summary_writer(options)
    def save() -> None:
        info = _player_info(options, train_tensors, state.step, state.seconds(), state.curve, model, heldout)
        player_file = player_file_from(model, kind, vocabulary, answers, info)
        write_torch_atomic(options.checkpoint_path, {
            "player": to_dict(player_file), **state.checkpoint_fields(), "options": asdict(options),
            **({"early_stopping": stopping.state_dict()} if stopping is not None else {}),
        })
        save_player_file(options.out, player_file)

    stopping = resumed_stopping(options.patience, checkpoint)

    def record_evaluation() -> bool:
        if eval_tensors is None:
            return False
        scores = evaluate_tensors(model, eval_tensors)
        point = {"step": state.step, "accuracy": round(scores.accuracy, 4), "minutes": round(state.seconds() / 60, 1)}
        state.curve.append(point)
        if writer is not None:
            writer.add_scalar("heldout/accuracy", scores.accuracy, state.step)
            for family, accuracy in scores.family_accuracy().items():
                writer.add_scalar(f"heldout/{family}", accuracy, state.step)
        tqdm.write(f"step {state.step}: held-out accuracy {scores.accuracy:.4f} ({point['minutes']} min)")
        if stopping is None:
            return False
        return stopping.after_evaluation(scores.accuracy, model, state.step, state.step >= options.steps)

    def loss_at(step: int) -> tuple[torch.Tensor, dict[str, float]]:
        batch, targets = train_tensors.batch(schedule.indices(step))
        return nn.functional.cross_entropy(model(batch), targets), {}

    if options.progress:
        print(f"{options.player}: {parameter_count(model)} parameters, {len(train_tensors)} training questions, "
              f"{len(vocabulary)} words, from step {state.step} of {options.steps}", flush=True)
    settings = options.loop_settings(log_every=50, smoothing=0.02)
    if stopping is not None and stopping.has_stopped(state.step):  # resumed after its early stop: nothing left
        settings = replace(settings, steps=state.step)
    result = run_loop(model, state, settings, loss_at, save, record_evaluation, started=started, writer=writer)
    if writer is not None:
        writer.close()
    if state.step == options.steps and options.eval_data:
        heldout = _full_evaluation(model, options.eval_data, vocabulary, answers)
        save()
    if not Path(options.out).exists():
        save()
    return TrainingResult(state.step, state.seconds(), state.curve, result.loss_average, state.carried_seconds,
                          result.out_of_time)


def _full_evaluation(model: nn.Module, folder: str, vocabulary: WordVocabulary, answers: list[str]) -> dict[str, Any]:
    """Accuracy on every question of the held-out set, kept in the player file's info."""
    tensors, _ = tensorise(folder, vocabulary, answers)
    scores = evaluate_tensors(model, tensors)
    return {
        "data": str(folder),
        "questions": len(tensors),
        "accuracy": round(scores.accuracy, 4),
        "families": {f: round(a, 4) for f, a in scores.family_accuracy().items()},
    }


_MUST_MATCH_ON_RESUME = ("player", "batch_size", "seed", "model_config")


def with_new_words(state_dict: dict[str, torch.Tensor], vocabulary_size: int) -> dict[str, torch.Tensor]:
    """`state_dict` with its word embedding grown to `vocabulary_size` rows.

    A new word's row starts as a copy of UNKNOWN's (id 1), so the grown model answers
    exactly as the original did until training tells the new words apart.
    """
    table = state_dict["words.weight"]
    extra = vocabulary_size - table.shape[0]
    if extra <= 0:
        return state_dict
    grown = dict(state_dict)
    grown["words.weight"] = torch.cat([table, table[1:2].expand(extra, -1)], dim=0)
    return grown


def _initial_player(options: TrainingOptions) -> PlayerFile:
    """The player file of `options.init`, checked against the player kind and any --config."""
    initial = load_player_file(options.init)
    if initial.kind != options.kind:
        raise InputError(f"--init {options.init}: holds a {initial.kind!r} model, not the {options.kind!r} of {options.player}")
    differing = sorted(k for k, v in options.model_config.items() if initial.config.get(k) != v)
    if differing:
        raise InputError(f"--init {options.init}: --config differs from the file's model in {', '.join(differing)} "
                         "(fine-tuning keeps the file's architecture)")
    return initial


def _check_resumable(saved: dict[str, Any], options: TrainingOptions) -> None:
    for key in _MUST_MATCH_ON_RESUME:
        if saved.get(key) != getattr(options, key):
            raise InputError(
                f"{options.checkpoint_path}: was trained with {key}={saved.get(key)!r}, "
                f"not {getattr(options, key)!r} (resume needs the same {key})"
            )


def _summary_writer(options: TrainingOptions) -> Any:
    if options.log_dir == "":
        return None
    from torch.utils.tensorboard import SummaryWriter

    return SummaryWriter(options.log_dir or f"{options.out}.logs")
