"""The benchmark's statistics against scipy and hand computations: t-tests, bootstrap intervals, the table."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as scipy_stats

from benchmarks.stats import bootstrap_ci, paired_t_test, summarise, t_test_against_zero, table

# mean 0.8 / 3 and sample standard deviation 0.2041...: t = 3.2 exactly on 5 degrees of freedom.
SAMPLE = [0.3, 0.4, 0.5, 0.35, 0.1, -0.05]
SAMPLE_P = 0.023995176803300478  # 2 * P(T_5 > 3.2)


def _two_sided_p(values: list[float]) -> float:
    """The one-sample t-test against 0 by its textbook formula."""
    n = len(values)
    mean = sum(values) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    t = mean / (sd / math.sqrt(n))
    return 2 * scipy_stats.t.sf(abs(t), n - 1)


def test_t_test_against_zero_is_the_two_sided_one_sample_test():
    assert _two_sided_p(SAMPLE) == pytest.approx(SAMPLE_P, rel=1e-9)
    assert t_test_against_zero(SAMPLE) == pytest.approx(SAMPLE_P, rel=1e-9)
    assert t_test_against_zero(SAMPLE) == pytest.approx(scipy_stats.ttest_1samp(SAMPLE, 0.0).pvalue, rel=1e-12)
    # Two-sided: the sign of the mean does not matter.
    assert t_test_against_zero([-v for v in SAMPLE]) == pytest.approx(SAMPLE_P, rel=1e-9)


def test_t_test_against_zero_limits():
    assert t_test_against_zero([0.0, 0.0, 0.0]) == 1.0  # nothing ever succeeded: no evidence at all
    assert t_test_against_zero([0.2, 0.2, 0.2]) == 0.0  # no spread around a non-zero mean
    assert math.isnan(t_test_against_zero([0.5]))
    assert math.isnan(t_test_against_zero([]))


def test_paired_t_test_is_scipys_related_test_and_the_one_sample_test_of_differences():
    trained = [0.10, 0.00, 0.20, 0.10, 0.30, 0.00, 0.10]
    random = [0.00, 0.00, 0.05, 0.00, 0.10, 0.00, 0.02]
    expected = 0.017457188595772322  # t = 3.2504 on 6 degrees of freedom
    assert paired_t_test(trained, random) == pytest.approx(expected, rel=1e-9)
    assert paired_t_test(trained, random) == pytest.approx(scipy_stats.ttest_rel(trained, random).pvalue, rel=1e-12)
    differences = [a - b for a, b in zip(trained, random, strict=True)]
    assert paired_t_test(trained, random) == pytest.approx(_two_sided_p(differences), rel=1e-9)
    # Pairing matters: the same values unpaired (Welch) give another p-value.
    assert scipy_stats.ttest_ind(trained, random, equal_var=False).pvalue != pytest.approx(expected, rel=1e-3)


def test_paired_t_test_limits():
    assert paired_t_test([0.1, 0.2, 0.3], [0.1, 0.2, 0.3]) == 1.0  # identical: no difference at all
    assert paired_t_test([0.2, 0.3, 0.4], [0.1, 0.2, 0.3]) == 0.0  # the same non-zero difference every time
    assert math.isnan(paired_t_test([0.1], [0.0]))


@pytest.mark.parametrize(("values", "ci95", "ci90"), [
    # Resampled means of three values take four levels with known chances: the mean of
    # [0, 1, 1] is 0 with chance 1/27 (> 2.5%, < 5%), of [0, 0, 1] it is 1 with chance 1/27.
    ([0.0, 1.0, 1.0], (0.0, 1.0), (1 / 3, 1.0)),
    ([0.0, 0.0, 1.0], (0.0, 1.0), (0.0, 2 / 3)),
])
def test_bootstrap_interval_of_an_enumerable_case(values, ci95, ci90):
    assert bootstrap_ci(values) == pytest.approx(ci95)
    assert bootstrap_ci(values, level=0.90) == pytest.approx(ci90)


def test_bootstrap_interval_matches_scipys_percentile_bootstrap():
    values = np.random.default_rng(1).normal(0.5, 1.0, 50)
    reference = scipy_stats.bootstrap((values,), np.mean, method="percentile", confidence_level=0.95,
                                      n_resamples=50_000, random_state=0).confidence_interval
    low, high = bootstrap_ci(values)
    # 2,000 resamples against 50,000: a few thousandths apart; a 90% interval would be 0.04 inside.
    assert low == pytest.approx(reference.low, abs=0.02)
    assert high == pytest.approx(reference.high, abs=0.02)
    assert bootstrap_ci(values, seed=3) != bootstrap_ci(values, seed=4)
    assert math.isnan(bootstrap_ci([])[0])


def test_bootstrap_interval_covers_a_known_mean_at_its_level():
    rng = np.random.default_rng(7)
    mean, repetitions = 0.3, 1000
    covered = {0.95: 0, 0.90: 0}
    for _ in range(repetitions):
        sample = rng.normal(mean, 1.0, 30)
        for level in covered:
            low, high = bootstrap_ci(sample, level=level)
            covered[level] += low <= mean <= high
    share95, share90 = covered[0.95] / repetitions, covered[0.90] / repetitions
    # Percentile intervals of 30 values run slightly below their level; 1,000 repetitions pin it to about 0.01.
    assert 0.90 <= share95 <= 0.99
    assert 0.83 <= share90 <= share95 - 0.02


def test_summary_mean_interval_maximum_p_value_and_count():
    by_minigame = {0: [0.1, 0.2], 1: [0.5, 0.7], 2: [0.0, 0.0, 0.3]}
    flat = [0.1, 0.2, 0.5, 0.7, 0.0, 0.0, 0.3]
    summary = summarise(by_minigame)
    assert summary.mean == pytest.approx(np.mean(flat))
    assert (summary.low, summary.high) == bootstrap_ci(flat)
    assert summary.maximum == pytest.approx(0.6)  # over mini-games, of the mean over seeds
    assert summary.p_value == pytest.approx(scipy_stats.ttest_1samp(flat, 0.0).pvalue, rel=1e-12)
    assert summary.n == 7
    assert summary.to_json()["ci95"] == [summary.low, summary.high]


def _record(minigame: int, seed: int, drop: float, random_drop: float, **extra) -> dict:
    return {"player": "p", "size": 10, "minigame": minigame, "seed": seed, "consistency": 2 * drop,
            "drop": drop, "random_consistency": 2 * random_drop, "random_drop": random_drop,
            "clean_accuracy": 0.9, **extra}


def test_table_rows_use_each_adversarys_own_figures():
    drops = [(0, 0, 0.1, 0.0), (0, 1, 0.2, 0.0), (1, 0, 0.0, 0.05), (1, 1, 0.3, 0.0), (2, 0, 0.1, 0.01)]
    records = [_record(*row) for row in drops]
    records[0]["search"] = {"consistency": 0.4, "drop": 0.2, "queries": 20.0}
    records.append({"player": "p", "size": 10, "minigame": 2, "seed": 1, "error": "the player crashed"})
    rows = {row["adversary"]: row for row in table(records)}
    assert set(rows) == {"trained", "random", "search"}

    trained, random, search = rows["trained"], rows["random"], rows["search"]
    trained_drops = [0.1, 0.2, 0.0, 0.3, 0.1]
    random_drops = [0.0, 0.0, 0.05, 0.0, 0.01]
    assert trained["trials"] == random["trials"] == 5  # the failed trial is left out
    assert trained["drop"]["mean"] == pytest.approx(0.14)
    assert trained["consistency"]["mean"] == pytest.approx(0.28)
    assert trained["drop"]["max_over_minigames"] == pytest.approx(0.15)
    assert trained["drop"]["ci95"] == list(bootstrap_ci(trained_drops))
    assert trained["drop"]["p_value"] == pytest.approx(scipy_stats.ttest_1samp(trained_drops, 0.0).pvalue)
    assert random["drop"]["mean"] == pytest.approx(0.012)
    assert random["consistency"]["mean"] == pytest.approx(0.024)
    assert random["drop"]["max_over_minigames"] == pytest.approx(0.025)
    # "drop p vs random": the paired test over the same trials.
    assert trained["drop_p_vs_random"] == pytest.approx(
        scipy_stats.ttest_rel(trained_drops, random_drops).pvalue, rel=1e-12)
    assert search["trials"] == 1 and search["drop"]["mean"] == pytest.approx(0.2)
    assert search["consistency"]["mean"] == pytest.approx(0.4)
    assert "jaccard_loss" not in trained  # CLEVR trials: no set answers


def test_set_answer_trials_get_a_jaccard_loss_per_adversary():
    records = [_record(m, s, 0.1, 0.0) for m in range(3) for s in range(2)]
    for k, record in enumerate(records):
        record["jaccard_loss"], record["random_jaccard_loss"] = 0.05 * k, 0.01
    rows = {row["adversary"]: row for row in table(records)}
    losses = [0.05 * k for k in range(6)]
    assert rows["trained"]["jaccard_loss"]["mean"] == pytest.approx(np.mean(losses))
    assert rows["trained"]["jaccard_loss"]["ci95"] == list(bootstrap_ci(losses))
    assert rows["random"]["jaccard_loss"]["mean"] == pytest.approx(0.01)


def test_benchmark_tables_keep_a_slow_baseline_visible():
    from perf.timing import figure

    assert figure(1 / 406.16) == "0.00246"  # perf_report's scipy baseline, one test in 406 s
    assert figure(13718.94) == "13718.9" and figure(1.0) == "1.0" and figure(0.0) == "0.0"
