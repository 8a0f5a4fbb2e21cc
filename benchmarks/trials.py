"""Trials of the robustness benchmark: one (player, mini-game size, mini-game, seed) attack each.

A trial is a plain dict (so it crosses process and Ray boundaries unchanged);
`run_trial` trains and evaluates one adversary through agents.attack and returns
the trial's record for `trials.jsonl`: its scores, the random, random valid and
search baselines, its per-item results and the sizes of its successful
manipulations (so the report needs no run folder for them), or the one-line
error that stopped it.

The mini-games of every size come from one permutation of the pool and never
share an item (`prepare_minigames`), and every player plays the same ones.
"""

from __future__ import annotations

import hashlib
import shutil
import time
import traceback
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any

from clevr_game.run_files import MANIPULATIONS_FILE, RUN_OPTIONS_FILE, SEARCH_MANIPULATIONS_FILE
from clevr_game.scene import read_json
from players.guard import DEFAULT_MAX_ERROR_RATE, DEFAULT_MAX_FAILURES
from players.registry import INPUT_OPTIONS


@dataclass(frozen=True)
class SizeBudget:
    """Mini-games, seeds, training steps (and optionally evaluation samples and search budget) of one size.

    It overrides the plan's defaults for that size; None keeps the plan's figure.
    """

    size: int
    minigames: int
    seeds: int
    steps: int
    eval_samples: int | None = None
    search_budget: int | None = None


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
    player_startup_timeout: float | None = None
    max_player_failures: int | None = DEFAULT_MAX_FAILURES
    max_error_rate: float = DEFAULT_MAX_ERROR_RATE
    check_visibility: bool | None = None
    adversaries: tuple[str, ...] = ("state",)
    per_size: tuple[SizeBudget, ...] = ()
    """Budgets of some sizes; the others use `minigames`, `seeds` and `steps`."""
    needs: str | None = None
    """What the external players (subprocess, http) are sent, as --needs gives it; None: their default.
    This and the three below apply to the external players only (players.registry.input_for)."""
    image_size: str | None = None
    render_preset: str | None = None
    send_image: str | None = None
    blind_baseline: bool = True
    """Each first-adversary trial also asks its questions about other items' scenes (the card has its own pass)."""
    first_seed: int = 0
    """The seeds of a mini-game are first_seed, first_seed + 1, ...: `evaluate --seed S` plays other seeds."""

    def manifest(self, size: int) -> Path:
        return Path(self.out) / "minigames" / f"size_{size}.json"

    def budget(self, size: int) -> SizeBudget:
        return next((b for b in self.per_size if b.size == size),
                    SizeBudget(size, self.minigames, self.seeds, self.steps))

    def trials(self) -> list[dict[str, Any]]:
        from players.registry import input_for, weights_digest

        digests = {player: weights_digest(player) for player in self.players}
        given = {name: getattr(self, name) for name in INPUT_OPTIONS if getattr(self, name) is not None}
        trials = []
        for player in self.players:
            player_input = input_for(player, given)
            for adversary in self.adversaries:
                # The state adversary's ids are as they were before pixel adversaries existed.
                seen_as = "" if adversary == "state" else f"__{adversary}"
                for size in self.sizes:
                    budget = self.budget(size)
                    for minigame in range(budget.minigames):
                        for seed in range(self.first_seed, self.first_seed + budget.seeds):
                            trial_id = f"{player_slug(player)}{seen_as}__size{size}__mg{minigame}__seed{seed}"
                            trials.append({
                                "trial": trial_id, "player": player, "player_weights": digests[player],
                                "adversary": adversary, "size": size,
                                "minigame": minigame, "seed": seed, "steps": budget.steps, "items": self.items,
                                "minigames_file": str(self.manifest(size)),
                                "run": str(Path(self.out) / "runs" / trial_id),
                                "num_envs": self.num_envs,
                                "eval_samples": budget.eval_samples or self.eval_samples,
                                "adversary_weights": self.adversary_weights,
                                "player_timeout": self.player_timeout,
                                "player_startup_timeout": self.player_startup_timeout,
                                "max_player_failures": self.max_player_failures,
                                "max_error_rate": self.max_error_rate,
                                "check_visibility": self.check_visibility,
                                **{name: player_input.get(name) for name in INPUT_OPTIONS},
                                # The search baseline is deterministic per mini-game: run it once, with the
                                # first seed of the first adversary.
                                "search_budget": ((self.search_budget if budget.search_budget is None
                                                   else budget.search_budget)
                                                  if seed == self.first_seed and adversary == self.adversaries[0]
                                                  else 0),
                                # Like the random adversary's row, the random valid one comes from the
                                # first adversary's trials; for pixel players each of its moves is rendered.
                                "random_valid": adversary == self.adversaries[0],
                                # So is the blind baseline: each question asked about another item's scene.
                                "blind": self.blind_baseline and adversary == self.adversaries[0],
                            })
        return trials


