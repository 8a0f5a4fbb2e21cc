"""Statistics of the benchmark table: means over mini-games and seeds, maxima, bootstrap CIs, t-tests."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np
from scipy import stats as scipy_stats

BOOTSTRAP_SAMPLES = 2000


@dataclass(frozen=True)
class Summary:
    mean: float
    low: float
    high: float
    maximum: float  # over mini-games, of the mean over seeds
    p_value: float  # one-sample t-test against 0 ("no manipulation succeeds")
    n: int

    def to_json(self) -> dict:
        return {"mean": self.mean, "ci95": [self.low, self.high], "max_over_minigames": self.maximum,
                "p_value": self.p_value, "n": self.n}


def bootstrap_ci(values: np.ndarray | list[float], seed: int = 0, level: float = 0.95) -> tuple[float, float]:
    values = np.asarray(values, dtype=np.float64)
    if len(values) == 0:
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    means = rng.choice(values, (BOOTSTRAP_SAMPLES, len(values)), replace=True).mean(1)
    tail = (1 - level) / 2
    return float(np.quantile(means, tail)), float(np.quantile(means, 1 - tail))


def t_test_against_zero(values: np.ndarray | list[float]) -> float:
    """p-value (two-sided) of the mean differing from 0; 1.0 when every value is 0, NaN for n < 2."""
    values = np.asarray(values, dtype=np.float64)
    if len(values) < 2:
        return float("nan")
    if np.all(values == values[0]):
        return 1.0 if values[0] == 0 else 0.0
    return float(scipy_stats.ttest_1samp(values, 0.0).pvalue)


def summarise(values_by_minigame: dict[int, list[float]]) -> Summary:
    values = np.array([v for vs in values_by_minigame.values() for v in vs], dtype=np.float64)
    per_minigame = [float(np.mean(vs)) for vs in values_by_minigame.values() if vs]
    low, high = bootstrap_ci(values)
    return Summary(float(values.mean()) if len(values) else float("nan"), low, high,
                   max(per_minigame) if per_minigame else float("nan"), t_test_against_zero(values), len(values))


TRAINED_LABEL = {"state": "trained", "pixel": "trained-pixel"}
"""Row label of the trained adversary by what it sees (records without `adversary` are state-input)."""


def table(records: list[dict]) -> list[dict]:
    """One row per (player, size) and adversary (trained per input kind, random, random valid, search)."""
    groups: dict[tuple[str, int], list[dict]] = defaultdict(list)
    for record in records:
        if "error" not in record:
            groups[(record["player"], record["size"])].append(record)
    rows = []
    for (player, size), group in sorted(groups.items()):
        by_input: dict[str, list[dict]] = defaultdict(list)
        for record in group:
            by_input[record.get("adversary", "state")].append(record)
        for kind in sorted(by_input, key=lambda k: (k != "state", k)):
            trained = by_input[kind]
            rows.append(_row(player, size, TRAINED_LABEL.get(kind, f"trained-{kind}"), trained,
                             "consistency", "drop", "jaccard_loss"))
            # Same trials, same items, same number of samples: a paired test of trained against random.
            rows[-1]["drop_p_vs_random"] = paired_t_test([r["drop"] for r in trained],
                                                         [r["random_drop"] for r in trained])
        # The random adversary of the first input kind's trials (each trial measures it on its own items).
        first = by_input[min(by_input, key=lambda k: (k != "state", k))]
        rows.append(_row(player, size, "random", first, "random_consistency", "random_drop", "random_jaccard_loss"))
        valid = [r for r in first if r.get("random_valid_consistency") is not None]
        if valid:
            rows.append(_row(player, size, "random-valid", valid, "random_valid_consistency", "random_valid_drop"))
        searched = [dict(r, **{"search_c": r["search"]["consistency"], "search_d": r["search"]["drop"]})
                    for r in group if "search" in r]
        if searched:
            rows.append(_row(player, size, "search", searched, "search_c", "search_d"))
    return rows


def _row(player: str, size: int, adversary: str, group: list[dict], key_c: str, key_d: str,
         key_j: str | None = None) -> dict:
    consistency: dict[int, list[float]] = defaultdict(list)
    drop: dict[int, list[float]] = defaultdict(list)
    for record in group:
        consistency[record["minigame"]].append(record[key_c])
        drop[record["minigame"]].append(record[key_d])
    return {
        "player": player, "size": size, "adversary": adversary,
        "consistency": summarise(consistency).to_json(), "drop": summarise(drop).to_json(),
        "clean_accuracy": float(np.mean([r["clean_accuracy"] for r in group])),
        "trials": len(group),
        # Older records hold no count: they are read as no errors only because none was seen.
        "player_errors": int(sum(r.get("player_errors", 0) for r in group)),
        "player_queries": int(sum(r.get("player_queries", 0) for r in group)),
        "unscored_items": int(sum(r.get("unscored_items", 0) for r in group)),
        # Set answers (CLEVR-POC trials): how much the answers' Jaccard index with the true set fell.
        **({"jaccard_loss": summarise(_by_minigame(group, key_j)).to_json()}
           if key_j and group and all(key_j in r for r in group) else {}),
    }


def _by_minigame(group: list[dict], key: str) -> dict[int, list[float]]:
    values: dict[int, list[float]] = defaultdict(list)
    for record in group:
        values[record["minigame"]].append(record[key])
    return values


def paired_t_test(trained: list[float], baseline: list[float]) -> float:
    """p-value that the trained adversary's scores differ from the baseline's on the same trials."""
    a, b = np.asarray(trained), np.asarray(baseline)
    if len(a) < 2 or np.allclose(a - b, (a - b)[0]):
        return float("nan") if len(a) < 2 else (1.0 if np.allclose(a, b) else 0.0)
    return float(scipy_stats.ttest_rel(a, b).pvalue)


def breakdown(items: list[dict], key: str) -> list[dict]:
    """Consistency and drop of the trained adversary per player and `key` (e.g. the question family).

    `items` are per-item results of the trials (each with `player`, `key`,
    `changed_share` and `dropped_share`): the means are over items and trials,
    the CIs bootstrap those item results.
    """
    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for item in items:
        groups[(item["player"], item[key])].append(item)
    rows = []
    for (player, value), group in sorted(groups.items()):
        changed = [g["changed_share"] for g in group]
        dropped = [g["dropped_share"] for g in group]
        rows.append({
            "player": player, key: value, "items": len(group),
            "distinct_items": len({g["item_id"] for g in group}),
            "consistency": {"mean": float(np.mean(changed)), "ci95": list(bootstrap_ci(changed))},
            "drop": {"mean": float(np.mean(dropped)), "ci95": list(bootstrap_ci(dropped))},
        })
    return rows
