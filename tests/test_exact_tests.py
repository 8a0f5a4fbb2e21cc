"""The Table 2 report's exact tests, its Holm correction and its units, against enumeration, scipy and hand work.

Brute force here means the definitions, written out: every assignment of the
values to the groups (every permutation, so each distinct assignment counts
as often as it repeats) and every sign flip of the paired differences.
"""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest
from scipy import stats as scipy_stats

from benchmarks import stats, table2
from benchmarks.stats import holm

# ---------------------------------------------------------------- Jonckheere-Terpstra by enumeration


def _j(groups: list[list[float]]) -> float:
    """J by its definition: over groups i < j and values x of i, y of j, 1 when y > x, 1/2 when equal."""
    return sum(1.0 if y > x else 0.5 if y == x else 0.0
               for i, j in itertools.combinations(range(len(groups)), 2) for x in groups[i] for y in groups[j])


def _brute_force_jt(groups: list[list[float]]) -> float:
    """Two-sided p over every permutation of the pooled values cut into groups of the same sizes."""
    values = [v for g in groups for v in g]
    sizes = [len(g) for g in groups]
    cuts = np.cumsum([0, *sizes])
    mean = (len(values) ** 2 - sum(s * s for s in sizes)) / 4
    observed = abs(_j(groups) - mean)
    null = [abs(_j([list(p[cuts[k]:cuts[k + 1]]) for k in range(len(sizes))]) - mean)
            for p in itertools.permutations(values)]
    return float(np.mean(np.array(null) >= observed))


CASES = [
    [[0.3, 0.2, 0.25], [0.1, 0.15], [0.0]],  # 3 / 2 / 1 mini-games, falling in perfect order
    [[0.0, 0.0, 0.0], [0.0, 0.004], [0.002]],  # Table 2's shape: mostly zeros, ties everywhere
    [[0.1, 0.3], [0.2, 0.2], [0.4, 0.1]],
    [[1.0, 2.0, 2.0, 5.0], [2.0, 3.0, 4.0]],
    [[0.5], [0.1], [0.3], [0.2, 0.6]],
    [[3.0, 1.0], [2.0]],
]


@pytest.mark.parametrize("groups", CASES)
def test_exact_jonckheere_terpstra_is_the_enumeration_of_every_assignment(groups):
    test = table2.jonckheere_terpstra(groups)
    sizes = [len(g) for g in groups]
    count = math.factorial(sum(sizes)) // math.prod(math.factorial(s) for s in sizes)
    assert test.statistic == _j(groups)
    assert test.p_value == pytest.approx(_brute_force_jt(groups), abs=1e-12)
    assert test.method == f"exact permutation over all {count:,} assignments of the values to the sizes"


def test_three_two_one_minigames_in_perfect_order_have_p_one_in_thirty():
    """2 of the 60 assignments are as extreme: p = 0.033, where the normal approximation said 0.024."""
    falling = table2.jonckheere_terpstra([[0.3, 0.2, 0.25], [0.1, 0.15], [0.0]])
    assert falling.statistic == 0 and falling.p_value == pytest.approx(2 / 60)
    z = -5.5 / math.sqrt((6 * 5 * 17 - 3 * 2 * 11 - 2 * 1 * 9) / 72)
    assert 2 * scipy_stats.norm.sf(abs(z)) == pytest.approx(0.024, abs=5e-4)
    # results/table2's state-rn under random valid moves: J = 10 of 11 with three tied zeros, 5 of 60
    # assignments as far from the mean 5.5 (the normal approximation said 0.049).
    rising = table2.jonckheere_terpstra([[0.0, 0.0, 0.0], [0.00375, 0.003125], [0.00325]])
    assert rising.statistic == 10 and rising.p_value == pytest.approx(5 / 60)


def test_two_groups_without_ties_is_scipys_exact_mann_whitney():
    rng = np.random.default_rng(7)
    for sizes in ((3, 4), (5, 2), (6, 6)):
        first, second = rng.random(sizes[0]).round(6).tolist(), rng.random(sizes[1]).round(6).tolist()
        test = table2.jonckheere_terpstra([first, second])
        scipy_result = scipy_stats.mannwhitneyu(second, first, method="exact")
        assert test.statistic == pytest.approx(scipy_result.statistic)
        assert test.p_value == pytest.approx(scipy_result.pvalue, abs=1e-12)


def test_equal_groups_with_ties_are_scipys_permutation_test():
    """With equal group sizes the null is symmetric, so the distance from the mean is scipy's doubled tail."""
    groups = [[0.1, 0.3, 0.3], [0.2, 0.3, 0.0], [0.4, 0.1, 0.5]]
    scipy_result = scipy_stats.permutation_test(
        groups, lambda *samples: _j([list(s) for s in samples]), permutation_type="independent",
        n_resamples=math.inf)
    assert table2.jonckheere_terpstra(groups).p_value == pytest.approx(scipy_result.pvalue, abs=1e-12)


