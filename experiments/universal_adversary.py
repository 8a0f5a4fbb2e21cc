"""The universal adversary: one adversary trained on a whole pool of items, then tested on unseen items.

The paper trained one adversary per mini-game and left one adversary for every
item ("arduous") as future work. Here one A2C adversary trains on `--train-size`
items (the mini-game is the whole pool) against one player for at most
`--max-minutes` per call (checkpointed: call again to continue), and is then
evaluated on held-out items it never saw, beside per-mini-game adversaries
trained the usual way (`clevr-game attack`, size 10) on held-out mini-games:
does one adversary learn moves that transfer, and how close does it come to
adversaries that train on the very items they attack?

Run (the committed figures: results/universal/):
    python -m experiments.universal_adversary --items runs/universal/items --player state-rn \
        --train-size 10000 --max-minutes 60 --out results/universal
Writes OUT/player.json (the player and its weights digest: a call against other
weights is refused), OUT/result.json, OUT/report.md, OUT/learning_curve.png; the
checkpoint and the per-mini-game runs live in OUT/runs/ (not committed).
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from clevr_game.atomic import atomic_path, write_json_atomic, write_text_atomic
from clevr_game.errors import InputError
from clevr_game.scene import read_json
from players.timed import TimedPlayer

SPLIT_FILE = "split.json"
PLAYER_FILE = "player.json"
PROGRESS_FILE = "progress.json"
RESULT_FILE = "result.json"
REPORT_FILE = "report.md"
WHO = {"universal": "universal (last policy)",
       "universal_best_window": "universal (best 20-update window of training reward)",
       "random": "random", "random_valid": "random valid"}
"""The report's adversaries: the universal one is shown as trained to the end and as the attack default keeps it."""
DEFAULT_STEPS = 50_000_000
"""Far more than an hour allows: the run ends by --max-minutes, and a later call continues it."""


def make_split(item_ids: list[str], train_size: int, heldout_minigames: int, minigame_size: int,
               heldout_items: int, seed: int, scene_of: list[int] | None = None) -> dict[str, Any]:
    """Training items, held-out mini-games (for per-mini-game adversaries) and more held-out items, disjoint.

    With `scene_of` (each item's scene), whole scenes are dealt: no held-out item shares a
    scene with a training item, so the held-out figures measure moves that transfer to
    scenes the adversary never saw, not only to other questions about them.
    """
    heldout_size = max(heldout_items, heldout_minigames * minigame_size)
    needed = train_size + heldout_size
    if len(item_ids) < needed:
        raise InputError(f"the pool holds {len(item_ids)} items; --train-size {train_size} and the held-out "
                         f"items need {needed}")
    rng = np.random.default_rng(seed)
    if scene_of is None:
        order = rng.permutation(len(item_ids)).tolist()
        train, rest = [item_ids[i] for i in order[:train_size]], [item_ids[i] for i in order[train_size:]]
        by = {}
    else:
        scenes = sorted(set(scene_of))
        items_of: dict[int, list[str]] = {scene: [] for scene in scenes}
        for item_id, scene in zip(item_ids, scene_of, strict=True):
            items_of[scene].append(item_id)
        dealt = [items_of[scenes[i]] for i in rng.permutation(len(scenes))]
        train, rest, in_training = [], [], True
        for scene_items in dealt:
            if in_training and len(train) + len(scene_items) > train_size:
                in_training = False  # a scene is never split between training and held-out items
            (train if in_training else rest).extend(scene_items)  # len(rest) >= len(ids) - train_size
        by = {"heldout_by": "scenes"}
    games = [rest[k * minigame_size:(k + 1) * minigame_size] for k in range(heldout_minigames)]
    return {"seed": seed, **by, "train": train, "heldout_minigames": games, "heldout": rest[:heldout_size]}


def _load_split(out: Path, items: list[Any], args: argparse.Namespace) -> dict[str, Any]:
    path = out / SPLIT_FILE
    scene_index: dict[int, int] = {}
    scene_of = [scene_index.setdefault(id(item.scene), len(scene_index)) for item in items]
    split = make_split([item.item_id for item in items], args.train_size, args.heldout_minigames,
                       args.minigame_size, args.heldout_items, args.seed,
                       scene_of if args.heldout == "scenes" else None)
    if path.is_file():
        if read_json(path) != split:
            raise InputError(f"{path}: written for other items or options; use the same ones or another --out")
    else:
        write_json_atomic(path, split)
    return split


