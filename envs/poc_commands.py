"""The `clevr-game poc ...` sub-commands; each handler imports what it needs when it runs.

The group sits above the world it mostly drives (clevr_game.asp): `poc eval` and `poc train`
run players and `poc solve --items` uses the game's referee (envs.poc_items).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from clevr_game.asp import POC_MAX_OBJECTS, POC_MIN_OBJECTS
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
    int_in,
    output_file,
    output_folder,
    probability,
    random_seed,
)
from clevr_game.errors import InputError
from players.registry import PLAYER_SPEC_HELP

MAX_POC_ITEMS = 100_000
"""Items generated or rendered in one run: about 0.2 s and at most 70 KB each (measured)."""
MAX_ENVIRONMENTS = 10_000
MAX_CONSTRAINTS_OPTION = 100
"""A loose bound: the environment generator narrows --max-constraints to its own range (it imports clingo)."""

if TYPE_CHECKING:
    from clevr_game.scene import Scene


def _cmd_environment(args: argparse.Namespace) -> int:
    import numpy as np

    from clevr_game.asp.envgen import environment_text, generate_environment
    from clevr_game.asp.environment import Environment
    from clevr_game.scene import write_text_atomic

    out = Path(args.out)
    specs = generate_environment(
        np.random.default_rng(args.seed), args.objects, max_constraints=args.max_constraints,
        allow_empty_regions=args.allow_empty_regions,
    )
    text = environment_text(specs, args.objects, f"CLEVR-POC environment: seed {args.seed}, {args.objects} objects")
    Environment.from_text(text, str(out))  # parse back and prove satisfiable before writing
    english = out.with_suffix(".txt")
    write_text_atomic(out, text)
    write_text_atomic(english, "".join(f"{s.sentence()}\n" for s in specs))
    print(f"wrote {out} and {english} ({len(specs)} constraints)")
    return 0


def _cmd_generate(args: argparse.Namespace) -> int:
    from clevr_game.asp.dataset import generate_poc_dataset

    path = generate_poc_dataset(
        args.out, args.environments, args.items, args.seed,
        min_objects=args.min_objects, max_objects=args.max_objects, allow_empty_regions=args.allow_empty_regions,
        check_visibility=args.check_visibility,
    )
    out = Path(args.out)
    print(f"wrote {out / 'environments'} and {path}, each item's partial.json, q.lp and env.lp under {out / 'items'}")
    return 0


def _load_one_scene(path: str) -> Scene:
    from clevr_game.scene import load_scenes
    from clevr_game.vocab import CLEVR_POC

    scenes = load_scenes(path, vocabulary=CLEVR_POC)
    if len(scenes) != 1:
        raise InputError(f"{path}: expected one scene, found {len(scenes)}")
    return scenes[0]


def _cmd_solve(args: argparse.Namespace) -> int:
    from clevr_game.asp.environment import Environment
    from clevr_game.asp.solve import brave_answers

    file_options = [f"--{name}" for name in ("environment", "scene", "question") if getattr(args, name) is not None]
    if args.items is not None:
        if file_options:
            raise InputError(f"poc solve: --items reads the item's own files; drop {', '.join(file_options)}")
        if (args.item is None) == (not args.all):
            raise InputError("poc solve: with --items give exactly one of --item K and --all")
        return _solve_items(args)
    if args.item is not None or args.all:
        raise InputError("poc solve: --item and --all need --items DIR")
    missing = [f"--{name}" for name in ("environment", "scene", "question") if getattr(args, name) is None]
    if missing:
        raise InputError(f"poc solve: missing {', '.join(missing)} (or give --items DIR with --item K or --all)")
    environment = Environment.load(args.environment)
    scene = _load_one_scene(args.scene)
    try:
        question = Path(args.question).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{args.question}: no such file") from None
    for value in brave_answers(environment, scene, question, scene_name=args.scene, question_name=args.question):
        print(value)
    return 0


def _solve_items(args: argparse.Namespace) -> int:
    """`--item K`: a line naming the item and its question, then its answer set, one value per line;
    `--all`: every item against its stored answer."""
    from clevr_game.asp.items import poc_items
    from clevr_game.asp.solve import brave_answers
    from envs.poc_items import PocRules

    items = poc_items(args.items)
    rules = PocRules()
    if args.item is not None:
        chosen = [item for item in items if item.item_id == f"poc:{args.item}"]
        if not chosen:
            raise InputError(f"{Path(args.items) / 'items.json'}: no item {args.item} ({len(items)} items)")
        item = chosen[0]
        # One line whatever the file holds: the answer set must stay the lines after it.
        print(f"item {args.item} ({item.item_id}): {' '.join(item.question.split())}")
        for value in brave_answers(rules.environment(item), item.scene, item.extra["asp"],
                                   scene_name=f"{item.item_id} scene", question_name=f"{item.item_id} rule"):
            print(value)
        return 0
    right = 0
    for item in items:
        solved = ",".join(brave_answers(rules.environment(item), item.scene, item.extra["asp"],
                                        scene_name=f"{item.item_id} scene", question_name=f"{item.item_id} rule"))
        if solved == item.answer:
            right += 1
        else:
            print(f"{item.item_id}: solved {solved or '(nothing)'}, stored {item.answer}")
    share = right / len(items) if items else 0.0
    print(f"exact: {share:.4f} ({right}/{len(items)} items)")
    return 0 if right == len(items) else 1


def _cmd_check(args: argparse.Namespace) -> int:
    from clevr_game.asp.environment import Environment

    environment = Environment.load(args.environment)
    result = environment.check(_load_one_scene(args.scene))
    if result.ok:
        print("satisfied")
        return 0
    for sentence in result.failed:
        print(f"violated: {sentence}")
    return 1


POC_PLAYERS = ("poc-state-neuro-symbolic", "poc-neuro-symbolic", "poc-neural")


def _cmd_train(args: argparse.Namespace) -> int:
    import torch

    from players.poc import training

    if args.threads:
        torch.set_num_threads(args.threads)
    out = args.out or str(training.default_out(args.player, args.knowledge))
    common = {"seed": args.seed, "max_minutes": args.max_minutes, "eval_limit": args.eval_limit}
    if args.player == "poc-state-neuro-symbolic":
        training.train_state_neuro_symbolic(
            args.items, args.eval_items, out, pairs=args.pairs, supervised_steps=args.supervised_steps,
            reinforce_steps=args.reinforce_steps, batch_size=args.batch_size or 32,
            learning_rate=args.learning_rate or 3e-3, limit=args.limit, **common)
    elif args.player == "poc-neuro-symbolic":
        training.train_neuro_symbolic(
            args.items, args.eval_items, out, parser_file=args.parser, perception_init=args.perception_init,
            images=args.images, steps=args.steps or 1500, batch_size=args.batch_size or 16,
            learning_rate=args.learning_rate or 1e-3, render_workers=args.render_workers, **common)
    else:
        training.train_neural(
            args.items, args.eval_items, out, knowledge=args.knowledge, steps=args.steps or 3000,
            batch_size=args.batch_size or 64, learning_rate=args.learning_rate or 1e-3, limit=args.limit, **common)
    return 0


def _cmd_eval(args: argparse.Namespace) -> int:
    import sys

    from players.guard import PlayerGaveUp
    from players.poc.evaluation import evaluate_poc_player
    from players.registry import load_guarded

    kwargs = {"path": args.weights} if args.weights else {}
    with load_guarded(args.player, **kwargs) as player:
        try:
            result = evaluate_poc_player(player, args.items, limit=args.limit, offset=args.offset,
                                         batch_size=args.batch_size,
                                         render_workers=args.render_workers, progress=args.progress,
                                         keep_records=args.records is not None)
        except PlayerGaveUp as exc:
            from clevr_game.errors import RunFailed

            raise RunFailed(str(exc)) from None
        count = player.count
    if args.records is not None:
        import json

        from clevr_game.atomic import open_atomic

        # Written before the error-rate check: a failing player's records are what explain the failure.
        with open_atomic(args.records) as handle:
            for row in result.records:
                handle.write(json.dumps(row, sort_keys=True) + "\n")
    for line in result.lines():
        print(line)
    failure = count.failure(args.max_error_rate)
    if failure is not None:
        print(f"clevr-game: error: poc eval: {failure}", file=sys.stderr)
        return 1
    return 0


def add_poc_commands(subparsers: argparse._SubParsersAction) -> None:
    """Add `poc` with its sub-commands environment, generate, solve, eval, train and check."""
    poc = subparsers.add_parser("poc", help="CLEVR-POC: constraint environments, hidden-object questions (clingo)")
    sub = poc.add_subparsers(dest="poc_command", required=True)

    p = sub.add_parser("environment", help="one random satisfiable environment (.lp plus English .txt)")
    p.add_argument("--seed", type=random_seed, default=0)
    p.add_argument("--objects", type=int_in(POC_MIN_OBJECTS, POC_MAX_OBJECTS), required=True,
                   help=f"number of objects, {POC_MIN_OBJECTS}..{POC_MAX_OBJECTS}")
    p.add_argument("--max-constraints", type=int_in(1, MAX_CONSTRAINTS_OPTION), default=15)
    p.add_argument("--allow-empty-regions", action="store_true",
                   help="allow constraints that together leave a region empty in every scene (off: every region can hold an object)")
    p.add_argument("--out", type=output_file, required=True, help="ENV.lp (the English sentences go to ENV.txt)")
    p.set_defaults(handler=_cmd_environment)

    p = sub.add_parser("generate", help="environments and hidden-object items (items.json)")
    p.add_argument("--environments", type=int_in(1, MAX_ENVIRONMENTS), default=5)
    p.add_argument("--items", type=int_in(0, MAX_POC_ITEMS), default=100)
    p.add_argument("--seed", type=random_seed, default=0)
    p.add_argument("--min-objects", type=int_in(POC_MIN_OBJECTS, POC_MAX_OBJECTS), default=POC_MIN_OBJECTS)
    p.add_argument("--max-objects", type=int_in(POC_MIN_OBJECTS, POC_MAX_OBJECTS), default=POC_MAX_OBJECTS)
    p.add_argument("--allow-empty-regions", action="store_true",
                   help="environments may force a region empty (off: every region can hold an object)")
    p.add_argument("--check-visibility", action="store_true",
                   help="every object of each partial scene shows at least CLEVR's 200 pixels (exact ray casting "
                        "at the index pass's 320x240), as CLEVR checks its scenes; for items a pixel player will see")
    p.add_argument("--out", type=output_folder, required=True,
                   help="folder: items.json, environments/, items/NNNN/ per item")
    p.set_defaults(handler=_cmd_generate)

    p = sub.add_parser(
        "solve", help="the answer set of a question about a partial scene, one value per line",
        description="Either three files (--environment, --scene, --question) or a generated folder "
                    "(--items DIR with --item K: a line `item K (poc:K): QUESTION`, then the answer set; or --all to "
                    "check every item against its stored answer; "
                    "last line `exact: X (right/items items)`, exit 1 when any differs).",
    )
    p.add_argument("--environment", help="ENV.lp")
    p.add_argument("--scene", help="partial CLEVR scene JSON (regions follow each object's 3d_coords)")
    p.add_argument("--question", help="Q.lp with a rule whose head is query(Q) or missing(Q)")
    p.add_argument("--items", help="a folder written by `poc generate`")
    p.add_argument("--item", type=int_in(0, MAX_ITEMS - 1), help="with --items: the item index K")
    p.add_argument("--all", action="store_true", help="with --items: every item, exact accuracy against the stored answers")
    p.set_defaults(handler=_cmd_solve)

    p = sub.add_parser(
        "eval", help="a player's exact accuracy and mean Jaccard on CLEVR-POC items",
        description="Per asked attribute and overall; for the neuro-symbolic players also program and perception "
                    "accuracy and the cause of each wrong answer. Last line `exact: X jaccard: Y`.",
    )
    p.add_argument("--player", required=True,
                   help=f"the player: {PLAYER_SPEC_HELP}; on CLEVR-POC items the oracle, a poc-* player or an "
                        "external one")
    p.add_argument("--items", required=True, help="a folder written by `poc generate`")
    p.add_argument("--limit", type=int_in(1, MAX_ITEMS), default=None, help="N items only")
    p.add_argument("--offset", type=int_in(0, MAX_ITEMS), default=0,
                   help="skip the first K items (e.g. held-out items after the training prefix of one folder)")
    p.add_argument("--weights", default=None, help="a player file instead of the shipped one (learned POC players)")
    p.add_argument("--batch-size", type=int_in(1, MAX_ANSWER_BATCH), default=128)
    p.add_argument("--render-workers", type=int_in(1, MAX_BLENDER_WORKERS), default=2,
                   help="Blender workers for image players")
    p.add_argument("--max-error-rate", type=probability, default=0.05,
                   help="exit 1 when more of the player's answers are errors (default 0.05)")
    p.add_argument("--progress", action="store_true", help="say when images are rendered")
    p.add_argument("--records", type=output_file, default=None,
                   help="FILE: one JSON line per item, in item order (item, environment, question, the true and "
                        "the given answer set or the error, exact, jaccard; for the neuro-symbolic players "
                        "program and perception right, fallback, cause of a wrong answer)")
    p.set_defaults(handler=_cmd_eval)

    p = sub.add_parser(
        "train", help="train a CLEVR-POC player (short runs; see players/weights/POC_MODEL_CARD.md)",
        description="poc-state-neuro-symbolic: parser supervised on --pairs items then REINFORCE on the rest; "
                    "poc-neuro-symbolic: perception on renders of --images items (needs a trained parser, --parser); "
                    "poc-neural: the CLIP-style baseline (--knowledge none, nl or asp), threshold tuned on --eval-items.",
    )
    p.add_argument("--player", choices=POC_PLAYERS, required=True)
    p.add_argument("--items", required=True, help="training items (a `poc generate` folder)")
    p.add_argument("--eval-items", required=True, help="held-out items: program accuracy per stage, perception "
                                                       "accuracy, or the baseline's threshold")
    p.add_argument("--out", type=output_file, default=None,
                   help="player file (default: the shipped one in players/weights/)")
    p.add_argument("--limit", type=int_in(1, MAX_ITEMS), default=None, help="use the first N training items only")
    p.add_argument("--eval-limit", type=int_in(1, MAX_ITEMS), default=None, help="use the first N held-out items only")
    p.add_argument("--pairs", type=int_in(1, MAX_ITEMS), default=200,
                   help="parser: supervised (question, program) pairs")
    p.add_argument("--supervised-steps", type=int_in(0, MAX_STEPS), default=1200)
    p.add_argument("--reinforce-steps", type=int_in(0, MAX_STEPS), default=200)
    p.add_argument("--parser", default=None, help="poc-neuro-symbolic: the poc-state-neuro-symbolic file whose parser it takes")
    p.add_argument("--perception-init", default=None,
                   help="poc-neuro-symbolic: perception to start from: a pixel neuro-symbolic file (default the shipped "
                        "one), a poc-neuro-symbolic file (continue its training) or 'none'")
    p.add_argument("--images", type=int_in(1, MAX_POC_ITEMS), default=600,
                   help="poc-neuro-symbolic: training items rendered")
    p.add_argument("--render-workers", type=int_in(1, MAX_BLENDER_WORKERS), default=2)
    p.add_argument("--knowledge", choices=("none", "nl", "asp"), default="none", help="poc-neural: the constraints it reads")
    p.add_argument("--steps", type=int_in(1, MAX_STEPS), default=None, help="optimiser steps (perception or baseline)")
    p.add_argument("--batch-size", type=int_in(1, MAX_TRAINING_BATCH), default=None)
    p.add_argument("--learning-rate", type=float_in(0, MAX_LEARNING_RATE, above_lo=True), default=None)
    p.add_argument("--seed", type=random_seed, default=0)
    p.add_argument("--threads", type=int_in(1, MAX_THREADS), default=None, help="torch threads")
    p.add_argument("--max-minutes", type=float_in(0, MAX_MINUTES, above_lo=True), default=None,
                   help="stop every stage after this long")
    p.set_defaults(handler=_cmd_train)

    p = sub.add_parser("check", help="does a complete scene satisfy an environment? (exit 1 when not)")
    p.add_argument("--environment", required=True, help="ENV.lp")
    p.add_argument("--scene", required=True, help="complete CLEVR scene JSON (regions from coordinates)")
    p.set_defaults(handler=_cmd_check)
