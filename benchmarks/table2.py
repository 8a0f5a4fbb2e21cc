"""The statistics behind the report's answers to the paper's questions, from trial records alone.

1. State-input vs pixel-input adversary: the Wilcoxon signed-rank test of the
   drop, paired per player x mini-game size x mini-game x seed.
2. Drop vs mini-game size: the Jonckheere-Terpstra trend test across the sizes,
   per player and adversary, with its normal approximation corrected for ties.
   Its unit is a mini-game (the mean over its seeds): seeds of one mini-game play
   the same items, so they are not independent samples of the size.
3. Clean accuracy vs robustness: Spearman's rank correlation across players of
   clean accuracy with the mean drop and the mean consistency; the worst
   mini-game (the maximal consistency) of each player.
4. Which questions break: the Kruskal-Wallis test of the per-item dropped share
   across question families, per player (the breakdown itself is
   `benchmarks.stats.breakdown`).
5. How small the manipulations are: the number of moved objects and the total
   displacement of the successful manipulations, and the Mann-Whitney U test of
   their displacement against the valid moves that changed nothing.

Every test is two-sided. A test with nothing to decide (all paired differences
zero, one size, fewer than three players, identical values) is reported with
statistic and p-value None and a note saying why.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

import numpy as np
from scipy import stats as scipy_stats

ADVERSARY_LABELS = {"trained": "state A2C", "trained-pixel": "pixel A2C", "random": "random",
                    "random-valid": "random valid", "search": "search"}
"""How the report names the table's adversaries (benchmarks.stats.table rows), in the paper's order."""


@dataclass(frozen=True)
class Test:
    """One test's outcome; `statistic` and `p_value` are None when there was nothing to test."""

    name: str
    statistic: float | None
    p_value: float | None
    n: int
    note: str = ""
    z: float | None = None
    """The standardised statistic, for tests judged by their normal approximation."""

    def to_json(self) -> dict:
        out = {"test": self.name, "statistic": _finite(self.statistic), "p_value": _finite(self.p_value),
               "n": self.n, "note": self.note}
        if self.z is not None:
            out["z"] = _finite(self.z)
        return out


def _finite(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)


def _ok(records: list[dict]) -> list[dict]:
    return [r for r in records if "error" not in r]


def _adversary(record: dict) -> str:
    return record.get("adversary", "state")


# ------------------------------------------------------------------ 1. state vs pixel input


def wilcoxon_paired(first: list[float], second: list[float], name: str = "Wilcoxon signed-rank") -> Test:
    """scipy's two-sided Wilcoxon signed-rank test (zeros dropped); n/a when every difference is zero."""
    a, b = np.asarray(first, dtype=np.float64), np.asarray(second, dtype=np.float64)
    nonzero = int(np.count_nonzero(a - b))
    if nonzero == 0:
        return Test(name, None, None, len(a), "n/a: every paired difference is zero")
    result = scipy_stats.wilcoxon(a, b)
    return Test(name, float(result.statistic), float(result.pvalue), len(a),
                f"{nonzero} of {len(a)} pairs differ")


def drop_pairs(records: list[dict], first: str = "state", second: str = "pixel") -> dict[tuple, tuple[float, float]]:
    """(player, size, mini-game, seed) -> (drop of the `first` adversary, drop of the `second`), both recorded."""
    by_key: dict[str, dict[tuple, float]] = defaultdict(dict)
    for record in _ok(records):
        key = (record["player"], record["size"], record["minigame"], record["seed"])
        by_key[_adversary(record)][key] = float(record["drop"])
    shared = sorted(by_key[first].keys() & by_key[second].keys())
    return {key: (by_key[first][key], by_key[second][key]) for key in shared}


