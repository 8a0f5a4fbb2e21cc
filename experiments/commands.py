"""`clevr-game adversarial-training` and `study examples`: the experiments' command line.

The option defaults are the options dataclasses' own (`AdversarialTrainingOptions`,
`StudyOptions`). Module-level imports stay light: each handler imports what it runs.
"""

from __future__ import annotations

import argparse

from agents.commands import MAX_ENVS, MAX_EVAL_SAMPLES, attack_bytes
from clevr_game.cli_types import (
    MAX_BLENDER_WORKERS,
    MAX_ITEMS,
    MAX_LEARNING_RATE,
    MAX_MINUTES,
    MAX_STEPS,
    MAX_THREADS,
    MAX_TRAINING_BATCH,
    MAX_WORKERS,
    check_memory,
    float_in,
    image_size,
    int_in,
    output_folder,
    random_seed,
)
from clevr_game.errors import InputError

MAX_SEEDS = 1_000
"""Seeds per mini-game (the paper's full Table 2 runs 30)."""
MAX_TRIALS = 1_000
"""Random scene splits per share in the examples study (default 10)."""


def _cmd_adversarial_training(args: argparse.Namespace) -> int:
    from experiments.adversarial_training import (
        AdversarialTrainingOptions,
        run_adversarial_training,
    )

    check_memory(args.workers * attack_bytes(args.size, args.eval_samples, args.num_envs, args.steps),
                 f"adversarial-training: --workers {args.workers} trials of --size {args.size} x --eval-samples "
                 f"{args.eval_samples}, --num-envs {args.num_envs}, --steps {args.steps}")
    report = run_adversarial_training(AdversarialTrainingOptions(
        player=args.player, items=args.items, out=args.out, heldout=args.heldout, size=args.size,
        minigames=args.minigames, seeds=args.seeds, steps=args.steps, finetune_steps=args.finetune_steps,
        finetune_batch_size=args.finetune_batch_size, finetune_learning_rate=args.finetune_learning_rate,
        select=args.select, split_seed=args.split_seed, seed=args.seed, num_envs=args.num_envs,
        eval_samples=args.eval_samples, adversary_weights=args.adversary_weights, workers=args.workers,
        threads=args.threads, progress=not args.no_progress,
    ))
    print(f"report: {report}")
    return 0


def add_adversarial_training_commands(subparsers: argparse._SubParsersAction) -> None:
    """Add `adversarial-training` to the clevr-game command line."""
    from clevr_game.export import SELECTIONS
    from experiments.adversarial_training import AdversarialTrainingOptions

    defaults = AdversarialTrainingOptions  # a dataclass field's default is also its class attribute
    p = subparsers.add_parser("adversarial-training", help="benchmark, export, fine-tune, benchmark on fresh "
                              "mini-games; last line `report: EXP/report.md`; resumable")
    p.add_argument("--player", required=True,
                   help="state-transformer, state-rn, film, pixel-rn or file:PATH (a player file of one of those "
                        "kinds); a pixel player trains and is measured on images rendered with its own preset "
                        "and size")
    p.add_argument("--items", required=True, help="item pool (CLEVR dataset folder); also the clean fine-tuning data; "
                   "only read (a pixel player's images are rendered for a copy in OUT/pixel-data)")
    p.add_argument("--out", type=output_folder, required=True, help="experiment folder")
    p.add_argument("--heldout", default=defaults.heldout,
                   help="clean held-out dataset (default: generated in OUT/heldout)")
    p.add_argument("--size", type=int_in(1, MAX_ITEMS), default=defaults.size, help="mini-game size")
    p.add_argument("--minigames", type=int_in(1, MAX_ITEMS), default=defaults.minigames,
                   help="M: mini-games 0..M-1 before, the fresh M..2M-1 after")
    p.add_argument("--seeds", type=int_in(1, MAX_SEEDS), default=defaults.seeds)
    p.add_argument("--steps", type=int_in(1, MAX_STEPS), default=defaults.steps,
                   help="adversary training env steps per trial")
    # The fine-tune's other settings (weight decay, clipping, ...) are its trainer's: TrainingOptions' for a
    # state player, PixelTrainingOptions' for a pixel player.
    p.add_argument("--finetune-steps", type=int_in(1, MAX_STEPS), default=defaults.finetune_steps,
                   help="fine-tuning optimiser steps, state and pixel players alike (default %(default)s)")
    p.add_argument("--finetune-batch-size", type=int_in(1, MAX_TRAINING_BATCH), default=defaults.finetune_batch_size,
                   help="(default %(default)s)")
    p.add_argument("--finetune-learning-rate", type=float_in(0, MAX_LEARNING_RATE),
                   default=defaults.finetune_learning_rate,
                   help="(default %(default)s; warmup: a tenth of the steps)")
    p.add_argument("--select", choices=list(SELECTIONS), default=defaults.select, help="what the export keeps")
    p.add_argument("--split-seed", type=random_seed, default=defaults.split_seed)
    p.add_argument("--seed", type=random_seed, default=defaults.seed, help="fine-tuning seed")
    p.add_argument("--num-envs", type=int_in(1, MAX_ENVS), default=defaults.num_envs)
    p.add_argument("--eval-samples", type=int_in(1, MAX_EVAL_SAMPLES), default=defaults.eval_samples)
    p.add_argument("--adversary-weights", default=defaults.adversary_weights,
                   help="relation-network file (default: the shipped one)")
    p.add_argument("--workers", type=int_in(1, MAX_BLENDER_WORKERS), default=defaults.workers,
                   help="local processes running trials; pixel players: also Blender workers rendering images")
    p.add_argument("--threads", type=int_in(1, MAX_THREADS), default=defaults.threads, help="torch threads for fine-tuning")
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(handler=_cmd_adversarial_training)


