"""Trials of the robustness benchmark: one (player, mini-game size, mini-game, seed) attack each.

A trial is a plain dict (so it crosses process and Ray boundaries unchanged);
`run_trial` trains and evaluates one adversary through agents.attack and returns
the trial's record for `trials.jsonl`: its scores, the random and search
baselines, or the one-line error that stopped it.
"""

from __future__ import annotations

import hashlib
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from players.guard import DEFAULT_MAX_ERROR_RATE, DEFAULT_MAX_FAILURES


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
    player_timeout: float | None = None
    max_player_failures: int | None = DEFAULT_MAX_FAILURES
    max_error_rate: float = DEFAULT_MAX_ERROR_RATE
    check_visibility: bool | None = None
    adversaries: tuple[str, ...] = ("state",)

    def manifest(self, size: int) -> Path:
        return Path(self.out) / "minigames" / f"size_{size}.json"

    def trials(self) -> list[dict[str, Any]]:
        trials = []
        for player in self.players:
            for adversary in self.adversaries:
                # The state adversary's ids are as they were before pixel adversaries existed.
                seen_as = "" if adversary == "state" else f"__{adversary}"
                for size in self.sizes:
                    for minigame in range(self.minigames):
                        for seed in range(self.seeds):
                            trial_id = f"{player_slug(player)}{seen_as}__size{size}__mg{minigame}__seed{seed}"
                            trials.append({
                                "trial": trial_id, "player": player, "adversary": adversary, "size": size,
                                "minigame": minigame, "seed": seed, "steps": self.steps, "items": self.items,
                                "minigames_file": str(self.manifest(size)),
                                "run": str(Path(self.out) / "runs" / trial_id),
                                "num_envs": self.num_envs, "eval_samples": self.eval_samples,
                                "adversary_weights": self.adversary_weights,
                                "player_timeout": self.player_timeout,
                                "max_player_failures": self.max_player_failures,
                                "max_error_rate": self.max_error_rate,
                                "check_visibility": self.check_visibility,
                                # The search baseline is deterministic per mini-game: run it once, with the
                                # first seed of the first adversary.
                                "search_budget": (self.search_budget
                                                  if seed == 0 and adversary == self.adversaries[0] else 0),
                            })
        return trials


def player_slug(spec: str) -> str:
    """A readable, collision-free folder name for a player spec: a slug plus a hash of the exact spec.

    The slug alone maps `q.a.py` and `q_a.py` (or two long paths that differ late)
    to one name; the hash keeps their trials apart.
    """
    readable = "".join(c if c.isalnum() or c in "-_" else "_" for c in spec)[:40]
    return f"{readable}-{hashlib.sha256(spec.encode('utf-8')).hexdigest()[:8]}"


def one_line(error: BaseException) -> str:
    text = " ".join(f"{type(error).__name__}: {error}".split())
    return text[:600]


RECORD_KEYS = ("trial", "player", "adversary", "size", "minigame", "seed", "steps", "run")
"""What a record repeats of its trial: resume checks them, not only the id."""


def same_trial(record: dict[str, Any], trial: dict[str, Any]) -> bool:
    # Records from before pixel adversaries existed were all of the state adversary.
    return all(record.get(k, "state" if k == "adversary" else None) == trial[k] for k in RECORD_KEYS if k != "run")


def run_trial(trial: dict[str, Any]) -> dict[str, Any]:
    """Run one trial; never raises: a failure is a record with `error`."""
    import torch

    from agents.attack import PlayerFailedRun

    torch.set_num_threads(1)  # trials run side by side, one core each
    started = time.time()
    record = {k: trial[k] for k in RECORD_KEYS}
    try:
        record.update(_attack(trial))
    except PlayerFailedRun as exc:  # the player failed too often: the trial is failed, with its count
        record["error"] = one_line(exc)
        record.update(exc.count.to_json())
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
        eval_samples=trial["eval_samples"], progress=False,
        # --adversary-weights is the state adversary's relation network; the pixel one uses its shipped file.
        adversary_weights=trial["adversary_weights"] if trial.get("adversary", "state") == "state" else None,
        player_timeout=trial.get("player_timeout"),
        max_player_failures=trial.get("max_player_failures", DEFAULT_MAX_FAILURES),
        max_error_rate=trial.get("max_error_rate", DEFAULT_MAX_ERROR_RATE),
        check_visibility=trial.get("check_visibility"), adversary=trial.get("adversary", "state"),
    ))
    record = {
        "player_queries": result["player_queries"], "player_errors": result["player_errors"],
        "player_error_rate": result["player_error_rate"], "first_player_error": result["first_player_error"],
        "items_left_out": result["items_left_out"], "visibility_checked": result["visibility_checked"],
        "consistency": result["consistency"], "drop": result["drop"], "invalid": result["invalid"],
        "clean_accuracy": result["clean_accuracy"], "random_consistency": result["random_consistency"],
        "random_drop": result["random_drop"],
        "curve": {k: result["history"][k][:: max(1, len(result["history"]["steps"]) // 50)]
                  for k in ("steps", "reward", "invalid", "changed", "dropped") if k in result["history"]},
    }
    if trial["search_budget"]:
        record["search"] = _search(trial)
    return record


def _search(trial: dict[str, Any]) -> dict[str, float]:
    from agents.attack import PlayerFailedRun
    from agents.search import SearchAdversary
    from envs.game import Game
    from envs.items import ItemPool, load_items
    from envs.minigames import MiniGames
    from players.guard import PlayerGaveUp
    from players.registry import load_guarded

    items = load_items(trial["items"])
    games = MiniGames.load(trial["minigames_file"])
    chosen = games.indices([it.item_id for it in items], trial["minigame"])
    pool = ItemPool([items[i] for i in chosen])
    with load_guarded(trial["player"], timeout_s=trial.get("player_timeout"),
                      max_failures=trial.get("max_player_failures", DEFAULT_MAX_FAILURES)) as player:
        game = Game(pool, player, check_visibility=trial.get("check_visibility"))
        search = SearchAdversary(game, budget=trial["search_budget"], strategy="greedy", seed=trial["seed"])
        try:
            results = [search.attack(i) for i in range(len(pool))]
        except PlayerGaveUp as exc:
            raise PlayerFailedRun(f"search baseline: {exc}", player.count) from None
    flipped = [r.flipped for r in results]
    return {
        "consistency": sum(f is not None for f in flipped) / len(results),
        "drop": sum(bool(f and f.dropped) for f in flipped) / len(results),
        "queries": sum(r.queries for r in results) / len(results),
    }