def prepare_minigames(plan: Plan, item_ids: list[str]) -> None:
    """Write the plan's mini-game manifests: disjoint across every size, shared by every player and seed.

    One permutation of the pool (seeded by `split_seed`) is dealt out, smallest
    size first, to the mini-games each size needs. Manifests already in the
    folder are kept (a resumed run plays the same mini-games) and their items
    are never dealt again; one that holds too few mini-games is extended.
    """
    import numpy as np

    from clevr_game.errors import InputError
    from envs.minigames import MiniGames, pool_fingerprint

    folder = plan.manifest(0).parent
    existing: dict[int, MiniGames] = {}
    for path in sorted(folder.glob("size_*.json")) if folder.is_dir() else []:
        games = MiniGames.load(path)
        if games.fingerprint != pool_fingerprint(item_ids):
            raise InputError(f"{path}: the item pool is not the one these mini-games were split from "
                             "(fingerprint differs); use another --out")
        existing[games.size] = games
    taken = {item for games in existing.values() for game in games.games for item in game}
    order = [item_ids[i] for i in np.random.default_rng(plan.split_seed).permutation(len(item_ids))]
    free = iter([item for item in order if item not in taken])
    for size in sorted(set(plan.sizes)):
        games = existing.get(size) or MiniGames(size, plan.split_seed, pool_fingerprint(item_ids), [])
        wanted = plan.budget(size).minigames
        if len(games) >= wanted:
            if size not in existing:
                games.save(plan.manifest(size))
            continue
        for _ in range(wanted - len(games)):
            game = list(islice(free, size))
            if len(game) < size:
                needed = sum(each * plan.budget(each).minigames for each in set(plan.sizes))
                raise InputError(f"the pool of {len(item_ids)} items is too small for mini-games that share no "
                                 f"item: sizes {', '.join(map(str, sorted(set(plan.sizes))))} need {needed} items")
            games.games.append(game)
        games.save(plan.manifest(size))


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


RECORD_KEYS = ("trial", "player", "player_weights", "adversary", "size", "minigame", "seed", "steps", "run")
"""What a record repeats of its trial: resume checks them, not only the id."""


def same_trial(record: dict[str, Any], trial: dict[str, Any]) -> bool:
    # Records from before pixel adversaries existed were all of the state adversary. A record holds the
    # input options its external player was given: the same player sent other input is another opponent.
    return (all(record.get(k, "state" if k == "adversary" else None) == trial[k] for k in RECORD_KEYS if k != "run")
            and all(record.get(k) == trial.get(k) for k in INPUT_OPTIONS))


def trial_input(trial: dict[str, Any]) -> dict[str, str]:
    """The input options of a trial's player that were given, as `load_guarded` and `AttackOptions` take them."""
    return {k: trial[k] for k in INPUT_OPTIONS if trial.get(k) is not None}


_UNKNOWN = object()


def clear_stale_run(trial: dict[str, Any]) -> bool:
    """Remove the trial's run folder if its adversary was trained against other weights of the player.

    Resuming such a folder would score the new player against an adversary that
    learned the old one. The folder's options.json names the weights it began with;
    a folder written before that field existed counts as begun with the weights of
    the trial's earlier record (`folder_weights`, set by the runner), and is kept
    when there is none.
    """
    run = Path(trial["run"])
    options_file = run / RUN_OPTIONS_FILE
    if not options_file.is_file():
        return False
    recorded = read_json(options_file)
    begun_with = recorded.get("player_weights", trial.get("folder_weights", _UNKNOWN)) \
        if isinstance(recorded, dict) else _UNKNOWN
    if begun_with is _UNKNOWN or begun_with == trial["player_weights"]:
        return False
    shutil.rmtree(run)
    return True