# ------------------------------------------------------------------ the examples study


def _share_list(text: str) -> list[float]:
    """Comma-separated shares strictly between 0 and 1 (`0.01,0.1,0.5`)."""
    try:
        shares = [float(part) for part in text.split(",")]
    except ValueError:
        shares = []
    if not shares or not all(0.0 < share < 1.0 for share in shares):
        raise argparse.ArgumentTypeError(f"must be comma-separated numbers strictly between 0 and 1, got {text!r}")
    return shares


def _json_object(option: str, text: str | None, example: str) -> dict:
    """The JSON object `text` of `option` ({} when absent); InputError in one line otherwise."""
    import json

    try:
        value = json.loads(text) if text else {}
    except json.JSONDecodeError as exc:
        raise InputError(f"{option}: not JSON: {exc.msg} at character {exc.pos}") from None
    if not isinstance(value, dict):
        raise InputError(f"{option}: expected a JSON object such as '{example}'")
    return value


def _cmd_study_examples(args: argparse.Namespace) -> int:
    import shlex

    from experiments.examples_study import PIXEL_PLAYERS, StudyOptions, run_study
    from players.pixel.images import parse_image_size

    config = _json_object("--config", args.config, '{"width": 64}')
    pixel_config = _json_object("--pixel-config", args.pixel_config, '{"film": {"width": 32}}')
    width, height = parse_image_size(args.image_size)
    players = args.players.split(",")
    command = ["clevr-game", "study", "examples", "--data", args.data, "--players", args.players, "--fractions",
               ",".join(f"{f:g}" for f in args.fractions), "--trials", str(args.trials), "--out", args.out,
               "--steps", str(args.steps), "--batch-size", str(args.batch_size), "--learning-rate",
               f"{args.learning_rate:g}", "--eval-every", str(args.eval_every), "--patience", str(args.patience),
               "--seed", str(args.seed)]
    if args.config:
        command += ["--config", args.config]
    if any(player in PIXEL_PLAYERS for player in players):  # state-only commands read as they did before
        command += ["--preset", args.preset, "--image-size", f"{width}x{height}"]
        if args.pixel_config:
            command += ["--pixel-config", args.pixel_config]
    outcome = run_study(StudyOptions(
        data=args.data.split(","), players=players, fractions=args.fractions, trials=args.trials,
        out=args.out, steps=args.steps, max_minutes=args.max_minutes, batch_size=args.batch_size,
        learning_rate=args.learning_rate, eval_every=args.eval_every, patience=args.patience, model_config=config,
        seed=args.seed, threads=args.threads, workers=args.workers, command=shlex.join(command), preset=args.preset,
        image_width=width, image_height=height, render_workers=args.render_workers, pixel_config=pixel_config,
        report_only=args.report_only, merge_from=args.merge_from.split(",") if args.merge_from else [],
    ))
    print(f"trials: {outcome.recorded} of {outcome.planned} recorded; report: {outcome.report}")
    return 0


