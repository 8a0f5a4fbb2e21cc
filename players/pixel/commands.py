"""The pixel-player side of `clevr-game players train` (the options are parsed in players.commands)."""

from __future__ import annotations

import argparse
import shlex
import sys
from typing import Any

from clevr_game.errors import InputError
from players.tunables import given_tunables


def train_from_args(args: argparse.Namespace, model_config: dict[str, Any]) -> int:
    """Run `players train` for a pixel player: images rendered with --preset / --image-size when missing."""
    from players.pixel.checkpoint import PLAYER_KINDS, build_model
    from players.pixel.images import parse_image_size
    from players.pixel.training import PixelTrainingOptions, train_pixel

    width, height = parse_image_size(args.image_size)
    options = PixelTrainingOptions(
        player=args.player, data=args.data, out=args.out, eval_data=args.eval_data,
        preset=args.preset, width=width, height=height, render_workers=args.render_workers,
        **given_tunables(args), decay_steps=args.decay_steps, seed=args.seed, max_minutes=args.max_minutes,
        model_config=model_config,
        threads=args.threads, device=args.device, log_dir=args.log_dir, progress=not args.no_progress, resume=args.resume,
        init=args.init, parser_only=args.parser_only, perception_from=args.perception_from,
        extra_data=list(args.extra or []), curriculum_steps=args.curriculum_steps,
        command=" ".join(shlex.quote(a) for a in ["clevr-game", *sys.argv[1:]]),
    )
    _ = (options.spec, options.torch_device)  # a bad preset, size or device fails before the data loads
    try:
        build_model(PLAYER_KINDS[args.player], model_config, 4, 2, 4)  # so does a bad --config
    except TypeError as exc:
        raise InputError(f"--config: {exc}") from None
    result = train_pixel(options)
    if result.curve:
        print(f"held-out accuracy at step {result.curve[-1]['step']}: {result.curve[-1]['accuracy']:.4f}")
    print(f"trained {result.step} steps in {result.train_seconds / 60:.1f} min; wrote {args.out}")
    return 0

