"""Table 2 and the paper's five questions, as blocks written once and rendered into both pages."""

from __future__ import annotations

from benchmarks import table2
from benchmarks.report.cells import (
    TABLE_HEADER,
    breakdown_cells,
    breakdown_header,
    fragile_lines,
    interval,
    p_text,
    row_cells,
)
from benchmarks.report.figures import CURVE_EXPLANATION
from benchmarks.report.parts import ReportParts

# ------------------------------------------------------------------ Table 2 and the five questions
# Blocks, written once and rendered into both pages: ("h2", text), ("p", text),
# ("table", header, rows), ("img", file, alt), ("ul", lines), and ("folded", title, reason) for a
# question the trials' design cannot answer: one line, folded away in the HTML page.


def _num(value: float | None, digits: int = 4) -> str:
    return "n/a" if value is None or value != value else f"{value:.{digits}g}"


def _pv(value: float | None) -> str:
    return "n/a" if value is None else p_text(value)


def _verdict(entry: dict) -> str:
    """Significant only by the Holm-adjusted p: the report makes all its tests at once."""
    if entry.get("p_holm") is None:
        return "not testable"
    return ("significant at the 0.05 level after Holm's correction" if entry["p_holm"] < 0.05
            else "not significant at the 0.05 level after Holm's correction")


def _p_pair(entry: dict) -> str:
    return f"p = {_pv(entry['p_value'])}, Holm-adjusted p = {_pv(entry.get('p_holm'))}"


def _methods(entries: list[dict]) -> str:
    """The distinct ways the p-values of a table were computed, in order of first use."""
    return "; ".join(dict.fromkeys(e["method"] for e in entries if e.get("method")))


def _paper_table(rows: list[dict]) -> list[tuple]:
    sizes = sorted({r["size"] for r in rows})
    header = ["player", "adversary"] + [f"{size}: {column}" for size in sizes
                                        for column in ("consistency (mean, 95% CI)", "max", "drop (mean, 95% CI)",
                                                       "max")]
    cells = []
    order = list(table2.ADVERSARY_LABELS)
    keys = sorted({(r["player"], r["adversary"]) for r in rows},
                  key=lambda k: (k[0], order.index(k[1]) if k[1] in order else len(order), k[1]))
    for player, adversary in keys:
        line = [player, table2.ADVERSARY_LABELS.get(adversary, adversary)]
        for size in sizes:
            row = next((r for r in rows if (r["player"], r["adversary"], r["size"]) == (player, adversary, size)),
                       None)
            if row is None:
                line += ["", "", "", ""]
                continue
            c, d = row["consistency"], row["drop"]
            line += [interval(c), f"{c['max_over_minigames']:.3f}", interval(d), f"{d['max_over_minigames']:.3f}"]
        cells.append(line)
    return [("h2", "Table 2"),
            ("p", "Laid out as the paper's Table 2: per player and adversary, for each mini-game size, the mean "
                  "consistency and drop over mini-games and seeds with bootstrap 95% CIs, and the maximum over "
                  "mini-games (each mini-game's mean over its seeds). Every adversary plays the same items with "
                  "the same number of evaluation samples."),
            ("table", header, cells)]


def _holm_blocks(answers: dict) -> list[tuple]:
    count = answers.get("holm", {}).get("tests", 0)
    return [("h2", "The tests of the five questions"),
            ("p", f"The five questions below make {count} tests in all. Each unit is independent of the others "
                  "as far as the design allows: a mini-game, its seeds averaged (the seeds of one mini-game play "
                  "the same items), or a distinct item. Each p-value is printed raw and Holm-adjusted over all "
                  f"{count} tests (Holm's step-down correction), and a result is called significant only when "
                  "its Holm-adjusted p is below 0.05.")]


