"""The Table 2 experiment: the table2 presets, disjoint mini-games, the random valid adversary, the statistics
of the five questions (each against scipy on hand-made trials) and the report rebuilt byte for byte from the
committed trials fixture (tests/data/table2_trials.jsonl: hand-made records of three players, two adversary
inputs and three sizes, with no run folders)."""

from __future__ import annotations

import json
import math
import shutil
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as scipy_stats

from agents.evaluation import moved_objects, random_valid_actions, total_displacement
from benchmarks import table2
from benchmarks.presets import PRESETS, estimated_hours, items_needed, pool_items
from benchmarks.report import build_report
from benchmarks.runner import prepare, run_plan
from benchmarks.trials import Plan, SizeBudget
from clevr_game.errors import InputError
from clevr_game.generate import generate_dataset
from envs.game import Game
from envs.items import ItemPool, load_items
from envs.minigames import MiniGames
from players.registry import available, load_guarded

FIXTURE = Path(__file__).parent / "data" / "table2_trials.jsonl"


@pytest.fixture(scope="module")
def items_dir(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("table2") / "items"
    generate_dataset(folder, 40, 2, seed=11, progress=False)
    return folder


def _record(player: str, adversary: str, size: int, minigame: int, seed: int, drop: float, **extra) -> dict:
    tag = "" if adversary == "state" else f"__{adversary}"
    return {"trial": f"{player}{tag}__size{size}__mg{minigame}__seed{seed}", "player": player,
            "adversary": adversary, "size": size, "minigame": minigame, "seed": seed, "drop": drop,
            "consistency": 2 * drop, "clean_accuracy": 0.9, "random_consistency": 0.0, "random_drop": 0.0, **extra}


# ------------------------------------------------------------------ the presets


def test_table2_presets_cover_the_papers_experiment():
    preset = PRESETS["table2"]
    assert preset.adversaries == ("state", "pixel") and preset.sizes == (10, 100, 1000)
    expected = ["state-transformer", "state-rn", "neuro-symbolic", "film", "pixel-rn", "blind"]
    assert list(preset.players) == expected
    # object-transformer joins only once the registry has it.
    assert ("object-transformer" in preset.all_players()) == ("object-transformer" in available())
    for name in ("table2", "table2-full", "table2-pilot"):
        assert items_needed(PRESETS[name]) <= pool_items(PRESETS[name]), name
    for name in ("table2", "table2-full"):
        design = PRESETS[name]
        # At least 10 / 5 / 3 mini-games, every one on scenes of its own, every referee for every player.
        assert [design.budget(size).minigames for size in design.sizes] == [10, 5, 3]
        assert design.pool_questions_per_scene == 1 and design.check_visibility is True
        # The same training steps per item at every size: size is not confounded with budget.
        assert {design.budget(size).steps / size for size in design.sizes} == {500}
        assert {(design.budget(size).eval_samples, design.budget(size).search_budget)
                for size in design.sizes} == {(16, 50)}
    assert {PRESETS["table2"].budget(size).seeds for size in (10, 100, 1000)} == {2}
    assert {PRESETS["table2-full"].budget(size).seeds for size in (10, 100, 1000)} == {30}
    players = (*expected, "object-transformer")
    # From the measured trial times: the pilot fit 8 hours on two cores; the design needs several runs.
    assert 0.5 <= estimated_hours(PRESETS["table2-pilot"], players[:5]) <= 8
    assert 8 < estimated_hours(preset, players) < 24
    assert estimated_hours(PRESETS["table2-full"], players) == pytest.approx(15 * estimated_hours(preset, players))


# ------------------------------------------------------------------ disjoint mini-games


def test_minigames_of_all_sizes_share_no_item(items_dir, tmp_path):
    budgets = (SizeBudget(5, 3, 1, 64), SizeBudget(10, 2, 1, 64), SizeBudget(20, 1, 1, 64))
    plan = Plan(players=["oracle"], items=str(items_dir), sizes=[20, 5, 10], minigames=1, seeds=1, steps=64,
                out=str(tmp_path / "a"), per_size=budgets)
    prepare(plan)
    games = {size: MiniGames.load(plan.manifest(size)) for size in (5, 10, 20)}
    assert {size: len(g) for size, g in games.items()} == {5: 3, 10: 2, 20: 1}
    dealt = [item for g in games.values() for game in g.games for item in game]
    assert len(dealt) == 15 + 20 + 20 and len(set(dealt)) == len(dealt)
    # The same plan elsewhere deals the same mini-games; every trial names its size's manifest.
    again = Plan(**{**plan.__dict__, "out": str(tmp_path / "b")})
    prepare(again)
    assert all(MiniGames.load(again.manifest(s)).games == games[s].games for s in games)
    assert {t["minigames_file"] for t in plan.trials()} == {str(plan.manifest(s)) for s in games}

    # A resumed plan that asks more mini-games keeps the dealt ones and stays disjoint.
    more = Plan(**{**plan.__dict__, "per_size": (SizeBudget(5, 4, 1, 64), *budgets[1:])})
    prepare(more)
    grown = MiniGames.load(plan.manifest(5))
    assert grown.games[:3] == games[5].games and len(grown) == 4
    dealt = [item for s in (5, 10, 20) for game in MiniGames.load(plan.manifest(s)).games for item in game]
    assert len(set(dealt)) == len(dealt) == 60


def test_a_pool_too_small_for_disjoint_minigames_is_one_line(items_dir, tmp_path):
    plan = Plan(players=["oracle"], items=str(items_dir), sizes=[10, 50], minigames=1, seeds=1, steps=64,
                out=str(tmp_path), per_size=(SizeBudget(10, 4, 1, 64),))
    with pytest.raises(InputError, match=r"^the pool of 80 items is too small .* sizes 10, 50 need 90 items$"):
        prepare(plan)


# ------------------------------------------------------------------ the random valid adversary


def _hidden_on_the_right(scene) -> list[int]:
    """A visibility referee of the game's hook kind: objects right of x = 2 count as hidden."""
    return [i for i, o in enumerate(scene.objects) if o.coords[0] > 2.0]


def test_random_valid_moves_pass_every_referee_and_move_one_or_two_objects(items_dir):
    # Scenes that pass the hook unmoved, so any rejection is a move's doing.
    pool = ItemPool([it for it in load_items(items_dir) if not _hidden_on_the_right(it.scene)][:24])
    with load_guarded("oracle") as player:
        game = Game(pool, player, visibility=_hidden_on_the_right)
        indices = np.repeat(np.arange(len(pool)), 8)
        heads = np.random.default_rng(0).permuted(np.tile(np.arange(10), (len(indices), 1)), axis=1)
        actions = random_valid_actions(game, seed=3)(indices, heads)
        asked = player.count.queries
        judged = game.judge_moves(indices, heads, actions)
        assert player.count.queries == asked, "judging asked the player"
        outcomes = game.play(indices, heads, actions)
    # What judge_moves accepted, play accepts: boundary, the visibility hook and relevance alike.
    assert [o.valid for o in outcomes] == judged.tolist()
    assert judged.mean() > 0.9
    for outcome in outcomes:
        if outcome.valid:
            assert 1 <= moved_objects(outcome.moves) <= 2 and total_displacement(outcome.moves) >= 0.3
            assert all(o.coords[0] <= 2.0 for o in outcome.new_scene.objects)
            assert outcome.new_scene is not None and outcome.true_answer == pool.items[
                next(i for i, it in enumerate(pool.items) if it.item_id == outcome.item_id)].answer
    counts = Counter(moved_objects(o.moves) for o in outcomes if o.valid)
    assert counts[1] and counts[2]


def test_random_valid_adversary_is_judged_by_the_render_visibility_referee(items_dir):
    """check_visibility: the object-index render of Blender judges every candidate, as `play` does."""
    pool = ItemPool(load_items(items_dir)[:3])
    with load_guarded("oracle") as player:
        game = Game(pool, player, check_visibility=True, visibility_counter="index")
        indices, heads = np.repeat([0, 1, 2], 3), np.tile(np.arange(10), (9, 1))
        actions = random_valid_actions(game, seed=5)(indices, heads)
        judged_by_render = game.renderer.stats.coverage_rendered
        outcomes = game.play(indices, heads, actions)
    assert judged_by_render >= 9, "candidates were not judged by the index render"
    assert all(o.valid and o.verdicts[-1].enforcer == "visibility" and o.verdicts[-1].ok for o in outcomes)


def test_random_valid_baseline_is_in_result_and_trial_record(items_dir, tmp_path):
    plan = Plan(players=["oracle"], items=str(items_dir), sizes=[10], minigames=1, seeds=1, steps=64,
                out=str(tmp_path), num_envs=64, eval_samples=4, search_budget=0)
    record = next(iter(run_plan(plan, workers=1).values()))
    result = json.loads((Path(record["run"]) / "result.json").read_text())
    assert record["random_valid_consistency"] == result["random_valid_consistency"] == 0.0  # the oracle
    assert record["random_valid_drop"] == result["random_valid_drop"] == 0.0
    assert result["random_valid_invalid"] < 0.1
    assert len(record["item_results"]) == 10 and {len(row) for row in record["item_results"]} == {5}
    valid = sum(1 for _ in (Path(record["run"]) / "manipulations.jsonl").open())
    assert sum(record["manipulation_sizes"]["valid"]["moved_objects"].values()) == valid
    assert record["manipulation_sizes"]["changed"] == {"moved_objects": {}, "displacement": {}}


# ------------------------------------------------------------------ 1. state vs pixel: Wilcoxon


def test_wilcoxon_pairs_each_minigames_seed_means_like_scipy():
    state = [0.10, 0.30, 0.05, 0.22, 0.18, 0.07, 0.40]
    pixel = [0.02, 0.25, 0.05, 0.10, 0.20, 0.01, 0.11]
    records = []
    for k, (s, p) in enumerate(zip(state, pixel, strict=True)):
        player, size = ("a" if k < 4 else "b"), (10 if k % 2 else 100)
        # Two seeds a mini-game, 0.01 either side of its mean: one pair, not two.
        for seed, shift in enumerate((-0.01, 0.01)):
            records += [_record(player, "state", size, k, seed, s + shift),
                        _record(player, "pixel", size, k, seed, p - shift)]
    records.append(_record("a", "state", 10, 99, 0, 0.9))  # no pixel partner: not a pair
    records.append({**_record("a", "pixel", 10, 1, 2, 0.5), "error": "crashed"})  # failed: left out
    answer = table2.adversary_inputs(records)
    order = sorted(range(7), key=lambda k: ("a" if k < 4 else "b", 10 if k % 2 else 100, k))
    differences = [state[k] - pixel[k] for k in order if state[k] != pixel[k]]
    expected = scipy_stats.wilcoxon(differences, method="exact")  # no tied |difference|: the exact test
    assert answer["all"]["pairs"] == 7 and answer["all"]["note"] == "6 of 7 pairs differ"
    assert answer["all"]["method"] == "exact"
    assert answer["all"]["statistic"] == pytest.approx(expected.statistic)
    assert answer["all"]["p_value"] == pytest.approx(expected.pvalue)
    assert answer["all"]["mean_drop_state"] == pytest.approx(np.mean(state))
    assert answer["all"]["stronger"] == "state"
    only_b = scipy_stats.wilcoxon(state[4:], pixel[4:], method="exact")
    assert answer["players"]["b"]["p_value"] == pytest.approx(only_b.pvalue) == pytest.approx(4 / 8)


def test_wilcoxon_with_every_difference_zero_is_not_applicable():
    records = [_record("a", kind, 10, mg, 0, 0.0) for kind in ("state", "pixel") for mg in range(4)]
    answer = table2.adversary_inputs(records)["all"]
    assert answer["statistic"] is None and answer["p_value"] is None
    assert answer["note"] == "n/a: every paired difference is zero" and answer["stronger"] == "neither"


# ------------------------------------------------------------------ 2. drop vs size: Jonckheere-Terpstra


def test_size_trend_takes_each_minigames_mean_over_seeds():
    drops = {(10, 0): [0.3, 0.5], (10, 1): [0.2, 0.2], (100, 0): [0.1, 0.3], (100, 1): [0.05, 0.05],
             (1000, 0): [0.0, 0.02]}
    records = [_record("p", "state", size, mg, seed, d) for (size, mg), ds in drops.items()
               for seed, d in enumerate(ds)]
    row = next(r for r in table2.size_trend(records) if r["adversary"] == "trained")
    expected = table2.jonckheere_terpstra([[0.4, 0.2], [0.2, 0.05], [0.01]])
    assert row["sizes"] == [10, 100, 1000] and row["minigames"] == [2, 2, 1]
    assert row["mean_drop"] == pytest.approx([0.3, 0.125, 0.01])
    # Pairs across sizes: 0.4 > all three later, 0.2 ties 0.2 and exceeds 0.05 and 0.01, 0.2 > 0.01, 0.05 > 0.01.
    assert row["statistic"] == expected.statistic == 0.5 and row["expected_statistic"] == 4.0
    assert row["p_value"] == pytest.approx(expected.p_value) and row["direction"] == "falls"
    assert row["method"] == "exact permutation over all 30 assignments of the values to the sizes"
    assert table2.size_trend([r for r in records if r["size"] == 10])[0]["p_value"] is None


# ------------------------------------------------------------------ 3. clean accuracy vs robustness


def test_spearman_across_players_and_the_worst_minigame():
    players = {"a": (0.95, [0.01, 0.02]), "b": (0.80, [0.05, 0.02]), "c": (0.60, [0.04, 0.20]),
               "d": (0.40, [0.30, 0.10])}
    records = [dict(_record(p, "state", 10, mg, 0, d), clean_accuracy=acc)
               for p, (acc, ds) in players.items() for mg, d in enumerate(ds)]
    answer = table2.accuracy_vs_robustness(records)["adversaries"]["trained"]
    accuracy = [0.95, 0.80, 0.60, 0.40]
    mean_drop = [0.015, 0.035, 0.12, 0.2]
    expected = scipy_stats.spearmanr(accuracy, mean_drop)
    assert answer["accuracy_vs_drop"]["statistic"] == pytest.approx(expected.statistic)
    exact = scipy_stats.permutation_test((accuracy, mean_drop), lambda x, y: scipy_stats.spearmanr(x, y).statistic,
                                         permutation_type="pairings", n_resamples=math.inf)
    assert answer["accuracy_vs_drop"]["p_value"] == pytest.approx(exact.pvalue) == pytest.approx(2 / 24)
    worst = answer["players"]["c"]
    assert worst["max_consistency"] == pytest.approx(0.4) and worst["max_consistency_minigame"] == 1
    assert table2.spearman([1, 2], [2, 1]).p_value is None


@pytest.mark.parametrize("x, y", [
    ([0.9, 0.7, 0.7, 0.5, 0.2], [0.01, 0.05, 0.02, 0.02, 0.3]),  # ties on both sides
    ([0.3, 0.1, 0.8, 0.6, 0.5], [0.2, 0.4, 0.1, 0.3, 0.5]),
])
def test_the_exact_spearman_p_is_scipys_test_permuting_both_samples(x, y):
    both = scipy_stats.permutation_test((x, y), lambda a, b: scipy_stats.spearmanr(a, b).statistic,
                                        permutation_type="pairings", n_resamples=math.inf)
    test = table2.spearman(x, y)
    assert test.note == "exact permutation p"
    assert test.statistic == pytest.approx(scipy_stats.spearmanr(x, y).statistic)
    assert test.p_value == pytest.approx(both.pvalue)


def test_clean_accuracy_weighs_each_distinct_minigame_by_its_items():
    records = [dict(_record("p", "state", 10, 0, seed, 0.0), clean_accuracy=0.5) for seed in range(3)]
    records.append(dict(_record("p", "pixel", 100, 0, 0, 0.0), clean_accuracy=0.9))
    assert table2.clean_accuracy(records)["p"] == pytest.approx((10 * 0.5 + 100 * 0.9) / 110)


# ------------------------------------------------------------------ 4. which questions break


def test_kruskal_wallis_takes_one_value_per_distinct_item_and_adversary():
    shares = {"zero_hop": [0.0, 0.1, 0.0], "one_hop": [0.5, 0.4, 0.6, 0.3], "compare_integer": [0.2, 0.0]}
    rows = []
    for family, values in shares.items():
        for k, value in enumerate(values):
            # Two seeds per item, value -/+ 0.05 (0.0 twice): one unit at the item's mean.
            for shift in (-0.05, 0.05) if value else (0.0, 0.0):
                rows.append({"player": "p", "adversary": "trained", "item_id": f"{family}:{k}", "family": family,
                             "kind": "count", "dropped_share": value + shift})
            # The pixel adversary broke nothing on the same items: tested apart, not pooled.
            rows.append({"player": "p", "adversary": "trained-pixel", "item_id": f"{family}:{k}", "family": family,
                         "kind": "count", "dropped_share": 0.0})
    answer = table2.family_differences(rows)["p"]
    expected = scipy_stats.kruskal(shares["compare_integer"], shares["one_hop"], shares["zero_hop"])
    assert answer["trained"]["n"] == 9
    assert answer["trained"]["statistic"] == pytest.approx(expected.statistic)
    assert answer["trained"]["p_value"] == pytest.approx(expected.pvalue)
    assert answer["trained-pixel"]["note"] == "n/a: every item has the same dropped share"
    assert table2.family_differences(rows, "kind")["p"]["trained"]["note"] == "n/a: one kind"


# ------------------------------------------------------------------ 5. how small the manipulations are


def _sizes(valid: dict, changed: dict, dropped: dict | None = None) -> dict:
    def histogram(counts: dict) -> dict:
        return {"moved_objects": {"1": sum(counts.values())}, "displacement": counts}
    return {"valid": histogram(valid), "changed": histogram(changed), "dropped": histogram(dropped or {})}


def test_manipulation_sizes_are_tested_over_minigames_with_their_seeds_pooled():
    sizes = {(10, 0, 0): _sizes({"0.3000": 6, "0.6000": 4}, {"0.6000": 2}, {"0.6000": 1}),
             (10, 0, 1): _sizes({"0.3000": 4}, {"0.3000": 2}),
             (10, 1, 0): _sizes({"0.3000": 5, "0.9000": 5}, {"0.9000": 5}),
             (100, 0, 0): _sizes({"0.3000": 3, "1.2000": 3}, {"1.2000": 1}),
             (100, 1, 0): _sizes({"0.3000": 3}, {})}
    records = [dict(_record("p", "state", size, mg, seed, 0.1), manipulation_sizes=s)
               for (size, mg, seed), s in sizes.items()]
    row = table2.manipulation_summary(records)[0]
    assert row["moves"] == "evaluation moves"
    assert row["changed"]["objects"]["count"] == 10 and row["dropped"]["objects"]["count"] == 1
    assert row["changed"]["total_displacement"]["median"] == pytest.approx(0.9)
    # Mini-game (10, 0): seeds pooled, successful 0.6, 0.6, 0.3, 0.3 against unchanged 0.3 x 8, 0.6 x 2.
    changed = [0.45, 0.9, 1.2]
    unchanged = [(8 * 0.3 + 2 * 0.6) / 10, 0.3, (3 * 0.3 + 2 * 1.2) / 5]
    assert row["minigame_means"]["changed"] == pytest.approx(changed)
    assert row["minigame_means"]["unchanged"] == pytest.approx(unchanged)
    test = row["displacement_vs_unchanged"]
    expected = scipy_stats.wilcoxon(changed, unchanged, method="exact")
    assert test["statistic"] == pytest.approx(expected.statistic) and test["p_value"] == pytest.approx(expected.pvalue)
    assert test["n"] == 3 and test["note"].startswith("3 of 4 mini-games with a successful move")


def test_manipulation_measures():
    assert moved_objects([(0, 0.3, 0.0), (4, -0.3, 0.6)]) == 2
    assert total_displacement([(0, 0.3, 0.0), (4, -0.3, 0.6)]) == pytest.approx(0.3 + math.hypot(0.3, 0.6))


# ------------------------------------------------------------------ the report, from trials.jsonl alone


def _rebuilt(folder: Path) -> Path:
    folder.mkdir()
    shutil.copy(FIXTURE, folder / "trials.jsonl")
    build_report(folder)
    return folder


def test_report_rebuilds_byte_identically_from_the_committed_trials(tmp_path):
    first, second = _rebuilt(tmp_path / "first"), _rebuilt(tmp_path / "second")
    names = sorted(p.name for p in first.iterdir())
    assert names == sorted(p.name for p in second.iterdir())
    for name in names:
        assert (first / name).read_bytes() == (second / name).read_bytes(), name
    md = (first / "report.md").read_text()
    # A section per question, each with its statistic and p-value as table2.json has them.
    answers = json.loads((first / "table2.json").read_text())
    for heading in ("## Table 2", "## 1. State-input vs pixel-input adversary", "## 2. Drop vs mini-game size",
                    "## 3. Clean accuracy vs robustness", "## 4. Which questions break", "## By question family",
                    "## 5. How small the manipulations are"):
        assert heading in md
    overall = answers["1_adversary_inputs"]["all"]
    assert f"W = {overall['statistic']:.4g}, p = {overall['p_value']:.2g}" in md
    for image in ("adversary_inputs.png", "drop_by_size.png", "accuracy_vs_robustness.png", "families.png",
                  "manipulation_sizes.png", "learning_curves.png"):
        assert f"]({image})" in md and (first / image).stat().st_size > 0
    assert "| state-transformer | random valid |" in md and "| film | pixel A2C |" in md
    # The gallery needs run folders, and the page says so; the failed trial is listed.
    assert "which are not here" in md and "film__size10__mg9__seed0: PlayerFailedRun" in md
    # Rebuilding in place gives the same bytes again.
    before = (first / "report.md").read_bytes()
    build_report(first)
    assert (first / "report.md").read_bytes() == before


def test_readme_table_reads_the_reports_numbers(tmp_path):
    from experiments.readme_table import clean_accuracies, readme_table

    folder = _rebuilt(tmp_path / "report")
    rows = json.loads((folder / "table.json").read_text())
    clean = clean_accuracies(json.loads((folder / "table2.json").read_text()))
    text = readme_table(rows, clean)
    some = next(r for r in rows if r["adversary"] == "trained" and r["trials"] > 1)
    low, high = some["drop"]["ci95"]
    assert f"{some['drop']['mean']:.3f} [{low:.3f}, {high:.3f}]" in text
    assert text.count(f"| {some['player']} |") == 1  # one block per player, its name on the first line
    without = [r for r in rows if not (r["player"] == some["player"] and r["size"] == some["size"])]
    assert "(not yet run)" in readme_table(without, clean)
    assert f"| {some['player']} | {clean[some['player']]:.3f} | state A2C |" in text
