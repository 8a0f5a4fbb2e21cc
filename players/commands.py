"""`clevr-game players train|eval`: train a state player, measure any player on a dataset.

Module-level imports stay light (no torch): the handlers import what they need.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from argparse import SUPPRESS

from clevr_game.cli_types import (
    MAX_ANSWER_BATCH,
    MAX_BLENDER_WORKERS,
    MAX_ITEMS,
    MAX_LEARNING_RATE,
    MAX_MINUTES,
    MAX_STEPS,
    MAX_THREADS,
    MAX_TRAINING_BATCH,
    float_in,
    image_size,
    int_in,
    output_file,
    output_folder,
    random_seed,
)
from clevr_game.errors import InputError, RunFailed
from players.guard import add_limit_options, limits_from_args
from players.registry import PLAYER_SPEC_HELP, add_input_options, input_from_args
from players.tunables import TUNABLES as TUNABLES  # re-exported: the tests read it here
from players.tunables import given_tunables

TRAINABLE = ("state-transformer", "state-rn", "blind")
MAX_WEIGHT_DECAY = 10.0
"""Decoupled weight decay (the trainers' defaults are 0.01 and 1e-4)."""
PIXEL_TRAINABLE = ("pixel-rn", "film", "neuro-symbolic", "object-transformer")  # trained by players.pixel.commands


def _model_config(text: str | None) -> dict:
    if not text:
        return {}
    try:
        config = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"--config: not JSON: {exc.msg} at character {exc.pos}") from None
    if not isinstance(config, dict):
        raise InputError("--config: expected a JSON object such as '{\"width\": 128}'")
    return config


def _cmd_train(args: argparse.Namespace) -> int:
    from players.state.training import TrainingOptions, train

    if args.perception_from and args.player not in ("object-transformer", "film", "pixel-rn"):
        raise InputError(f"--perception-from is for object-transformer, film and pixel-rn, not {args.player}")
    if args.parser_only and args.player != "neuro-symbolic":
        raise InputError(f"--parser-only is for neuro-symbolic, not {args.player}")
    if args.curriculum_steps and args.player not in PIXEL_TRAINABLE:
        raise InputError(f"--curriculum-steps is for {', '.join(PIXEL_TRAINABLE)}, not {args.player}")
    if args.player in PIXEL_TRAINABLE:
        from players.pixel.commands import train_from_args

        return train_from_args(args, _model_config(args.config))
    options = TrainingOptions(
        player=args.player, data=args.data, out=args.out, eval_data=args.eval_data, **given_tunables(args),
        decay_steps=args.decay_steps, seed=args.seed, max_minutes=args.max_minutes, model_config=_model_config(args.config), threads=args.threads,
        log_dir=args.log_dir, progress=not args.no_progress, resume=args.resume,
        command=" ".join(shlex.quote(a) for a in ["clevr-game", *sys.argv[1:]]),
        extra_data=list(args.extra or []), init=args.init,
    )
    try:
        from players.state.models import build_model

        build_model(options.kind, options.model_config, 4, 2)  # a bad --config fails before the data loads
    except TypeError as exc:
        raise InputError(f"--config: {exc}") from None
    result = train(options)
    if result.curve:
        print(f"held-out accuracy at step {result.curve[-1]['step']}: {result.curve[-1]['accuracy']:.4f}")
    print(f"trained {result.step} steps in {result.train_seconds / 60:.1f} min; wrote {args.out}")
    return 0


def _cmd_eval(args: argparse.Namespace) -> int:
    from players.guard import PlayerGaveUp
    from players.pixel.evaluation import evaluate_on_dataset
    from players.registry import load_guarded

    kwargs: dict = {}
    if args.weights:
        kwargs["path"] = args.weights
    if args.device:
        kwargs["device"] = args.device
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    limits = limits_from_args(args)
    player_input = input_from_args(args)
    with load_guarded(args.player, **limits, player_input=player_input, **kwargs) as player:
        try:  # a pixel player's queries carry rendered images
            result = evaluate_on_dataset(player, args.data, limit=args.limit, batch_size=args.batch_size,
                                         render_workers=args.render_workers, progress=not args.no_progress)
        except PlayerGaveUp as exc:
            raise RunFailed(str(exc)) from None
        count = player.count
    for line in result.lines():
        print(line)
    failure = count.failure(args.max_error_rate)
    if failure is not None:
        print(f"clevr-game: error: players eval: {failure}", file=sys.stderr)
        return 1
    return 0