def _question_1(answer: dict, figure: bool) -> list[tuple]:
    title = "1. State-input vs pixel-input adversary"
    blocks: list[tuple] = [("h2", title)]
    overall = answer["all"]
    if not overall["pairs"]:
        return [("folded", title, "no trial has both a state-input and a pixel-input adversary on the same "
                                  "player, mini-game and seed (run the benchmark with `--adversaries state,pixel`).")]
    stronger = {"state": "the state-input adversary is the stronger", "pixel": "the pixel-input adversary is the "
                "stronger", "neither": "neither adversary is stronger"}[overall["stronger"]]
    how = f"{overall['note']}; {overall['method']}" if overall.get("method") else overall["note"]
    blocks.append(("p", f"Over {overall['pairs']} pairs (player x size x mini-game, each side the mean drop over "
                        f"the seeds both adversaries played) the state-input adversary's mean drop is "
                        f"{_num(overall['mean_drop_state'])} and the pixel-input one's "
                        f"{_num(overall['mean_drop_pixel'])}: {stronger} on average. Wilcoxon signed-rank "
                        f"W = {_num(overall['statistic'])}, {_p_pair(overall)} ({how}), {_verdict(overall)}."))
    header = ["player", "pairs", "mean drop, state", "mean drop, pixel", "W", "p", "Holm-adjusted p", "note"]
    blocks.append(("table", header, [[player, str(e["pairs"]), _num(e["mean_drop_state"]),
                                      _num(e["mean_drop_pixel"]), _num(e["statistic"]), _pv(e["p_value"]),
                                      _pv(e.get("p_holm")), e["note"]] for player, e in answer["players"].items()]))
    methods = _methods(list(answer["players"].values()))
    if methods:
        blocks.append(("p", f"How the per-player p-values were computed: {methods}."))
    if figure:
        blocks.append(("img", "adversary_inputs.png", "drop of the state- against the pixel-input adversary"))
    return blocks


def _question_2(rows: list[dict]) -> list[tuple]:
    title = "2. Drop vs mini-game size"
    blocks: list[tuple] = [("h2", title)]
    if not rows or all(len(r["sizes"]) < 2 for r in rows):
        return [("folded", title, "the trials cover one mini-game size: there is no trend to test.")]
    tested = [r for r in rows if r["p_value"] is not None]
    falls = sum(r["direction"] == "falls" and r["p_holm"] < 0.05 for r in tested)
    rises = sum(r["direction"] == "rises" and r["p_holm"] < 0.05 for r in tested)
    raw = sum(r["p_value"] < 0.05 for r in tested)
    blocks.append(("p", f"Jonckheere-Terpstra trend test of the drop across sizes (unit: a mini-game, the mean "
                        f"over its seeds; J above its mean under no trend: the drop rises with size), by "
                        f"permutation ({_methods(tested) or 'none computed'}). Of {len(tested)} testable "
                        f"player-adversary pairs, the drop falls significantly (Holm-adjusted p < 0.05) with size "
                        f"for {falls} and rises for {rises}; {raw} have a raw p below 0.05."))
    header = ["player", "adversary", "mean drop by size (mini-games)", "J", "mean J under no trend", "p",
              "Holm-adjusted p", "trend"]
    cells = [[r["player"], table2.ADVERSARY_LABELS.get(r["adversary"], r["adversary"]),
              ", ".join(f"{size}: {drop:.4f} ({n})" for size, drop, n in zip(r["sizes"], r["mean_drop"],
                                                                               r["minigames"], strict=True)),
              _num(r["statistic"]), _num(r["expected_statistic"]), _pv(r["p_value"]), _pv(r.get("p_holm")),
              r["direction"]] for r in rows]
    return blocks + [("table", header, cells), ("img", "drop_by_size.png", "drop by size and adversary")]


def _question_3(answer: dict, figure: bool) -> list[tuple]:
    title = "3. Clean accuracy vs robustness"
    blocks: list[tuple] = [("h2", title)]
    if not answer["adversaries"]:
        return [("folded", title, "no trained adversary has finished trials.")]
    for label, entry in sorted(answer["adversaries"].items()):
        name = table2.ADVERSARY_LABELS[label]
        by_drop, by_consistency = entry["accuracy_vs_drop"], entry["accuracy_vs_consistency"]
        blocks.append(("p", f"{name}: Spearman's rank correlation across {by_drop['n']} players of clean accuracy "
                            f"with the mean drop rho = {_num(by_drop['statistic'], 3)}, {_p_pair(by_drop)}; "
                            f"with the mean consistency rho = {_num(by_consistency['statistic'], 3)}, "
                            f"{_p_pair(by_consistency)}"
                            f"{' (' + by_drop['method'] + ')' if by_drop.get('method') else ''}. A negative rho "
                            f"would mean that the more accurate players are the more robust."))
        header = ["player", "clean acc.", "mean consistency", "mean drop", "max consistency (size, mini-game)",
                  "max drop"]
        blocks.append(("table", header, [
            [player, f"{e['clean_accuracy']:.3f}", f"{e['mean_consistency']:.4f}", f"{e['mean_drop']:.4f}",
             f"{e['max_consistency']:.3f} ({e['max_consistency_size']}, {e['max_consistency_minigame']})",
             f"{e['max_drop']:.3f}"] for player, e in sorted(entry["players"].items())]))
    if figure:
        blocks.append(("img", "accuracy_vs_robustness.png", "clean accuracy against mean drop and worst mini-game"))
    return blocks


