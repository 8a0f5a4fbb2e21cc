"""`clevr-game evaluate`: one player against the frozen protocol, to a robustness card.

The protocol's items and mini-games are shipped (benchmarks.card.protocol); the budget
says how many mini-games of each size, how many seeds and steps. The trials are a
benchmark plan run by benchmarks.runner into DIR (its `trials.jsonl` makes a run
resumable: the same command again plays only what is missing), with every referee for
every player, CLEVR's visibility rule included. Then the clean and blind pass, the
inspectable manipulations, the card's figures (benchmarks.card.summary) and its pages.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clevr_game.atomic import write_json_atomic
from clevr_game.errors import InputError, RunFailed
from clevr_game.scene import read_json
from players.guard import DEFAULT_MAX_ERROR_RATE, DEFAULT_MAX_FAILURES

CARD_FILE = "card.json"
OPTIONS_FILE = "evaluate.json"
CLEAN_BLIND_FILE = "clean_blind.json"
EVALUATE_LOCK = ".clevr-game-evaluate.lock"
SEED_STRIDE = 1_000
"""`--seed S` plays the trial seeds S * SEED_STRIDE, S * SEED_STRIDE + 1, ...: no two card seeds share one."""


@dataclass
class EvaluateOptions:
    player: str
    out: str
    budget: str = "quick"
    seed: int = 0
    protocol: str = "clevr-robust-v1"
    player_input: dict[str, str] = field(default_factory=dict)
    player_timeout: float | None = None
    player_startup_timeout: float | None = None
    max_player_failures: int | None = DEFAULT_MAX_FAILURES
    max_error_rate: float = DEFAULT_MAX_ERROR_RATE
    workers: int = 1
    gallery_preset: str = "balanced"
    progress: bool = True

    def recorded(self) -> dict[str, Any]:
        """What a resumed evaluation must share with the one that began the folder."""
        return {"protocol": self.protocol, "budget": self.budget, "seed": self.seed, "player": self.player,
                "player_input": dict(sorted(self.player_input.items()))}


def run_evaluation(options: EvaluateOptions, log: Any = print) -> dict[str, Any]:
    """Run (or resume) the evaluation and write the card; returns card.json's content."""
    from clevr_game.folder_lock import sole_writer

    out = Path(options.out)
    if out.exists() and not out.is_dir():
        raise InputError(f"--out {out}: a file, not a folder")
    with sole_writer(out, "evaluation", lock_name=EVALUATE_LOCK):
        return _run(options, out, log)


def _run(options: EvaluateOptions, out: Path, log: Any) -> dict[str, Any]:
    from benchmarks.card.protocol import load_protocol
    from players.registry import check_spec, weights_digest

    check_spec(options.player)
    protocol = load_protocol(options.protocol)
    if options.budget not in protocol.budgets:
        raise InputError(f"--budget {options.budget!r}: {protocol.name} has {', '.join(sorted(protocol.budgets))}")
    budget = protocol.budgets[options.budget]
    _check_folder(out, options)
    weights = weights_digest(options.player)
    player_info, clean, blind, clean_seconds = _clean_and_blind(options, protocol, weights, out, log)
    image_player = "image" in player_info["needs"]
    plan = _plan(options, protocol, budget, out, image_player)
    records = _trials(options, plan, log)
    started = time.monotonic()
    lines = _manipulations(records, protocol, out, player_info)
    family_of = _families(protocol.items_folder)
    from benchmarks.card.summary import summarise

    card = {
        "protocol": protocol.name, "budget": budget.name, "seed": options.seed, "player": player_info,
        "items": clean["answered"] + clean["errors"], "clean_accuracy": clean, "blind_accuracy": blind,
        "from_input": round(clean["value"] - blind["value"], 6),
        **summarise(records, [{"size": s.size, "minigames": s.minigames, "seeds": s.seeds,
                               "steps": budget.steps(s.size)} for s in budget.sizes], family_of),
        "manipulations": len(lines), "gallery": [],
    }
    # The evaluation's own time: its trials, its passes and the manipulations, not the gallery's renders.
    card["seconds"] = round(sum(r.get("seconds", 0.0) for r in records) + clean_seconds
                            + time.monotonic() - started, 1)
    write_json_atomic(out / CARD_FILE, card, indent=2)
    from benchmarks.card.pages import write_pages

    # The pages show the gallery they draw; card.json then lists it too.
    card["gallery"] = write_pages(out, gallery_preset=options.gallery_preset)
    write_json_atomic(out / CARD_FILE, card, indent=2)
    return card


def _check_folder(out: Path, options: EvaluateOptions) -> None:
    """Record the options in a new folder; refuse to resume one begun with others."""
    path = out / OPTIONS_FILE
    wanted = options.recorded()
    if path.is_file():
        begun = read_json(path)
        differences = [f"{k} was {begun.get(k)!r}, now {v!r}" for k, v in wanted.items()
                       if not isinstance(begun, dict) or begun.get(k) != v]
        if differences:
            raise InputError(f"--out {out}: an evaluation begun with other options ({'; '.join(differences)}); "
                             "run the same command again to resume it, or choose another --out")
        return
    out.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, wanted, indent=2)


