"""Training of the pixel players, resumable, on the state players' schedule and batching.

The optimisation loop (`players.loop`: AdamW, warmup-stable-decay, clipping,
checkpoints, time limit), the batch order (`BatchSchedule`: the batch of any
step from (seed, epoch), so resuming needs only the step) and the per-family
scores are the state players'; what differs is the data (rendered images, rendered here
when missing) and the model. Two tasks:

- question answering (`pixel-rn`, `film`): cross-entropy on the answer; with
  the config's `backbone="perception"` a fresh run copies the frozen backbone
  from a neuro-symbolic player file (`perception_from`, by default the shipped
  one) and computes its features once per image, at the first step. `--init
  FILE` starts from a player file of the same kind (fine-tuning: its config,
  answers, backbone and weights; its word list grown by the data's new words,
  as the state players grow theirs);
- `neuro-symbolic`: the perception loss on the images of the batch plus the
  parser's cross-entropy on the program tokens of its questions, summed (the
  two parts share no weights, so this trains both side by side); evaluated
  end to end (perceive, parse, execute). `--init FILE` starts from a
  neuro-symbolic player file, its word and program-token lists grown by the
  data's new ones (`grown_state`); `--parser-only` trains the parser alone on
  questions (no training image is rendered or read) and leaves perception's
  weights bit for bit as they were;
- `object-transformer`: cross-entropy on the answer, the transformer only, on
  detections of a perception copied from a neuro-symbolic file and frozen
  (`players.pixel.object_training`).

The checkpoint `<out>.ckpt` holds the player file, optimiser, scheduler, RNG
state, step, learning curve and seconds; `<out>` is rewritten at every
checkpoint, so it is always the latest usable player. `extra_data` folders
(e.g. `clevr-game export` output) join the training questions, each with its
own images rendered at the same spec, as `--extra` does for the state players.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import torch
from torch import nn

from clevr_game.errors import InputError
from clevr_game.text import WordVocabulary, default_word_vocabulary
from players.loop import LoopOptions, Optimisation, decoupled_optimizer, run_loop
from players.pixel.checkpoint import (
    PLAYER_KINDS,
    PixelPlayerFile,
    build_model,
    from_dict,
    load_player_file,
    player_file_from,
    save_player_file,
    to_dict,
)
from players.pixel.data import (
    PixelData,
    attach_program_ids,
    concatenate_pixel_data,
    image_rows,
    load_pixel_data,
    load_question_data,
)
from players.pixel.images import ImageSpec
from players.pixel.neuro_symbolic import (
    NeuroSymbolicNetwork,
    answer_questions,
    fallback_answers,
    grown_state,
)
from players.pixel.object_training import (
    DEFAULT_PERCEPTION_FILE,
    ObjectTransformerTask,
    perception_source,
    reasoning_source,
    start_config,
    start_weights,
)
from players.pixel.object_transformer import ObjectTransformerNetwork, perception_state
from players.pixel.perception import SceneTargets, perception_loss
from players.pixel.program_tokens import arities, program_to_tokens, token_list
from players.state.checkpoint import read_torch, shipped_path, write_torch_atomic
from players.state.features import ANSWERS
from players.state.training import (
    BatchSchedule,
    CurriculumSchedule,
    FamilyScores,
    check_prepared_words,
    resumed_stopping,
    with_new_words,
)


@dataclass
class PixelTrainingOptions(LoopOptions):
    player: str
    data: str
    out: str
    eval_data: str | None = None
    preset: str = "fast"
    width: int = 128
    height: int = 96
    render_workers: int = 2
    steps: int = 4000
    batch_size: int = 64
    learning_rate: float = 5e-4
    weight_decay: float = 1e-4
    warmup_steps: int = 200
    decay_steps: int | None = None
    clip_norm: float = 5.0
    seed: int = 0
    eval_every: int = 500
    eval_size: int = 2000
    checkpoint_minutes: float = 5.0
    max_minutes: float | None = None
    model_config: dict[str, Any] = field(default_factory=dict)
    threads: int = 1
    device: str = "cpu"
    log_dir: str | None = None
    progress: bool = True
    resume: bool = False
    command: str = ""
    perception_from: str | None = None
    """object-transformer, and film / pixel-rn with a `backbone`: the neuro-symbolic player file whose
    perception a fresh run copies (None: shipped)."""
    init: str | None = None
    """object-transformer: a state-transformer player file a fresh run starts its reasoning from;
    neuro-symbolic, film, pixel-rn: a player file of the same kind a fresh run starts from (fine-tuning)."""
    extra_data: list[str] = field(default_factory=list)
    """More dataset folders trained on as well (e.g. `clevr-game export` output); their images are rendered
    at the same spec when missing."""
    parser_only: bool = False
    """neuro-symbolic: train the question parser alone; perception stays as it is and no training image is read."""
    patience: int | None = None
    """Held-out evaluations without a better accuracy before the run stops, keeping the best weights
    (None: no early stopping, the run uses its whole step budget)."""
    min_steps: int = 0
    """With `patience`: the run does not stop before this step (`EarlyStopping.min_steps`)."""
    curriculum_steps: int = 0
    """Short questions first for this many steps (`CurriculumSchedule`); 0: every question from the start."""

    @property
    def kind(self) -> str:
        try:
            return PLAYER_KINDS[self.player]
        except KeyError:
            raise InputError(f"--player {self.player!r}: expected one of {', '.join(PLAYER_KINDS)}") from None

    @property
    def spec(self) -> ImageSpec:
        return ImageSpec(self.preset, self.width, self.height).checked()

    @property
    def torch_device(self) -> torch.device:
        """The training device; InputError for one that is unknown or absent here."""
        try:
            device = torch.device(self.device)
        except RuntimeError:
            raise InputError(f"--device {self.device!r}: not a torch device (cpu, cuda, cuda:1, ...)") from None
        if device.type == "cuda" and not torch.cuda.is_available():
            raise InputError(f"--device {self.device!r}: no CUDA device on this machine")
        return device


@dataclass
class PreparedPixelData:
    """Data the caller already holds (one split of a dataset in memory, `data.select_scenes`), trained on
    instead of reading `data` / `eval_data`: answers in ANSWERS order, words in `vocabulary`, images at the
    options' spec. Fresh runs, or resumed ones given the same data again."""

    train: PixelData
    vocabulary: WordVocabulary
    held_out: PixelData | None = None