def _check_player(out: Path, player: str) -> None:
    """OUT/player.json names the player and its weights; a call against other weights is refused.

    The checkpoint, the per-mini-game runs and the progress all learned one player:
    continuing or evaluating them against a retrained one would mix two opponents.
    """
    from players.registry import weights_digest

    path, current = out / PLAYER_FILE, {"player": player, "player_weights": weights_digest(player)}
    if path.is_file():
        recorded = read_json(path)
        if recorded != current:
            raise InputError(f"{path}: made against {recorded.get('player')} with weights "
                             f"{recorded.get('player_weights')}, not {player} with weights "
                             f"{current['player_weights']} (a retrained player needs another --out)")
    elif (out / PROGRESS_FILE).is_file():
        raise InputError(f"{out}: begun before runs recorded their player's weights, so which player it learned "
                         "is unknown; use another --out")
    else:
        write_json_atomic(path, current)


def _trainer(args: argparse.Namespace, env: Any, out: Path) -> tuple[Any, Any, Any]:
    """The universal adversary's trainer on `env`'s pool (resumed from its checkpoint), its network and word map.

    The attack's defaults, with a step budget no hour reaches: --max-minutes ends each call.
    """
    from agents.a2c import A2CConfig, A2CTrainer
    from agents.features import FeatureCache
    from agents.pretrained import load_adversary_network

    network, word_map = load_adversary_network(None, env.pool.words)
    config = A2CConfig(steps=DEFAULT_STEPS, num_envs=args.num_envs, max_entropy_coef=0.05, keep_best=True,
                       seed=args.seed)
    trainer = A2CTrainer(env, FeatureCache(network, word_map, env.pool), config,
                         checkpoint=out / "runs" / "universal" / "checkpoint.pt")
    return trainer, network, word_map


def train_universal(args: argparse.Namespace, split: dict[str, Any], out: Path) -> dict[str, Any]:
    """Train (or continue) the universal adversary for at most --max-minutes; returns its progress record."""
    import torch

    from envs.items import ItemPool, load_items
    from envs.vector import AdversarialVectorEnv
    from players.registry import load as load_player

    torch.set_num_threads(args.threads)
    by_id = {it.item_id: it for it in load_items(args.items)}
    pool = ItemPool([by_id[i] for i in split["train"]])
    player = TimedPlayer(load_player(args.player))
    progress_path = out / PROGRESS_FILE
    progress = read_json(progress_path) if progress_path.is_file() else {"calls": []}
    try:
        env = AdversarialVectorEnv(pool, player, args.num_envs)
        started = time.perf_counter()
        trainer, _, _ = _trainer(args, env, out)
        feature_seconds = time.perf_counter() - started
        config = trainer.config
        before = trainer.update
        started = time.perf_counter()
        trainer.train(max_seconds=args.max_minutes * 60)
        seconds = time.perf_counter() - started
    finally:
        player.close()
    steps = (trainer.update - before) * config.num_envs
    progress["calls"].append({
        "from_step": before * config.num_envs, "to_step": trainer.update * config.num_envs,
        "seconds": round(seconds, 1), "steps_per_second": round(steps / max(seconds, 1e-9), 1),
        "player_seconds": round(player.seconds, 1), "player_queries": player.queries,
        "feature_cache_seconds": round(feature_seconds, 1), "threads": args.threads,
        "command": _command(),
    })
    progress["history"] = asdict(trainer.history)
    progress["best_update"] = trainer.best["update"] if trainer.best else None
    write_json_atomic(progress_path, progress)
    return progress


def evaluate_universal(args: argparse.Namespace, split: dict[str, Any], out: Path) -> dict[str, Any]:
    """The kept policy on training items and on held-out items, with the random baselines on the same ones."""
    import torch

    from agents.a2c import policy_actions
    from agents.evaluation import evaluate, random_actions, random_valid_actions, scores
    from agents.features import FeatureCache
    from envs.game import Game
    from envs.items import ItemPool, load_items
    from envs.vector import AdversarialVectorEnv
    from players.registry import load as load_player

    torch.set_num_threads(args.threads)
    by_id = {it.item_id: it for it in load_items(args.items)}
    train_pool = ItemPool([by_id[i] for i in split["train"]])
    results: dict[str, Any] = {}
    with load_player(args.player) as player:
        env = AdversarialVectorEnv(train_pool, player, args.num_envs)
        trainer, network, word_map = _trainer(args, env, out)
        last = {k: v.detach().clone() for k, v in trainer.adversary.state_dict().items()}
        trainer.use_best()
        best = {k: v.detach().clone() for k, v in trainer.adversary.state_dict().items()}
        sets = {"train_sample": split["train"][:len(split["heldout"])], "heldout": split["heldout"],
                "heldout_minigames": [i for game in split["heldout_minigames"] for i in game]}
        for name, ids in sets.items():
            pool = ItemPool([by_id[i] for i in ids], train_pool.words, train_pool.question_tokens.shape[1])
            game = Game(pool, player)
            features = FeatureCache(network, word_map, pool)
            everyone = list(range(len(pool)))
            policies = {}
            for policy, weights in (("universal", last), ("universal_best_window", best)):
                trainer.adversary.load_state_dict(weights)
                policies[policy] = evaluate(game, everyone, policy_actions(trainer.adversary, features),
                                            args.eval_samples, seed=args.seed + 1)
            random = evaluate(game, everyone, random_actions(args.seed + 2), args.eval_samples, seed=args.seed + 1)
            random_valid = evaluate(game, everyone, random_valid_actions(game, args.seed + 3), args.eval_samples,
                                    seed=args.seed + 1)
            results[name] = {"items": len(ids), **{p: scores(r).to_json() for p, r in policies.items()},
                             "random": scores(random).to_json(), "random_valid": scores(random_valid).to_json(),
                             **{f"{p}_per_item_drop": [r.dropped_share for r in found if r.scored]
                                for p, found in policies.items()}}
    return results


