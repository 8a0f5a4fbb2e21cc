"""`clevr-game export`: the manipulated scenes of attack runs as a CLEVR dataset.

The option defaults are `ExportOptions`' own.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from clevr_game.cli_types import MAX_BLENDER_WORKERS, MAX_ITEMS, int_in, output_folder, random_seed


def _cmd_export(args: argparse.Namespace) -> int:
    from clevr_game.export import (
        MANIFEST_FILE,
        QUESTIONS_FILE,
        SCENES_FILE,
        ExportOptions,
        export_run,
    )

    summary = export_run(ExportOptions(
        run=args.run, out=args.out, select=args.select, split=args.split, render=args.render,
        render_workers=args.workers, items=args.items, limit=args.limit, seed=args.seed,
        progress=not args.no_progress,
    ))
    for line in summary.warnings:
        print(f"clevr-game: warning: {line}", file=sys.stderr)
    print(f"wrote {Path(args.out) / SCENES_FILE}, {QUESTIONS_FILE} and {MANIFEST_FILE} "
          f"({summary.candidates} selected, {summary.duplicates} duplicates removed)")
    print(summary.last_line())
    return 0


def add_export_commands(subparsers: argparse._SubParsersAction) -> None:
    """Add `export` to the clevr-game command line."""
    from clevr_game.export import SELECTIONS, ExportOptions

    defaults = ExportOptions  # a dataclass field's default is also its class attribute
    p = subparsers.add_parser("export", help="manipulated scenes of attack runs as a CLEVR dataset; last line "
                              "`scenes: X questions: Y images: Z`")
    p.add_argument("--run", required=True,
                   help="an attack run folder (result.json) or a benchmark results folder (trials.jsonl)")
    p.add_argument("--out", type=output_folder, required=True)
    p.add_argument("--select", choices=list(SELECTIONS), default=defaults.select,
                   help="every valid move, moves that changed the answer, or moves that made a right answer wrong")
    p.add_argument("--render", default=defaults.render, metavar="PRESET",
                   help="render images/ with this preset (fast, balanced, clevr)")
    p.add_argument("--workers", type=int_in(1, MAX_BLENDER_WORKERS), default=defaults.render_workers,
                   help="Blender processes when rendering")
    p.add_argument("--split", default=defaults.split, help="split name in the files and image names")
    p.add_argument("--items", default=defaults.items, help="the items folder (default: the one recorded in each run)")
    p.add_argument("--limit", type=int_in(1, MAX_ITEMS), default=defaults.limit,
                   help="keep at most this many questions, drawn with --seed")
    p.add_argument("--seed", type=random_seed, default=defaults.seed)
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(handler=_cmd_export)