def add_study_commands(subparsers: argparse._SubParsersAction) -> None:
    """Add `study examples` to the clevr-game command line."""
    from experiments.examples_study import FIGURE_FILE, REPORT_FILE, RESULTS_FILE, StudyOptions

    defaults = StudyOptions  # a dataclass field's default is also its class attribute
    study = subparsers.add_parser("study", help="experiments over datasets and players").add_subparsers(
        dest="study", required=True)
    p = study.add_parser("examples", help="accuracy on unseen placements against the share trained on "
                         "(the paper's Figure 2); resumable; last line `trials: X of Y recorded; report: PATH`")
    p.add_argument("--data", required=True, help="comma-separated `clevr-game exhaustive` folders")
    p.add_argument("--players", default="state-transformer",
                   help="comma-separated players: state-transformer, state-rn, film, pixel-rn, object-transformer")
    p.add_argument("--fractions", type=_share_list, default=_share_list("0.01,0.05,0.1,0.25,0.5,0.75,0.9"),
                   help="shares of the scenes trained on")
    p.add_argument("--trials", type=int_in(1, MAX_TRIALS), default=10, help="random scene splits per fraction")
    p.add_argument("--out", type=output_folder, required=True,
                   help=f"results folder ({RESULTS_FILE}, {REPORT_FILE}, {FIGURE_FILE})")
    p.add_argument("--steps", type=int_in(1, MAX_STEPS), default=defaults.steps,
                   help="step budget of each training run")
    p.add_argument("--max-minutes", type=float_in(0, MAX_MINUTES, above_lo=True), default=defaults.max_minutes,
                   help="stop the whole study after this long (the cut trial is not recorded; rerun to continue)")
    p.add_argument("--batch-size", type=int_in(1, MAX_TRAINING_BATCH), default=defaults.batch_size)
    p.add_argument("--learning-rate", type=float_in(0, MAX_LEARNING_RATE, above_lo=True), default=defaults.learning_rate)
    p.add_argument("--eval-every", type=int_in(1, MAX_STEPS), default=defaults.eval_every,
                   help="steps between validation evaluations")
    p.add_argument("--patience", type=int_in(1, MAX_STEPS), default=defaults.patience,
                   help="validation evaluations without a better accuracy before a run stops")
    p.add_argument("--config", default=None,
                   help="state players' model config as JSON, e.g. '{\"width\": 64, \"layers\": 2}'")
    p.add_argument("--seed", type=random_seed, default=defaults.seed, help="seeds the splits and the models")
    p.add_argument("--threads", type=int_in(1, MAX_THREADS), default=defaults.threads, help="torch threads of each trial")
    p.add_argument("--workers", type=int_in(1, MAX_WORKERS), default=defaults.workers,
                   help="trials run side by side, one process each (the records are the same as with one)")
    p.add_argument("--preset", default=defaults.preset, help="pixel players: render preset of the images")
    p.add_argument("--image-size", type=image_size, default=f"{defaults.image_width}x{defaults.image_height}",
                   help="pixel players: image size, WIDTHxHEIGHT")
    p.add_argument("--render-workers", type=int_in(1, MAX_BLENDER_WORKERS), default=defaults.render_workers,
                   help="pixel players: Blender workers rendering a dataset's missing images (once per dataset)")
    p.add_argument("--pixel-config", default=None,
                   help="pixel players' model configs as JSON keyed by player, e.g. '{\"film\": {\"width\": 32}}', "
                        "laid over the study's: film and pixel-rn read the frozen perception ('{\"backbone\": "
                        "\"perception\"}', as the shipped players do)")
    p.add_argument("--report-only", action="store_true",
                   help="run no trial: rewrite the report and figure from the recorded trials")
    p.add_argument("--merge-from", default=None,
                   help="comma-separated results folders of other runs of this study (say, other --data on "
                        "another machine): their trials are added to --out's first")
    p.set_defaults(handler=_cmd_study_examples)