def run_trial(trial: dict[str, Any]) -> dict[str, Any]:
    """Run one trial; never raises: a failure is a record with `error`."""
    import torch

    from agents.attack import PlayerFailedRun

    torch.set_num_threads(1)  # trials run side by side, one core each
    started = time.time()
    record = {k: trial[k] for k in RECORD_KEYS} | trial_input(trial)
    try:
        clear_stale_run(trial)
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
        player_timeout=trial.get("player_timeout"), player_startup_timeout=trial.get("player_startup_timeout"),
        max_player_failures=trial.get("max_player_failures", DEFAULT_MAX_FAILURES),
        max_error_rate=trial.get("max_error_rate", DEFAULT_MAX_ERROR_RATE),
        check_visibility=trial.get("check_visibility"), adversary=trial.get("adversary", "state"),
        random_valid=trial.get("random_valid", True), **trial_input(trial),
    ))
    record = {
        "player_queries": result["player_queries"], "player_errors": result["player_errors"],
        "player_error_rate": result["player_error_rate"], "first_player_error": result["first_player_error"],
        "items_left_out": result["items_left_out"], "visibility_checked": result["visibility_checked"],
        # The evaluation's own account: failed answers on moved scenes, and the items they left unscored.
        "eval_queries": result["eval_queries"], "eval_player_errors": result["eval_player_errors"],
        "unscored_items": result["unscored_items"],
        "consistency": result["consistency"], "drop": result["drop"], "invalid": result["invalid"],
        "clean_accuracy": result["clean_accuracy"], "random_consistency": result["random_consistency"],
        "random_drop": result["random_drop"],
        "curve": {k: result["history"][k][:: max(1, len(result["history"]["steps"]) // 50)]
                  for k in ("steps", "reward", "invalid", "changed", "dropped") if k in result["history"]},
    }
    for set_metric in ("jaccard_loss", "random_jaccard_loss"):  # CLEVR-POC items: set answers
        if set_metric in result:
            record[set_metric] = result[set_metric]
    if result.get("random_valid_consistency") is not None:
        record["random_valid_consistency"] = result["random_valid_consistency"]
        record["random_valid_drop"] = result["random_valid_drop"]
        record["random_valid_invalid"] = result["random_valid_invalid"]
    record["item_results"] = item_results(result, trial["items"])
    if result.get("random_valid_items"):
        record["random_valid_item_results"] = [[r["item_id"], round(float(r["dropped_share"]), 6)]
                                               for r in result["random_valid_items"]]
    record["manipulation_sizes"] = manipulation_sizes(Path(trial["run"]) / MANIPULATIONS_FILE)
    if trial["search_budget"]:
        record["search"] = _search(trial)
    if trial.get("blind"):
        record.update(_clean_and_blind(trial))
    return record


def item_results(result: dict[str, Any], items_dir: str) -> list[list]:
    """The trained adversary's result per item: [item id, family, kind, changed share, dropped share].

    The family is the question's template file when the item folder names it, else
    `family N` by its index; unscored items (a move got no answer) are left out, as
    they are of the scores.
    """
    from benchmarks.items_folder import read_items_folder

    folder = read_items_folder(items_dir)
    rows = []
    for item in result.get("items", []):
        if item.get("player_errors", 0):
            continue
        item_id = item["item_id"]
        family = folder.families.get(item_id) if folder else None
        if family is None and item.get("family") is not None:
            family = f"family {item['family']}"
        kind = item.get("question_kind") or (folder.kinds.get(item_id) if folder else None)
        rows.append([item_id, family or "unknown", kind or "unknown",
                     round(float(item.get("changed_share", 0.0)), 6), round(float(item.get("dropped_share", 0.0)), 6)])
    return rows


def manipulation_sizes(path: Path) -> dict[str, dict[str, dict[str, int]]]:
    """How many objects each successful manipulation of the evaluation moved, and how far in all.

    Histograms (value -> count) over the records of manipulations.jsonl (every
    valid move of the evaluation: `valid`), those that changed an answer
    (`changed`) and those that broke a right one (`dropped`); the total
    displacement is the sum of the moved objects' move lengths, to 4 decimals.
    `distinct` holds the same histograms over distinct moves: the final policy is
    sampled many times per item and often plays one move again, which a test must
    count once.
    """
    from clevr_game.jsonl import json_lines

    records = [record for _, record in json_lines(path)] if path.is_file() else []
    return {**size_histograms(records), "distinct": size_histograms(list({move_key(r): r for r in records}.values()))}


def move_key(record: dict[str, Any]) -> tuple:
    """What makes two evaluation moves the same move: the item and which object went where (in any order)."""
    moved = sorted((int(o), round(float(dx), 6), round(float(dy), 6)) for o, dx, dy in record["moves"] if dx or dy)
    return record["item_id"], tuple(moved)


def size_histograms(records: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, int]]]:
    """`valid` / `changed` / `dropped` -> moved objects and total displacement -> count, over manipulation records."""
    from agents.evaluation import moved_objects, total_displacement

    sizes: dict[str, dict[str, Counter]] = {kind: {"moved_objects": Counter(), "displacement": Counter()}
                                            for kind in ("valid", "changed", "dropped")}
    for record in records:
        for kind in ("valid", "changed", "dropped"):
            if kind == "valid" or record.get(kind):
                sizes[kind]["moved_objects"][str(moved_objects(record["moves"]))] += 1
                sizes[kind]["displacement"][f"{total_displacement(record['moves']):.4f}"] += 1
    return {kind: {name: dict(sorted(counts.items())) for name, counts in by_name.items()}
            for kind, by_name in sizes.items()}


