"""The `clevr-game poc ...` sub-commands; each handler imports what it needs when it runs."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from clevr_game.cli_types import non_negative_int, positive_int, random_seed
from clevr_game.errors import InputError

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
    """`--item K`: its answer set, one value per line; `--all`: every item against its stored answer."""
    from clevr_game.asp.solve import brave_answers
    from envs.poc_items import PocRules, poc_items

    items = poc_items(args.items)
    rules = PocRules()
    if args.item is not None:
        chosen = [item for item in items if item.item_id == f"poc:{args.item}"]
        if not chosen:
            raise InputError(f"{Path(args.items) / 'items.json'}: no item {args.item} ({len(items)} items)")
        item = chosen[0]
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


def add_poc_commands(subparsers: argparse._SubParsersAction) -> None:
    """Add `poc` with its sub-commands environment, generate, solve and check."""
    poc = subparsers.add_parser("poc", help="CLEVR-POC: constraint environments, hidden-object questions (clingo)")
    sub = poc.add_subparsers(dest="poc_command", required=True)

    p = sub.add_parser("environment", help="one random satisfiable environment (.lp plus English .txt)")
    p.add_argument("--seed", type=random_seed, default=0)
    p.add_argument("--objects", type=positive_int, required=True, help="number of objects, 5..9")
    p.add_argument("--max-constraints", type=positive_int, default=15)
    p.add_argument("--allow-empty-regions", action="store_true",
                   help="allow constraints that together leave a region empty in every scene (off: every region can hold an object)")
    p.add_argument("--out", required=True, help="ENV.lp (the English sentences go to ENV.txt)")
    p.set_defaults(handler=_cmd_environment)

    p = sub.add_parser("generate", help="environments and hidden-object items (items.json)")
    p.add_argument("--environments", type=positive_int, default=5)
    p.add_argument("--items", type=non_negative_int, default=100)
    p.add_argument("--seed", type=random_seed, default=0)
    p.add_argument("--min-objects", type=positive_int, default=5)
    p.add_argument("--max-objects", type=positive_int, default=9)
    p.add_argument("--allow-empty-regions", action="store_true",
                   help="environments may force a region empty (off: every region can hold an object)")
    p.add_argument("--out", required=True, help="folder: items.json, environments/, items/NNNN/ per item")
    p.set_defaults(handler=_cmd_generate)

    p = sub.add_parser(
        "solve", help="the answer set of a question about a partial scene, one value per line",
        description="Either three files (--environment, --scene, --question) or a generated folder "
                    "(--items DIR with --item K, or --all to check every item against its stored answer; "
                    "last line `exact: X (right/items items)`, exit 1 when any differs).",
    )
    p.add_argument("--environment", help="ENV.lp")
    p.add_argument("--scene", help="partial CLEVR scene JSON (regions follow each object's 3d_coords)")
    p.add_argument("--question", help="Q.lp with a rule whose head is query(Q) or missing(Q)")
    p.add_argument("--items", help="a folder written by `poc generate`")
    p.add_argument("--item", type=non_negative_int, help="with --items: the item index K")
    p.add_argument("--all", action="store_true", help="with --items: every item, exact accuracy against the stored answers")
    p.set_defaults(handler=_cmd_solve)

    p = sub.add_parser("check", help="does a complete scene satisfy an environment? (exit 1 when not)")
    p.add_argument("--environment", required=True, help="ENV.lp")
    p.add_argument("--scene", required=True, help="complete CLEVR scene JSON (regions from coordinates)")
    p.set_defaults(handler=_cmd_check)