def test_too_many_assignments_are_drawn_at_random_with_a_seed(monkeypatch):
    groups = [[0.3, 0.2, 0.25, 0.05], [0.1, 0.15, 0.22], [0.0, 0.12]]
    exact = table2.jonckheere_terpstra(groups)
    monkeypatch.setattr(stats, "EXACT_MAX", 100)
    drawn = table2.jonckheere_terpstra(groups)
    assert drawn.method == "Monte Carlo permutation, 100,000 seeded assignments (1,260 too many to enumerate)"
    assert drawn.p_value == table2.jonckheere_terpstra(groups).p_value  # seeded: the same on every rebuild
    assert drawn.p_value == pytest.approx(exact.p_value, abs=0.003) and drawn.statistic == exact.statistic


def test_nothing_to_decide_is_not_applicable():
    assert table2.jonckheere_terpstra([[0.0, 0.0], [0.0]]).p_value is None
    assert table2.jonckheere_terpstra([[0.1, 0.2], []]).note == "n/a: fewer than two sizes with trials"


# ---------------------------------------------------------------- Wilcoxon signed-rank


def _brute_force_wilcoxon(differences: list[float]) -> float:
    """Two-sided p over every sign flip of the nonzero differences, ranked with midranks."""
    d = np.array([x for x in differences if x != 0])
    ranks = scipy_stats.rankdata(np.abs(d))
    mean = ranks.sum() / 2
    observed = abs(ranks[d > 0].sum() - mean)
    null = [abs(ranks[np.array(signs)].sum() - mean) for signs in itertools.product([False, True], repeat=len(d))]
    return float(np.mean(np.array(null) >= observed - 1e-9))


@pytest.mark.parametrize("differences", [
    [0.08, 0.05, 0.0, 0.12, -0.02, 0.06, 0.29],
    [0.3, -0.1, 0.2, 0.4, 0.5, 0.6],
    [-0.01, -0.03, -0.02],
])
def test_wilcoxon_without_ties_is_scipys_exact_test_and_the_enumeration(differences):
    test = table2.wilcoxon_paired(differences, [0.0] * len(differences))
    nonzero = [d for d in differences if d]
    scipy_result = scipy_stats.wilcoxon(nonzero, method="exact")
    assert test.method == "exact"
    assert test.statistic == pytest.approx(scipy_result.statistic)
    assert test.p_value == pytest.approx(scipy_result.pvalue, abs=1e-12)
    assert test.p_value == pytest.approx(_brute_force_wilcoxon(differences), abs=1e-12)


def test_wilcoxon_with_tied_differences_enumerates_every_sign_flip():
    differences = [0.1, 0.1, -0.1, 0.2, 0.3, 0.3, 0.0, 0.05]
    test = table2.wilcoxon_paired(differences, [0.0] * len(differences))
    assert test.method == "exact permutation over all 128 sign flips (tied differences)"
    assert test.p_value == pytest.approx(_brute_force_wilcoxon(differences), abs=1e-12)
    # Drops averaged in another order still tie: 0.1 + 0.2 and 0.2 + 0.1 differ by 1e-17 in floats.
    assert table2.wilcoxon_paired([(0.1 + 0.2) / 2, (0.2 + 0.1) / 2], [0.0, 0.0]).method.startswith("exact perm")


@pytest.mark.slow  # 20 s: 100,000 seeded sign flips, twice; the exact paths above run by default
def test_wilcoxon_with_ties_and_too_many_flips_is_monte_carlo_with_a_seed():
    differences = [0.1 * (k % 7 + 1) * (-1 if k % 5 == 0 else 1) for k in range(24)]
    test = table2.wilcoxon_paired(differences, [0.0] * len(differences))
    assert test.method == ("Monte Carlo permutation, 100,000 seeded sign flips (tied differences, 2^24 flips too "
                           "many to enumerate)")
    assert test.p_value == table2.wilcoxon_paired(differences, [0.0] * len(differences)).p_value
    approximate = scipy_stats.wilcoxon(differences, method="approx").pvalue
    assert test.p_value == pytest.approx(approximate, rel=0.2)


# ---------------------------------------------------------------- Holm


def test_holm_by_hand():
    # Sorted: 0.005 x 4 = 0.02, 0.01 x 3 = 0.03, 0.03 x 2 = 0.06, 0.04 x 1 = 0.04, held up to 0.06.
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.5, 0.6, 0.01]) == pytest.approx([1.0, 1.0, 0.03])  # capped at 1
    assert holm([0.02, 0.02]) == pytest.approx([0.04, 0.04])
    assert holm([0.3]) == [0.3] and holm([]) == []


def _records() -> list[dict]:
    records = []
    for player, base in (("a", 0.2), ("b", 0.05), ("c", 0.0)):
        for size, minigames in ((10, 3), (100, 2), (1000, 1)):
            for mg in range(minigames):
                for seed in range(2):
                    for adversary, factor in (("state", 1.0), ("pixel", 0.4)):
                        drop = round(base * factor * (1 + 0.3 * mg - 0.1 * seed) * 10 / size ** 0.5, 6)
                        records.append({"trial": f"{player}__{adversary}__{size}__{mg}__{seed}", "player": player,
                                        "adversary": adversary, "size": size, "minigame": mg, "seed": seed,
                                        "drop": drop, "consistency": 2 * drop, "clean_accuracy": 0.9 - base,
                                        "random_consistency": 0.0, "random_drop": drop / 3})
    return records


