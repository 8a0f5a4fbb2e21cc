"""Does adversary training keep what it learns? Training variants on the same trials, compared.

Each variant trains one adversary per (player, mini-game, seed) with `clevr-game
attack`'s code and options; the final policy is evaluated as in the benchmark.
The question is the evaluation's invalid share (a policy that learned valid moves
and then forgot them ends high) and whether the drop holds.

    python -m experiments.adversary_stability --items DIR --players state-rn,state-transformer \
        --size 10 --minigames 0,1 --seeds 0,1 --steps 20000 --out results/adversary-stability

`OUT/trials.jsonl` is rewritten atomically after each trial and a rerun skips the
trials it holds; `OUT/summary.md` has the table per variant and player.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.records import read_trials, write_trials
from clevr_game.cli_types import positive_int
from clevr_game.scene import write_text_atomic

VARIANTS: dict[str, dict[str, Any]] = {
    # The defaults before this study: the coefficient adapts without bound toward a fixed target.
    "unbounded": {"max_entropy_coef": None, "target_entropy_final": None, "keep_best": False},
    "capped": {"max_entropy_coef": 0.05, "target_entropy_final": None, "keep_best": False},
    "decaying-target": {"max_entropy_coef": None, "target_entropy_final": 0.05, "keep_best": False},
    "best-window": {"max_entropy_coef": None, "target_entropy_final": None, "keep_best": True},
    "capped+best-window": {"max_entropy_coef": 0.05, "target_entropy_final": None, "keep_best": True},
    "capped-0.1": {"max_entropy_coef": 0.1, "target_entropy_final": None, "keep_best": False},
    "capped-0.1+best-window": {"max_entropy_coef": 0.1, "target_entropy_final": None, "keep_best": True},
}


def run_variant_trial(variant: str, player: str, items: str, size: int, minigame: int, seed: int, steps: int,
                      out: Path, minigames_file: Path) -> dict[str, Any]:
    from agents.attack import AttackOptions, run_attack

    started = time.time()
    result = run_attack(AttackOptions(
        player=player, items=items, minigame_size=size, minigame=minigame, seed=seed, steps=steps,
        out=str(out), minigames_file=str(minigames_file), progress=False, **VARIANTS[variant],
    ))
    history = result["history"]
    return {
        "variant": variant, "player": player, "size": size, "minigame": minigame, "seed": seed, "steps": steps,
        "eval_invalid": result["invalid"], "drop": result["drop"], "consistency": result["consistency"],
        "random_drop": result["random_drop"], "evaluated_update": result["evaluated_update"],
        "lowest_training_invalid": float(min(history["invalid"])),
        "final_training_invalid": float(np.mean(history["invalid"][-20:])),
        "seconds": round(time.time() - started, 1),
    }


def summary(records: list[dict[str, Any]]) -> str:
    lines = ["# Adversary training: does it keep what it learns?", "",
             "Per variant and player: median and mean evaluation invalid share of the final (or kept) policy, "
             "mean drop and consistency, and the training batches' invalid share over the last 20 updates.", "",
             "| variant | player | trials | median eval invalid | mean eval invalid | mean drop | mean consistency "
             "| final training invalid (median) |", "|---|---|---|---|---|---|---|---|"]
    for variant in VARIANTS:
        for player in sorted({r["player"] for r in records}):
            group = [r for r in records if r["variant"] == variant and r["player"] == player]
            if not group:
                continue
            lines.append(
                f"| {variant} | {player} | {len(group)} | {np.median([r['eval_invalid'] for r in group]):.3f} "
                f"| {np.mean([r['eval_invalid'] for r in group]):.3f} | {np.mean([r['drop'] for r in group]):.4f} "
                f"| {np.mean([r['consistency'] for r in group]):.4f} "
                f"| {np.median([r['final_training_invalid'] for r in group]):.3f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", required=True)
    parser.add_argument("--players", default="state-rn,state-transformer")
    parser.add_argument("--size", type=positive_int, default=10)
    parser.add_argument("--minigames", default="0,1", help="comma-separated mini-game indices")
    parser.add_argument("--seeds", default="0,1", help="comma-separated seeds")
    parser.add_argument("--steps", type=positive_int, default=20_000)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    variants = args.variants.split(",")
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        parser.error(f"unknown variants {unknown} (expected some of {', '.join(VARIANTS)})")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    minigames_file = out / f"minigames_size{args.size}.json"
    if not minigames_file.is_file():
        from envs.items import load_items
        from envs.minigames import split_minigames

        split_minigames([it.item_id for it in load_items(args.items)], args.size, 0).save(minigames_file)
    records = read_trials(out)
    for variant in variants:
        for player in args.players.split(","):
            for minigame in (int(m) for m in args.minigames.split(",")):
                for seed in (int(s) for s in args.seeds.split(",")):
                    key = f"{variant}__{player}__size{args.size}__mg{minigame}__seed{seed}__steps{args.steps}"
                    if key in records:
                        continue
                    record = run_variant_trial(variant, player, args.items, args.size, minigame, seed, args.steps,
                                               out / "runs" / key, minigames_file)
                    records[key] = {"trial": key, **record}
                    write_trials(out, records)
                    print(json.dumps(records[key]), flush=True)
    write_text_atomic(out / "summary.md", summary(list(records.values())))
    print(f"wrote {out / 'summary.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
