"""The study's options, files, players and the settings a recorded trial depends on."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clevr_game.errors import InputError

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
VOLATILE_TRAINING_OPTIONS = ("max_minutes", "resume", "command")
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