def per_minigame_adversaries(args: argparse.Namespace, split: dict[str, Any], out: Path) -> list[dict[str, Any]]:
    """`clevr-game attack` on each held-out mini-game (resumable: finished runs are read back)."""
    from agents.attack import AttackOptions, run_attack
    from clevr_game.run_files import RESULT_FILE as ATTACK_RESULT
    from envs.items import load_items
    from envs.minigames import MiniGames, pool_fingerprint

    ids = [it.item_id for it in load_items(args.items)]
    manifest = out / "runs" / "heldout_minigames.json"
    MiniGames(args.minigame_size, args.seed, pool_fingerprint(ids), split["heldout_minigames"]).save(manifest)
    records = []
    for k in range(len(split["heldout_minigames"])):
        run = out / "runs" / f"minigame{k}"
        if (run / ATTACK_RESULT).is_file():
            result = read_json(run / ATTACK_RESULT)
        else:
            result = run_attack(AttackOptions(player=args.player, items=args.items, minigame_size=args.minigame_size,
                                              minigame=k, minigames_file=str(manifest), seed=args.seed,
                                              steps=args.minigame_steps, out=str(run), eval_samples=args.eval_samples,
                                              progress=False, threads=args.threads))
        records.append({"minigame": k, "drop": result["drop"], "consistency": result["consistency"],
                        "invalid": result["invalid"],
                        "per_item_drop": [r["dropped_share"] for r in result["items"] if r.get("counted", True)]})
    return records


