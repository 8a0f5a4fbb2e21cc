"""`clevr-game evaluate` and `leaderboard`: a player's robustness card on the frozen protocol, and a table of cards."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from clevr_game.cli_types import MAX_WORKERS, int_in, output_folder
from players.guard import add_limit_options, limits_from_args
from players.registry import PLAYER_SPEC_HELP, add_input_options, input_from_args

MAX_CARD_SEED = 1_000_000


def _cmd_evaluate(args: argparse.Namespace) -> int:
    from benchmarks.card.evaluate import EvaluateOptions, last_line, run_evaluation
    from benchmarks.provenance import run_info, write_run_info

    limits = limits_from_args(args)
    options = EvaluateOptions(
        player=args.player, out=args.out, budget=args.budget, seed=args.seed, protocol=args.protocol,
        player_input=input_from_args(args), player_timeout=limits["timeout_s"],
        player_startup_timeout=limits["startup_timeout_s"], max_player_failures=limits["max_failures"],
        max_error_rate=args.max_error_rate, workers=args.workers, gallery_preset=args.gallery_preset,
        progress=not args.no_progress,
    )
    log = (lambda line: print(line, file=sys.stderr, flush=True)) if not args.no_progress else (lambda line: None)
    card = run_evaluation(options, log=log)
    write_run_info(Path(args.out), run_info(getattr(args, "argv", []),
                                            {k: v for k, v in vars(args).items() if k not in ("handler", "argv")}))
    print(f"card: {Path(args.out) / 'card.md'} {Path(args.out) / 'card.html'}")
    print(last_line(card))
    return 0


def _cmd_leaderboard(args: argparse.Namespace) -> int:
    from benchmarks.card.leaderboard import build_leaderboard

    table = build_leaderboard([Path(folder) for folder in args.cards], Path(args.out))
    print(table)
    print(f"leaderboard: {Path(args.out) / 'leaderboard.md'} {Path(args.out) / 'leaderboard.html'}")
    return 0


def add_card_commands(subparsers: argparse._SubParsersAction) -> None:
    """Add `evaluate` and `leaderboard` to the clevr-game command line."""
    from benchmarks.card.protocol import DEFAULT_PROTOCOL, PROTOCOLS
    from clevr_game.render.presets import PRESETS as RENDER_PRESETS

    p = subparsers.add_parser("evaluate", help="a player's robustness card on the frozen protocol clevr-robust-v1 "
                                               "(docs/robustness-card.md)")
    p.add_argument("--player", required=True, help=PLAYER_SPEC_HELP)
    p.add_argument("--out", type=output_folder, required=True,
                   help="the card's folder; the same command again resumes an interrupted evaluation")
    p.add_argument("--budget", choices=("smoke", "quick", "standard"), default="quick",
                   help="smoke: two small mini-games, a few hundred steps: does the player plug in (about a "
                        "minute); quick: 4 + 2 mini-games of sizes 10 and 100, one seed (minutes); standard: "
                        "10 + 5, two seeds, and the pixel adversary for image players")
    p.add_argument("--seed", type=int_in(0, MAX_CARD_SEED), default=0,
                   help="the seed of the adversaries, baselines and blind pass: the same seed, the same card")
    p.add_argument("--protocol", choices=PROTOCOLS, default=DEFAULT_PROTOCOL)
    p.add_argument("--workers", type=int_in(1, MAX_WORKERS), default=1, help="local processes running trials")
    p.add_argument("--gallery-preset", choices=[*RENDER_PRESETS, "schematic"], default="balanced",
                   help="render preset of the card's gallery (schematic: top views, no Blender)")
    p.add_argument("--no-progress", action="store_true")
    add_input_options(p)
    add_limit_options(p)
    p.set_defaults(handler=_cmd_evaluate)

    p = subparsers.add_parser("leaderboard", help="a Markdown and HTML table from robustness cards")
    p.add_argument("cards", nargs="+", metavar="DIR", help="card folders written by `clevr-game evaluate`")
    p.add_argument("--out", type=output_folder, default="leaderboard",
                   help="where leaderboard.md and leaderboard.html go")
    p.set_defaults(handler=_cmd_leaderboard)