def _question_4(answer: dict, parts: ReportParts) -> list[tuple]:
    blocks: list[tuple] = [("h2", "4. Which questions break")]
    if not answer["family"]:
        return blocks + [("p", "No per-item results: the trials' records predate them and their run folders "
                               "are not here.")]
    entries = [e for by_adversary in answer["family"].values() for e in by_adversary.values()]
    entries += [e for by_adversary in answer["kind"].values() for e in by_adversary.values()]
    significant = sum(e.get("p_holm") is not None and e["p_holm"] < 0.05 for e in entries)
    tested = sum(e.get("p_holm") is not None for e in entries)
    blocks.append(("p", "Kruskal-Wallis test of the dropped share across question families and across question "
                        "kinds, per player and trained adversary (do some questions break more often than "
                        "others?). The unit is a distinct item: its dropped share is the mean over the trials "
                        "(seeds) that played it, and the two adversaries are tested apart, not pooled (p: "
                        f"{_methods(entries) or 'none computed'}). {significant} of {tested} tests are significant "
                        "(Holm-adjusted p < 0.05). The means per family and kind follow under \"By question "
                        "family\" (those pool both trained adversaries and every trial)."))
    header = ["player", "adversary", "families: H", "p", "Holm-adjusted p", "kinds: H", "p", "Holm-adjusted p",
              "items"]
    rows = []
    for player, by_adversary in answer["family"].items():
        for label, e in by_adversary.items():
            kind = answer["kind"].get(player, {}).get(label, {})
            rows.append([player, table2.ADVERSARY_LABELS.get(label, label), _num(e["statistic"]),
                         _pv(e["p_value"]), _pv(e.get("p_holm")), _num(kind.get("statistic")),
                         _pv(kind.get("p_value")), _pv(kind.get("p_holm")), str(e["n"])])
    blocks.append(("table", header, rows))
    if parts.records_without_items:
        blocks.append(("p", f"{parts.records_without_items} finished trial(s) have no per-item results (older "
                            "records whose run folders are not here) and are left out of this question."))
    return blocks


def _question_5(rows: list[dict], figure: bool) -> list[tuple]:
    blocks: list[tuple] = [("h2", "5. How small the manipulations are")]
    if not rows:
        return blocks + [("p", "No trial recorded the sizes of its manipulations (older records).")]
    counted = {r["moves"] for r in rows}
    if counted == {"distinct moves"}:
        unit = "Each distinct move counts once (the same item with the same objects moved the same way)."
    else:
        unit = ("The trials recorded how often each size of move was played, not which moves were the same, so "
                "the counts are of evaluation moves: a move the policy played again in another evaluation sample "
                "counts again.")
    tests = [r["displacement_vs_unchanged"] for r in rows]
    blocks.append(("p", "The moves of the trained adversaries' evaluations that changed an answer (successful "
                        "manipulations): how many objects they moved and how far in all (the sum of the moved "
                        "objects' move lengths in scene units; the board is 6 wide, one bin 0.3). "
                        f"{unit} The test's unit is the mini-game: per mini-game (its seeds pooled), the mean "
                        "displacement of the successful moves against that of the valid moves that changed "
                        "nothing, compared by the Wilcoxon signed-rank test over the mini-games with a successful "
                        f"move (p: {_methods(tests) or 'not computed'})."))
    header = ["player", "adversary", "successful (dropped)", "one object", "objects mean / median",
              "displacement mean / median / max", "W", "p", "Holm-adjusted p", "mini-games"]
    cells = []
    for r in rows:
        changed, test = r["changed"], r["displacement_vs_unchanged"]
        objects, moved = changed["objects"], changed["total_displacement"]
        cells.append([r["player"], table2.ADVERSARY_LABELS[r["adversary"]],
                      f"{objects['count']} ({r['dropped']['objects']['count']})",
                      "n/a" if changed["one_object_share"] is None else f"{changed['one_object_share']:.1%}",
                      f"{_num(objects['mean'], 3)} / {_num(objects['median'], 3)}",
                      f"{_num(moved['mean'], 3)} / {_num(moved['median'], 3)} / {_num(moved['max'], 3)}",
                      _num(test["statistic"]), _pv(test["p_value"]), _pv(test.get("p_holm")), test["note"]])
    blocks.append(("table", header, cells))
    if figure:
        blocks.append(("img", "manipulation_sizes.png", "moved objects and displacement of successful manipulations"))
    return blocks


