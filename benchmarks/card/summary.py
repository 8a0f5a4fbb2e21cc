"""The card's figures from its trials: the mini-game is the unit, exact tests, one Holm correction.

A mini-game's seeds are averaged first, so each mini-game counts once; a drop's
interval is Student's t over the mini-games of its size (clipped to [0, 1]; none from
one mini-game). Each adversary is tested against random valid moves at each size
(exact Wilcoxon signed-rank, paired by mini-game) and for a trend over sizes (exact
permutation Jonckheere-Terpstra); every p of the card is Holm-corrected together and a
difference is called significant only when its corrected p is below ALPHA.

An adversary's drop over sizes is the mean of its per-size drops (each size weighs the
same); the card's headline drop is the strongest adversary's.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

import numpy as np

from benchmarks.stats import Test, holm, jonckheere_terpstra, wilcoxon_paired

ALPHA = 0.05
CONFIDENCE = 0.95
TRAINED = ("state", "pixel")
ATTACKERS = (*TRAINED, "search")
"""The adversaries the headline drop is the strongest of."""
BASELINE = "random_valid"
ADVERSARIES = (*ATTACKERS, BASELINE)


def _round(value: float | None) -> float | None:
    return None if value is None else round(float(value), 6)


def per_minigame(records: list[dict[str, Any]], adversary: str, size: int, metric: str) -> dict[int, float]:
    """Mini-game -> the adversary's `metric` (drop or consistency) at `size`, its seeds averaged."""
    by_game: dict[int, list[float]] = defaultdict(list)
    for record in records:
        if record["size"] != size:
            continue
        if adversary in TRAINED and record.get("adversary", "state") == adversary:
            by_game[record["minigame"]].append(record[metric])
        elif adversary == "search" and isinstance(record.get("search"), dict):
            by_game[record["minigame"]].append(record["search"][metric])
        elif adversary == BASELINE and record.get(f"random_valid_{metric}") is not None:
            by_game[record["minigame"]].append(record[f"random_valid_{metric}"])
    return {game: float(np.mean(values)) for game, values in sorted(by_game.items())}


def interval(values: list[float]) -> dict[str, Any]:
    """Mean with Student's t interval over the units (none from one unit), clipped to [0, 1]."""
    from scipy.stats import t as student_t

    mean = float(np.mean(values))
    low = high = None
    if len(values) > 1:
        half = float(student_t.ppf(0.5 + CONFIDENCE / 2, len(values) - 1) * np.std(values, ddof=1)
                     / math.sqrt(len(values)))
        low, high = max(0.0, mean - half), min(1.0, mean + half)
    return {"mean": _round(mean), "low": _round(low), "high": _round(high),
            "per_minigame": [_round(v) for v in values]}


def size_rows(records: list[dict[str, Any]], sizes: list[dict[str, int]]) -> list[dict[str, Any]]:
    """One entry per size: its design and each adversary's drop and consistency over mini-games."""
    rows = []
    for design in sizes:
        size = design["size"]
        adversaries = {}
        for adversary in ADVERSARIES:
            drops = per_minigame(records, adversary, size, "drop")
            if drops:
                consistency = per_minigame(records, adversary, size, "consistency")
                adversaries[adversary] = {"drop": interval(list(drops.values())),
                                          "consistency": interval(list(consistency.values()))}
        rows.append({**design, "adversaries": adversaries})
    return rows


def tests(records: list[dict[str, Any]], sizes: list[int]) -> list[dict[str, Any]]:
    """Every test of the card, Holm-corrected together."""
    found: list[tuple[str, Test]] = []
    for adversary in ATTACKERS:
        for size in sizes:
            drops, baseline = per_minigame(records, adversary, size, "drop"), \
                per_minigame(records, BASELINE, size, "drop")
            games = sorted(set(drops) & set(baseline))
            if drops:
                found.append((f"{adversary} vs random valid, size {size}",
                              wilcoxon_paired([drops[g] for g in games], [baseline[g] for g in games],
                                              "exact Wilcoxon signed-rank")))
    for adversary in ADVERSARIES:
        groups = [list(per_minigame(records, adversary, size, "drop").values()) for size in sizes]
        if sum(bool(g) for g in groups) > 1:
            found.append((f"{adversary} drop over sizes {', '.join(map(str, sizes))}",
                          jonckheere_terpstra(groups)))
    testable = [i for i, (_, test) in enumerate(found) if test.p_value is not None]
    corrected = dict(zip(testable, holm([found[i][1].p_value for i in testable]), strict=True))
    rows = []
    for i, (name, test) in enumerate(found):
        p_holm = corrected.get(i)
        rows.append({"name": name, "test": test.name, "method": test.method, "n": test.n,
                     "statistic": _round(test.statistic), "p": _round(test.p_value), "p_holm": _round(p_holm),
                     "significant": p_holm is not None and p_holm < ALPHA, "note": test.note})
    return rows