def test_answers_adjust_every_printed_p_by_holm_over_all_of_them():
    answers = table2.answers(_records(), [])
    tests = table2._tests(answers)
    tested = [t for t in tests if t["p_value"] is not None]
    assert answers["holm"] == {"tests": len(tested), "level": 0.05} and len(tested) > 10
    assert [t["p_holm"] for t in tested] == pytest.approx(holm([t["p_value"] for t in tested]))
    assert all(t["p_holm"] is None for t in tests if t["p_value"] is None)
    assert all(t["p_holm"] >= t["p_value"] for t in tested)


# ---------------------------------------------------------------- the units


def test_seeds_of_a_minigame_are_one_unit_in_questions_one_and_two():
    records = _records()
    pairs = table2.drop_pairs(records)
    assert len(pairs) == 3 * 6  # player x mini-game, not x seed
    seeds = [r["drop"] for r in records if (r["player"], r["adversary"], r["size"], r["minigame"]) ==
             ("a", "state", 100, 1)]
    assert pairs[("a", 100, 1)][0] == pytest.approx(np.mean(seeds))
    overall = table2.adversary_inputs(records)["all"]
    assert overall["pairs"] == 18 and overall["note"] == "12 of 18 pairs differ"  # c never breaks: zeros
    row = next(r for r in table2.size_trend(records) if (r["player"], r["adversary"]) == ("a", "trained"))
    assert row["n"] == 6 and row["minigames"] == [3, 2, 1]


def test_an_item_is_one_unit_per_player_and_adversary_in_question_four():
    rows = [{"player": "p", "adversary": adversary, "item_id": item, "family": family, "kind": "count",
             "dropped_share": share}
            for adversary, item, family, share in [("trained", "i1", "f", 0.2), ("trained", "i1", "f", 0.4),
                                                   ("trained", "i2", "g", 0.0), ("trained-pixel", "i1", "f", 1.0)]]
    assert table2.item_means(rows) == {("p", "trained"): {"f": [pytest.approx(0.3)], "g": [0.0]},
                                       ("p", "trained-pixel"): {"f": [1.0]}}


def _move(item: str, moves: list, changed: bool, dropped: bool = False) -> dict:
    return {"item_id": item, "moves": moves, "changed": changed, "dropped": dropped}


def test_identical_moves_count_once_in_question_five():
    one = [[3, 0.3, 0.0], [5, 0.0, 0.0]]
    manipulations = [
        _move("i1", one, True, True), _move("i1", [[5, 0.0, 0.0], [3, 0.3, 0.0]], True, True),  # same move
        _move("i1", one, True, True), _move("i2", one, True),  # another item: another move
        _move("i1", [[3, 0.3, 0.3]], False), _move("i1", [[3, 0.3, 0.3]], False),
        _move("i1", [[3, 0.3, 0.0], [4, 0.0, -0.6]], False),
    ]
    distinct = table2.distinct_move_sizes(manipulations)
    assert distinct["valid"]["moved_objects"] == {"1": 3, "2": 1}
    assert distinct["changed"] == {"moved_objects": {"1": 2}, "displacement": {"0.3000": 2}}
    assert distinct["dropped"]["displacement"] == {"0.3000": 1}
    # A trial record that keeps them is counted over distinct moves; one without falls back to every move.
    sizes = {"valid": {"moved_objects": {"1": 6, "2": 1}, "displacement": {"0.3000": 4, "0.4243": 2, "0.9000": 1}},
             "changed": {"moved_objects": {"1": 4}, "displacement": {"0.3000": 4}},
             "dropped": {"moved_objects": {"1": 3}, "displacement": {"0.3000": 3}}}
    record = {"trial": "t", "player": "p", "adversary": "state", "size": 10, "minigame": 0, "seed": 0}
    with_distinct = table2.manipulation_summary([{**record, "manipulation_sizes": {**sizes, "distinct": distinct}}])
    assert with_distinct[0]["moves"] == "distinct moves" and with_distinct[0]["changed"]["objects"]["count"] == 2
    without = table2.manipulation_summary([{**record, "manipulation_sizes": sizes}])
    assert without[0]["moves"] == "evaluation moves" and without[0]["changed"]["objects"]["count"] == 4


def test_a_trial_records_its_distinct_moves(tmp_path):
    from benchmarks.trials import manipulation_sizes

    move = {"item_id": "1:2", "moves": [[0, 0.3, 0.0]], "valid": True, "changed": True, "dropped": True}
    other = {"item_id": "1:2", "moves": [[1, 0.0, 0.6]], "valid": True, "changed": False, "dropped": False}
    path = tmp_path / "manipulations.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in (move, move, move, other)) + "\n")
    sizes = manipulation_sizes(path)
    assert sizes["valid"]["moved_objects"] == {"1": 4} and sizes["dropped"]["displacement"] == {"0.3000": 3}
    assert sizes["distinct"]["valid"]["moved_objects"] == {"1": 2}
    assert sizes["distinct"]["dropped"]["displacement"] == {"0.3000": 1}