def adversary_inputs(records: list[dict]) -> dict:
    """Question 1: the state-input adversary against the pixel-input one, over all pairs and per player."""
    pairs = drop_pairs(records)

    def summary(keys: list[tuple]) -> dict:
        state = [pairs[k][0] for k in keys]
        pixel = [pairs[k][1] for k in keys]
        test = wilcoxon_paired(state, pixel)
        difference = float(np.mean(np.subtract(state, pixel))) if keys else 0.0
        stronger = "neither" if difference == 0 else ("state" if difference > 0 else "pixel")
        return {**test.to_json(), "pairs": len(keys), "mean_drop_state": float(np.mean(state)) if keys else None,
                "mean_drop_pixel": float(np.mean(pixel)) if keys else None,
                "mean_difference": difference, "stronger": stronger}

    keys = list(pairs)
    players = sorted({k[0] for k in keys})
    return {"all": summary(keys), "players": {p: summary([k for k in keys if k[0] == p]) for p in players}}


# ------------------------------------------------------------------ 2. drop vs size


def jonckheere_terpstra(groups: list[list[float]]) -> Test:
    """The Jonckheere-Terpstra test for a trend across ordered groups, normal approximation with ties.

    J counts, over every pair of groups i < j and every pair of values (x from i,
    y from j), 1 when y > x and 1/2 when y == x. Under no trend its mean is
    sum_{i<j} n_i n_j / 2; the variance is Hollander and Wolfe's, corrected for
    tied values (it equals a quarter of the variance of Kendall's S with ties in
    both variables). z > 0: values rise with the group order. Two-sided p.
    """
    groups = [np.asarray(g, dtype=np.float64) for g in groups if len(g)]
    name = "Jonckheere-Terpstra"
    if len(groups) < 2:
        return Test(name, None, None, sum(len(g) for g in groups), "n/a: fewer than two sizes with trials")
    statistic = 0.0
    for i in range(len(groups)):
        for j in range(i + 1, len(groups)):
            diff = groups[j][None, :] - groups[i][:, None]
            statistic += float(np.sum(diff > 0) + 0.5 * np.sum(diff == 0))
    values = np.concatenate(groups)
    n = len(values)
    sizes = np.array([len(g) for g in groups], dtype=np.float64)
    ties = np.unique(values, return_counts=True)[1].astype(np.float64)
    mean = (n * n - np.sum(sizes**2)) / 4
    variance = (n * (n - 1) * (2 * n + 5) - np.sum(sizes * (sizes - 1) * (2 * sizes + 5))
                - np.sum(ties * (ties - 1) * (2 * ties + 5))) / 72
    if n > 2:  # the tie terms vanish with fewer values (and their denominators with them)
        variance += (np.sum(sizes * (sizes - 1) * (sizes - 2)) * np.sum(ties * (ties - 1) * (ties - 2))
                     / (36 * n * (n - 1) * (n - 2))
                     + np.sum(sizes * (sizes - 1)) * np.sum(ties * (ties - 1)) / (8 * n * (n - 1)))
    if variance <= 0:
        return Test(name, statistic, None, n, "n/a: every value is the same")
    z = (statistic - mean) / math.sqrt(variance)
    return Test(name, statistic, float(2 * scipy_stats.norm.sf(abs(z))), n, z=float(z))


_SCORE_KEYS = {"random": ("random_consistency", "random_drop"),
               "random-valid": ("random_valid_consistency", "random_valid_drop")}


def _scored(records: list[dict]) -> list[tuple[str, dict, float, float]]:
    """(adversary label, record, consistency, drop) for every adversary each record measured.

    The trained adversary is labelled by its input; the baselines come from the
    trials of the first input kind, as in the table (each measures them on its items).
    """
    ok = _ok(records)
    kinds = sorted({_adversary(r) for r in ok}, key=lambda k: (k != "state", k))
    first = kinds[0] if kinds else "state"
    scored = []
    for record in ok:
        kind = _adversary(record)
        scored.append(("trained" if kind == "state" else f"trained-{kind}", record,
                       float(record["consistency"]), float(record["drop"])))
        if kind != first:
            continue
        for label, (key_c, key_d) in _SCORE_KEYS.items():
            if record.get(key_c) is not None:
                scored.append((label, record, float(record[key_c]), float(record[key_d])))
        if "search" in record:
            scored.append(("search", record, float(record["search"]["consistency"]), float(record["search"]["drop"])))
    return scored