def overall(rows: list[dict[str, Any]], adversary: str, metric: str = "drop") -> float | None:
    """The adversary's figure over sizes: the mean of its per-size means (None when it played no size)."""
    means = [row["adversaries"][adversary][metric]["mean"] for row in rows if adversary in row["adversaries"]]
    return _round(float(np.mean(means))) if means else None


def family_rows(records: list[dict[str, Any]], adversary: str, family_of: dict[str, str]) -> list[dict[str, Any]]:
    """Per question family: the adversary's drop and random valid's, each item's trials averaged first."""
    def shares(rows_of: str, adversary_filter: Any) -> dict[str, float]:
        by_item: dict[str, list[float]] = defaultdict(list)
        for record in records:
            if not adversary_filter(record):
                continue
            rows = record.get(rows_of) if rows_of != "search" else (record.get("search") or {}).get("item_results")
            for row in rows or []:
                by_item[row[0]].append(float(row[-1]))
        return {item: float(np.mean(values)) for item, values in by_item.items()}

    if adversary == "search":
        chosen = shares("search", lambda r: isinstance(r.get("search"), dict))
    else:
        chosen = shares("item_results", lambda r: r.get("adversary", "state") == adversary)
    baseline = shares("random_valid_item_results", lambda r: True)
    rows = []
    for family in sorted({family_of.get(item, "unknown") for item in chosen}):
        items = [item for item in chosen if family_of.get(item, "unknown") == family]
        base = [baseline[item] for item in items if item in baseline]
        rows.append({"family": family, "items": len(items), "drop": _round(np.mean([chosen[i] for i in items])),
                     "random_valid_drop": _round(np.mean(base)) if base else None})
    return rows


def worst_minigame(records: list[dict[str, Any]], adversary: str, sizes: list[int]) -> dict[str, Any] | None:
    candidates = [(drop, -size, -game, size, game) for size in sizes
                  for game, drop in per_minigame(records, adversary, size, "drop").items()]
    if not candidates:
        return None
    drop, _, _, size, game = max(candidates)
    return {"size": size, "minigame": game, "adversary": adversary, "drop": _round(drop)}


def error_account(records: list[dict[str, Any]]) -> tuple[dict[str, Any], int]:
    """The evaluations' failed answers over their queries, and the items left unscored by one."""
    queries = sum(r.get("eval_queries", 0) for r in records)
    errors = sum(r.get("eval_player_errors", 0) for r in records)
    unscored = sum(r.get("unscored_items", 0) for r in records)
    for record in records:
        search = record.get("search")
        if isinstance(search, dict):
            errors += search.get("player_errors", 0)
            unscored += search.get("unscored_items", 0)
    return {"queries": queries, "errors": errors, "rate": _round(errors / queries if queries else 0.0)}, unscored


def summarise(records: list[dict[str, Any]], sizes: list[dict[str, int]], family_of: dict[str, str]) -> dict:
    """The card's measured figures (everything but the header, clean / blind accuracy and timings)."""
    size_list = [design["size"] for design in sizes]
    rows = size_rows(records, sizes)
    by_adversary = {a: {"drop": overall(rows, a), "consistency": overall(rows, a, "consistency")}
                    for a in ADVERSARIES if overall(rows, a) is not None}
    attackers = [a for a in ATTACKERS if a in by_adversary]
    strongest = max(attackers, key=lambda a: (by_adversary[a]["drop"], -ATTACKERS.index(a)))
    errors, unscored = error_account(records)
    drop, random_valid = by_adversary[strongest]["drop"], by_adversary.get(BASELINE, {}).get("drop")
    return {
        "drop": drop, "drop_adversary": strongest,
        "random_valid_drop": random_valid,
        # How much more the strongest adversary breaks than moves drawn at random under the same rules.
        "relative_to_random_valid": None if random_valid is None else {
            "difference": _round(drop - random_valid),
            "ratio": _round(drop / random_valid) if random_valid else None},
        "search_drop": by_adversary.get("search", {}).get("drop"),
        "adversaries": by_adversary,
        "sizes": rows,
        "tests": tests(records, size_list),
        "families": family_rows(records, strongest, family_of),
        "worst_minigame": worst_minigame(records, strongest, size_list),
        "evaluation_errors": errors,
        "unscored_items": unscored,
    }