def add_player_commands(subparsers: argparse._SubParsersAction) -> None:
    """Add `players train` and `players eval` to the clevr-game command line."""
    players = subparsers.add_parser("players", help="train state players; measure any player's accuracy")
    commands = players.add_subparsers(dest="players_command", required=True)

    p = commands.add_parser("train", help="train a state player on a generated (or CLEVR) dataset; resumable")
    p.add_argument("--player", choices=TRAINABLE + PIXEL_TRAINABLE, required=True)
    p.add_argument("--data", required=True, help="dataset folder (scenes.json + questions.json)")
    p.add_argument("--out", type=output_file, required=True, help="player file to write; the checkpoint is <out>.ckpt")
    p.add_argument("--eval-data", default=None, help="held-out dataset folder for the learning curve")
    # Tunables left out default to the trainer's own figures (state and pixel players differ).
    trainer = "(default: the player kind's, TrainingOptions / PixelTrainingOptions)"
    p.add_argument("--steps", type=int_in(1, MAX_STEPS), default=SUPPRESS,
                   help=f"total optimiser steps; resume with a larger value to extend the run {trainer}")
    p.add_argument("--batch-size", type=int_in(1, MAX_TRAINING_BATCH), default=SUPPRESS, help=trainer)
    p.add_argument("--learning-rate", type=float_in(0, MAX_LEARNING_RATE), default=SUPPRESS, help=trainer)
    p.add_argument("--weight-decay", type=float_in(0, MAX_WEIGHT_DECAY), default=SUPPRESS, help=trainer)
    p.add_argument("--warmup-steps", type=int_in(0, MAX_STEPS), default=SUPPRESS, help=trainer)
    p.add_argument("--decay-steps", type=int_in(0, MAX_STEPS), default=None,
                   help="final linear learning-rate decay (default: the last fifth of --steps)")
    p.add_argument("--seed", type=random_seed, default=0)
    p.add_argument("--eval-every", type=int_in(1, MAX_STEPS), default=SUPPRESS, help=trainer)
    p.add_argument("--eval-size", type=int_in(1, MAX_ITEMS), default=SUPPRESS,
                   help=f"held-out questions used for the curve {trainer}")
    p.add_argument("--checkpoint-minutes", type=float_in(0, MAX_MINUTES, above_lo=True), default=SUPPRESS, help=trainer)
    p.add_argument("--max-minutes", type=float_in(0, MAX_MINUTES, above_lo=True), default=None,
                   help="checkpoint and stop after this long")
    p.add_argument("--config", default=None, help="model config as JSON, e.g. '{\"width\": 128, \"layers\": 4}'")
    p.add_argument("--threads", type=int_in(1, MAX_THREADS), default=1,
                   help="torch threads (1 is fastest on a busy shared machine)")
    p.add_argument("--log-dir", type=output_folder, default=None,
                   help="TensorBoard folder (default <out>.logs; '' for none)")
    p.add_argument("--resume", action="store_true", help="continue from <out>.ckpt")
    p.add_argument("--extra", action="append", default=[], metavar="DIR",
                   help="another dataset folder to train on as well, e.g. `clevr-game export` output (repeatable; "
                        "pixel players: its images are rendered with --preset / --image-size when missing)")
    p.add_argument("--init", default=None, metavar="FILE",
                   help="start from this player file's weights and vocabulary (fine-tuning) instead of a fresh model: "
                        "a file of the same kind (state players, film, pixel-rn, neuro-symbolic); "
                        "object-transformer: a state-transformer file, its reasoning starts from it")
    p.add_argument("--perception-from", default=None, metavar="FILE",
                   help="object-transformer, and film / pixel-rn with a backbone: the neuro-symbolic player file whose "
                        "perception a fresh run copies (default: the shipped one)")
    p.add_argument("--parser-only", action="store_true",
                   help="neuro-symbolic: train the question parser alone (no training images; perception unchanged), "
                        "e.g. with --init players/weights/neuro-symbolic.pt on new question phrasings")
    p.add_argument("--curriculum-steps", type=int_in(0, MAX_STEPS), default=0, metavar="N",
                   help="pixel players: the first N steps draw their batches from the shortest questions only, "
                        "a share growing from 20%% to all of them (short questions first, as curricula by "
                        "program depth do)")
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--preset", default="fast", help="pixel players: render preset of the images (default fast)")
    p.add_argument("--image-size", type=image_size, default="128x96", help="pixel players: image size, WIDTHxHEIGHT")
    p.add_argument("--render-workers", type=int_in(1, MAX_BLENDER_WORKERS), default=2,
                   help="pixel players: Blender workers for missing images")
    p.add_argument("--device", default="cpu", help="pixel players: torch device for training (e.g. cuda)")
    p.set_defaults(handler=_cmd_train)

    p = commands.add_parser("eval", help="accuracy overall and per question family; last line `accuracy: X`")
    p.add_argument("--player", required=True, help=f"the player: {PLAYER_SPEC_HELP}")
    p.add_argument("--data", required=True, help="dataset folder (scenes.json + questions.json)")
    p.add_argument("--weights", default=None, help="a player file instead of the shipped one (state players)")
    p.add_argument("--device", default=None, help="torch device for state players (default cpu)")
    p.add_argument("--limit", type=int_in(1, MAX_ITEMS), default=None, help="only the first N questions")
    p.add_argument("--batch-size", type=int_in(1, MAX_ANSWER_BATCH), default=512)
    p.add_argument("--threads", type=int_in(1, MAX_THREADS), default=None)
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--render-workers", type=int_in(1, MAX_BLENDER_WORKERS), default=2,
                   help="pixel players: Blender workers for missing images")
    add_input_options(p)
    add_limit_options(p)
    p.set_defaults(handler=_cmd_eval)