@dataclass
class PixelTrainingResult:
    step: int
    train_seconds: float
    curve: list[dict[str, float]]
    final_loss: float
    first_loss: float
    resumed_seconds: float = 0.0
    """The training seconds of the runs before this one, carried by the checkpoint it resumed (0 when fresh)."""
    cut: bool = False
    """Ended by --max-minutes before its step budget and any early stop: `--resume` continues it."""


def _words(data: PixelData, indices: torch.Tensor) -> torch.Tensor:
    longest = max(int(data.questions.lengths[indices].max()), 1)
    return data.questions.words[indices, :longest].long()


def _scores(correct: torch.Tensor, data: PixelData) -> FamilyScores:
    scores = FamilyScores()
    for family_id, name in enumerate(data.questions.family_names):
        members = data.questions.families[: len(correct)] == family_id
        if bool(members.any()):
            scores.add(name, int(correct[members].sum()), int(members.sum()))
    return scores


class AnsweringTask:
    """pixel-rn and film: logits over the answers from (images, words).

    A model with a frozen backbone has its features computed once per image of a dataset, on first use, and
    kept (`cache_features`; 64 x 24 x 32 floats, 197 kB, per 128 x 96 image): the images do not change during
    training and the backbone does not learn, so each step runs only the trainable layers.

    An evaluation of data not yet cached and larger than `cache_limit` images computes its features a chunk of
    scenes at a time and keeps none: evaluated once, 38,000 images of a 3-object study's unseen part would
    otherwise hold 7.5 GB. Its features are those the cache would hold (the same batches of `cache_batch`).
    """

    def __init__(self, model: nn.Module, device: torch.device, cache_features: bool = True,
                 cache_batch: int = 64, cache_limit: int = 4096):
        self.model, self.device = model, device
        self.cached = cache_features and getattr(model, "backbone", None) is not None
        self.cache_batch = cache_batch
        self.cache_limit = cache_limit
        self._features: dict[int, tuple[PixelData, torch.Tensor]] = {}  # the data kept so its id stays its own

    def image_features(self, data: PixelData) -> torch.Tensor:
        """The backbone's features of every image of `data` (S, C, h, w) on the device, computed on first use."""
        key = id(data)
        if key not in self._features:
            self._features[key] = (data, self._compute_features(data.images))
        return self._features[key][1]

    def _compute_features(self, images: torch.Tensor) -> torch.Tensor:
        # Filled in place: concatenating the batches would hold every feature twice at its peak.
        # Ordinary tensors even when first asked for during an evaluation: training steps read them too.
        with torch.inference_mode(False), torch.no_grad():
            features: torch.Tensor | None = None
            for start in range(0, len(images), self.cache_batch):
                part = self.model.image_features(images[start : start + self.cache_batch].to(self.device))
                if features is None:
                    features = torch.empty((len(images), *part.shape[1:]), dtype=part.dtype, device=self.device)
                features[start : start + len(part)] = part
        if features is None:
            raise ValueError("no images to compute features of")
        return features

    def logits(self, data: PixelData, indices: torch.Tensor) -> torch.Tensor:
        words = _words(data, indices).to(self.device)
        scenes = data.questions.scene_of[indices]
        if self.cached:
            return self.model.answer(self.image_features(data)[scenes.to(self.device)], words)
        return self.model(data.images[scenes].to(self.device), words)

    def loss(self, data: PixelData, indices: torch.Tensor) -> tuple[torch.Tensor, dict[str, float]]:
        logits = self.logits(data, indices)
        loss = nn.functional.cross_entropy(logits, data.questions.answers[indices].to(self.device))
        return loss, {}

    @torch.inference_mode()
    def evaluate(self, data: PixelData, limit: int | None = None, batch_size: int = 256) -> tuple[FamilyScores, dict]:
        self.model.eval()
        count = min(len(data), limit or len(data))
        correct = torch.zeros(count, dtype=torch.bool)
        if self.cached and id(data) not in self._features and len(data.images) > self.cache_limit:
            for indices, logits in self.streamed_logits(data, count, batch_size):
                correct[indices] = logits.argmax(dim=1).cpu() == data.questions.answers[indices]
            return _scores(correct, data), {}
        for start in range(0, count, batch_size):
            indices = torch.arange(start, min(start + batch_size, count))
            predicted = self.logits(data, indices).argmax(dim=1).cpu()
            correct[indices] = predicted == data.questions.answers[indices]
        return _scores(correct, data), {}

    def streamed_logits(self, data: PixelData, count: int,
                        batch_size: int = 256) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """(question indices, their logits) over the first `count` questions, a chunk of scenes at a time,
        keeping no features."""
        scene_of = data.questions.scene_of[:count]
        by_scene = torch.argsort(scene_of, stable=True)
        chunk = self.cache_batch * max(1, self.cache_limit // (4 * self.cache_batch))
        bounds = torch.searchsorted(scene_of[by_scene], torch.arange(0, len(data.images) + chunk, chunk))
        for number, first_scene in enumerate(range(0, len(data.images), chunk)):
            asked = by_scene[int(bounds[number]) : int(bounds[number + 1])]
            if not len(asked):
                continue
            features = self._compute_features(data.images[first_scene : first_scene + chunk])
            for start in range(0, len(asked), batch_size):
                indices = asked[start : start + batch_size]
                rows = (scene_of[indices] - first_scene).to(self.device)
                words = _words(data, indices).to(self.device)
                yield indices, self.model.answer(features[rows], words)


class NeuroSymbolicTask:
    """Perception loss + parser loss; evaluated end to end through the executor."""

    def __init__(self, model: NeuroSymbolicNetwork, tokens: list[str], fallback: dict[str, str], spec: ImageSpec,
                 device: torch.device, parser_only: bool = False):
        self.model, self.tokens, self.fallback, self.spec, self.device = model, tokens, fallback, spec, device
        self.arity = torch.from_numpy(arities(tokens)).to(device)
        self.parser_only = parser_only

    def loss(self, data: PixelData, indices: torch.Tensor) -> tuple[torch.Tensor, dict[str, float]]:
        seeing, parts = torch.zeros((), device=self.device), {}
        if not self.parser_only:
            scenes, _ = image_rows(data, indices)
            targets = SceneTargets(*(t[scenes].to(self.device) for t in data.targets))
            maps = self.model.perception(data.images[scenes].to(self.device))
            seeing, parts = perception_loss(maps, targets, self.model.config.perception.heatmap_sigma)
        assert data.program_ids is not None
        programs = data.program_ids[indices]
        longest = max(int((programs != 0).sum(dim=1).max()), 1)
        programs = programs[:, :longest].to(self.device)
        logits = self.model.parser(_words(data, indices).to(self.device), programs)
        parsing = nn.functional.cross_entropy(logits.flatten(0, 1), programs.flatten(), ignore_index=0)
        parts["parser"] = parsing.item()
        return seeing + parsing, parts

    @torch.inference_mode()
    def evaluate(self, data: PixelData, limit: int | None = None, batch_size: int = 512) -> tuple[FamilyScores, dict]:
        self.model.eval()
        count = min(len(data), limit or len(data))
        correct = torch.zeros(count, dtype=torch.bool)
        exact_programs = fell_back = repaired = counted_right = scenes_seen = 0
        for start in range(0, count, batch_size):
            indices = torch.arange(start, min(start + batch_size, count))
            scenes, image_of = image_rows(data, indices)
            answers, programs, perceived, fallbacks, repairs = answer_questions(
                self.model, data.images[scenes].to(self.device), _words(data, indices).to(self.device), image_of,
                arity=self.arity, tokens=self.tokens, fallback=self.fallback,
                width=self.spec.width, height=self.spec.height,
            )
            fell_back += fallbacks
            repaired += repairs
            for index, answer, program in zip(indices.tolist(), answers, programs, strict=True):
                correct[index] = answer == data.answers_text[index]
                exact_programs += program_to_tokens(program) == program_to_tokens(data.programs[index])
            present = data.targets.present[scenes].sum(dim=1).tolist()
            counted_right += sum(len(p.scores) == n for p, n in zip(perceived, present, strict=True))
            scenes_seen += len(perceived)
        extra = {
            "program_exact": round(exact_programs / max(count, 1), 4),
            "object_count_right": round(counted_right / max(scenes_seen, 1), 4),
            "fallback_share": round(fell_back / max(count, 1), 4),
            "repaired_share": round(repaired / max(count, 1), 4),
        }
        return _scores(correct, data), extra


def majority_baseline(train: PixelData, heldout: PixelData | None) -> dict[str, Any]:
    """The most frequent training answer and its accuracy on the held-out questions."""
    answer = Counter(train.answers_text).most_common(1)[0][0]
    result: dict[str, Any] = {"answer": answer}
    if heldout is not None:
        result["heldout_accuracy"] = round(sum(a == answer for a in heldout.answers_text) / len(heldout), 4)
    return result


_MUST_MATCH_ON_RESUME = ("player", "batch_size", "seed", "model_config", "preset", "width", "height",
                         "curriculum_steps")


def _check_resumable(saved: dict[str, Any], options: PixelTrainingOptions) -> None:
    # Checkpoints from before --parser-only trained both parts; those from before --curriculum-steps had none.
    saved = {"parser_only": False, "curriculum_steps": 0, **saved}
    for key in (*_MUST_MATCH_ON_RESUME, "parser_only"):
        if saved.get(key) != getattr(options, key):
            raise InputError(
                f"{options.checkpoint_path}: was trained with {key}={saved.get(key)!r}, "
                f"not {getattr(options, key)!r} (resume needs the same {key})"
            )


def _start_file(options: PixelTrainingOptions) -> PixelPlayerFile:
    """The player file of `--init` (neuro-symbolic, film, pixel-rn); InputError for another model kind, a
    --config or another image spec."""
    assert options.init is not None
    try:
        start = load_player_file(options.init)
    except InputError as exc:  # a state player file, say: name the option that pointed at it
        raise InputError(f"--init: {exc}") from None
    if start.kind != options.kind:
        raise InputError(f"--init {options.init}: holds a {start.kind!r} model, not the {options.kind!r} of "
                         f"{options.player}")
    if options.model_config:
        raise InputError(f"--init {options.init}: --config cannot change the file's model (fine-tuning keeps it)")
    if start.image != options.spec:
        raise InputError(f"--init {options.init}: its model reads {start.image.label} images, "
                         f"not {options.spec.label} (--preset, --image-size)")
    return start


def _started_state(start: PixelPlayerFile, vocabulary_size: int, token_count: int) -> dict[str, torch.Tensor]:
    """The `--init` file's weights for a model that reads `vocabulary_size` words (new words start as
    UNKNOWN's embedding, so the model answers as the file did until training tells them apart)."""
    if start.kind == "neuro-symbolic":
        return grown_state(start.state_dict, vocabulary_size, token_count)
    key = "question.words.weight"  # film and pixel-rn read the question through one QuestionEncoder
    return {**start.state_dict, key: with_new_words({"words.weight": start.state_dict[key]},
                                                    vocabulary_size)["words.weight"]}


def backbone_source(options: PixelTrainingOptions) -> tuple[str, dict[str, torch.Tensor]]:
    """(path, perception weights) of the neuro-symbolic player file a fresh film / pixel-rn run copies its
    frozen backbone from; InputError for another kind of file or a perception trained on other images."""
    path = str(shipped_path(DEFAULT_PERCEPTION_FILE)) if options.perception_from is None else options.perception_from
    source = load_player_file(path)
    if source.kind != "neuro-symbolic":
        raise InputError(f"{path}: holds a {source.kind!r} model; the backbone is copied from a 'neuro-symbolic' "
                         "player file's perception")
    if source.image != options.spec:
        raise InputError(f"{path}: its perception reads {source.image.label} images, not {options.spec.label} "
                         "(--preset, --image-size): the backbone would see images it was never trained on")
    return path, perception_state(source.state_dict)


def train_pixel(options: PixelTrainingOptions, prepared: PreparedPixelData | None = None) -> PixelTrainingResult:
    """Train (or resume) a pixel player; writes `options.out` and its checkpoint; returns the run's summary.

    `prepared`: train on these in-memory tensors instead of reading `options.data` and `options.eval_data`.
    """
    from players.state.training import denormals_flushed

    if prepared is not None:
        _check_prepared(prepared, options)
    with denormals_flushed():
        return _train_pixel(options, prepared)


def _check_prepared(prepared: PreparedPixelData, options: PixelTrainingOptions) -> None:
    if options.init or options.parser_only or options.extra_data:
        raise ValueError("prepared data is for fresh or resumed runs (no init, no parser-only, no extra data)")
    for part in (prepared.train, prepared.held_out):
        if part is not None and tuple(part.images.shape[1:]) != (options.height, options.width, 3):
            raise ValueError(f"prepared images are {tuple(part.images.shape[1:])}, not the options' "
                             f"{(options.height, options.width, 3)}")


def evaluate_pixel_player(player_file: PixelPlayerFile, data: PixelData,
                          device: torch.device | str = "cpu") -> tuple[FamilyScores, dict[str, Any]]:
    """Per-family accuracy of a trained player on every question of `data` (images at the player's spec),
    with the task's extra measures (the neuro-symbolic player's program and perception scores)."""
    device = torch.device(device)
    model = player_file.build(device)
    task: AnsweringTask | NeuroSymbolicTask | ObjectTransformerTask
    if isinstance(model, ObjectTransformerNetwork):
        task = ObjectTransformerTask(model, device)
    elif isinstance(model, NeuroSymbolicNetwork):
        attach_program_ids(data, player_file.program_tokens, model.config.parser.max_tokens)
        task = NeuroSymbolicTask(model, player_file.program_tokens, player_file.fallback, player_file.image, device)
    else:
        task = AnsweringTask(model, device)
    return task.evaluate(data)


def _train_pixel(options: PixelTrainingOptions, prepared: PreparedPixelData | None = None) -> PixelTrainingResult:
    from tqdm import tqdm

    torch.set_num_threads(options.threads)
    kind, spec, device = options.kind, options.spec, options.torch_device
    started = time.monotonic()
    checkpoint: dict[str, Any] | None = None
    if options.resume and options.checkpoint_path.exists():
        checkpoint = read_torch(options.checkpoint_path, "training checkpoint")
        _check_resumable(checkpoint["options"], options)
    previous: PixelPlayerFile | None = (
        from_dict(checkpoint["player"], str(options.checkpoint_path)) if checkpoint else None
    )
    if options.parser_only and kind != "neuro-symbolic":
        raise InputError(f"--parser-only is for neuro-symbolic, not {options.player}")
    fresh_start = options.init is not None and previous is None
    initial = reasoning_source(options.init) if fresh_start and kind == "object-transformer" else None
    start_file = _start_file(options) if fresh_start and kind != "object-transformer" else None
    vocabulary = WordVocabulary(previous.words[2:]) if previous else (
        start_file.vocabulary() if start_file else initial.vocabulary() if initial else default_word_vocabulary())
    source = previous or start_file or initial
    answers = list(source.answers) if source else list(ANSWERS)
    eval_data = None

    def training_data(folder: str, vocabulary: WordVocabulary) -> tuple[PixelData, WordVocabulary]:
        if options.parser_only:
            return load_question_data(folder, vocabulary, answers, spec, extend_vocabulary=previous is None)
        return load_pixel_data(folder, vocabulary, answers, spec, extend_vocabulary=previous is None,
                               render_workers=options.render_workers, progress=options.progress)

    if prepared is not None:
        if previous is not None:
            check_prepared_words(prepared.vocabulary, vocabulary, options.checkpoint_path)
        train_data, vocabulary, eval_data = prepared.train, prepared.vocabulary, prepared.held_out
    else:
        parts = []
        for folder in [options.data, *options.extra_data]:
            # Growing appends words, so the ids of the folders read before stay valid.
            part, vocabulary = training_data(folder, vocabulary)
            parts.append(part)
        train_data = parts[0] if len(parts) == 1 else concatenate_pixel_data(parts)
    if prepared is None and options.eval_data:
        eval_data, _ = load_pixel_data(options.eval_data, vocabulary, answers, spec,
                                       render_workers=options.render_workers, progress=options.progress)
    torch.manual_seed(options.seed)
    config = previous.config if previous else start_file.config if start_file else options.model_config
    perception_weights = None
    if kind == "object-transformer" and previous is None:
        perception_config, perception_weights = perception_source(options.perception_from)
        config = start_config(config, perception_config, initial)
    tokens: list[str] = []
    fallback: dict[str, str] = {}
    if kind == "neuro-symbolic":
        found = token_list(train_data.programs)
        known = previous or start_file
        tokens = list(known.program_tokens) if known else found
        tokens += [token for token in found if token not in tokens]  # a fine-tuning run's new tokens, after the known
        fallback = dict(known.fallback) if known else {}
        for root, answer in fallback_answers(train_data.programs, train_data.answers_text).items():
            fallback.setdefault(root, answer)
    model = build_model(kind, config, len(vocabulary), len(answers), len(tokens)).to(device)
    if isinstance(model, ObjectTransformerNetwork) and perception_weights is not None:
        start_weights(model, perception_weights, initial, len(vocabulary))
    if start_file is not None:
        model.load_state_dict(_started_state(start_file, len(vocabulary), len(tokens)))
    backbone = getattr(model, "backbone", None)
    known = previous or start_file
    backbone_from = known.info.get("backbone_from") if known else None
    if backbone is not None and known is None:  # a resumed or --init run's backbone is in its file
        backbone_from, backbone_weights = backbone_source(options)
        backbone.load_perception(backbone_weights)
    task: AnsweringTask | NeuroSymbolicTask | ObjectTransformerTask
    if isinstance(model, ObjectTransformerNetwork):
        task = ObjectTransformerTask(model, device)
    elif isinstance(model, NeuroSymbolicNetwork):
        attach_program_ids(train_data, tokens, model.config.parser.max_tokens)
        if eval_data is not None:
            attach_program_ids(eval_data, tokens, model.config.parser.max_tokens)
        task = NeuroSymbolicTask(model, tokens, fallback, spec, device, parser_only=options.parser_only)
    else:
        task = AnsweringTask(model, device)
    trained: nn.Module = model
    if isinstance(model, NeuroSymbolicNetwork) and options.parser_only:
        model.perception.requires_grad_(False)  # out of the optimiser too: no weight decay touches it
        trained = model.parser
    state = Optimisation(decoupled_optimizer(trained, options.learning_rate, options.weight_decay),
                         options.warmup_steps, options.steps, options.decay)
    heldout: dict[str, Any] = {}
    if checkpoint is not None:
        model.load_state_dict(checkpoint["player"]["state_dict"])
        state.restore(checkpoint)
        heldout = checkpoint.get("heldout", {})
    schedule = (CurriculumSchedule(train_data.questions.lengths, options.batch_size, options.seed,
                                   options.curriculum_steps) if options.curriculum_steps
                else BatchSchedule(train_data.questions.lengths, options.batch_size, options.seed))
    writer = None
    if options.log_dir != "":
        from torch.utils.tensorboard import SummaryWriter

        writer = SummaryWriter(options.log_dir or f"{options.out}.logs")
    baseline = majority_baseline(train_data, eval_data)
    def info() -> dict[str, Any]:
        return {
            "player": options.player, "data": str(options.data), "data_questions": len(train_data),
            "data_images": int(train_data.images.shape[0]), "eval_data": options.eval_data,
            "seed": options.seed, "batch_size": options.batch_size, "step": state.step,
            "steps_planned": options.steps, "train_seconds": round(state.seconds(), 1),
            "parameters": sum(p.numel() for p in model.parameters()),
            "curve": state.curve, "command": options.command, "heldout": heldout, "majority": baseline,
            **({"init": options.init} if options.init else {}),
            **({"extra_data": list(options.extra_data)} if options.extra_data else {}),
            **({"backbone_from": backbone_from} if backbone_from else {}),
            **({"parser_only": True} if options.parser_only else {}),
        }

    def save() -> None:
        player_file = player_file_from(model, kind, vocabulary, answers, spec, program_tokens=tokens,
                                       fallback=fallback, info=info())
        write_torch_atomic(options.checkpoint_path, {
            "player": to_dict(player_file), **state.checkpoint_fields(), "heldout": heldout,
            "options": asdict(options), **({"early_stopping": stopping.state_dict()} if stopping is not None else {}),
        })
        save_player_file(options.out, player_file)

    stopping = resumed_stopping(options.patience, checkpoint, options.min_steps)

    def record_evaluation() -> bool:
        if eval_data is None:
            return False
        scores, extra = task.evaluate(eval_data, limit=options.eval_size)
        point = {"step": state.step, "accuracy": round(scores.accuracy, 4),
                 "minutes": round(state.seconds() / 60, 1), **extra}
        state.curve.append(point)
        if writer is not None:
            writer.add_scalar("heldout/accuracy", scores.accuracy, state.step)
            for name, value in extra.items():
                writer.add_scalar(f"heldout/{name}", value, state.step)
        tqdm.write(f"step {state.step}: held-out accuracy {scores.accuracy:.4f} {extra} ({point['minutes']} min)")
        if stopping is None:
            return False
        return stopping.after_evaluation(scores.accuracy, model, state.step, state.step >= options.steps)

    if options.progress:
        trained_count = sum(p.numel() for p in model.parameters() if p.requires_grad)
        print(f"{options.player}: {sum(p.numel() for p in model.parameters())} parameters "
              f"({trained_count} trained), "
              f"{len(train_data)} questions on {train_data.images.shape[0]} images ({spec.label}), "
              f"from step {state.step} of {options.steps}; majority answer {baseline}", flush=True)
    settings = options.loop_settings(log_every=20, smoothing=0.05)
    if stopping is not None and stopping.has_stopped(state.step):  # resumed after its early stop: nothing left
        settings = replace(settings, steps=state.step)
    result = run_loop(model, state, settings, lambda step: task.loss(train_data, schedule.indices(step)),
                      save, record_evaluation, started=started, writer=writer)
    if writer is not None:
        writer.close()
    if state.step == options.steps and eval_data is not None and prepared is None:  # the caller scores its own
        scores, extra = task.evaluate(eval_data)
        heldout.update({
            "data": str(options.eval_data), "questions": len(eval_data), "accuracy": round(scores.accuracy, 4),
            "families": {f: round(a, 4) for f, a in scores.family_accuracy().items()}, **extra,
        })
        save()
    if not Path(options.out).exists():
        save()
    return PixelTrainingResult(state.step, state.seconds(), state.curve, result.loss_average, result.first_loss,
                               state.carried_seconds, result.out_of_time)