def minigame_means(records: list[dict], metric: str = "drop") -> dict[tuple[str, str], dict[int, dict[int, float]]]:
    """(player, adversary label) -> size -> mini-game -> mean of `metric` over its seeds."""
    values: dict[tuple[str, str, int, int], list[float]] = defaultdict(list)
    for label, record, consistency, drop in _scored(records):
        values[(record["player"], label, record["size"], record["minigame"])].append(
            drop if metric == "drop" else consistency)
    means: dict[tuple[str, str], dict[int, dict[int, float]]] = defaultdict(lambda: defaultdict(dict))
    for (player, label, size, minigame), vs in sorted(values.items()):
        means[(player, label)][size][minigame] = float(np.mean(vs))
    return {key: dict(by_size) for key, by_size in means.items()}


def size_trend(records: list[dict]) -> list[dict]:
    """Question 2: per player and adversary, the mean drop per size and the trend test across sizes."""
    rows = []
    for (player, label), by_size in sorted(minigame_means(records).items(),
                                           key=lambda kv: (kv[0][0], list(ADVERSARY_LABELS).index(kv[0][1]))):
        sizes = sorted(by_size)
        test = jonckheere_terpstra([list(by_size[s].values()) for s in sizes])
        if test.z is None or test.p_value is None:
            direction = "n/a"
        else:
            direction = "falls" if test.z < 0 else ("rises" if test.z > 0 else "flat")
        rows.append({"player": player, "adversary": label, "sizes": sizes,
                     "mean_drop": [float(np.mean(list(by_size[s].values()))) for s in sizes],
                     "minigames": [len(by_size[s]) for s in sizes], "direction": direction,
                     **test.to_json()})
    return rows


# ------------------------------------------------------------------ 3. clean accuracy vs robustness


def clean_accuracy(records: list[dict]) -> dict[str, float]:
    """Per player, the accuracy on the unmoved items of every distinct mini-game it played, item-weighted."""
    seen: dict[str, dict[tuple[int, int], float]] = defaultdict(dict)
    for record in _ok(records):
        seen[record["player"]][(record["size"], record["minigame"])] = float(record["clean_accuracy"])
    return {player: sum(size * acc for (size, _), acc in cells.items()) / sum(size for size, _ in cells)
            for player, cells in sorted(seen.items())}


EXACT_SPEARMAN_MAX = 8
"""Up to this many players the Spearman p-value is exact (every pairing); above, scipy's t approximation."""


def spearman(x: list[float], y: list[float], name: str = "Spearman rank correlation") -> Test:
    """scipy's Spearman rho with a two-sided p; n/a below three points or when either side is constant.

    With a handful of players the t approximation is far off (it gives p = 0 for
    three players in perfect order, where 2 of the 6 orders are as extreme), so
    up to EXACT_SPEARMAN_MAX players p is scipy's exact permutation test.
    """
    if len(x) < 3:
        return Test(name, None, None, len(x), "n/a: fewer than three players")
    if len(set(x)) < 2 or len(set(y)) < 2:
        return Test(name, None, None, len(x), "n/a: one side has no spread")
    rho = float(scipy_stats.spearmanr(x, y).statistic)
    if len(x) > EXACT_SPEARMAN_MAX:
        return Test(name, rho, float(scipy_stats.spearmanr(x, y).pvalue), len(x), "t approximation")
    # Spearman's rho is Pearson's r of the (average) ranks. Permuting y's ranks alone
    # visits each pairing once: n! statistics, where passing (x, y) makes scipy permute
    # both samples, (n!)^2 of them with the same p (eight players: 1.6e9).
    x_ranks = scipy_stats.rankdata(x)
    exact = scipy_stats.permutation_test(
        (scipy_stats.rankdata(y),), lambda y_ranks, axis: _pearson_against(x_ranks, y_ranks, axis),
        permutation_type="pairings", n_resamples=math.inf, vectorized=True)
    return Test(name, rho, float(exact.pvalue), len(x), "exact permutation p")


