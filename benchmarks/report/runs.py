"""The finished trials' run folders: per-item rows and the gallery's candidates."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from benchmarks.gallery import Candidate, breaks_a_clevr_rule
from benchmarks.items_folder import ItemsFolder, read_items_folder
from benchmarks.table2 import trained_label
from clevr_game.run_files import RESULT_FILE
from clevr_game.scene import parse_scene


@dataclass
class FinishedRun:
    """One finished trial with its result.json and the item folder it played."""

    record: dict
    result: dict
    items: ItemsFolder | None


# ------------------------------------------------------------------ reading the runs


def finished_runs(folder: Path, records: list[dict]) -> list[FinishedRun]:
    """The finished trials whose result.json is still there, with their item folders (read once each)."""
    folders: dict[str, ItemsFolder | None] = {}
    runs = []
    for record in records:
        result_path = _run_dir(folder, record) / RESULT_FILE
        if not result_path.is_file():
            continue
        try:
            result = json.loads(result_path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            continue
        items_dir = _items_dir(folder, result)
        if items_dir is not None and items_dir not in folders:
            folders[items_dir] = read_items_folder(items_dir)
        runs.append(FinishedRun(record, result, folders.get(items_dir) if items_dir else None))
    return runs


def _run_dir(folder: Path, record: dict) -> Path:
    """The trial's run folder as recorded, else where the benchmark puts it (a results folder moved whole)."""
    recorded = Path(record.get("run", ""))
    if (recorded / RESULT_FILE).is_file():
        return recorded
    return folder / "runs" / record["trial"]


def _items_dir(folder: Path, result: dict) -> str | None:
    given = result.get("options", {}).get("items")
    for candidate in ([Path(given)] if given else []) + [folder / "items"]:
        if candidate.is_dir():
            return str(candidate.resolve())
    return None



def item_rows(records: list[dict], runs: list[FinishedRun]) -> list[dict]:
    """Per-item results of the trained adversaries, labelled with player, adversary, family and kind.

    From each record's `item_results` (so trials.jsonl alone suffices); records of
    older versions without them are read from their run folder's result.json.
    """
    rows = []
    with_results = set()
    for record in records:
        if "item_results" in record:
            with_results.add(record["trial"])
            rows += [{"player": record["player"], "adversary": trained_label(record), "item_id": item_id,
                      "family": family, "kind": kind,
                      "changed_share": float(changed), "dropped_share": float(dropped)}
                     for item_id, family, kind, changed, dropped in record["item_results"]]
    for run in runs:
        if run.record["trial"] in with_results:
            continue
        for item in run.result.get("items", []):
            if item.get("player_errors", 0):
                continue  # a move of this item got no answer: unscored, it counts nowhere
            item_id = item["item_id"]
            family = run.items.families.get(item_id) if run.items else None
            if family is None and item.get("family") is not None:
                family = f"family {item['family']}"
            kind = item.get("question_kind") or (run.items.kinds.get(item_id) if run.items else None)
            rows.append({
                "player": run.record["player"], "adversary": trained_label(run.record), "item_id": item_id,
                "family": family or "unknown", "kind": kind or "unknown",
                "changed_share": float(item.get("changed_share", item.get("changed", 0))),
                "dropped_share": float(item.get("dropped_share", item.get("dropped", 0))),
            })
    return rows


def _player_ranks(rows: list[dict]) -> dict[str, int]:
    """Players by the trained adversary's drop, then consistency, highest first."""
    best: dict[str, tuple[float, float]] = {}
    for row in rows:
        if row["adversary"] == "trained":
            score = (row["drop"]["mean"], row["consistency"]["mean"])
            best[row["player"]] = max(best.get(row["player"], score), score)
    ordered = sorted(best, key=lambda p: (-best[p][0], -best[p][1], p))
    return {player: rank for rank, player in enumerate(ordered)}


def gallery_candidates(runs: list[FinishedRun], rows: list[dict]) -> list[Candidate]:
    ranks = _player_ranks(rows)
    found = []
    for run in runs:
        if run.items is None:
            continue
        for item in run.result.get("items", []):
            best = item.get("best_manipulation")
            before = run.items.scenes.get(item["item_id"])
            # Right answers broken only: a wrong answer turned right shows no weakness.
            if not (item.get("dropped") and best and best.get("scene") and best.get("moves")) or before is None:
                continue
            if str(best.get("new_answer")) == str(item["true_answer"]):
                continue
            after = parse_scene(best["scene"], vocabulary=before.vocabulary)
            if breaks_a_clevr_rule(after) is not None:
                continue  # a state player's trial may not check visibility; the gallery shows CLEVR scenes only
            found.append(Candidate(
                player=run.record["player"], player_rank=ranks.get(run.record["player"], len(ranks)),
                trial=run.record["trial"], item_id=item["item_id"],
                items_dir=str(run.result.get("options", {}).get("items")),
                question=run.items.questions[item["item_id"]], true_answer=str(item["true_answer"]),
                old_answer=str(item["old_answer"]), new_answer=str(best["new_answer"]),
                dropped=bool(item.get("dropped")),
                moves=tuple((int(m[0]), float(m[1]), float(m[2])) for m in best["moves"]),
                before=before, after=after,
            ))
    return found