def _floor_blocks(floor: list[dict]) -> list[tuple]:
    if not floor:
        return []
    header = ["player", "mini-games", "items", "own scene (95% CI)", "another scene (95% CI)", "from the scene"]
    cells = [[r["player"], str(r["minigames"]), str(r["items"]),
              f"{r['own']['value']:.3f} [{r['own']['low']:.3f}, {r['own']['high']:.3f}]",
              f"{r['blind']['value']:.3f} [{r['blind']['low']:.3f}, {r['blind']['high']:.3f}]",
              f"{r['from_scene']:+.3f}"] for r in floor]
    return [("h2", "Accuracy and its floor"),
            ("p", "Per player, the accuracy on the mini-games' unmoved items with their own scenes, and with each "
                  "question asked about another item's scene (the blind baseline; each mini-game once, Wilson "
                  "intervals). The difference is how much of the accuracy comes from the scene: a player near "
                  "zero answers from the question's wording, and its drops say little about visual robustness."),
            ("table", header, cells)]


def _question_blocks(parts: ReportParts) -> list[tuple]:
    answers = parts.answers
    return (_paper_table(parts.rows) + _floor_blocks(answers.get("blind_floor", [])) + _holm_blocks(answers)
            + _question_1(answers["1_adversary_inputs"], parts.figures.get("adversary_inputs", False))
            + _question_2(answers["2_size_trend"])
            + _question_3(answers["3_accuracy_vs_robustness"], parts.figures.get("accuracy_vs_robustness", False))
            + _question_4(answers["4_families"], parts)
            + _question_5(answers["5_manipulation_sizes"], parts.figures.get("manipulation_sizes", False)))


def _family_blocks(parts: ReportParts) -> list[tuple]:
    if not parts.family_rows:
        return []
    return [("h2", "By question family"),
            ("table", breakdown_header("family"), [breakdown_cells(r, "family") for r in parts.family_rows]),
            ("table", breakdown_header("kind"), [breakdown_cells(r, "kind") for r in parts.kind_rows]),
            ("img", "families.png", "consistency and drop by question family and kind"),
            ("ul", fragile_lines(parts.family_rows, "family") + fragile_lines(parts.kind_rows, "kind"))]


def body_blocks(parts: ReportParts) -> tuple[list[tuple], list[tuple]]:
    """The blocks before the metric definitions and those after them (learning curves)."""
    questions = _question_blocks(parts)
    fifth = next(k for k, block in enumerate(questions)
                 if block[0] in ("h2", "folded") and block[1] == "5. How small the manipulations are")
    before = questions[:fifth] + _family_blocks(parts) + questions[fifth:]
    if any("jaccard_loss" in r for r in parts.rows):  # CLEVR-POC trials: set answers
        before += [("h2", "Results"), ("table", [*TABLE_HEADER, "Jaccard loss (mean, 95% CI)"],
                                      [[*row_cells(r), interval(r["jaccard_loss"]) if "jaccard_loss" in r else ""]
                                       for r in parts.rows])]
    else:
        before += [("h2", "Results"), ("table", TABLE_HEADER, [row_cells(r) for r in parts.rows])]
    if parts.rows and not any(block[:2] == ("img", "drop_by_size.png") for block in questions):
        before.append(("img", "drop_by_size.png", "drop by size and adversary"))
    after: list[tuple] = []
    if parts.curves:
        after = [("h2", "Learning curves"), ("img", "learning_curves.png", "learning curves"),
                 ("p", CURVE_EXPLANATION), ("ul", parts.curve_text)]
    return before, after


