"""`clevr-game generate|answer|exhaustive`: the world's datasets.

Module-level imports stay light: each handler imports what it runs.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from clevr_game.cli_types import (
    check_memory,
    int_in,
    output_file,
    output_folder,
    random_seed,
)

MAX_SCENES = 1_000_000
"""CLEVR itself has 100_000; every scene and question is held in memory until the files are written."""
MAX_QUESTIONS_PER_SCENE = 1_000
SCENE_BYTES, QUESTION_BYTES = 50_000, 5_000
"""Memory a generated scene and a question take until written (measured with tracemalloc: 47 KB, 4.6 KB)."""
MAX_QUESTIONS_PER_FAMILY = 1_000
"""`exhaustive` asks each question of every placement; a family has far fewer distinct questions."""


def _cmd_generate(args: argparse.Namespace) -> int:
    from clevr_game.generate import generate_dataset

    if args.scenes is None:
        check_memory(args.num_scenes * (SCENE_BYTES + args.questions_per_scene * QUESTION_BYTES),
                     f"generate: --num-scenes {args.num_scenes} x --questions-per-scene {args.questions_per_scene}")
    generate_dataset(
        out_dir=args.out,
        num_scenes=args.num_scenes,
        questions_per_scene=args.questions_per_scene,
        seed=args.seed,
        min_objects=args.min_objects,
        max_objects=args.max_objects,
        templates=args.templates,
        clevr_templates=args.clevr_templates,
        check_visibility=args.check_visibility,
        scenes_file=args.scenes,
        sampling=args.sampling,
        split=args.split,
        progress=not args.no_progress,
    )
    out = Path(args.out)  # `--out data/` prints data/scenes.json, not data//scenes.json
    print(f"wrote {out / 'scenes.json'} and {out / 'questions.json'}")
    return 0


def _cmd_answer(args: argparse.Namespace) -> int:
    import sys

    from clevr_game.answering import answer_files

    # On stderr, so the last stdout line stays `accuracy: X/Y` for scripts that read it.
    correct, total = answer_files(args.scenes, args.questions, args.out,
                                  note=lambda line: print(f"clevr-game: warning: {line}", file=sys.stderr))
    print(f"accuracy: {correct}/{total}")
    return 0


def add_generate_commands(subparsers: argparse._SubParsersAction) -> None:
    """Add `generate` to the clevr-game command line."""
    from clevr_game.generate import MIN_OBJECTS
    from clevr_game.scene import MAX_OBJECTS

    p = subparsers.add_parser("generate", help="random valid CLEVR scenes and template questions")
    p.add_argument("--num-scenes", type=int_in(0, MAX_SCENES), default=100)
    p.add_argument("--questions-per-scene", type=int_in(0, MAX_QUESTIONS_PER_SCENE), default=10)
    p.add_argument("--seed", type=random_seed, default=0)
    p.add_argument("--min-objects", type=int_in(1, MAX_OBJECTS), default=MIN_OBJECTS)
    p.add_argument("--max-objects", type=int_in(1, MAX_OBJECTS), default=MAX_OBJECTS)
    p.add_argument("--templates", default=None, metavar="own|clevr|both|PATH",
                   help="question templates: the project's own (default), CLEVR 1.0's, both, or a template file or folder")
    p.add_argument("--sampling", choices=["clevr", "minimal"], default=None,
                   help="how a template's params are drawn. clevr: as CLEVR's own generator draws them (descriptions "
                        "name 2 attributes on average, needed or not, some match nothing; relations that add nothing "
                        "kept at 10%%; templates in a round robin; CLEVR's synonyms), so the questions follow CLEVR's "
                        "distribution. minimal: descriptions name only the attributes needed to pick out their objects "
                        "and every filter and relation removes something (shorter programs, larger counts). Default: "
                        "clevr for --templates clevr and both, minimal for own and a PATH")
    p.add_argument("--clevr-templates", default=None, metavar="DIR",
                   help="a folder of CLEVR 1.0 template files for --templates clevr or both (default: the copy shipped in "
                        "the package, clevr_game/data/clevr_1.0/templates)")
    p.add_argument("--scenes", default=None, metavar="SCENES_JSON",
                   help="ask the questions about these scenes (a CLEVR scenes file) instead of generating new ones")
    p.add_argument("--check-visibility", action="store_true",
                   help="redraw scenes where an object shows fewer than CLEVR's 200 pixels at 320x240 (exact ray casting)")
    p.add_argument("--split", default="new")
    p.add_argument("--out", type=output_folder, default="clevr_output")
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(handler=_cmd_generate)


def add_answer_commands(subparsers: argparse._SubParsersAction) -> None:
    """Add `answer` to the clevr-game command line (its parser imports nothing: the command is often timed)."""
    p = subparsers.add_parser("answer", help="execute every question's program; last line `accuracy: X/Y`")
    p.add_argument("--scenes", required=True)
    p.add_argument("--questions", required=True)
    p.add_argument("--out", type=output_file, default=None, help="write predictions JSON here")
    p.set_defaults(handler=_cmd_answer)


def _cmd_exhaustive(args: argparse.Namespace) -> int:
    import shlex

    from clevr_game.exhaustive import ExhaustiveOptions, build_exhaustive

    # The command as parsed, every option spelt out: it rebuilds the dataset however it was typed.
    command = ["clevr-game", "exhaustive", "--objects", str(args.objects), "--hops", args.hops, "--seed",
               str(args.seed), "--out", args.out, "--questions-per-family", str(args.questions_per_family)]
    if args.stationary is not None:
        command += ["--stationary", str(args.stationary)]
    summary = build_exhaustive(ExhaustiveOptions(
        objects=args.objects, hops=args.hops, seed=args.seed, out=args.out, stationary=args.stationary,
        questions_per_family=args.questions_per_family, command=shlex.join(command),
    ), log=print)
    print(summary.last_line())
    return 0


def add_exhaustive_commands(subparsers: argparse._SubParsersAction) -> None:
    """Add `exhaustive` to the clevr-game command line."""
    from clevr_game.exhaustive import HOPS, OBJECT_COUNTS, ExhaustiveOptions

    p = subparsers.add_parser("exhaustive", help="every placement of a few objects on the 7 x 7 grid, with one-/two-hop "
                              "questions; last line `scenes: V valid of T placements`")
    p.add_argument("--objects", type=int_in(min(OBJECT_COUNTS), max(OBJECT_COUNTS)), choices=list(OBJECT_COUNTS),
                   required=True)
    p.add_argument("--hops", choices=list(HOPS), required=True,
                   help="one-hop questions, two-hop questions, or both")
    p.add_argument("--seed", type=random_seed, default=0, help="draws the base objects and the questions")
    p.add_argument("--out", type=output_folder, required=True)
    p.add_argument("--stationary", type=int_in(0, max(OBJECT_COUNTS) - 1), default=ExhaustiveOptions.stationary,
                   help="objects kept on one drawn cell (default: 1 of 4 objects, else none)")
    p.add_argument("--questions-per-family", type=int_in(1, MAX_QUESTIONS_PER_FAMILY),
                   default=ExhaustiveOptions.questions_per_family)
    p.set_defaults(handler=_cmd_exhaustive)
