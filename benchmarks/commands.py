"""`clevr-game benchmark` and `report`: the robustness benchmark's command line.

The option defaults are the preset's. Module-level imports stay light: each
handler imports what it runs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from agents.commands import attack_bytes
from clevr_game.cli_types import (
    MAX_ITEMS,
    MAX_MINUTES,
    MAX_STEPS,
    MAX_WORKERS,
    check_memory,
    float_in,
    int_in,
    int_list_in,
    output_folder,
)
from clevr_game.errors import InputError
from players.guard import add_limit_options, limits_from_args
from players.registry import PLAYER_SPEC_HELP, add_input_options, input_from_args

MAX_SEEDS = 1_000
"""Seeds per mini-game (the paper's full Table 2 runs 30)."""
MAX_TRIALS = 1_000
"""Random scene splits per share in the examples study (default 10)."""

if TYPE_CHECKING:
    from benchmarks.presets import Preset

# ------------------------------------------------------------------ the benchmark and its report


def _cmd_benchmark(args: argparse.Namespace) -> int:
    from benchmarks.card.manipulations import update_results_folder
    from benchmarks.presets import PRESETS, preset_plan
    from benchmarks.provenance import run_info, write_run_info
    from benchmarks.report import build_report
    from benchmarks.runner import run_plan
    from clevr_game.run_files import TRIALS_FILE
    from players.registry import check_input_for_some

    preset = PRESETS[args.preset]
    _check_benchmark_memory(args, preset)
    limits = limits_from_args(args)
    player_input = input_from_args(args)
    # The input options are for the external players of the list; the others declare their own input.
    check_input_for_some(player_specs(args) or preset.all_players(), player_input)
    out = Path(args.out)
    plan = preset_plan(
        preset, out,
        players=player_specs(args),
        items=args.items,
        sizes=[int(s) for s in args.sizes.split(",")] if args.sizes else None,
        minigames=args.minigames, seeds=args.seeds, steps=args.steps,
        adversaries=tuple(_adversaries(args.adversaries)) if args.adversaries else None,
        clevr_templates=args.clevr_templates, progress=not args.no_progress,
        adversary_weights=args.adversary_weights,
        player_timeout=limits["timeout_s"], player_startup_timeout=limits["startup_timeout_s"],
        max_player_failures=limits["max_failures"],
        max_error_rate=args.max_error_rate,
        check_visibility=False if args.no_visibility else preset.check_visibility,
        **player_input,
    )
    write_run_info(out, run_info(getattr(args, "argv", []), {k: v for k, v in vars(args).items()
                                                              if k not in ("handler", "argv")}))
    planned = {trial["trial"] for trial in plan.trials()}
    total = len(planned)
    records = run_plan(plan, workers=args.workers, ray=args.ray, ray_address=args.ray_address,
                       on_progress=lambda progress: print(progress.line(), flush=True), max_minutes=args.max_minutes)
    # The folder may hold other players' trials too (--players): the last line counts this plan's.
    records = {trial_id: record for trial_id, record in records.items() if trial_id in planned}
    failed = sum("error" in r for r in records.values())
    if not records:  # stopped by --max-minutes before any trial of this plan finished
        print(f"stopped at the --max-minutes limit ({args.max_minutes:g}): {total} trial(s) not begun; "
              "the same command continues the benchmark")
        print(f"trials: {total} finished: 0 failed: 0")
        print("report: none yet (no trial finished)")
        return 0
    update_results_folder(out, list(records.values()), Path(plan.items))
    md, page = build_report(out, gallery_preset=args.gallery_preset)
    if failed:
        print(f"{failed} trial(s) failed; their errors are in {md} (Failed trials) and {out / TRIALS_FILE}",
              file=sys.stderr)
    if len(records) < total:
        print(f"stopped at the --max-minutes limit ({args.max_minutes:g}): {total - len(records)} trial(s) not "
              "begun; the same command continues the benchmark")
    print(f"trials: {total} finished: {len(records) - failed} failed: {failed}")
    print(f"report: {md} {page}")
    return 1 if failed else 0


def player_specs(args: argparse.Namespace) -> list[str] | None:
    """--players' names, then each --player's spec, in order; None (the preset's players) when neither is given.

    A spec with a comma in its command line cannot travel in --players' list: --player takes it whole.
    """
    specs = (args.players.split(",") if args.players else []) + (args.player or [])
    return specs or None


def _check_benchmark_memory(args: argparse.Namespace, preset: Preset) -> None:
    """The largest trial, times the workers running trials side by side, must fit before any starts."""
    from agents.attack import AttackOptions

    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else list(preset.sizes)
    size = max(sizes)
    budget = preset.budget(size)
    eval_samples = budget.eval_samples or preset.eval_samples
    steps = args.steps or budget.steps
    check_memory(args.workers * attack_bytes(size, eval_samples, AttackOptions.num_envs, steps),
                 f"benchmark: --workers {args.workers} trials of size {size} x {eval_samples} evaluation samples")


def _adversaries(text: str) -> list[str]:
    from agents.attack import ADVERSARY_INPUTS

    chosen = [a.strip() for a in text.split(",") if a.strip()]
    unknown = [a for a in chosen if a not in ADVERSARY_INPUTS]
    if unknown or not chosen:
        raise InputError(f"--adversaries {text!r}: expected a comma-separated list of {', '.join(ADVERSARY_INPUTS)}")
    return chosen


def _cmd_report(args: argparse.Namespace) -> int:
    from benchmarks.report import build_report

    md, page = build_report(args.results, gallery_preset=args.gallery_preset)
    print(f"report: {md} {page}")
    return 0


def add_benchmark_commands(subparsers: argparse._SubParsersAction) -> None:
    """Add `benchmark` and `report` to the clevr-game command line."""
    from benchmarks.presets import PRESETS

    p = subparsers.add_parser("benchmark", help="players x mini-game sizes x mini-games x seeds of `attack`, with a report")
    p.add_argument("--preset", choices=list(PRESETS), default="quick",
                   help="quick: minutes on 2 cores; paper: the shipped players at the paper's scale; table2: the "
                        "paper's Table 2 experiment on every player, state and pixel adversaries, 10/5/3 mini-games "
                        "of sizes 10/100/1000 x 2 seeds, 500 steps per item (about 22 hours on 2 cores, estimated; "
                        "docs/table2.md); table2-full: the same at 30 seeds, for a Ray cluster; table2-pilot: the "
                        "design results/table2 was made with (about 1.2 hours)")
    p.add_argument("--clevr-templates", default=None, metavar="DIR",
                   help="CLEVR 1.0's template folder: the table2 presets' generated pool asks CLEVR's templates "
                        "and the project's own (default: the own templates only, with a notice)")
    p.add_argument("--players", default=None,
                   help=f"comma-separated players (default: the preset's players), each {PLAYER_SPEC_HELP}; "
                        "a spec that holds a comma goes in --player")
    p.add_argument("--player", action="append", default=None, metavar="SPEC",
                   help=f"a player, taken whole as one spec (a subprocess command may hold commas): "
                        f"{PLAYER_SPEC_HELP}; repeatable; with --players, --players' players come first, "
                        "then each --player in order")
    p.add_argument("--items", default=None, help="item folder (default: a generated pool in OUT/items)")
    p.add_argument("--sizes", type=int_list_in(1, MAX_ITEMS), default=None, help="comma-separated mini-game sizes")
    p.add_argument("--minigames", type=int_in(1, MAX_ITEMS), default=None, help="mini-games per size")
    p.add_argument("--seeds", type=int_in(1, MAX_SEEDS), default=None)
    p.add_argument("--steps", type=int_in(1, MAX_STEPS), default=None, help="training env steps per trial")
    p.add_argument("--out", type=output_folder, default="results")
    p.add_argument("--workers", type=int_in(1, MAX_WORKERS), default=2, help="local processes running trials")
    p.add_argument("--max-minutes", type=float_in(0, MAX_MINUTES, above_lo=True), default=None,
                   help="start no trial after this many minutes (those under way finish and are recorded); "
                        "the same command continues the benchmark")
    p.add_argument("--ray", action="store_true", help="run trials as Ray tasks on a local Ray")
    p.add_argument("--ray-address", default=None, help="run trials on this Ray cluster")
    p.add_argument("--adversary-weights", default=None, help="relation-network file (default: the shipped one)")
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--no-visibility", action="store_true",
                   help="do not require every object to stay visible (checked for every player in the quick preset, "
                        "for players that see images in the others)")
    p.add_argument("--adversaries", default=None,
                   help="comma-separated adversary inputs: state (the scene graph), pixel (the original image) "
                        "(default: the preset's: state; state,pixel for table2)")
    add_input_options(p)
    add_limit_options(p)
    _add_gallery_option(p)
    p.set_defaults(handler=_cmd_benchmark)

    p = subparsers.add_parser("report", help="rebuild RESULTS/report.md and report.html from trials.jsonl")
    p.add_argument("results")
    _add_gallery_option(p)
    p.set_defaults(handler=_cmd_report)


def _add_gallery_option(p: argparse.ArgumentParser) -> None:
    from clevr_game.render.presets import PRESETS as RENDER_PRESETS

    p.add_argument("--gallery-preset", choices=[*RENDER_PRESETS, "schematic"], default="fast",
                   help="render preset of the report's before/after images (balanced: Cycles, about 30 s an "
                        "image on a 2-core CPU; schematic: top-view drawings, no Blender)")


# ------------------------------------------------------------------ adversarial training
