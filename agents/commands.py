"""`clevr-game attack`: train an adversary on one mini-game and evaluate it.

The option defaults are `AttackOptions`' own. Module-level imports stay light:
the handler imports what it runs.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from clevr_game.cli_types import (
    MAX_ITEMS,
    MAX_LEARNING_RATE,
    MAX_STEPS,
    MAX_THREADS,
    MOVE_BYTES,
    check_memory,
    float_in,
    int_in,
    output_folder,
    random_seed,
)
from players.guard import add_limit_options, limits_from_args
from players.registry import PLAYER_SPEC_HELP, add_input_options, input_from_args

MAX_ENVS = 65_536
"""Envs stepped at once (default 128): each a few KB of buffers, all asked of the player in one batch."""
MAX_EVAL_SAMPLES = 100_000
"""Moves per item when evaluating (presets use 8..64)."""
ENV_BYTES, UPDATE_BYTES = 4_000, 200
"""Memory of one env's buffers (2.1 KB measured) and of one update's entry in the training history."""
EVALUATIONS = 3
"""The trained, the random and the random valid adversary: each keeps minigame-size x eval-samples moves."""
MAX_COEF, MAX_LOGIT, MAX_NATS, MAX_REWARD = 10.0, 50.0, 10.0, 100.0
"""Entropy coefficients (default 0.05), the `stay` logit (4.4; 50 already means never move), entropy targets in
nats per action dimension (a 7-bin axis has at most 1.95) and rewards (within -1..1)."""


def attack_bytes(minigame_size: int, eval_samples: int, num_envs: int, steps: int) -> int:
    """Memory one attack holds at most: its evaluated moves, its envs and its training history."""
    return (EVALUATIONS * minigame_size * eval_samples * MOVE_BYTES + num_envs * ENV_BYTES
            + -(-steps // num_envs) * UPDATE_BYTES)


def _cmd_attack(args: argparse.Namespace) -> int:
    from agents.attack import AttackOptions, last_line, run_attack
    from clevr_game.run_files import RESULT_FILE
    from players.registry import check_input, check_spec

    check_memory(attack_bytes(args.minigame_size, args.eval_samples, args.num_envs, args.steps),
                 f"attack: --minigame-size {args.minigame_size} x --eval-samples {args.eval_samples} moves, "
                 f"--num-envs {args.num_envs}, --steps {args.steps}")
    limits = limits_from_args(args)
    player_input = input_from_args(args)
    check_spec(args.player)
    check_input(args.player, player_input)
    options = AttackOptions(
        player=args.player, items=args.items, minigame_size=args.minigame_size, minigame=args.minigame,
        seed=args.seed, steps=args.steps, out=args.out, split_seed=args.split_seed, num_envs=args.num_envs,
        eval_samples=args.eval_samples, learning_rate=args.lr, entropy_coef=args.entropy_coef,
        stay_bias=args.stay_bias, target_entropy=args.target_entropy if args.target_entropy >= 0 else None,
        max_entropy_coef=args.max_entropy_coef or None, target_entropy_final=args.target_entropy_final,
        keep_best=not args.last_policy,
        threads=args.threads, rewards=tuple(args.rewards), fine_tune=args.fine_tune,
        adversary_weights=args.adversary_weights, mode=args.mode,
        progress=not args.no_progress, report_rounding=True, player_timeout=limits["timeout_s"],
        player_startup_timeout=limits["startup_timeout_s"],
        max_player_failures=limits["max_failures"], max_error_rate=args.max_error_rate,
        check_visibility=False if args.no_visibility else None, adversary=args.adversary, **player_input,
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
    p = subparsers.add_parser("attack", help="train an adversary on one mini-game; last line `consistency: X drop: Y accuracy: A`")
    p.add_argument("--player", required=True, help=f"the player: {PLAYER_SPEC_HELP}")
    p.add_argument("--items", required=True, help="a dataset folder (scenes.json + questions.json)")
    p.add_argument("--minigame-size", type=int_in(1, MAX_ITEMS), default=defaults.minigame_size)
    p.add_argument("--minigame", type=int_in(0, MAX_ITEMS - 1), default=defaults.minigame,
                   help="which mini-game of the split (0-based)")
    p.add_argument("--split-seed", type=random_seed, default=defaults.split_seed,
                   help="seed of the split into mini-games")
    p.add_argument("--seed", type=random_seed, default=defaults.seed)
    p.add_argument("--steps", type=int_in(1, MAX_STEPS), default=defaults.steps, help="env steps of training")
    p.add_argument("--num-envs", type=int_in(1, MAX_ENVS), default=defaults.num_envs)
    p.add_argument("--eval-samples", type=int_in(1, MAX_EVAL_SAMPLES), default=defaults.eval_samples,
                   help="moves per item when evaluating")
    p.add_argument("--lr", type=float_in(0, MAX_LEARNING_RATE), default=defaults.learning_rate)
    p.add_argument("--entropy-coef", type=float_in(0, MAX_COEF), default=defaults.entropy_coef,
                   help="starting entropy coefficient")
    p.add_argument("--stay-bias", type=float_in(-MAX_LOGIT, MAX_LOGIT), default=defaults.stay_bias,
                   help="initial logit of `stay` per axis: higher starts with fewer objects moving")
    p.add_argument("--target-entropy", type=float_in(-MAX_NATS, MAX_NATS), default=defaults.target_entropy,
                   help="adapt the entropy coefficient to hold this many nats per action dimension "
                        "(a negative value keeps --entropy-coef fixed)")
    p.add_argument("--max-entropy-coef", type=float_in(0, MAX_COEF), default=defaults.max_entropy_coef,
                   help="upper bound of the adaptive entropy coefficient (0: no bound); without one, a policy "
                        "that learned to stay is pushed back into mostly invalid moves")
    p.add_argument("--target-entropy-final", type=float_in(-MAX_NATS, MAX_NATS), default=defaults.target_entropy_final,
                   help="move the target entropy linearly to this value over training (default: it stays put)")
    p.add_argument("--last-policy", action="store_true",
                   help="evaluate the last policy, not the one of the best window of training updates")
    p.add_argument("--threads", type=int_in(1, MAX_THREADS), default=defaults.threads, help="torch threads")
    p.add_argument("--rewards", type=float_in(-MAX_REWARD, MAX_REWARD), nargs=4, default=list(defaults.rewards),
                   metavar=("DR", "CR", "FR", "ISR"),
                   help="training rewards: right answer broken, other change, nothing changed, invalid scene")
    p.add_argument("--fine-tune", action="store_true", help="train the relation network too (default: frozen)")
    p.add_argument("--adversary-weights", default=defaults.adversary_weights,
                   help="relation-network file (default: the shipped one)")
    p.add_argument("--mode", choices=list(MOVE_MODES), default=defaults.mode)
    p.add_argument("--out", type=output_folder, default=defaults.out)
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--no-visibility", action="store_true",
                   help="do not require every object to stay visible (checked by default for players that see images)")
    p.add_argument("--adversary", choices=list(ADVERSARY_INPUTS), default=defaults.adversary,
                   help="what the adversary sees: the scene graph (state) or the original image (pixel)")
    add_input_options(p)
    add_limit_options(p)
    p.set_defaults(handler=_cmd_attack)