def _pearson_against(fixed: np.ndarray, samples: np.ndarray, axis: int) -> np.ndarray:
    """Pearson's r of `fixed` with every 1-D slice of `samples` along `axis`."""
    samples = np.moveaxis(samples, axis, -1)
    fixed_centred = fixed - fixed.mean()
    centred = samples - samples.mean(axis=-1, keepdims=True)
    return (centred @ fixed_centred) / np.sqrt((centred**2).sum(axis=-1) * (fixed_centred @ fixed_centred))


def accuracy_vs_robustness(records: list[dict]) -> dict:
    """Question 3: per trained adversary, rank correlations across players and each player's worst mini-game."""
    accuracy = clean_accuracy(records)
    drops, consistencies = minigame_means(records, "drop"), minigame_means(records, "consistency")
    out: dict = {"clean_accuracy": accuracy, "adversaries": {}}
    for label in [label for label in ADVERSARY_LABELS if label.startswith("trained")]:
        players = sorted(p for p in accuracy if (p, label) in drops)
        if not players:
            continue
        per_player = {}
        for player in players:
            cells_c = [(c, size, mg) for size, by_mg in consistencies[(player, label)].items()
                       for mg, c in by_mg.items()]
            cells_d = [d for by_mg in drops[(player, label)].values() for d in by_mg.values()]
            worst_c, worst_size, worst_mg = max(cells_c, key=lambda cell: (cell[0], -cell[1], -cell[2]))
            per_player[player] = {
                "clean_accuracy": accuracy[player],
                "mean_consistency": float(np.mean([c for c, _, _ in cells_c])),
                "mean_drop": float(np.mean(cells_d)),
                "max_consistency": worst_c, "max_consistency_size": worst_size,
                "max_consistency_minigame": worst_mg, "max_drop": float(max(cells_d)),
            }
        x = [per_player[p]["clean_accuracy"] for p in players]
        out["adversaries"][label] = {
            "players": per_player,
            "accuracy_vs_drop": spearman(x, [per_player[p]["mean_drop"] for p in players]).to_json(),
            "accuracy_vs_consistency": spearman(x, [per_player[p]["mean_consistency"] for p in players]).to_json(),
        }
    return out


# ------------------------------------------------------------------ 4. which questions break


def family_differences(item_rows: list[dict], key: str = "family") -> dict[str, dict]:
    """Question 4: per player, the Kruskal-Wallis test of the per-item dropped share across `key` groups."""
    groups: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for row in item_rows:
        groups[row["player"]][row[key]].append(float(row["dropped_share"]))
    out = {}
    for player, by_group in sorted(groups.items()):
        samples = [by_group[g] for g in sorted(by_group)]
        name = "Kruskal-Wallis H"
        n = sum(len(s) for s in samples)
        if len(samples) < 2:
            test = Test(name, None, None, n, f"n/a: one {key}")
        elif len({v for s in samples for v in s}) < 2:
            test = Test(name, None, None, n, "n/a: every item has the same dropped share")
        else:
            result = scipy_stats.kruskal(*samples)
            test = Test(name, float(result.statistic), float(result.pvalue), n, f"{len(samples)} groups")
        out[player] = test.to_json()
    return out


# ------------------------------------------------------------------ 5. how small the manipulations are


def _merged(histograms: list[dict[str, int]]) -> dict[float, int]:
    total: dict[float, int] = defaultdict(int)
    for histogram in histograms:
        for value, count in histogram.items():
            total[float(value)] += int(count)
    return dict(sorted(total.items()))