def _curve_png(progress: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    history = progress["history"]
    steps = history["steps"]
    window = max(1, len(steps) // 200)  # the batch shares are noisy: a moving mean over 0.5% of training
    fig, axes = plt.subplots(3, 1, figsize=(6, 6.5), sharex=True)
    for ax, key, label in zip(axes, ("reward", "dropped", "invalid"),
                              ("mean reward", "dropped share", "invalid share"), strict=True):
        ax.plot(steps, history[key], lw=0.3, alpha=0.3, color="tab:blue")
        ax.plot(steps, _windowed(history[key], window), lw=1.2, color="tab:blue")
        ax.set_ylabel(label)
    axes[-1].set_xlabel("env steps")
    fig.suptitle(f"universal adversary: training batches (line: mean of {window} updates)")
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=100)
    plt.close(fig)


def _windowed(values: list[float], window: int) -> list[float]:
    """The mean of each value and the `window - 1` before it."""
    sums = np.cumsum(np.concatenate([[0.0], np.asarray(values, dtype=np.float64)]))
    ends = np.arange(1, len(values) + 1)
    starts = np.maximum(0, ends - window)
    return ((sums[ends] - sums[starts]) / (ends - starts)).tolist()


def _command() -> str:
    return "python -m experiments.universal_adversary " + " ".join(sys.argv[1:])


def report(args: argparse.Namespace, progress: dict[str, Any], universal: dict[str, Any],
           minigames: list[dict[str, Any]], evaluated_by: str) -> str:
    from benchmarks.stats import bootstrap_ci

    calls = progress["calls"]
    seconds = sum(c["seconds"] for c in calls)
    steps = progress["history"]["steps"][-1] if progress["history"]["steps"] else 0
    player_share = sum(c["player_seconds"] for c in calls) / max(seconds, 1e-9)
    dropped = _windowed(progress["history"]["dropped"], 50)
    marks = [int(len(dropped) * f) - 1 for f in (0.25, 0.5, 0.75, 1.0) if int(len(dropped) * f) > 0]

    def cell(values: list[float]) -> str:
        low, high = bootstrap_ci(values)
        return f"{np.mean(values):.4f} [{low:.4f}, {high:.4f}]"

    per_mg = [d for record in minigames for d in record["per_item_drop"]]
    apart = ("Held-out items are on scenes no training item uses." if args.heldout == "scenes" else
             "Held-out items are other questions, often about the training items' scenes (`--heldout items`).")
    lines = [
        "# Universal adversary", "",
        f"One adversary trained on {args.train_size:,} items against `{args.player}` "
        f"({steps:,} env steps, {seconds / 60:.1f} minutes over {len(calls)} call(s), "
        f"{steps / max(seconds, 1e-9):,.0f} steps/s; the player took {100 * player_share:.0f}% of the time). "
        + apart, "",
        "Training curve (dropped share of the batch, mean of 50 updates): "
        + ", ".join(f"{progress['history']['steps'][m]:,} steps {dropped[m]:.4f}" for m in marks) + ".", "",
        "| items | adversary | drop (mean over items, 95% CI) | consistency | invalid |",
        "|---|---|---|---|---|",
    ]
    for name, label in (("train_sample", "training items (sample)"), ("heldout", "held-out items"),
                        ("heldout_minigames", "held-out mini-game items")):
        entry = universal[name]
        for who, name_shown in WHO.items():
            s = entry[who]
            drop = cell(entry[f"{who}_per_item_drop"]) if f"{who}_per_item_drop" in entry else f"{s['drop']:.4f}"
            lines.append(f"| {label} ({entry['items']}) | {name_shown} | {drop} | "
                         f"{s['consistency']:.4f} | {s['invalid']:.4f} |")
    if minigames:
        lines.append(f"| held-out mini-game items ({len(per_mg)}) | per-mini-game adversaries "
                     f"({len(minigames)} x size {args.minigame_size}, {args.minigame_steps:,} steps each) | "
                     f"{cell(per_mg)} | {np.mean([m['consistency'] for m in minigames]):.4f} | "
                     f"{np.mean([m['invalid'] for m in minigames]):.4f} |")
    trained_by = [c["command"] for c in calls if "command" in c]
    lines += ["", "Training calls:" if trained_by else "Training command: not recorded in progress.json.", ""]
    lines += ["```", *trained_by, "```", ""] if trained_by else []
    lines += ["Evaluated by:", "", "```", evaluated_by, "```", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.universal_adversary", description=__doc__.split("\n")[0])
    parser.add_argument("--items", required=True, help="item folder holding the pool and the held-out items")
    parser.add_argument("--player", default="state-rn")
    parser.add_argument("--train-size", type=int, default=10_000)
    parser.add_argument("--heldout-items", type=int, default=1_000)
    parser.add_argument("--heldout-minigames", type=int, default=10)
    parser.add_argument("--heldout", choices=("scenes", "items"), default="scenes",
                        help="what held-out items keep apart from training: their scenes (no held-out item on a "
                             "training scene) or only themselves (results/universal was made so)")
    parser.add_argument("--minigame-size", type=int, default=10)
    parser.add_argument("--minigame-steps", type=int, default=20_000)
    parser.add_argument("--num-envs", type=int, default=256)
    parser.add_argument("--eval-samples", type=int, default=32)
    parser.add_argument("--max-minutes", type=float, default=60.0, help="training time of this call")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (two oversubscribe a busy 2-core machine: 20x slower measured)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--evaluate-only", action="store_true", help="no more training: evaluate and report")
    parser.add_argument("--report-only", action="store_true",
                        help="rebuild report.md and the figure from OUT/result.json and OUT/progress.json")
    parser.add_argument("--out", default="results/universal")
    args = parser.parse_args(argv)
    from envs.items import load_items

    out = Path(args.out)
    (out / "runs").mkdir(parents=True, exist_ok=True)
    try:
        split = _load_split(out, load_items(args.items), args)
        if args.report_only:
            saved = read_json(out / RESULT_FILE)
            progress = read_json(out / PROGRESS_FILE)
            _curve_png(progress, out / "learning_curve.png")
            text = report(args, progress, saved["universal"], saved["per_minigame"],
                          saved.get("evaluation_command", "not recorded"))
            write_text_atomic(out / REPORT_FILE, text)
            print(text)
            return 0
        _check_player(out, args.player)
        if args.evaluate_only:
            progress = read_json(out / PROGRESS_FILE)
        else:
            progress = train_universal(args, split, out)
        universal = evaluate_universal(args, split, out)
        minigames = per_minigame_adversaries(args, split, out)
    except InputError as exc:
        print(f"universal adversary: {exc}", file=sys.stderr)
        return 2
    _curve_png(progress, out / "learning_curve.png")
    write_json_atomic(out / RESULT_FILE, {"options": vars(args), "training": progress["calls"],
                                          "best_update": progress["best_update"], "universal": universal,
                                          "per_minigame": minigames, "evaluation_command": _command()})
    text = report(args, progress, universal, minigames, _command())
    write_text_atomic(out / REPORT_FILE, text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
