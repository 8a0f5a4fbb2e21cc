"""Statistics of the benchmark: the table's means, maxima, bootstrap CIs and t-tests; the report's tests.

The tests the report's questions make (benchmarks.table2 applies them): the
Wilcoxon signed-rank test, exact or by permutation; the exact permutation
Jonckheere-Terpstra test; Spearman's rank correlation, exact for few players;
Kruskal-Wallis; and Holm's adjustment over all of them.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from collections.abc import Sequence
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


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjustment of p-values, each capped at 1.

    It keeps the chance of any false "significant" among all the tests at the
    level, whatever their dependence (the report's tests share trials), and is
    uniformly more powerful than Bonferroni's. scipy has only Benjamini-Hochberg
    (`false_discovery_control`), which bounds a different error.
    """
    p = np.asarray(p_values, dtype=np.float64)
    order = np.argsort(p, kind="stable")
    # The k-th smallest p is multiplied by the m - k + 1 tests not yet rejected; the running maximum keeps
    # the adjusted values in the order of the raw ones (a step-down procedure stops at its first failure).
    stepped = np.minimum(1.0, np.maximum.accumulate((len(p) - np.arange(len(p))) * p[order]))
    adjusted = np.empty_like(p)
    adjusted[order] = stepped
    return adjusted.tolist()


# ------------------------------------------------------------------ the tests of the report's questions


SIGNIFICANCE = 0.05
"""The level the report judges Holm-adjusted p-values by."""

EXACT_MAX = 1_000_000
"""Up to this many permutations (sign flips, assignments to sizes) a permutation p is exact, enumerated."""

MONTE_CARLO_DRAWS = 100_000
MONTE_CARLO_SEED = 0
"""Above EXACT_MAX, the permutation p of this many seeded random draws (the same p on every rebuild)."""


@dataclass(frozen=True)
class Test:
    """One test's outcome; `statistic` and `p_value` are None when there was nothing to test."""

    name: str
    statistic: float | None
    p_value: float | None
    n: int
    note: str = ""
    method: str = ""
    """How p was computed (exact, permutation, approximation), and why that way."""

    def to_json(self) -> dict:
        return {"test": self.name, "statistic": _finite(self.statistic), "p_value": _finite(self.p_value),
                "n": self.n, "note": self.note, "method": self.method}


def _finite(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)


def _exact_ties(values: np.ndarray) -> np.ndarray:
    """Values rounded to 12 decimals: means of equal drops taken in another order must tie, not differ by 1e-17."""
    return np.round(np.asarray(values, dtype=np.float64), 12)


def wilcoxon_paired(first: list[float], second: list[float], name: str = "Wilcoxon signed-rank") -> Test:
    """The two-sided Wilcoxon signed-rank test of paired values (zero differences dropped, as Wilcoxon did).

    Without ties among the nonzero |differences| scipy's exact null distribution;
    with ties the exact one does not exist in closed form, so p is scipy's
    permutation test over every sign flip (2^n of them, up to EXACT_MAX), else
    over MONTE_CARLO_DRAWS seeded random flips. n/a when every difference is zero.
    """
    a, b = np.asarray(first, dtype=np.float64), np.asarray(second, dtype=np.float64)
    differences = _exact_ties(a - b)
    nonzero = differences[differences != 0]
    if not len(nonzero):
        return Test(name, None, None, len(a), "n/a: every paired difference is zero")
    note = f"{len(nonzero)} of {len(a)} pairs differ"
    if len(np.unique(np.abs(nonzero))) == len(nonzero):
        result = scipy_stats.wilcoxon(nonzero, method="exact")
        method = "exact"
    elif 2 ** len(nonzero) <= EXACT_MAX:
        result = scipy_stats.wilcoxon(nonzero, method=scipy_stats.PermutationMethod(n_resamples=math.inf))
        method = f"exact permutation over all {2 ** len(nonzero):,} sign flips (tied differences)"
    else:
        result = scipy_stats.wilcoxon(nonzero, method=scipy_stats.PermutationMethod(
            n_resamples=MONTE_CARLO_DRAWS, rng=np.random.default_rng(MONTE_CARLO_SEED)))
        method = (f"Monte Carlo permutation, {MONTE_CARLO_DRAWS:,} seeded sign flips (tied differences, "
                  f"2^{len(nonzero)} flips too many to enumerate)")
    return Test(name, float(result.statistic), float(result.pvalue), len(a), note, method)


def _pair_scores(values: np.ndarray) -> np.ndarray:
    """scores[a, b]: what the pair (a in an earlier group, b in a later one) adds to J: 1, 1/2 when tied, else 0."""
    return (values[None, :] > values[:, None]) + 0.5 * (values[None, :] == values[:, None])


def _j_statistics(labels: np.ndarray, scores: np.ndarray, chunk: int = 4096) -> np.ndarray:
    """J for every row of `labels` (the group of each value); halves and ones add up exactly in floats."""
    out = np.empty(len(labels), dtype=np.float64)
    for start in range(0, len(labels), chunk):
        rows = labels[start:start + chunk]
        out[start:start + chunk] = ((rows[:, :, None] < rows[:, None, :]) * scores).sum(axis=(1, 2))
    return out


