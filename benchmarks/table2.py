"""The statistics behind the report's answers to the paper's questions, from trial records alone.

The unit of every test is what varies independently: the two seeds of a
mini-game play the same items, so they are averaged (or pooled) before a test
and never count as two samples; an item counts once per player and adversary.

1. State-input vs pixel-input adversary: the Wilcoxon signed-rank test of the
   drop, paired per player x mini-game size x mini-game (each side the mean over
   the seeds both adversaries played). Exact when the nonzero differences have
   no ties; with ties, the exact permutation test over every sign flip (scipy),
   or 100,000 seeded Monte Carlo flips above 10^6 of them.
2. Drop vs mini-game size: the Jonckheere-Terpstra trend test across the sizes,
   per player and adversary, by permutation (a mini-game's mean over its seeds is
   the unit): every assignment of the mini-game means to the sizes when there
   are at most 10^6, else 100,000 seeded random ones. scipy has no such test and
   its `permutation_test` needs two values per group (size 1000 has one).
3. Clean accuracy vs robustness: Spearman's rank correlation across players of
   clean accuracy with the mean drop and the mean consistency (exact up to 8
   players); the worst mini-game (the maximal consistency) of each player.
4. Which questions break: the Kruskal-Wallis test of the dropped share across
   question families (and kinds), per player and trained adversary, one value
   per distinct item: the mean over the trials (seeds) that played it.
5. How small the manipulations are: the number of moved objects and the total
   displacement of the successful manipulations, and the Wilcoxon signed-rank
   test, over mini-games, of their mean displacement against that of the valid
   moves that changed nothing.

Every test is two-sided. A test with nothing to decide (all paired differences
zero, one size, fewer than three players, identical values) is reported with
statistic and p-value None and a note saying why. `answers` adds to every test
its Holm-adjusted p over all the tests it holds (`p_holm`), and the report calls
a result significant only when that is below 0.05.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from benchmarks.stats import (
    SIGNIFICANCE,
    Test,
    expected_j,
    holm,
    jonckheere_terpstra,
    kruskal_wallis,
    spearman,
    wilcoxon_paired,
)

ADVERSARY_LABELS = {"trained": "state A2C", "trained-pixel": "pixel A2C", "random": "random",
                    "random-valid": "random valid", "search": "search"}
"""How the report names the table's adversaries (benchmarks.stats.table rows), in the paper's order."""


def _ok(records: list[dict]) -> list[dict]:
    return [r for r in records if "error" not in r]


def _adversary(record: dict) -> str:
    return record.get("adversary", "state")


# ------------------------------------------------------------------ 1. state vs pixel input


def drop_pairs(records: list[dict], first: str = "state", second: str = "pixel") -> dict[tuple, tuple[float, float]]:
    """(player, size, mini-game) -> the mean drop of the `first` adversary and of the `second`.

    Each mean is over the seeds that both adversaries finished, so the two sides
    of a pair average the same seeds.
    """
    by_key: dict[str, dict[tuple, float]] = defaultdict(dict)
    for record in _ok(records):
        key = (record["player"], record["size"], record["minigame"], record["seed"])
        by_key[_adversary(record)][key] = float(record["drop"])
    seeds: dict[tuple, list[tuple[float, float]]] = defaultdict(list)
    for key in sorted(by_key[first].keys() & by_key[second].keys()):
        seeds[key[:3]].append((by_key[first][key], by_key[second][key]))
    return {key: (float(np.mean([s for s, _ in pairs])), float(np.mean([p for _, p in pairs])))
            for key, pairs in seeds.items()}


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
        groups = [list(by_size[s].values()) for s in sizes]
        test = jonckheere_terpstra(groups)
        expected = expected_j([len(g) for g in groups])
        if test.statistic is None or test.p_value is None:
            direction = "n/a"
        else:
            direction = "falls" if test.statistic < expected else ("rises" if test.statistic > expected else "flat")
        rows.append({"player": player, "adversary": label, "sizes": sizes,
                     "mean_drop": [float(np.mean(g)) for g in groups],
                     "minigames": [len(g) for g in groups], "direction": direction,
                     "expected_statistic": expected, **test.to_json()})
    return rows


# ------------------------------------------------------------------ 3. clean accuracy vs robustness


def clean_accuracy(records: list[dict]) -> dict[str, float]:
    """Per player, the accuracy on the unmoved items of every distinct mini-game it played, item-weighted."""
    seen: dict[str, dict[tuple[int, int], float]] = defaultdict(dict)
    for record in _ok(records):
        seen[record["player"]][(record["size"], record["minigame"])] = float(record["clean_accuracy"])
    return {player: sum(size * acc for (size, _), acc in cells.items()) / sum(size for size, _ in cells)
            for player, cells in sorted(seen.items())}


def blind_floor(records: list[dict]) -> list[dict]:
    """Per player, accuracy with each item's own scene and with another item's (the blind baseline), pooled.

    Each distinct mini-game counts once (its lowest seed's blind pass): the seeds play the
    same items. `from_scene` is how much of the accuracy comes from the scene at all; a
    player near zero answers from the question, and its drops say little.
    """
    from benchmarks.card.clean_blind import Accuracy

    first: dict[tuple[str, int, int], dict] = {}
    for record in _ok(records):
        if record.get("blind_accuracy") is not None:
            key = (record["player"], record["size"], record["minigame"])
            if key not in first or record["seed"] < first[key]["seed"]:
                first[key] = record
    pooled: dict[str, dict[str, int]] = defaultdict(lambda: {"answered": 0, "own": 0, "blind": 0, "minigames": 0})
    for (player, _, _), record in sorted(first.items()):
        cell = pooled[player]
        cell["answered"] += record["own_scene_accuracy"]["answered"]
        cell["own"] += record["own_scene_accuracy"]["correct"]
        cell["blind"] += record["blind_accuracy"]["correct"]
        cell["minigames"] += 1
    rows = []
    for player, cell in sorted(pooled.items()):
        if not cell["answered"]:
            continue
        entry = {"player": player, "minigames": cell["minigames"], "items": cell["answered"]}
        for name in ("own", "blind"):
            figure = Accuracy(cell[name], cell["answered"], 0).to_json()
            entry[name] = {key: figure[key] for key in ("value", "low", "high")}
        entry["from_scene"] = round((cell["own"] - cell["blind"]) / cell["answered"], 6)
        rows.append(entry)
    return rows


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


def trained_label(record: dict) -> str:
    """The table's label of a record's trained adversary: `trained` (state input) or `trained-<input>`."""
    kind = _adversary(record)
    return "trained" if kind == "state" else f"trained-{kind}"


def item_means(item_rows: list[dict], key: str = "family") -> dict[tuple[str, str], dict[str, list[float]]]:
    """(player, adversary) -> `key` group -> one dropped share per distinct item: its mean over the trials.

    The seeds of a mini-game play the same items, so an item's two results are
    one unit, not two. Rows without `adversary` (older callers) count as the
    state-input adversary's.
    """
    shares: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    group_of: dict[tuple[str, str, str], str] = {}
    for row in item_rows:
        unit = (row["player"], row.get("adversary", "trained"), row["item_id"])
        shares[unit].append(float(row["dropped_share"]))
        group_of.setdefault(unit, row[key])
    out: dict[tuple[str, str], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for unit, values in sorted(shares.items()):
        out[unit[:2]][group_of[unit]].append(float(np.mean(values)))
    return {pair: dict(groups) for pair, groups in out.items()}


def family_differences(item_rows: list[dict], key: str = "family") -> dict[str, dict[str, dict]]:
    """Question 4: per player and trained adversary, Kruskal-Wallis of the items' dropped shares across `key`."""
    out: dict[str, dict[str, dict]] = defaultdict(dict)
    for (player, label), by_group in sorted(item_means(item_rows, key).items(),
                                            key=lambda kv: (kv[0][0], list(ADVERSARY_LABELS).index(kv[0][1]))):
        out[player][label] = kruskal_wallis([by_group[g] for g in sorted(by_group)], key).to_json()
    return dict(out)


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


def distinct_move_sizes(manipulations: list[dict]) -> dict[str, dict[str, dict[str, int]]]:
    """The histograms of `benchmarks.trials.manipulation_sizes`, over distinct moves instead of evaluation moves.

    `manipulations` are the lines of a trial's manipulations.jsonl: the final
    policy is sampled many times per item and often plays the same move again,
    which then counts once (its outcome is the same: same scene, same player).
    Trial records keep these under `manipulation_sizes["distinct"]`, and
    question 5 is then counted over distinct moves.
    """
    from benchmarks.trials import move_key, size_histograms

    return size_histograms(list({move_key(record): record for record in manipulations}.values()))


def _unchanged(sizes: list[dict]) -> dict[float, int]:
    """The valid moves that changed nothing: every valid move less the changing ones, value by value."""
    unchanged = dict(_merged([s["valid"]["displacement"] for s in sizes if "valid" in s]))
    for value, count in _merged([s["changed"]["displacement"] for s in sizes if "changed" in s]).items():
        unchanged[value] = unchanged.get(value, 0) - count
    return {value: count for value, count in unchanged.items() if count > 0}


def _mean(histogram: dict[float, int]) -> float | None:
    total = sum(histogram.values())
    return sum(value * count for value, count in histogram.items()) / total if total else None


def manipulation_summary(records: list[dict]) -> list[dict]:
    """Question 5: per player and trained adversary, moved objects and total displacement of its successes.

    `changed` counts the evaluation moves that changed an answer, `dropped` those
    that broke a right one: distinct moves when every trial recorded them
    (`manipulation_sizes["distinct"]`), else every evaluation move, a move the
    policy played again counted again. The test's unit is the mini-game either
    way: per mini-game (its seeds pooled) the mean displacement of the changing
    moves against that of the valid moves that changed nothing, Wilcoxon
    signed-rank over the mini-games with a changing move.
    """
    grouped: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for record in _ok(records):
        if "manipulation_sizes" in record:
            grouped[(record["player"], trained_label(record))].append(record)
    rows = []
    for (player, label), group in sorted(grouped.items()):
        distinct = all("distinct" in r["manipulation_sizes"] for r in group)
        sizes = [r["manipulation_sizes"]["distinct"] if distinct else r["manipulation_sizes"] for r in group]
        row: dict = {"player": player, "adversary": label,
                     "moves": "distinct moves" if distinct else "evaluation moves"}
        for kind in ("changed", "dropped"):
            objects = _merged([s[kind]["moved_objects"] for s in sizes if kind in s])
            displacement = _merged([s[kind]["displacement"] for s in sizes if kind in s])
            row[kind] = {"moved_objects": {f"{int(k)}": v for k, v in objects.items()},
                         "displacement": {f"{k:.4f}": v for k, v in displacement.items()},
                         "objects": _describe(objects), "total_displacement": _describe(displacement),
                         "one_object_share": (objects.get(1.0, 0) / sum(objects.values())) if objects else None}
        by_minigame: dict[tuple[int, int], list[dict]] = defaultdict(list)
        for record, size in zip(group, sizes, strict=True):
            by_minigame[(record["size"], record["minigame"])].append(size)
        changed_means, unchanged_means = [], []
        for key in sorted(by_minigame):
            changed = _mean(_merged([s["changed"]["displacement"] for s in by_minigame[key] if "changed" in s]))
            unchanged = _mean(_unchanged(by_minigame[key]))
            if changed is not None and unchanged is not None:
                changed_means.append(changed)
                unchanged_means.append(unchanged)
        if changed_means:
            test = wilcoxon_paired(changed_means, unchanged_means)
        else:
            test = Test("Wilcoxon signed-rank", None, None, 0, "n/a: no mini-game with a successful move")
        entry = test.to_json()
        if test.p_value is not None:
            entry["note"] = (f"{len(changed_means)} of {len(by_minigame)} mini-games with a successful move; mean "
                             f"displacement {np.mean(changed_means):.2f} (successful) vs "
                             f"{np.mean(unchanged_means):.2f} (unchanged)")
        row["minigame_means"] = {"changed": changed_means, "unchanged": unchanged_means}
        row["displacement_vs_unchanged"] = entry
        rows.append(row)
    return rows


# ------------------------------------------------------------------ all of it


def _tests(node: object) -> list[dict]:
    """Every test in `node`, in the order the report prints them."""
    if isinstance(node, dict):
        if "test" in node and "p_value" in node:
            return [node]
        return [t for value in node.values() for t in _tests(value)]
    if isinstance(node, list):
        return [t for value in node for t in _tests(value)]
    return []


def answers(records: list[dict], item_rows: list[dict]) -> dict:
    """Every statistic of the five questions, as JSON-ready dicts (what table2.json holds).

    Every test gets `p_holm`, its p adjusted by Holm's method over all the tests
    here (None where nothing was tested): the report makes them all at once, so
    one of them below 0.05 by chance alone is likely without it.
    """
    out = {
        "1_adversary_inputs": adversary_inputs(records),
        "2_size_trend": size_trend(records),
        "3_accuracy_vs_robustness": accuracy_vs_robustness(records),
        "4_families": {"family": family_differences(item_rows, "family"),
                       "kind": family_differences(item_rows, "kind")},
        "5_manipulation_sizes": manipulation_summary(records),
    }
    every = _tests(out)
    tested = [t for t in every if t["p_value"] is not None]
    adjusted = dict(zip(map(id, tested), holm([t["p_value"] for t in tested]), strict=True))
    for test in every:
        test["p_holm"] = adjusted.get(id(test))
    out["holm"] = {"tests": len(tested), "level": SIGNIFICANCE}
    floor = blind_floor(records)
    if floor:  # trials made before the blind baseline carry none
        out["blind_floor"] = floor
    return out

