"""The `clevr-game` command line: the one thin module that sees every package.

Each command imports what it needs inside its handler, so `import clevr_game`
and `clevr-game --help` stay light. A ClevrGameError ends the run with one line
on stderr and exit status 2 (bad input or usage) or 1 (a run that could not give
a trustworthy result, such as a player that kept failing).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from clevr_game.cli_types import (
    finite_float,
    non_negative_float,
    non_negative_int,
    positive_float,
    positive_int,
    positive_int_list,
    random_seed,
)
from clevr_game.errors import ClevrGameError, InputError, RunFailed
from players.guard import add_limit_options, limits_from_args

Handler = Callable[[argparse.Namespace], int | None]


# ------------------------------------------------------------------ world (issue 2)


def _cmd_generate(args: argparse.Namespace) -> int | None:
    from clevr_game.generate import generate_dataset

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
        split=args.split,
        progress=not args.no_progress,
    )
    out = Path(args.out)  # `--out data/` prints data/scenes.json, not data//scenes.json
    print(f"wrote {out / 'scenes.json'} and {out / 'questions.json'}")
    return 0


def _cmd_answer(args: argparse.Namespace) -> int | None:
    from clevr_game.answering import answer_files

    correct, total = answer_files(args.scenes, args.questions, args.out)
    print(f"accuracy: {correct}/{total}")
    return 0


def _add_world_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("generate", help="random valid CLEVR scenes and template questions")
    p.add_argument("--num-scenes", type=non_negative_int, default=100)
    p.add_argument("--questions-per-scene", type=non_negative_int, default=10)
    p.add_argument("--seed", type=random_seed, default=0)
    p.add_argument("--min-objects", type=positive_int, default=3)
    p.add_argument("--max-objects", type=positive_int, default=10)
    p.add_argument("--templates", default=None, metavar="own|clevr|both|PATH",
                   help="question templates: the project's own (default), CLEVR 1.0's, both, or a template file or folder")
    p.add_argument("--clevr-templates", default=None, metavar="DIR",
                   help="CLEVR 1.0's template folder, for --templates clevr or both (not shipped with the project)")
    p.add_argument("--scenes", default=None, metavar="SCENES_JSON",
                   help="ask the questions about these scenes (a CLEVR scenes file) instead of generating new ones")
    p.add_argument("--check-visibility", action="store_true",
                   help="redraw scenes where an object shows fewer than CLEVR's 200 pixels (renders an index pass)")
    p.add_argument("--split", default="new")
    p.add_argument("--out", default="clevr_output")
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(handler=_cmd_generate)

    p = sub.add_parser("answer", help="execute every question's program; last line `accuracy: X/Y`")
    p.add_argument("--scenes", required=True)
    p.add_argument("--questions", required=True)
    p.add_argument("--out", default=None, help="write predictions JSON here")
    p.set_defaults(handler=_cmd_answer)


# ------------------------------------------------------------------ the game (issue 4)


def _cmd_play(args: argparse.Namespace) -> int | None:
    from envs.items import ItemPool, load_items
    from envs.play import play_moves, summarise
    from players.guard import PlayerGaveUp
    from players.registry import check_spec, load_guarded

    limits = limits_from_args(args)
    check_spec(args.player)
    pool = ItemPool(load_items(args.items))
    with load_guarded(args.player, **limits) as player:
        try:
            outcomes = play_moves(pool, player, args.episodes, moves=args.moves, seed=args.seed,
                                  batch=args.batch, mode=args.mode)
        except PlayerGaveUp as exc:
            raise RunFailed(f"{exc} ({player.count.queries} queries asked)") from None
        count = player.count
    summary = summarise(outcomes)
    if count.errors:
        print(f"player errors: {count.errors} of {count.queries} queries, first: {count.first_error}")
    print(f"episodes: {summary.episodes} mean reward: {summary.mean_reward:.4f}")
    print(summary.last_line())
    failure = count.failure(args.max_error_rate)
    if failure is not None:
        print(f"clevr-game: error: play: {failure}", file=sys.stderr)
        return 1
    return 0


def _add_game_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("play", help="play moves against a player; last line `consistency: X drop: Y invalid: Z`")
    p.add_argument("--items", required=True, help="a dataset folder (scenes.json + questions.json, or CLEVR-POC items.json)")
    p.add_argument("--player", default="oracle", help="oracle, a registered name, subprocess:<command>, or an http URL")
    p.add_argument("--moves", choices=["random", "stay"], default="random",
                   help="random: a uniform bin on each axis for every object; stay: move nothing (the unmoved answers)")
    p.add_argument("--episodes", type=positive_int, default=1000,
                   help="moves to play, items taken in turn (each item gets about EPISODES / items)")
    p.add_argument("--mode", choices=["displacement", "absolute"], default="displacement",
                   help="displacement: a bin moves an object by -0.9..0.9 in steps of 0.3; absolute: a 7 x 7 grid")
    p.add_argument("--batch", type=positive_int, default=64,
                   help="moves played at once (the player is asked once per batch)")
    p.add_argument("--seed", type=random_seed, default=0, help="seed of the random moves")
    add_limit_options(p)
    p.set_defaults(handler=_cmd_play)


# ------------------------------------------------------------------ the adversary (issue 7)


def _cmd_attack(args: argparse.Namespace) -> int | None:
    from agents.attack import AttackOptions, last_line, run_attack
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
    print(f"wrote {Path(args.out) / 'result.json'}")
    print(last_line(result))
    return 0


def _add_attack_commands(sub: argparse._SubParsersAction) -> None:
    from agents.attack import AttackOptions

    p = sub.add_parser("attack", help="train an adversary on one mini-game; last line `consistency: X drop: Y`")
    p.add_argument("--player", required=True)
    p.add_argument("--items", required=True, help="a dataset folder (scenes.json + questions.json)")
    p.add_argument("--minigame-size", type=positive_int, default=10)
    p.add_argument("--minigame", type=non_negative_int, default=0, help="which mini-game of the split (0-based)")
    p.add_argument("--split-seed", type=random_seed, default=0, help="seed of the split into mini-games")
    p.add_argument("--seed", type=random_seed, default=0)
    p.add_argument("--steps", type=positive_int, default=20_000, help="env steps of training")
    p.add_argument("--num-envs", type=positive_int, default=128)
    p.add_argument("--eval-samples", type=positive_int, default=32, help="moves per item when evaluating")
    p.add_argument("--lr", type=non_negative_float, default=5e-4)
    p.add_argument("--entropy-coef", type=non_negative_float, default=0.05, help="starting entropy coefficient")
    p.add_argument("--stay-bias", type=finite_float, default=4.4,
                   help="initial logit of `stay` per axis: higher starts with fewer objects moving")
    p.add_argument("--target-entropy", type=finite_float, default=0.3,
                   help="adapt the entropy coefficient to hold this many nats per action dimension "
                        "(a negative value keeps --entropy-coef fixed)")
    p.add_argument("--max-entropy-coef", type=non_negative_float, default=AttackOptions.max_entropy_coef,
                   help="upper bound of the adaptive entropy coefficient (0: no bound); without one, a policy "
                        "that learned to stay is pushed back into mostly invalid moves")
    p.add_argument("--target-entropy-final", type=finite_float, default=None,
                   help="move the target entropy linearly to this value over training (default: it stays put)")
    p.add_argument("--last-policy", action="store_true",
                   help="evaluate the last policy, not the one of the best window of training updates")
    p.add_argument("--threads", type=positive_int, default=1, help="torch threads")
    p.add_argument("--rewards", type=finite_float, nargs=4, default=[1.0, 0.1, -0.1, -0.8], metavar=("DR", "CR", "FR", "ISR"),
                   help="training rewards: right answer broken, other change, nothing changed, invalid scene")
    p.add_argument("--fine-tune", action="store_true", help="train the relation network too (default: frozen)")
    p.add_argument("--adversary-weights", default=None, help="relation-network file (default: the shipped one)")
    p.add_argument("--mode", choices=["displacement", "absolute"], default="displacement")
    p.add_argument("--out", default="runs/attack")
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--no-visibility", action="store_true",
                   help="do not require every object to stay visible (checked by default for players that see images)")
    p.add_argument("--adversary", choices=["state", "pixel"], default="state",
                   help="what the adversary sees: the scene graph (state) or the original image (pixel)")
    add_limit_options(p)
    p.set_defaults(handler=_cmd_attack)


# ------------------------------------------------------------------ the benchmark (issue 8)


def _cmd_benchmark(args: argparse.Namespace) -> int | None:
    from pathlib import Path

    from benchmarks.presets import PRESETS, budgets, default_pool
    from benchmarks.report import build_report
    from benchmarks.runner import run_plan
    from benchmarks.trials import Plan
    from players.registry import check_spec

    preset = PRESETS[args.preset]
    limits = limits_from_args(args)
    players = args.players.split(",") if args.players else list(preset.all_players())
    adversaries = tuple(_adversaries(args.adversaries or ",".join(preset.adversaries)))
    for spec in players:  # a typo fails now, not as one failed trial per seed hours later
        check_spec(spec)
    out = Path(args.out)
    items = args.items
    if items is None:  # the embedded default: a generated pool, the same for a given preset
        items = default_pool(preset, out / "items", clevr_templates=args.clevr_templates,
                             progress=not args.no_progress)
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else list(preset.sizes)
    plan = Plan(
        players=players,
        items=items,
        sizes=sizes,
        minigames=preset.minigames if args.minigames is None else args.minigames,
        seeds=preset.seeds if args.seeds is None else args.seeds,
        steps=preset.steps if args.steps is None else args.steps,
        out=str(out),
        eval_samples=preset.eval_samples,
        search_budget=preset.search_budget,
        adversary_weights=args.adversary_weights,
        adversaries=adversaries,
        per_size=budgets(preset, sizes, minigames=args.minigames, seeds=args.seeds, steps=args.steps),
        player_timeout=limits["timeout_s"], max_player_failures=limits["max_failures"],
        max_error_rate=args.max_error_rate, check_visibility=False if args.no_visibility else None,
    )
    total = len(plan.trials())
    records = run_plan(plan, workers=args.workers, ray=args.ray, ray_address=args.ray_address,
                       on_progress=lambda progress: print(progress.line(), flush=True))
    failed = sum("error" in r for r in records.values())
    md, page = build_report(out, gallery_preset=args.gallery_preset)
    if failed:
        print(f"{failed} trial(s) failed; their errors are in {md} (Failed trials) and {out / 'trials.jsonl'}",
              file=sys.stderr)
    print(f"trials: {total} finished: {len(records) - failed} failed: {failed}")
    print(f"report: {md} {page}")
    return 1 if failed else 0


def _adversaries(text: str) -> list[str]:
    from agents.attack import ADVERSARY_INPUTS

    chosen = [a.strip() for a in text.split(",") if a.strip()]
    unknown = [a for a in chosen if a not in ADVERSARY_INPUTS]
    if unknown or not chosen:
        raise InputError(f"--adversaries {text!r}: expected a comma-separated list of {', '.join(ADVERSARY_INPUTS)}")
    return chosen


def _cmd_report(args: argparse.Namespace) -> int | None:
    from benchmarks.report import build_report

    md, page = build_report(args.results, gallery_preset=args.gallery_preset)
    print(f"report: {md} {page}")
    return 0


def _add_benchmark_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("benchmark", help="players x mini-game sizes x mini-games x seeds of `attack`, with a report")
    p.add_argument("--preset", choices=["quick", "paper", "table2", "table2-full"], default="quick",
                   help="quick: minutes on 2 cores; paper: the shipped players at the paper's scale; table2: the "
                        "paper's Table 2 experiment on every player, state and pixel adversaries, sizes 10/100/1000 "
                        "(about 8 hours on 2 cores, see docs/report.md); table2-full: the same at 30 seeds per "
                        "mini-game, for a Ray cluster or GPU machine")
    p.add_argument("--clevr-templates", default=None, metavar="DIR",
                   help="CLEVR 1.0's template folder: the table2 presets' generated pool asks CLEVR's templates "
                        "and the project's own (default: the own templates only, with a notice)")
    p.add_argument("--players", default=None, help="comma-separated player names (default: the preset's players)")
    p.add_argument("--items", default=None, help="item folder (default: a generated pool in OUT/items)")
    p.add_argument("--sizes", type=positive_int_list, default=None, help="comma-separated mini-game sizes")
    p.add_argument("--minigames", type=positive_int, default=None, help="mini-games per size")
    p.add_argument("--seeds", type=positive_int, default=None)
    p.add_argument("--steps", type=positive_int, default=None, help="training env steps per trial")
    p.add_argument("--out", default="results")
    p.add_argument("--workers", type=positive_int, default=2, help="local processes running trials")
    p.add_argument("--ray", action="store_true", help="run trials as Ray tasks on a local Ray")
    p.add_argument("--ray-address", default=None, help="run trials on this Ray cluster")
    p.add_argument("--adversary-weights", default=None, help="relation-network file (default: the shipped one)")
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--no-visibility", action="store_true",
                   help="do not require every object to stay visible (checked by default for players that see images)")
    p.add_argument("--adversaries", default=None,
                   help="comma-separated adversary inputs: state (the scene graph), pixel (the original image) "
                        "(default: the preset's: state; state,pixel for table2)")
    add_limit_options(p)
    _add_gallery_option(p)
    p.set_defaults(handler=_cmd_benchmark)

    p = sub.add_parser("report", help="rebuild RESULTS/report.md and report.html from trials.jsonl")
    p.add_argument("results")
    _add_gallery_option(p)
    p.set_defaults(handler=_cmd_report)


def _add_gallery_option(p: argparse.ArgumentParser) -> None:
    from clevr_game.render.presets import PRESETS as RENDER_PRESETS

    p.add_argument("--gallery-preset", choices=[*RENDER_PRESETS, "schematic"], default="fast",
                   help="render preset of the report's before/after images (balanced: Cycles, about 30 s an "
                        "image on a 2-core CPU; schematic: top-view drawings, no Blender)")


# ------------------------------------------------------------------ CLEVR-POC (issue 3)


def _add_poc_commands(sub: argparse._SubParsersAction) -> None:
    from clevr_game.asp.commands import add_poc_commands

    add_poc_commands(sub)


# ------------------------------------------------------------------ players and rendering (issues 5, 6)


def _add_player_commands(sub: argparse._SubParsersAction) -> None:
    from players.commands import add_player_commands

    add_player_commands(sub)


def _add_render_commands(sub: argparse._SubParsersAction) -> None:
    from clevr_game.render.commands import add_render_commands

    add_render_commands(sub)


# ------------------------------------------------------------------ adversarial-training export (issue 9)


def _cmd_export(args: argparse.Namespace) -> int | None:
    from clevr_game.export import ExportOptions, export_run

    summary = export_run(ExportOptions(
        run=args.run, out=args.out, select=args.select, split=args.split, render=args.render,
        render_workers=args.workers, items=args.items, limit=args.limit, seed=args.seed,
        progress=not args.no_progress,
    ))
    for line in summary.warnings:
        print(f"clevr-game: warning: {line}", file=sys.stderr)
    print(f"wrote {Path(args.out) / 'scenes.json'}, questions.json and manifest.json "
          f"({summary.candidates} selected, {summary.duplicates} duplicates removed)")
    print(summary.last_line())
    return 0


def _add_export_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("export", help="manipulated scenes of attack runs as a CLEVR dataset; last line `scenes: X questions: Y images: Z`")
    p.add_argument("--run", required=True, help="an attack run folder (result.json) or a benchmark results folder (trials.jsonl)")
    p.add_argument("--out", required=True)
    p.add_argument("--select", choices=["all", "flips", "drops"], default="flips",
                   help="every valid move, moves that changed the answer, or moves that made a right answer wrong")
    p.add_argument("--render", default=None, metavar="PRESET", help="render images/ with this preset (fast, balanced, clevr)")
    p.add_argument("--workers", type=positive_int, default=1, help="Blender processes when rendering")
    p.add_argument("--split", default="adversarial", help="split name in the files and image names")
    p.add_argument("--items", default=None, help="the items folder (default: the one recorded in each run)")
    p.add_argument("--limit", type=positive_int, default=None, help="keep at most this many questions, drawn with --seed")
    p.add_argument("--seed", type=random_seed, default=0)
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(handler=_cmd_export)


def _cmd_adversarial_training(args: argparse.Namespace) -> int | None:
    from benchmarks.adversarial_training import AdversarialTrainingOptions, run_adversarial_training

    report = run_adversarial_training(AdversarialTrainingOptions(
        player=args.player, items=args.items, out=args.out, heldout=args.heldout, size=args.size,
        minigames=args.minigames, seeds=args.seeds, steps=args.steps, finetune_steps=args.finetune_steps,
        finetune_batch_size=args.finetune_batch_size, finetune_learning_rate=args.finetune_learning_rate,
        select=args.select, split_seed=args.split_seed, seed=args.seed, num_envs=args.num_envs,
        eval_samples=args.eval_samples, adversary_weights=args.adversary_weights, workers=args.workers,
        threads=args.threads, progress=not args.no_progress,
    ))
    print(f"report: {report}")
    return 0


def _add_adversarial_training_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("adversarial-training", help="benchmark, export, fine-tune, benchmark on fresh mini-games; "
                       "last line `report: EXP/report.md`; resumable")
    p.add_argument("--player", required=True, help="state-transformer, state-rn or file:PATH (a state player file)")
    p.add_argument("--items", required=True, help="item pool (CLEVR dataset folder); also the clean fine-tuning data")
    p.add_argument("--out", required=True, help="experiment folder")
    p.add_argument("--heldout", default=None, help="clean held-out dataset (default: generated in OUT/heldout)")
    p.add_argument("--size", type=positive_int, default=10, help="mini-game size")
    p.add_argument("--minigames", type=positive_int, default=2,
                   help="M: mini-games 0..M-1 before, the fresh M..2M-1 after")
    p.add_argument("--seeds", type=positive_int, default=1)
    p.add_argument("--steps", type=positive_int, default=20000, help="adversary training env steps per trial")
    p.add_argument("--finetune-steps", type=positive_int, default=500)
    p.add_argument("--finetune-batch-size", type=positive_int, default=64)
    p.add_argument("--finetune-learning-rate", type=non_negative_float, default=1e-4)
    p.add_argument("--select", choices=["all", "flips", "drops"], default="flips", help="what the export keeps")
    p.add_argument("--split-seed", type=random_seed, default=0)
    p.add_argument("--seed", type=random_seed, default=0, help="fine-tuning seed")
    p.add_argument("--num-envs", type=positive_int, default=128)
    p.add_argument("--eval-samples", type=positive_int, default=32)
    p.add_argument("--adversary-weights", default=None, help="relation-network file (default: the shipped one)")
    p.add_argument("--workers", type=positive_int, default=1, help="local processes running trials")
    p.add_argument("--threads", type=positive_int, default=1, help="torch threads for fine-tuning")
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(handler=_cmd_adversarial_training)


# ------------------------------------------------------------------ exhaustive datasets, the examples study (issue 15)


def _cmd_exhaustive(args: argparse.Namespace) -> int | None:
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


def _add_exhaustive_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("exhaustive", help="every placement of a few objects on the 7 x 7 grid, with one-/two-hop "
                       "questions; last line `scenes: V valid of T placements`")
    p.add_argument("--objects", type=positive_int, choices=[2, 3, 4], required=True)
    p.add_argument("--hops", choices=["one", "two", "mix"], required=True,
                   help="one-hop questions, two-hop questions, or both")
    p.add_argument("--seed", type=random_seed, default=0, help="draws the base objects and the questions")
    p.add_argument("--out", required=True)
    p.add_argument("--stationary", type=non_negative_int, default=None,
                   help="objects kept on one drawn cell (default: 1 of 4 objects, else none)")
    p.add_argument("--questions-per-family", type=positive_int, default=4)
    p.set_defaults(handler=_cmd_exhaustive)


def _share_list(text: str) -> list[float]:
    """Comma-separated shares strictly between 0 and 1 (`0.01,0.1,0.5`)."""
    try:
        shares = [float(part) for part in text.split(",")]
    except ValueError:
        shares = []
    if not shares or not all(0.0 < share < 1.0 for share in shares):
        raise argparse.ArgumentTypeError(f"must be comma-separated numbers strictly between 0 and 1, got {text!r}")
    return shares


def _cmd_study_examples(args: argparse.Namespace) -> int | None:
    import json
    import shlex

    from benchmarks.examples_study import StudyOptions, run_study
    from clevr_game.errors import InputError

    try:
        config = json.loads(args.config) if args.config else {}
    except json.JSONDecodeError as exc:
        raise InputError(f"--config: not JSON: {exc.msg} at character {exc.pos}") from None
    if not isinstance(config, dict):
        raise InputError("--config: expected a JSON object such as '{\"width\": 64}'")
    command = ["clevr-game", "study", "examples", "--data", args.data, "--players", args.players, "--fractions",
               ",".join(f"{f:g}" for f in args.fractions), "--trials", str(args.trials), "--out", args.out,
               "--steps", str(args.steps), "--batch-size", str(args.batch_size), "--learning-rate",
               f"{args.learning_rate:g}", "--eval-every", str(args.eval_every), "--patience", str(args.patience),
               "--seed", str(args.seed)]
    if args.config:
        command += ["--config", args.config]
    outcome = run_study(StudyOptions(
        data=args.data.split(","), players=args.players.split(","), fractions=args.fractions, trials=args.trials,
        out=args.out, steps=args.steps, max_minutes=args.max_minutes, batch_size=args.batch_size,
        learning_rate=args.learning_rate, eval_every=args.eval_every, patience=args.patience, model_config=config,
        seed=args.seed, threads=args.threads, command=shlex.join(command),
    ))
    print(f"trials: {outcome.recorded} of {outcome.planned} recorded; report: {outcome.report}")
    return 0


def _add_study_commands(sub: argparse._SubParsersAction) -> None:
    study = sub.add_parser("study", help="experiments over datasets and players").add_subparsers(
        dest="study", required=True)
    p = study.add_parser("examples", help="accuracy on unseen placements against the share trained on "
                         "(the paper's Figure 2); resumable; last line `trials: X of Y recorded; report: PATH`")
    p.add_argument("--data", required=True, help="comma-separated `clevr-game exhaustive` folders")
    p.add_argument("--players", default="state-transformer", help="comma-separated state players")
    p.add_argument("--fractions", type=_share_list, default=_share_list("0.01,0.05,0.1,0.25,0.5,0.75,0.9"),
                   help="shares of the scenes trained on")
    p.add_argument("--trials", type=positive_int, default=10, help="random scene splits per fraction")
    p.add_argument("--out", required=True, help="results folder (study.jsonl, report.md, figure.png)")
    p.add_argument("--steps", type=positive_int, default=3000, help="step budget of each training run")
    p.add_argument("--max-minutes", type=positive_float, default=None,
                   help="stop the whole study after this long (the cut trial is not recorded; rerun to continue)")
    p.add_argument("--batch-size", type=positive_int, default=128)
    p.add_argument("--learning-rate", type=positive_float, default=1e-3)
    p.add_argument("--eval-every", type=positive_int, default=100, help="steps between validation evaluations")
    p.add_argument("--patience", type=positive_int, default=5,
                   help="validation evaluations without a better accuracy before a run stops")
    p.add_argument("--config", default=None, help="model config as JSON, e.g. '{\"width\": 64, \"layers\": 2}'")
    p.add_argument("--seed", type=random_seed, default=0, help="seeds the splits and the models")
    p.add_argument("--threads", type=positive_int, default=1, help="torch threads")
    p.set_defaults(handler=_cmd_study_examples)


# ------------------------------------------------------------------ entry point


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="clevr-game", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    _add_world_commands(sub)
    _add_game_commands(sub)
    _add_attack_commands(sub)
    _add_benchmark_commands(sub)
    _add_poc_commands(sub)
    _add_export_commands(sub)
    _add_adversarial_training_commands(sub)
    _add_player_commands(sub)
    _add_render_commands(sub)
    _add_exhaustive_commands(sub)
    _add_study_commands(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler: Handler = args.handler
    try:
        return int(handler(args) or 0)
    except ClevrGameError as exc:
        print(f"clevr-game: error: {exc}", file=sys.stderr)
        return exc.exit_status
    except KeyboardInterrupt:
        print("clevr-game: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