def _clean_and_blind(options: EvaluateOptions, protocol: Any, weights: str | None, out: Path,
                     log: Any) -> tuple[dict, dict, dict, float]:
    """The player's description and its clean and blind accuracy (kept in DIR for a resumed run)."""
    path = out / CLEAN_BLIND_FILE
    if path.is_file():
        kept = read_json(path)
        if isinstance(kept, dict) and kept.get("player", {}).get("weights") == weights:
            return kept["player"], kept["clean_accuracy"], kept["blind_accuracy"], kept["seconds"]
    from benchmarks.card.clean_blind import clean_and_blind
    from envs.game import Game
    from envs.items import ItemPool, load_items
    from players.guard import PlayerGaveUp
    from players.registry import load_guarded

    started = time.monotonic()
    by_id = {item.item_id: item for item in load_items(protocol.items_folder)}
    items = [by_id[item_id] for item_id in protocol.item_ids(options.budget)]
    with load_guarded(options.player, timeout_s=options.player_timeout,
                      startup_timeout_s=options.player_startup_timeout,
                      max_failures=options.max_player_failures, player_input=options.player_input) as player:
        spec = player.image_spec if "image" in player.needs else None
        info = {"spec": options.player, "weights": weights, "needs": sorted(player.needs),
                "image": spec.as_dict() if spec is not None else None}
        if options.player_input:
            info["input"] = dict(sorted(options.player_input.items()))
        log(f"evaluate: clean and blind accuracy on {len(items)} questions")
        try:
            pool = ItemPool(items)
            clean, blind = clean_and_blind(Game(pool, player, check_visibility=True),
                                           Game(pool, player.player, check_visibility=True), items, options.seed)
        except PlayerGaveUp as exc:
            raise RunFailed(f"the clean and blind pass: {exc}") from None
    if clean.errors / len(items) > options.max_error_rate:
        raise RunFailed(f"the clean pass: {clean.errors} of {len(items)} answers on the protocol's own scenes "
                        f"failed (above --max-error-rate {options.max_error_rate:g}); first: {player.count.first_error}")
    kept = {"player": info, "clean_accuracy": clean.to_json(), "blind_accuracy": blind.to_json(),
            "seconds": round(time.monotonic() - started, 1)}
    write_json_atomic(path, kept, indent=2)
    return info, kept["clean_accuracy"], kept["blind_accuracy"], kept["seconds"]


def _plan(options: EvaluateOptions, protocol: Any, budget: Any, out: Path, image_player: bool) -> Any:
    """The budget as a benchmark plan on the protocol's items, its mini-game manifests copied into DIR."""
    from benchmarks.trials import Plan, SizeBudget

    sizes = [s.size for s in budget.sizes]
    plan = Plan(
        players=[options.player], items=str(protocol.items_folder), sizes=sizes,
        minigames=max(s.minigames for s in budget.sizes), seeds=max(s.seeds for s in budget.sizes),
        steps=budget.steps(sizes[0]), out=str(out), eval_samples=budget.eval_samples,
        search_budget=budget.search_budget, check_visibility=True, blind_baseline=False,
        adversaries=("state", "pixel") if image_player and budget.pixel_adversary else ("state",),
        per_size=tuple(SizeBudget(s.size, s.minigames, s.seeds, budget.steps(s.size), budget.eval_samples,
                                  budget.search_budget) for s in budget.sizes),
        player_timeout=options.player_timeout, player_startup_timeout=options.player_startup_timeout,
        max_player_failures=options.max_player_failures, max_error_rate=options.max_error_rate,
        first_seed=options.seed * SEED_STRIDE,
        **{name: options.player_input.get(name) for name in ("needs", "image_size", "render_preset", "send_image")},
    )
    for size in sizes:
        if not plan.manifest(size).is_file():
            plan.manifest(size).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(protocol.manifest(size), plan.manifest(size))
    return plan


def _trials(options: EvaluateOptions, plan: Any, log: Any) -> list[dict[str, Any]]:
    """Run the plan's missing trials; RunFailed (one line) when any trial failed."""
    from benchmarks.runner import run_plan

    def progress(p: Any) -> None:
        state = f"failed: {p.record['error']}" if "error" in p.record else f"drop {p.record['drop']:.4f}"
        log(f"evaluate: trial {p.done}/{p.total} {p.record['trial']} {state} ({p.record['seconds']:.0f} s)")

    records = run_plan(plan, workers=options.workers, on_progress=progress if options.progress else None)
    wanted = {t["trial"] for t in plan.trials()}
    failed = [r for t, r in sorted(records.items()) if t in wanted and "error" in r]
    if failed:
        raise RunFailed(f"{len(failed)} of {len(wanted)} trials failed (first: {failed[0]['trial']}: "
                        f"{failed[0]['error']}); no card is written from a partial evaluation; "
                        "the same command again retries them")
    return [records[t] for t in sorted(wanted)]


def _manipulations(records: list[dict[str, Any]], protocol: Any, out: Path, player: dict[str, Any]) -> list[dict]:
    from benchmarks.card.manipulations import (
        CARD_MANIPULATIONS_FILE,
        add_images,
        collect,
        write_lines,
    )
    from players.protocol import ImageSpec

    lines = collect(records, protocol.items_folder)
    if player["image"] is not None:
        add_images(lines, out, ImageSpec(**player["image"]))
    write_lines(lines, out / CARD_MANIPULATIONS_FILE)
    return lines


def _families(items_folder: Path) -> dict[str, str]:
    """Item id -> its CLEVR template file without `.json` (its family)."""
    from benchmarks.card.manipulations import question_records

    return {item_id: str(q.get("template_filename", "unknown")).removesuffix(".json")
            for item_id, q in question_records(items_folder).items()}


def last_line(card: dict[str, Any]) -> str:
    """`accuracy: A blind: B drop: D random-valid: R`: the contract line of `clevr-game evaluate`."""
    random_valid = card["random_valid_drop"]
    return (f"accuracy: {card['clean_accuracy']['value']:.4f} blind: {card['blind_accuracy']['value']:.4f} "
            f"drop: {card['drop']:.4f} random-valid: "
            + (f"{random_valid:.4f}" if random_valid is not None else "n/a"))
