"""Trials of the robustness benchmark: one (player, mini-game size, mini-game, seed) attack each.

A trial is a plain dict (so it crosses process and Ray boundaries unchanged);
`run_trial` trains and evaluates one adversary through agents.attack and returns
the trial's record for `trials.jsonl`: its scores, the random and search
baselines, or the one-line error that stopped it.
"""

from __future__ import annotations

import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Plan:
    players: list[str]
    items: str
    sizes: list[int]
    minigames: int
    seeds: int
    steps: int
    out: str
    num_envs: int = 128
    eval_samples: int = 32
    search_budget: int = 200
    split_seed: int = 0
    adversary_weights: str | None = None

    def manifest(self, size: int) -> Path:
        return Path(self.out) / "minigames" / f"size_{size}.json"

    def trials(self) -> list[dict[str, Any]]:
        trials = []
        for player in self.players:
            for size in self.sizes:
                for minigame in range(self.minigames):
                    for seed in range(self.seeds):
                        trial_id = f"{_slug(player)}__size{size}__mg{minigame}__seed{seed}"
                        trials.append({
                            "trial": trial_id, "player": player, "size": size, "minigame": minigame,
                            "seed": seed, "steps": self.steps, "items": self.items,
                            "minigames_file": str(self.manifest(size)),
                            "run": str(Path(self.out) / "runs" / trial_id),
                            "num_envs": self.num_envs, "eval_samples": self.eval_samples,
                            "adversary_weights": self.adversary_weights,
                            # The search baseline is deterministic per mini-game: run it with the first seed.
                            "search_budget": self.search_budget if seed == 0 else 0,
                        })
        return trials


def _slug(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in name)[:60]


def one_line(error: BaseException) -> str:
    text = " ".join(f"{type(error).__name__}: {error}".split())
    return text[:300]


def run_trial(trial: dict[str, Any]) -> dict[str, Any]:
    """Run one trial; never raises: a failure is a record with `error`."""
    import torch

    torch.set_num_threads(1)  # trials run side by side, one core each
    started = time.time()
    record = {k: trial[k] for k in ("trial", "player", "size", "minigame", "seed", "run")}
    try:
        record.update(_attack(trial))
    except Exception as exc:  # any failure of a trial is recorded; the benchmark goes on
        record["error"] = one_line(exc)
        record["traceback_tail"] = traceback.format_exc().strip().splitlines()[-1][:300]
    record["seconds"] = round(time.time() - started, 2)
    return record


def _attack(trial: dict[str, Any]) -> dict[str, Any]:
    from agents.attack import AttackOptions, run_attack

    result = run_attack(AttackOptions(
        player=trial["player"], items=trial["items"], minigame_size=trial["size"],
        minigame=trial["minigame"], seed=trial["seed"], steps=trial["steps"], out=trial["run"],
        minigames_file=trial["minigames_file"], num_envs=trial["num_envs"],
        eval_samples=trial["eval_samples"], adversary_weights=trial["adversary_weights"], progress=False,
    ))
    record = {
        "consistency": result["consistency"], "drop": result["drop"], "invalid": result["invalid"],
        "clean_accuracy": result["clean_accuracy"], "random_consistency": result["random_consistency"],
        "random_drop": result["random_drop"],
        "curve": {k: result["history"][k][:: max(1, len(result["history"]["steps"]) // 50)]
                  for k in ("steps", "reward", "invalid", "changed")},
    }
    if trial["search_budget"]:
        record["search"] = _search(trial)
    return record


def _search(trial: dict[str, Any]) -> dict[str, float]:
    from agents.search import SearchAdversary
    from envs.game import Game
    from envs.items import ItemPool, load_items
    from envs.minigames import MiniGames
    from players.registry import load as load_player

    items = load_items(trial["items"])
    games = MiniGames.load(trial["minigames_file"])
    chosen = games.indices([it.item_id for it in items], trial["minigame"])
    pool = ItemPool([items[i] for i in chosen])
    with load_player(trial["player"]) as player:
        game = Game(pool, player)
        search = SearchAdversary(game, budget=trial["search_budget"], strategy="greedy", seed=trial["seed"])
        results = [search.attack(i) for i in range(len(pool))]
    flipped = [r.flipped for r in results]
    return {
        "consistency": sum(f is not None for f in flipped) / len(results),
        "drop": sum(bool(f and f.dropped) for f in flipped) / len(results),
        "queries": sum(r.queries for r in results) / len(results),
    }