def _expand(histogram: dict[float, int]) -> np.ndarray:
    return np.repeat(np.array(list(histogram), dtype=np.float64), np.array(list(histogram.values()), dtype=np.int64))


def _describe(histogram: dict[float, int]) -> dict:
    values = _expand(histogram)
    if not len(values):
        return {"count": 0, "mean": None, "median": None, "max": None}
    return {"count": int(len(values)), "mean": float(values.mean()), "median": float(np.median(values)),
            "max": float(values.max())}


def manipulation_summary(records: list[dict]) -> list[dict]:
    """Question 5: per player and trained adversary, moved objects and total displacement of its successes.

    `changed` counts every evaluation move that changed an answer, `dropped` those
    that broke a right one; the test compares the displacement of the changing
    moves with that of the valid moves that changed nothing.
    """
    grouped: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for record in _ok(records):
        if "manipulation_sizes" in record:
            kind = _adversary(record)
            grouped[(record["player"], "trained" if kind == "state" else f"trained-{kind}")].append(
                record["manipulation_sizes"])
    rows = []
    for (player, label), sizes in sorted(grouped.items()):
        row: dict = {"player": player, "adversary": label}
        for kind in ("changed", "dropped"):
            objects = _merged([s[kind]["moved_objects"] for s in sizes if kind in s])
            displacement = _merged([s[kind]["displacement"] for s in sizes if kind in s])
            row[kind] = {"moved_objects": {f"{int(k)}": v for k, v in objects.items()},
                         "displacement": {f"{k:.4f}": v for k, v in displacement.items()},
                         "objects": _describe(objects), "total_displacement": _describe(displacement),
                         "one_object_share": (objects.get(1.0, 0) / sum(objects.values())) if objects else None}
        changed = _expand(_merged([s["changed"]["displacement"] for s in sizes if "changed" in s]))
        valid = _merged([s["valid"]["displacement"] for s in sizes if "valid" in s])
        unchanged = dict(valid)
        for value, count in _merged([s["changed"]["displacement"] for s in sizes if "changed" in s]).items():
            unchanged[value] = unchanged.get(value, 0) - count
        row["displacement_vs_unchanged"] = mann_whitney(changed, _expand({k: v for k, v in unchanged.items()
                                                                          if v > 0})).to_json()
        rows.append(row)
    return rows


def mann_whitney(first: np.ndarray | list[float], second: np.ndarray | list[float]) -> Test:
    """scipy's two-sided Mann-Whitney U (asymptotic, tie-corrected); n/a when a side is empty or all tie."""
    a, b = np.asarray(first, dtype=np.float64), np.asarray(second, dtype=np.float64)
    name = "Mann-Whitney U"
    if not len(a) or not len(b):
        return Test(name, None, None, len(a) + len(b), "n/a: no successful or no unsuccessful valid moves")
    if len(np.unique(np.concatenate([a, b]))) < 2:
        return Test(name, None, None, len(a) + len(b), "n/a: every move has the same displacement")
    result = scipy_stats.mannwhitneyu(a, b, method="asymptotic")
    return Test(name, float(result.statistic), float(result.pvalue), len(a) + len(b),
                f"median {np.median(a):.2f} (changed) vs {np.median(b):.2f} (unchanged)")


# ------------------------------------------------------------------ all of it


def answers(records: list[dict], item_rows: list[dict]) -> dict:
    """Every statistic of the five questions, as JSON-ready dicts (what table2.json holds)."""
    return {
        "1_adversary_inputs": adversary_inputs(records),
        "2_size_trend": size_trend(records),
        "3_accuracy_vs_robustness": accuracy_vs_robustness(records),
        "4_families": {"family": family_differences(item_rows, "family"),
                       "kind": family_differences(item_rows, "kind")},
        "5_manipulation_sizes": manipulation_summary(records),
    }
