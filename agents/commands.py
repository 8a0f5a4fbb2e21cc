"""`clevr-game attack`: train an adversary on one mini-game and evaluate it.

The option defaults are `AttackOptions`' own. Module-level imports stay light:
the handler imports what it runs.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from clevr_game.cli_types import (
    finite_float,
    non_negative_float,
    non_negative_int,
    positive_int,
    random_seed,
)
from players.guard import add_limit_options, limits_from_args


def _cmd_attack(args: argparse.Namespace) -> int:
    from agents.attack import AttackOptions, last_line, run_attack
    from clevr_game.run_files import RESULT_FILE
    from players.registry import check_spec

    limits = limits_from_args(args)
    check_spec(args.player)
    options = AttackOptions(
        player=args.player, items=args.items, minigame_size=args.minigame_size, minigame=args.minigame,
        seed=args.seed, steps=args.steps, out=args.out, split_seed=args.split_seed, num_envs=args.num_envs,
        eval_samples=args.eval_samples, learning_rate=args.lr, entropy_coef=args.entropy_coef,
        stay_bias=args.stay_bias, target_entropy=args.target_entropy if args.target_entropy >= 0 else None,
        max_entropy_coef=args.max_entropy_coef or None, target_entropy_final=args.target_entropy_final,
        keep_best=not args.last_policy,
        threads=args.threads, rewards=tuple(args.rewards), fine_tune=args.fine_tune,
        adversary_weights=args.adversary_weights, mode=args.mode,
        progress=not args.no_progress, player_timeout=limits["timeout_s"],
        player_startup_timeout=limits["startup_timeout_s"],
        max_player_failures=limits["max_failures"], max_error_rate=args.max_error_rate,
        check_visibility=False if args.no_visibility else None, adversary=args.adversary,
    )
    result = run_attack(options)
    if result["player_errors"]:
        print(f"player errors: {result['player_errors']} of {result['player_queries']} queries, "
              f"first: {result['first_player_error']}")
    if result["items_left_out"]:
        print(f"items left out (unmoved scene never answered): {result['items_left_out']}")
    print(f"random adversary: consistency: {result['random_consistency']:.4f} drop: {result['random_drop']:.4f}")
    print(f"wrote {Path(args.out) / RESULT_FILE}")
    print(last_line(result))
    return 0


def add_attack_commands(subparsers: argparse._SubParsersAction) -> None:
    """Add `attack` to the clevr-game command line."""
    from agents.attack import ADVERSARY_INPUTS, AttackOptions
    from envs.moves import MOVE_MODES

    defaults = AttackOptions  # a dataclass field's default is also its class attribute
    p = subparsers.add_parser("attack", help="train an adversary on one mini-game; last line `consistency: X drop: Y`")
    p.add_argument("--player", required=True)
    p.add_argument("--items", required=True, help="a dataset folder (scenes.json + questions.json)")
    p.add_argument("--minigame-size", type=positive_int, default=defaults.minigame_size)
    p.add_argument("--minigame", type=non_negative_int, default=defaults.minigame,
                   help="which mini-game of the split (0-based)")
    p.add_argument("--split-seed", type=random_seed, default=defaults.split_seed,
                   help="seed of the split into mini-games")
    p.add_argument("--seed", type=random_seed, default=defaults.seed)
    p.add_argument("--steps", type=positive_int, default=defaults.steps, help="env steps of training")
    p.add_argument("--num-envs", type=positive_int, default=defaults.num_envs)
    p.add_argument("--eval-samples", type=positive_int, default=defaults.eval_samples,
                   help="moves per item when evaluating")
    p.add_argument("--lr", type=non_negative_float, default=defaults.learning_rate)
    p.add_argument("--entropy-coef", type=non_negative_float, default=defaults.entropy_coef,
                   help="starting entropy coefficient")
    p.add_argument("--stay-bias", type=finite_float, default=defaults.stay_bias,
                   help="initial logit of `stay` per axis: higher starts with fewer objects moving")
    p.add_argument("--target-entropy", type=finite_float, default=defaults.target_entropy,
                   help="adapt the entropy coefficient to hold this many nats per action dimension "
                        "(a negative value keeps --entropy-coef fixed)")
    p.add_argument("--max-entropy-coef", type=non_negative_float, default=defaults.max_entropy_coef,
                   help="upper bound of the adaptive entropy coefficient (0: no bound); without one, a policy "
                        "that learned to stay is pushed back into mostly invalid moves")
    p.add_argument("--target-entropy-final", type=finite_float, default=defaults.target_entropy_final,
                   help="move the target entropy linearly to this value over training (default: it stays put)")
    p.add_argument("--last-policy", action="store_true",
                   help="evaluate the last policy, not the one of the best window of training updates")
    p.add_argument("--threads", type=positive_int, default=defaults.threads, help="torch threads")
    p.add_argument("--rewards", type=finite_float, nargs=4, default=list(defaults.rewards),
                   metavar=("DR", "CR", "FR", "ISR"),
                   help="training rewards: right answer broken, other change, nothing changed, invalid scene")
    p.add_argument("--fine-tune", action="store_true", help="train the relation network too (default: frozen)")
    p.add_argument("--adversary-weights", default=defaults.adversary_weights,
                   help="relation-network file (default: the shipped one)")
    p.add_argument("--mode", choices=list(MOVE_MODES), default=defaults.mode)
    p.add_argument("--out", default=defaults.out)
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--no-visibility", action="store_true",
                   help="do not require every object to stay visible (checked by default for players that see images)")
    p.add_argument("--adversary", choices=list(ADVERSARY_INPUTS), default=defaults.adversary,
                   help="what the adversary sees: the scene graph (state) or the original image (pixel)")
    add_limit_options(p)
    p.set_defaults(handler=_cmd_attack)
