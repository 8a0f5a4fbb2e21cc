"""The CLEVR-POC paper's training-size table for this project's POC players.

Every POC player is trained on the first 2,000 / 6,000 / 12,000 items of one
`poc generate` folder and evaluated on two test sets: items of environments
never seen in training (another seed) and held-out items of the training
environments (the items after the largest prefix, never trained on). Each
(player, size) is one record in RESULTS/training_sizes.jsonl, written when its
training and both evaluations are done, so an interrupted run resumes at the
first missing record (a training cut short starts again; none takes more than
its `--max-minutes`). The report (training_sizes.md) is rebuilt from the records.

    python -m experiments.poc_training_sizes --work runs/poc-sizes --out results/poc
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clevr_game.atomic import write_text_atomic

SIZES = (2000, 6000, 12000)
HELD_OUT_SEEN = 200
TRAIN_ENVIRONMENTS = 8
TEST_ENVIRONMENTS = 4
PAIRS = 300
RECORDS_FILE = "training_sizes.jsonl"
REPORT_FILE = "training_sizes.md"
PLAYERS = ("poc-state-neuro-symbolic", "poc-neuro-symbolic", "poc-neural", "poc-neural-nl", "poc-neural-asp")
KNOWLEDGE = {"poc-neural": "none", "poc-neural-nl": "nl", "poc-neural-asp": "asp"}


@dataclass(frozen=True)
class Folders:
    train: Path
    validation: Path
    unseen: Path

    @classmethod
    def under(cls, work: Path) -> Folders:
        return cls(work / "train", work / "validation", work / "test-unseen")


def generate_commands(folders: Folders, sizes: tuple[int, ...], test_items: int) -> list[tuple[Path, list[str]]]:
    """The `poc generate` calls, disjoint seeds: train (largest size + the seen-environment held-out items),
    validation and test on environments of their own."""
    # Every object visible, as CLEVR's generator checks: the neuro-symbolic player sees renders of these.
    base = ["clevr-game", "poc", "generate", "--check-visibility"]
    return [
        (folders.train, base + ["--environments", str(TRAIN_ENVIRONMENTS), "--items", str(max(sizes) + HELD_OUT_SEEN),
                                "--seed", "110", "--out", str(folders.train)]),
        (folders.validation, base + ["--environments", str(TEST_ENVIRONMENTS), "--items", "200", "--seed", "210",
                                     "--out", str(folders.validation)]),
        (folders.unseen, base + ["--environments", str(TEST_ENVIRONMENTS), "--items", str(test_items),
                                 "--seed", "310", "--out", str(folders.unseen)]),
    ]


def read_records(path: Path) -> dict[str, dict[str, Any]]:
    from benchmarks.records import read_keyed_lines

    return read_keyed_lines(path, "key")


def write_records(path: Path, records: dict[str, dict[str, Any]]) -> None:
    write_text_atomic(path, "".join(json.dumps(records[k], sort_keys=True) + "\n" for k in sorted(records)))


def train_player(player: str, size: int, folders: Folders, out: Path, work: Path, max_minutes: float,
                 log: Callable[[str], None]) -> dict[str, Any]:
    """Train one player on the first `size` training items; its info (the stage figures) is returned."""
    from players.poc import training

    common = {"seed": 0, "max_minutes": max_minutes, "log": log}
    if player == "poc-state-neuro-symbolic":
        # Two REINFORCE epochs over the items after the supervised pairs.
        reinforce_steps = max(1, 2 * (size - PAIRS) // 32)
        return training.train_state_neuro_symbolic(
            str(folders.train), str(folders.validation), str(out), pairs=PAIRS, supervised_steps=1500,
            reinforce_steps=reinforce_steps, limit=size, **common)
    if player == "poc-neuro-symbolic":
        parser = work / "players" / f"poc-state-neuro-symbolic-{size}.pt"
        return training.train_neuro_symbolic(
            str(folders.train), str(folders.validation), str(out), parser_file=str(parser), images=size,
            steps=3000, batch_size=16, **common)
    return training.train_neural(str(folders.train), str(folders.validation), str(out),
                                 knowledge=KNOWLEDGE[player], steps=3000, batch_size=64, limit=size, **common)


def evaluate(player: str, path: Path, folder: Path, offset: int, limit: int | None) -> dict[str, Any]:
    from scipy.stats import binomtest

    from players.poc.evaluation import evaluate_poc_player
    from players.registry import load

    result = evaluate_poc_player(load(player, path=str(path)), folder, offset=offset, limit=limit)
    right = sum(result.exact.values())
    low, high = binomtest(right, result.total).proportion_ci(0.95, method="wilson")
    figures = {"items": result.total, "exact": round(result.exact_accuracy(), 4), "exact_ci": [round(low, 4), round(high, 4)],
               "jaccard": round(result.mean_jaccard(), 4), "errors": result.errors}
    if result.traced:
        figures["program_accuracy"] = round(result.parsed_right / result.traced, 4)
    if result.perceived_traced:
        figures["perception_accuracy"] = round(result.perceived_right / result.perceived_traced, 4)
    return figures


def report(records: dict[str, dict[str, Any]], command: str, planned: list[str]) -> str:
    lines = [
        "# CLEVR-POC players at three training sizes",
        "",
        "The CLEVR-POC paper's Table 2 for this project's players: exact accuracy (95% Wilson interval) and mean "
        "Jaccard index, on items of environments never seen in training and on held-out items of the training "
        "environments. Every player trains on the first N items of one `poc generate` folder; the neuro-symbolic "
        f"parsers see {PAIRS} supervised (question, program) pairs, then REINFORCE on the other items' answers. "
        "CPU only, one torch thread, each training capped by `--max-minutes`.",
        "",
        "```",
        *sorted({r.get("command", command) for r in records.values()} or {command}),
        "```",
        "",
        "| player | training items | unseen envs: exact [95% CI] | Jaccard | seen envs: exact [95% CI] | Jaccard "
        "| program acc. | perception acc. | training minutes |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    sizes = sorted({r["size"] for r in records.values()} | {int(key.split("@")[1]) for key in planned})
    for player in PLAYERS:
        for size in sizes:
            record = records.get(f"{player}@{size}")
            if record is None:
                continue
            unseen, seen = record["unseen"], record["seen"]
            lines.append(
                f"| {player} | {size:,} | {unseen['exact']:.3f} [{unseen['exact_ci'][0]:.3f}, {unseen['exact_ci'][1]:.3f}] "
                f"| {unseen['jaccard']:.3f} | {seen['exact']:.3f} [{seen['exact_ci'][0]:.3f}, {seen['exact_ci'][1]:.3f}] "
                f"| {seen['jaccard']:.3f} | {unseen.get('program_accuracy', '')} | {unseen.get('perception_accuracy', '')} "
                f"| {record['minutes']:.1f} |")
    staged = [r for r in records.values() if r["info"].get("stages")]
    if staged:
        lines += ["", "## The parser's two stages (the paper's Table 3)", "",
                  "Program accuracy (greedy parse equals the item's program token for token) and exact accuracy of "
                  "parse + clingo on the true scenes, on the validation items, after each stage.", "",
                  "| player | training items | supervised pairs | after supervised: program / exact "
                  "| REINFORCE steps | after REINFORCE: program / exact | mean reward |",
                  "|---|---|---|---|---|---|---|"]
        for record in sorted(staged, key=lambda r: (PLAYERS.index(r["player"]), r["size"])):
            stage = {entry["stage"]: entry for entry in record["info"]["stages"]}
            first, second = stage.get("supervised", {}), stage.get("reinforce", {})
            lines.append(
                f"| {record['player']} | {record['size']:,} | {record['info'].get('pairs', PAIRS)} "
                f"| {first.get('program_accuracy', '')} / {first.get('answer_exact', '')} | {second.get('steps', 0)} "
                f"| {second.get('program_accuracy', '')} / {second.get('answer_exact', '')} "
                f"| {second.get('mean_reward', '')} |")
    missing = [key for key in planned if key not in records]
    if missing:
        lines += ["", f"Not yet run: {', '.join(missing)} (rerun the command: it resumes)."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", default="runs/poc-sizes", help="data and trained player files (not committed)")
    parser.add_argument("--out", default="results/poc", help="records and report (committed)")
    parser.add_argument("--players", default=",".join(PLAYERS))
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)), help="training prefixes, comma-separated")
    parser.add_argument("--test-items", type=int, default=400)
    parser.add_argument("--max-minutes", type=float, default=20.0, help="cap of each training run")
    parser.add_argument("--stop-after-minutes", type=float, default=None,
                        help="start no new (player, size) after this long; rerun to resume")
    parser.add_argument("--report-only", action="store_true", help="rebuild the report from the records and stop")
    args = parser.parse_args(argv)
    if args.report_only:
        records = read_records(Path(args.out) / RECORDS_FILE)
        write_text_atomic(Path(args.out) / REPORT_FILE, report(records, "", []))
        print(f"report: {Path(args.out) / REPORT_FILE}")
        return 0
    import torch

    torch.set_num_threads(1)
    work, out = Path(args.work), Path(args.out)
    folders = Folders.under(work)
    out.mkdir(parents=True, exist_ok=True)
    sizes = tuple(sorted(int(s) for s in args.sizes.split(",")))
    for folder, command in generate_commands(folders, sizes, args.test_items):
        if not (folder / "items.json").is_file():
            print("$ " + shlex.join(command), flush=True)
            subprocess.run(command, check=True)
    records_path = out / RECORDS_FILE
    records = read_records(records_path)
    command = shlex.join(["python", "-m", "experiments.poc_training_sizes", *(argv if argv is not None else sys.argv[1:])])
    started = time.monotonic()
    players = sorted((p.strip() for p in args.players.split(",") if p.strip()), key=PLAYERS.index)
    planned = [f"{player}@{size}" for player in players for size in sizes]
    # The neuro-symbolic player takes its parser from the state player of the same size: those train first.
    for player in players:
        for size in sizes:
            key = f"{player}@{size}"
            if key in records:
                continue
            if args.stop_after_minutes is not None and time.monotonic() - started > args.stop_after_minutes * 60:
                print(f"stopping after {args.stop_after_minutes} minutes; rerun to resume", flush=True)
                write_text_atomic(out / REPORT_FILE, report(records, command, planned))
                return 0
            path = work / "players" / f"{player}-{size}.pt"
            path.parent.mkdir(parents=True, exist_ok=True)
            print(f"== {key}", flush=True)
            trained = time.monotonic()
            info = train_player(player, size, folders, path, work, args.max_minutes,
                                lambda message: print(f"  {message}", flush=True))
            minutes = (time.monotonic() - trained) / 60
            records[key] = {
                "key": key, "player": player, "size": size, "minutes": round(minutes, 2), "info": info,
                "command": command,
                "unseen": evaluate(player, path, folders.unseen, 0, None),
                "seen": evaluate(player, path, folders.train, max(sizes), HELD_OUT_SEEN),
            }
            print(f"  unseen {records[key]['unseen']} seen {records[key]['seen']}", flush=True)
            write_records(records_path, records)
            write_text_atomic(out / REPORT_FILE, report(records, command, planned))
    write_text_atomic(out / REPORT_FILE, report(records, command, planned))
    print(f"report: {out / REPORT_FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