def _assignments(sizes: list[int]) -> np.ndarray:
    """Every distinct assignment of len = sum(sizes) positions to groups of these sizes, one row each."""
    rows: list[list[int]] = []

    def place(group: int, free: tuple[int, ...], labels: list[int]) -> None:
        if group == len(sizes) - 1:
            for i in free:
                labels[i] = group
            rows.append(list(labels))
            return
        for chosen in itertools.combinations(free, sizes[group]):
            for i in chosen:
                labels[i] = group
            place(group + 1, tuple(i for i in free if i not in chosen), labels)

    place(0, tuple(range(sum(sizes))), [0] * sum(sizes))
    return np.array(rows, dtype=np.int16)


def jonckheere_terpstra(groups: list[list[float]]) -> Test:
    """The Jonckheere-Terpstra test for a trend across ordered groups, by permutation; two-sided.

    J counts, over every pair of groups i < j and every pair of values (x from i,
    y from j), 1 when y > x and 1/2 when y == x. Its null distribution is that of
    J over the assignments of the pooled values to groups of the same sizes; with
    few groups' worth of values the normal approximation is far off (3 / 2 / 1
    values in perfect order: 2 of the 60 assignments are as extreme, p = 0.033,
    where z gives 0.024). Exact up to EXACT_MAX assignments, else
    MONTE_CARLO_DRAWS seeded draws ((hits + 1) / (draws + 1)). Two-sided p: the
    share of assignments whose J lies at least as far from its null mean as the
    observed J (with unequal group sizes the null is skewed, so this is not
    twice one tail). Ties are exact: the permutation conditions on the values.
    """
    groups = [_exact_ties(g) for g in groups if len(g)]
    name = "Jonckheere-Terpstra"
    n = sum(len(g) for g in groups)
    if len(groups) < 2:
        return Test(name, None, None, n, "n/a: fewer than two sizes with trials")
    values = np.concatenate(groups)
    if len(np.unique(values)) < 2:
        return Test(name, None, None, n, "n/a: every value is the same")
    sizes = [len(g) for g in groups]
    scores = _pair_scores(values)
    labels = np.repeat(np.arange(len(groups), dtype=np.int16), sizes)
    observed = float(_j_statistics(labels[None, :], scores)[0])
    count = math.factorial(n) // math.prod(math.factorial(size) for size in sizes)
    # J and its mean are multiples of 1/4: the distances compare exactly in floats.
    distance = abs(observed - expected_j(sizes))
    if count <= EXACT_MAX:
        null = _j_statistics(_assignments(sizes), scores)
        p_value = float(np.mean(np.abs(null - expected_j(sizes)) >= distance))
        method = f"exact permutation over all {count:,} assignments of the values to the sizes"
    else:
        rng = np.random.default_rng(MONTE_CARLO_SEED)
        null = _j_statistics(rng.permuted(np.tile(labels, (MONTE_CARLO_DRAWS, 1)), axis=1), scores)
        p_value = float((np.sum(np.abs(null - expected_j(sizes)) >= distance) + 1) / (MONTE_CARLO_DRAWS + 1))
        method = (f"Monte Carlo permutation, {MONTE_CARLO_DRAWS:,} seeded assignments ({count:,} too many to "
                  "enumerate)")
    return Test(name, observed, p_value, n, method=method)


def expected_j(sizes: list[int]) -> float:
    """The mean of J under no trend: half the pairs of values in different groups."""
    return (sum(sizes) ** 2 - sum(size * size for size in sizes)) / 4


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
        return Test(name, rho, float(scipy_stats.spearmanr(x, y).pvalue), len(x), "t approximation",
                    f"t approximation (more than {EXACT_SPEARMAN_MAX} players)")
    # Spearman's rho is Pearson's r of the (average) ranks. Permuting y's ranks alone
    # visits each pairing once: n! statistics, where passing (x, y) makes scipy permute
    # both samples, (n!)^2 of them with the same p (eight players: 1.6e9).
    x_ranks = scipy_stats.rankdata(x)
    exact = scipy_stats.permutation_test(
        (scipy_stats.rankdata(y),), lambda y_ranks, axis: _pearson_against(x_ranks, y_ranks, axis),
        permutation_type="pairings", n_resamples=math.inf, vectorized=True)
    return Test(name, rho, float(exact.pvalue), len(x), "exact permutation p",
                f"exact permutation over all {math.factorial(len(x)):,} pairings")


def _pearson_against(fixed: np.ndarray, samples: np.ndarray, axis: int) -> np.ndarray:
    """Pearson's r of `fixed` with every 1-D slice of `samples` along `axis`."""
    samples = np.moveaxis(samples, axis, -1)
    fixed_centred = fixed - fixed.mean()
    centred = samples - samples.mean(axis=-1, keepdims=True)
    return (centred @ fixed_centred) / np.sqrt((centred**2).sum(axis=-1) * (fixed_centred @ fixed_centred))


def kruskal_wallis(samples: list[list[float]], key: str = "family") -> Test:
    """scipy's Kruskal-Wallis H with the tie correction, judged by its chi-squared approximation.

    The report's groups hold hundreds of items, where the approximation is
    good; an exact permutation p over that many items is out of reach.
    """
    name = "Kruskal-Wallis H"
    n = sum(len(s) for s in samples)
    if len(samples) < 2:
        return Test(name, None, None, n, f"n/a: one {key}")
    if len({v for s in samples for v in s}) < 2:
        return Test(name, None, None, n, "n/a: every item has the same dropped share")
    result = scipy_stats.kruskal(*samples)
    return Test(name, float(result.statistic), float(result.pvalue), n, f"{len(samples)} groups",
                "chi-squared approximation, tie-corrected")
