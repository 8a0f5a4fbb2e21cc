"""`clevr-game play`: moves of the game against a player, random or none.

Module-level imports stay light: the handler imports what it runs.
"""

from __future__ import annotations

import argparse
import sys

from clevr_game.cli_types import (
    MAX_ANSWER_BATCH,
    MAX_ITEMS,
    MOVE_BYTES,
    check_memory,
    int_in,
    random_seed,
)
from clevr_game.errors import RunFailed
from players.guard import add_limit_options, limits_from_args
from players.registry import PLAYER_SPEC_HELP, add_input_options, input_from_args


def _cmd_play(args: argparse.Namespace) -> int:
    from envs.items import ItemPool, load_items
    from envs.play import play_moves, summarise
    from players.guard import PlayerGaveUp
    from players.registry import check_input, check_spec, load_guarded

    check_memory(args.episodes * MOVE_BYTES, f"play: --episodes {args.episodes}")
    limits = limits_from_args(args)
    player_input = input_from_args(args)
    check_spec(args.player)
    check_input(args.player, player_input)
    pool = ItemPool(load_items(args.items))
    with load_guarded(args.player, **limits, player_input=player_input) as player:
        try:
            outcomes = play_moves(pool, player, args.episodes, moves=args.moves, seed=args.seed,
                                  batch=args.batch, mode=args.mode)
        except PlayerGaveUp as exc:
            raise RunFailed(f"{exc} ({player.count.queries} queries asked)") from None
        count = player.count
    summary = summarise(outcomes)
    if count.errors:
        print(f"player errors: {count.errors} of {count.queries} queries, first: {count.first_error}")
    if summary.unscored_items:
        print(f"unscored items (a move got no answer): {summary.unscored_items} of {summary.items}")
    print(f"episodes: {summary.episodes} mean reward: {summary.mean_reward:.4f}")
    print(summary.last_line())
    failure = count.failure(args.max_error_rate) or summary.failure(args.max_error_rate)
    if failure is not None:
        print(f"clevr-game: error: play: {failure}", file=sys.stderr)
        return 1
    return 0


def add_game_commands(subparsers: argparse._SubParsersAction) -> None:
    """Add `play` to the clevr-game command line."""
    from envs.moves import MOVE_MODES

    p = subparsers.add_parser("play", help="play moves against a player; last line `consistency: X drop: Y invalid: Z accuracy: A`")
    p.add_argument("--items", required=True, help="a dataset folder (scenes.json + questions.json, or CLEVR-POC items.json)")
    p.add_argument("--player", default="oracle", help=f"the player: {PLAYER_SPEC_HELP} (default: oracle)")
    p.add_argument("--moves", choices=["random", "stay"], default="random",
                   help="random: a uniform bin on each axis for every object; stay: move nothing (the unmoved answers)")
    p.add_argument("--episodes", type=int_in(1, MAX_ITEMS), default=1000,
                   help="moves to play, items taken in turn (each item gets about EPISODES / items)")
    p.add_argument("--mode", choices=list(MOVE_MODES), default="displacement",
                   help="displacement: a bin moves an object by -0.9..0.9 in steps of 0.3; absolute: a 7 x 7 grid")
    p.add_argument("--batch", type=int_in(1, MAX_ANSWER_BATCH), default=64,
                   help="moves played at once (the player is asked once per batch)")
    p.add_argument("--seed", type=random_seed, default=0, help="seed of the random moves")
    add_input_options(p)
    add_limit_options(p)
    p.set_defaults(handler=_cmd_play)
