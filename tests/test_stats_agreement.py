"""The reported statistics agree with scipy and with their textbook definitions, at the level each report states.

The committed reports cannot guard these: the CLEVR-POC sizes report has no
interval that a 90% level would leave unchanged by chance only, and Table 2 has
too few players (at most 8) to reach Spearman's t approximation.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter

import numpy as np
import pytest
from scipy import stats as scipy_stats

from benchmarks import table2
from experiments import poc_training_sizes
from players.poc.evaluation import PocEvaluation

# ---------------------------------------------------------------- Wilson intervals of exact accuracy

COUNTS = [(0, 1), (1, 1), (0, 10), (10, 10), (3, 10), (37, 50), (1, 200), (512, 600)]


def _wilson(right: int, total: int, level: float = 0.95) -> tuple[float, float]:
    """Wilson's score interval from its formula."""
    z = scipy_stats.norm.ppf(0.5 + level / 2)
    share = right / total
    centre = (share + z * z / (2 * total)) / (1 + z * z / total)
    half = z / (1 + z * z / total) * math.sqrt(share * (1 - share) / total + z * z / (4 * total * total))
    return centre - half, centre + half


@pytest.fixture
def evaluate_with(monkeypatch):
    """`poc_training_sizes.evaluate` of a player that got `right` of `total` items exactly right."""
    import players.poc.evaluation
    import players.registry

    def run(right: int, total: int) -> dict:
        result = PocEvaluation(items=Counter(color=total), exact=Counter(color=right),
                               jaccard=Counter(color=float(right)))
        monkeypatch.setattr(players.registry, "load", lambda *args, **kwargs: object())
        monkeypatch.setattr(players.poc.evaluation, "evaluate_poc_player", lambda *args, **kwargs: result)
        return poc_training_sizes.evaluate("poc-neural", "unused.pt", "unused", offset=0, limit=None)

    return run


@pytest.mark.parametrize(("right", "total"), COUNTS)
def test_the_exact_accuracy_interval_is_the_95_percent_wilson_interval(evaluate_with, right, total):
    figures = evaluate_with(right, total)
    scipy_ci = scipy_stats.binomtest(right, total).proportion_ci(method="wilson")  # 95% by default
    assert figures["exact_ci"] == [round(scipy_ci.low, 4), round(scipy_ci.high, 4)]
    assert figures["exact_ci"] == pytest.approx(_wilson(right, total), abs=5e-5)
    assert figures["exact"] == round(right / total, 4) and figures["items"] == total


def test_the_wilson_formula_is_scipys_at_every_level():
    for (right, total), level in itertools.product(COUNTS, (0.9, 0.95, 0.99)):
        ci = scipy_stats.binomtest(right, total).proportion_ci(level, method="wilson")
        assert (ci.low, ci.high) == pytest.approx(_wilson(right, total, level), abs=1e-12)


# ---------------------------------------------------------------- Spearman's rank correlation across players


def _samples(n: int, seed: int, ties: bool) -> tuple[list[float], list[float]]:
    rng = np.random.default_rng(seed)
    x, y = rng.random(n), rng.random(n) + 0.8 * np.arange(n) / n
    if ties:
        x, y = np.round(x * 3) / 3, np.round(y * 4) / 4
    return x.tolist(), y.tolist()


def _exact_p(x: list[float], y: list[float]) -> float:
    """Two-sided p of Spearman's rho over every pairing of y's ranks with x's, as scipy's permutation test counts."""
    x_ranks, y_ranks = scipy_stats.rankdata(x), scipy_stats.rankdata(y)
    observed = np.corrcoef(x_ranks, y_ranks)[0, 1]
    pairings = np.array(list(itertools.permutations(y_ranks)))
    x_centred, centred = x_ranks - x_ranks.mean(), pairings - pairings.mean(axis=1, keepdims=True)
    null = centred @ x_centred / np.sqrt((centred**2).sum(axis=1) * (x_centred @ x_centred))
    slack = 1e-12 * max(1.0, abs(observed))  # equal statistics computed in another order
    below, above = np.mean(null <= observed + slack), np.mean(null >= observed - slack)
    return min(1.0, 2 * min(below, above))


@pytest.mark.parametrize("n", [9, 10, 12, 20, 40])
@pytest.mark.parametrize("ties", [False, True])
def test_spearman_above_eight_players_is_scipys_t_approximation(n, ties):
    for seed in range(5):
        x, y = _samples(n, seed, ties)
        test = table2.spearman(x, y)
        scipy_result = scipy_stats.spearmanr(x, y)
        assert test.note == "t approximation" and test.n == n
        assert test.statistic == pytest.approx(scipy_result.statistic, abs=1e-12)
        assert test.p_value == pytest.approx(scipy_result.pvalue, rel=1e-9, abs=1e-300)
        rho = test.statistic
        t = rho * math.sqrt((n - 2) / (1 - rho * rho))
        assert test.p_value == pytest.approx(2 * scipy_stats.t.sf(abs(t), n - 2), rel=1e-9)


@pytest.mark.parametrize("n", [3, 4, 5, 6, 7, 8])
@pytest.mark.parametrize("ties", [False, True])
def test_spearman_up_to_eight_players_is_the_exact_enumeration(n, ties):
    for seed in range(3):
        x, y = _samples(n, seed, ties)
        if len(set(x)) < 2 or len(set(y)) < 2:
            continue
        test = table2.spearman(x, y)
        assert test.note == "exact permutation p" and test.n == n
        assert test.statistic == pytest.approx(scipy_stats.spearmanr(x, y).statistic, abs=1e-12)
        assert test.p_value == pytest.approx(_exact_p(x, y), abs=1e-12)


def test_three_players_in_perfect_order_have_p_one_third():
    """2 of the 3! pairings are as extreme as a perfect order: far from the t approximation's p = 0."""
    test = table2.spearman([0.1, 0.2, 0.3], [1.0, 2.0, 3.0])
    assert test.statistic == pytest.approx(1.0) and test.p_value == pytest.approx(1 / 3)