@contextmanager
def _minigame_player(trial: dict[str, Any]) -> Iterator[tuple[Any, Any]]:
    """The trial's mini-game as an item pool, and its player loaded with the trial's limits (closed after)."""
    from envs.items import ItemPool, load_items
    from envs.minigames import MiniGames
    from players.registry import load_guarded

    items = load_items(trial["items"])
    chosen = MiniGames.load(trial["minigames_file"]).indices([it.item_id for it in items], trial["minigame"])
    with load_guarded(trial["player"], timeout_s=trial.get("player_timeout"),
                      startup_timeout_s=trial.get("player_startup_timeout"),
                      max_failures=trial.get("max_player_failures", DEFAULT_MAX_FAILURES),
                      player_input=trial_input(trial)) as player:
        yield ItemPool([items[i] for i in chosen]), player


def _search(trial: dict[str, Any]) -> dict[str, float]:
    from agents.attack import PlayerFailedRun
    from agents.search import SearchAdversary
    from envs.game import Game
    from players.guard import PlayerGaveUp

    with _minigame_player(trial) as (pool, player):
        game = Game(pool, player, check_visibility=trial.get("check_visibility"))
        search = SearchAdversary(game, budget=trial["search_budget"], strategy="greedy", seed=trial["seed"])
        try:
            results = [search.attack(i) for i in range(len(pool))]
        except PlayerGaveUp as exc:
            raise PlayerFailedRun(f"search baseline: {exc}", player.count) from None
        count = player.count
    # The evaluation's rule: an item whose search met a failed answer and found no flip is unscored.
    scored = [r for r in results if r.scored]
    errors, asked = sum(r.player_errors for r in results), sum(r.queries for r in results)
    limit = trial.get("max_error_rate", DEFAULT_MAX_ERROR_RATE)
    if (asked and errors / asked > limit) or not scored:
        raise PlayerFailedRun(f"search baseline: {errors} of {asked} queries on moved scenes failed, "
                              f"{len(results) - len(scored)} of {len(results)} items unscored "
                              f"(--max-error-rate {limit:g})", count)
    _write_search_flips([r.flipped for r in results if r.flipped is not None],
                        Path(trial["run"]) / SEARCH_MANIPULATIONS_FILE)
    return {
        "consistency": sum(r.flipped is not None for r in scored) / len(scored),
        "drop": sum(bool(r.flipped and r.flipped.dropped) for r in scored) / len(scored),
        "queries": sum(r.queries for r in results) / len(results),
        # Per scored item, whether the search broke its right answer: the card's per-family figures.
        "item_results": [[r.item_id, int(bool(r.flipped and r.flipped.dropped))] for r in scored],
        **({"player_errors": errors, "unscored_items": len(results) - len(scored)} if errors else {}),
    }


def _clean_and_blind(trial: dict[str, Any]) -> dict[str, Any]:
    """The player's accuracy on the mini-game's items, with their own scenes and with other items' scenes.

    The blind figure (benchmarks.card.clean_blind) says how much of the player's accuracy
    comes from the scene at all: a drop of a player that barely looks says little. A
    mini-game whose items all share one scene has no other scene to ask about: its record
    says so instead of failing the trial.
    """
    from agents.attack import PlayerFailedRun
    from benchmarks.card.clean_blind import clean_and_blind
    from envs.game import Game
    from players.guard import PlayerGaveUp

    with _minigame_player(trial) as (pool, player):
        if len({id(item.scene) for item in pool.items}) < 2:
            return {"blind_accuracy": None, "blind_skipped": "every item of the mini-game is about one scene"}
        visibility = trial.get("check_visibility")
        try:
            clean, blind = clean_and_blind(Game(pool, player, check_visibility=visibility),
                                           Game(pool, player.player, check_visibility=visibility), pool.items,
                                           trial["seed"])
        except PlayerGaveUp as exc:
            raise PlayerFailedRun(f"blind baseline: {exc}", player.count) from None
    return {"own_scene_accuracy": clean.to_json(), "blind_accuracy": blind.to_json()}


def _write_search_flips(flips: list[Any], path: Path) -> None:
    """The search's flips as manipulation records, beside the trained adversary's (the card reads both)."""
    import json

    from clevr_game.atomic import open_atomic
    from clevr_game.export import manipulation_record

    path.parent.mkdir(parents=True, exist_ok=True)
    with open_atomic(path) as handle:
        for o in flips:
            handle.write(json.dumps(manipulation_record(o.item_id, o.moves, o.old_answer, o.new_answer,
                                                        o.true_answer, o.changed, o.dropped, o.new_scene)) + "\n")
