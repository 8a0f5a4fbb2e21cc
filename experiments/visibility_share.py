"""How many of an adversary's successes against a pixel player hide an object? Before and after the rule.

Trains the same attack twice on one mini-game, once without the visibility
referee (`--no-visibility`) and once with it, and counts, among the distinct
scenes where the adversary changed (or broke) an answer, those where an object
shows fewer than CLEVR's 200 pixels in Blender's object-index pass.

    python -m experiments.visibility_share --player neuro-symbolic --items DIR --size 100 --minigame 0 \
        --steps 20000 --out results/visibility
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from clevr_game.cli_types import non_negative_int, positive_int
from clevr_game.scene import parse_scene, write_json_atomic


def successes(run: Path) -> list[dict[str, Any]]:
    """Distinct manipulated scenes of a run whose answer changed, from its manipulations.jsonl."""
    from clevr_game.jsonl import json_lines
    from clevr_game.run_files import MANIPULATIONS_FILE

    seen: dict[str, dict[str, Any]] = {}
    for _, record in json_lines(run / MANIPULATIONS_FILE):
        if record.get("changed"):
            key = json.dumps(record["scene"], sort_keys=True)
            seen.setdefault(key, record)
    return list(seen.values())


def hidden_share(records: list[dict[str, Any]]) -> dict[str, Any]:
    from clevr_game.render import Renderer

    with Renderer("fast", workers=1) as renderer:
        hidden = [bool(renderer.hidden_objects(parse_scene(r["scene"]))) for r in records]
    dropped = [h for h, r in zip(hidden, records, strict=True) if r.get("dropped")]
    return {"successful_scenes": len(records), "with_hidden_object": sum(hidden),
            "dropped_scenes": len(dropped), "dropped_with_hidden_object": sum(dropped)}


def main(argv: list[str] | None = None) -> int:
    from agents.attack import AttackOptions, run_attack

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--player", default="neuro-symbolic")
    parser.add_argument("--items", required=True)
    parser.add_argument("--size", type=positive_int, default=100)
    parser.add_argument("--minigame", type=non_negative_int, default=0)
    parser.add_argument("--seed", type=non_negative_int, default=0)
    parser.add_argument("--steps", type=positive_int, default=20_000)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    out = Path(args.out)
    summary: dict[str, Any] = {"player": args.player, "items": args.items, "size": args.size,
                               "minigame": args.minigame, "seed": args.seed, "steps": args.steps}
    for label, check in (("without_visibility", False), ("with_visibility", True)):
        run = out / "runs" / label
        result = run_attack(AttackOptions(
            player=args.player, items=args.items, minigame_size=args.size, minigame=args.minigame, seed=args.seed,
            steps=args.steps, out=str(run), progress=False, check_visibility=check,
        ))
        summary[label] = {"consistency": result["consistency"], "drop": result["drop"], "invalid": result["invalid"],
                          "random_drop": result["random_drop"], **hidden_share(successes(run))}
        print(label, json.dumps(summary[label]), flush=True)
    write_json_atomic(out / "summary.json", summary, indent=2)
    print(f"wrote {out / 'summary.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
