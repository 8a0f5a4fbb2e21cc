"""RESULTS/report.md and RESULTS/report.html from trials.jsonl (and the trials' run folders, when there).

Both files hold the same parts (docs/report.md says what each shows): the table
laid out as the paper's Table 2, one section per question of the paper with its
test statistic, p-value and figure (benchmarks/table2.py), the table of every
row with its tests, the metric definitions, the learning curves with a generated
account of what they show, the breakdown per question family and kind, the
gallery of distinct broken items rendered before and after
(benchmarks/gallery.py), and the failed trials.

Everything but the gallery comes from trials.jsonl alone, and the same trials
give the same bytes: no timestamps, sorted keys, seeded bootstraps, figures
saved without the software stamp. The gallery is drawn from the run folders and
its captions kept in gallery.json, so a rebuild without them keeps it as it was.
"""

from __future__ import annotations

import html
import json
import os
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import table2
from benchmarks.gallery import GALLERY_SIZE, SCHEMATIC, Candidate, draw_gallery, pick
from benchmarks.runner import TRIALS_FILE, read_trials
from benchmarks.stats import breakdown, table
from benchmarks.trials import FINISHED_FIELDS
from clevr_game.atomic import atomic_path, write_text_atomic
from clevr_game.errors import InputError
from clevr_game.run_files import RESULT_FILE
from clevr_game.scene import Scene, parse_scene

__all__ = ["GALLERY_SIZE", "build_report"]

METRICS = [
    ("consistency", "share of items whose answer one move of the final adversary changed, with a valid "
                    "scene, averaged over the evaluation samples (how often the player is inconsistent)."),
    ("drop", "share of items answered right before the move and wrong after it (the accuracy the "
             "player loses to one move)."),
    ("adversary", "trained (state A2C): the adversary trained by RL on the mini-game, seeing the scene graph; "
                  "trained-pixel (pixel A2C): the same, seeing the original image; random: uniform random bins "
                  "for every object, with the same number of samples on the same items (most of its moves are "
                  "invalid); random-valid: a random move of one or two objects, drawn again until every referee "
                  "accepts it (up to 64 draws), same samples and items; search: greedy search over "
                  "single-object moves within a query budget (first seed of each mini-game only)."),
    ("mean, 95% CI", "mean over mini-games and seeds with a bootstrap 95% confidence interval; max: the "
                     "highest mini-game mean (over its seeds); p: one-sample t-test against 0 "
                     "(no manipulation succeeds)."),
    ("drop p vs random", "paired t-test of the trained adversary's drop against the random adversary's "
                         "on the same trials."),
    ("clean acc.", "the player's accuracy on the unmoved scenes of the mini-games."),
    ("player errors", "queries the player failed to answer (crash, time-out, garbage), over all queries of "
                      "the trials; an item with a failed answer in the evaluation is unscored (left out of "
                      "consistency and drop, never counted as unchanged; the count follows), and a trial with "
                      "more than 5% failed queries, overall or in an evaluation (or its --max-error-rate), is "
                      "failed."),
    ("tests", "1: Wilcoxon signed-rank test of the drop, state- against pixel-input adversary, paired per "
              "player, size, mini-game and seed; 2: Jonckheere-Terpstra trend test of the drop across sizes "
              "(normal approximation with ties; unit: a mini-game's mean over its seeds); 3: Spearman rank "
              "correlation across players of clean accuracy with mean drop and mean consistency; 4: "
              "Kruskal-Wallis test of the per-item dropped share across question families; 5: Mann-Whitney U "
              "test of the total displacement of successful manipulations against valid moves that changed "
              "nothing. All two-sided; n/a when there is nothing to test (the note says why)."),
    ("family, kind", "family: the question's template file (zero_hop, one_hop, ..., compare_integer); "
                     "kind: what it asks (count, exist, compare, query an attribute). Per family, "
                     "consistency and drop are means over the item results of the trained adversary "
                     "(each item once per trial that played it)."),
]

GALLERY_PRESETS = ("fast", "balanced", "clevr", SCHEMATIC)


@dataclass
class _Run:
    """One finished trial with its result.json and the item folder it played."""

    record: dict
    result: dict
    items: ItemsFolder | None


@dataclass
class ItemsFolder:
    """Scenes, questions, families and kinds of an item folder, by item id."""

    scenes: dict[str, Scene] = field(default_factory=dict)
    questions: dict[str, str] = field(default_factory=dict)
    families: dict[str, str] = field(default_factory=dict)
    kinds: dict[str, str] = field(default_factory=dict)


# ------------------------------------------------------------------ the whole report


def build_report(results: str | os.PathLike[str], *, gallery_preset: str = "fast") -> tuple[Path, Path]:
    """Write RESULTS/report.md, report.html, table.json, families.json and the figures; returns both pages."""
    if gallery_preset not in GALLERY_PRESETS:
        raise InputError(f"unknown gallery preset {gallery_preset!r} (expected one of {', '.join(GALLERY_PRESETS)})")
    folder = Path(results)
    records = sorted(read_trials(folder).values(), key=lambda r: r["trial"])
    if not records:
        raise InputError(f"{folder}: no trials.jsonl with finished trials (run `clevr-game benchmark` first)")
    ok = [r for r in records if "error" not in r]
    failed = [r for r in records if "error" in r]
    for record in ok:
        missing = [field for field in FINISHED_FIELDS if field not in record]
        if missing:
            raise InputError(f"{folder / TRIALS_FILE}: trial {record['trial']}: a finished trial without "
                             f"{', '.join(repr(f) for f in missing)}")
    rows = table(ok)
    write_text_atomic(folder / "table.json", _json(rows))
    runs = _runs(folder, ok)
    item_rows = _item_rows(ok, runs)
    by_family, by_kind = breakdown(item_rows, "family"), breakdown(item_rows, "kind")
    write_text_atomic(folder / "families.json", _json({"family": by_family, "kind": by_kind}))
    answers = table2.answers(ok, item_rows)
    write_text_atomic(folder / "table2.json", _json(answers))
    parts = _Parts(rows=rows, failed=failed, family_rows=by_family, kind_rows=by_kind, answers=answers,
                   unlabelled_items=sum(r["family"] == "unknown" for r in item_rows),
                   records_without_items=sum("item_results" not in r and r["trial"] not in
                                             {run.record["trial"] for run in runs} for r in ok))
    if ok:
        size_plot(rows, folder / "drop_by_size.png")
        parts.curves = curve_plot(ok, folder / "learning_curves.png")
        parts.curve_text = curve_account(ok)
        parts.figures["adversary_inputs"] = input_plot(ok, folder / "adversary_inputs.png")
        parts.figures["accuracy_vs_robustness"] = accuracy_plot(answers["3_accuracy_vs_robustness"],
                                                                folder / "accuracy_vs_robustness.png")
        parts.figures["manipulation_sizes"] = manipulation_plot(answers["5_manipulation_sizes"],
                                                                folder / "manipulation_sizes.png")
    if by_family:
        family_plot(by_family, by_kind, folder / "families.png")
    parts.gallery, parts.gallery_note = _gallery(folder, runs, rows, gallery_preset)
    write_text_atomic(folder / "report.md", _markdown(parts))
    write_text_atomic(folder / "report.html", _html(parts))
    return folder / "report.md", folder / "report.html"


@dataclass
class _Parts:
    rows: list[dict]
    failed: list[dict]
    family_rows: list[dict]
    kind_rows: list[dict]
    answers: dict = field(default_factory=dict)
    figures: dict[str, bool] = field(default_factory=dict)
    unlabelled_items: int = 0
    records_without_items: int = 0
    """Finished trials with neither per-item results in their record nor a run folder (older records)."""
    curves: bool = False
    curve_text: list[str] = field(default_factory=list)
    gallery: list[dict] = field(default_factory=list)
    gallery_note: str | None = None


def _json(data: Any) -> str:
    return json.dumps(data, indent=1, sort_keys=True) + "\n"


GALLERY_FILE = "gallery.json"


def _gallery(folder: Path, runs: list[_Run], rows: list[dict], preset: str) -> tuple[list[dict], str | None]:
    """Draw the gallery from the run folders; without them, keep the one gallery.json describes."""
    if not runs:
        kept = folder / GALLERY_FILE
        if kept.is_file():
            saved = json.loads(kept.read_text(encoding="utf-8"))
            if all((folder / entry["image"]).is_file() for entry in saved["entries"]):
                return saved["entries"], saved["note"]
        return [], ("The gallery is drawn from the trials' run folders (runs/TRIAL/result.json), which are not "
                    "here, and no earlier gallery was kept.")
    entries, note = draw_gallery(pick(_candidates(runs, rows), one_per_player=True), folder, preset)
    if entries and note is None and preset != SCHEMATIC:
        note = f"Rendered with the `{preset}` preset of the game's Blender renderer."
    write_text_atomic(folder / GALLERY_FILE, _json({"entries": entries, "note": note}))
    return entries, note


# ------------------------------------------------------------------ reading the runs


def _runs(folder: Path, records: list[dict]) -> list[_Run]:
    """The finished trials whose result.json is still there, with their item folders (read once each)."""
    folders: dict[str, ItemsFolder | None] = {}
    runs = []
    for record in records:
        result_path = _run_dir(folder, record) / RESULT_FILE
        if not result_path.is_file():
            continue
        try:
            result = json.loads(result_path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            continue
        items_dir = _items_dir(folder, result)
        if items_dir is not None and items_dir not in folders:
            folders[items_dir] = read_items_folder(items_dir)
        runs.append(_Run(record, result, folders.get(items_dir) if items_dir else None))
    return runs


def _run_dir(folder: Path, record: dict) -> Path:
    """The trial's run folder as recorded, else where the benchmark puts it (a results folder moved whole)."""
    recorded = Path(record.get("run", ""))
    if (recorded / RESULT_FILE).is_file():
        return recorded
    return folder / "runs" / record["trial"]


def _items_dir(folder: Path, result: dict) -> str | None:
    given = result.get("options", {}).get("items")
    for candidate in ([Path(given)] if given else []) + [folder / "items"]:
        if candidate.is_dir():
            return str(candidate.resolve())
    return None


def read_items_folder(items_dir: str) -> ItemsFolder | None:
    """Item folder contents by item id; None when the folder cannot be read any more."""
    from agents.evaluation import question_kind
    from clevr_game.dataset import load_dataset
    from envs.items import load_items

    found = ItemsFolder()
    try:
        scenes, questions = Path(items_dir) / "scenes.json", Path(items_dir) / "questions.json"
        if scenes.is_file() and questions.is_file():
            _, parsed, scene_of = load_dataset(scenes, questions)
            for question, scene in zip(parsed, scene_of, strict=True):
                item_id = f"{question.image_index}:{question.index}"
                found.scenes[item_id], found.questions[item_id] = scene, question.text
                template = question.raw.get("template_filename")
                if isinstance(template, str):
                    found.families[item_id] = template.rsplit(".", 1)[0]
                elif question.family is not None:
                    found.families[item_id] = f"family {question.family}"
                kind = question_kind(question.program)
                if kind is not None:
                    found.kinds[item_id] = kind
        else:
            for item in load_items(items_dir):
                found.scenes[item.item_id], found.questions[item.item_id] = item.scene, item.question
                attribute = item.extra.get("query_attribute")
                if attribute is not None:  # CLEVR-POC: one family per asked attribute of the hidden object
                    found.families[item.item_id] = f"hidden {attribute}"
                kind = question_kind(item.program)
                if kind is not None:
                    found.kinds[item.item_id] = kind
    except InputError:
        return None
    return found


def _item_rows(records: list[dict], runs: list[_Run]) -> list[dict]:
    """Per-item results of the trained adversary, labelled with player, family and kind.

    From each record's `item_results` (so trials.jsonl alone suffices); records of
    older versions without them are read from their run folder's result.json.
    """
    rows = []
    with_results = set()
    for record in records:
        if "item_results" in record:
            with_results.add(record["trial"])
            rows += [{"player": record["player"], "item_id": item_id, "family": family, "kind": kind,
                      "changed_share": float(changed), "dropped_share": float(dropped)}
                     for item_id, family, kind, changed, dropped in record["item_results"]]
    for run in runs:
        if run.record["trial"] in with_results:
            continue
        for item in run.result.get("items", []):
            if item.get("player_errors", 0):
                continue  # a move of this item got no answer: unscored, it counts nowhere
            item_id = item["item_id"]
            family = run.items.families.get(item_id) if run.items else None
            if family is None and item.get("family") is not None:
                family = f"family {item['family']}"
            kind = item.get("question_kind") or (run.items.kinds.get(item_id) if run.items else None)
            rows.append({
                "player": run.record["player"], "item_id": item_id,
                "family": family or "unknown", "kind": kind or "unknown",
                "changed_share": float(item.get("changed_share", item.get("changed", 0))),
                "dropped_share": float(item.get("dropped_share", item.get("dropped", 0))),
            })
    return rows


def _player_ranks(rows: list[dict]) -> dict[str, int]:
    """Players by the trained adversary's drop, then consistency, highest first."""
    best: dict[str, tuple[float, float]] = {}
    for row in rows:
        if row["adversary"] == "trained":
            score = (row["drop"]["mean"], row["consistency"]["mean"])
            best[row["player"]] = max(best.get(row["player"], score), score)
    ordered = sorted(best, key=lambda p: (-best[p][0], -best[p][1], p))
    return {player: rank for rank, player in enumerate(ordered)}


def _candidates(runs: list[_Run], rows: list[dict]) -> list[Candidate]:
    ranks = _player_ranks(rows)
    found = []
    for run in runs:
        if run.items is None:
            continue
        for item in run.result.get("items", []):
            best = item.get("best_manipulation")
            before = run.items.scenes.get(item["item_id"])
            if not (item.get("changed") and best and best.get("scene") and best.get("moves")) or before is None:
                continue
            after = parse_scene(best["scene"], vocabulary=before.vocabulary)
            found.append(Candidate(
                player=run.record["player"], player_rank=ranks.get(run.record["player"], len(ranks)),
                trial=run.record["trial"], item_id=item["item_id"],
                items_dir=str(run.result.get("options", {}).get("items")),
                question=run.items.questions[item["item_id"]], true_answer=str(item["true_answer"]),
                old_answer=str(item["old_answer"]), new_answer=str(best["new_answer"]),
                dropped=bool(item.get("dropped")),
                moves=tuple((int(m[0]), float(m[1]), float(m[2])) for m in best["moves"]),
                before=before, after=after,
            ))
    return found


# ------------------------------------------------------------------ figures


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path: Path) -> None:
    with atomic_path(path) as tmp:
        # No software stamp: the same trials give the same bytes, whatever matplotlib wrote them.
        fig.savefig(tmp, dpi=100, metadata={"Software": None})
    _plt().close(fig)


_ADVERSARIES = ("trained", "trained-pixel", "random", "random-valid", "search")


def _whiskers(means: np.ndarray, lows: np.ndarray, highs: np.ndarray) -> list[list[float]]:
    """Error-bar lengths below and above each mean.

    Plain lists: matplotlib reads a one-point array of whiskers through a NumPy
    conversion that is deprecated (and slated to fail).
    """
    return [np.maximum(means - lows, 0).tolist(), np.maximum(highs - means, 0).tolist()]


def size_plot(rows: list[dict], path: Path):
    """Drop per player: bars per adversary for one mini-game size, lines over a log size axis for several.

    Returns the (closed) figure, for a look at what was drawn.
    """
    plt = _plt()
    sizes = sorted({row["size"] for row in rows})
    players = sorted({row["player"] for row in rows})
    fig, ax = plt.subplots(figsize=(7, 3.8), layout="constrained")
    if len(sizes) == 1:
        width = 0.8 / len(_ADVERSARIES)
        for k, adversary in enumerate(_ADVERSARIES):
            points = [(i, r) for i, p in enumerate(players) for r in rows
                      if r["player"] == p and r["adversary"] == adversary]
            if not points:
                continue
            x = np.array([i for i, _ in points]) + (k - (len(_ADVERSARIES) - 1) / 2) * width
            means = np.array([r["drop"]["mean"] for _, r in points])
            lows, highs = np.array([r["drop"]["ci95"] for _, r in points], dtype=np.float64).T
            ax.bar(x, means, width, yerr=_whiskers(means, lows, highs),
                   capsize=3, label=adversary)
        ax.set_xticks(range(len(players)), [_short(p) for p in players], fontsize=8)
        ax.set_title(f"drop at mini-game size {sizes[0]} (bars: mean, whiskers: 95% CI)", fontsize=10)
    else:
        for player in players:
            for adversary, style in (("trained", "-"), ("trained-pixel", "--"), ("random", ":"),
                                     ("random-valid", "-.")):
                points = sorted((r["size"], r["drop"]["mean"], *r["drop"]["ci95"]) for r in rows
                                if r["player"] == player and r["adversary"] == adversary)
                if points:
                    s, means, lows, highs = map(np.array, zip(*points, strict=True))
                    ax.errorbar(s, means, yerr=_whiskers(means, lows, highs),
                                marker="o", ls=style, capsize=3, label=f"{_short(player)}, {adversary}")
        ax.set_xscale("log")
        ax.set_xticks(sizes, [str(s) for s in sizes])
        ax.set_xlabel("mini-game size")
        ax.set_title("drop by mini-game size (mean, 95% CI)", fontsize=10)
    ax.set_ylabel("drop")
    ax.legend(fontsize=8)
    _save(fig, path)
    return fig


_CURVES = (("reward", "mean reward"), ("invalid", "invalid share"), ("changed", "changed share"),
           ("dropped", "dropped share"))


def _mean_curves(records: list[dict]) -> dict[str, dict[str, Any]]:
    """Per player: steps and each curve key present in all its trials, averaged over the trials."""
    by_player: dict[str, list[dict]] = defaultdict(list)
    for record in records:
        if record.get("curve", {}).get("steps"):
            by_player[record["player"]].append(record["curve"])
    means = {}
    for player, curves in sorted(by_player.items()):
        length = min(len(c["steps"]) for c in curves)
        mean = {"steps": np.asarray(curves[0]["steps"][:length], dtype=np.float64), "trials": len(curves)}
        for key, _ in _CURVES:
            if all(len(c.get(key, [])) >= length for c in curves):
                mean[key] = np.mean([c[key][:length] for c in curves], 0)
        means[player] = mean
    return means


def _smooth(values: np.ndarray) -> np.ndarray:
    """A centred moving average over about a tenth of the curve: batch shares are noisy."""
    window = max(1, len(values) // 10)
    if window == 1:
        return values
    padded = np.pad(values, (window // 2, window - 1 - window // 2), mode="edge")
    return np.convolve(padded, np.ones(window) / window, mode="valid")


def curve_plot(records: list[dict], path: Path) -> bool:
    """Reward, invalid share and changed/dropped shares over training; False when no trial has a curve."""
    means = _mean_curves(records)
    if not means:
        return False
    plt = _plt()
    fig, (top, middle, bottom) = plt.subplots(3, 1, figsize=(7, 7), sharex=True, layout="constrained")
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for k, (player, mean) in enumerate(means.items()):
        color, name = colors[k % len(colors)], _short(player)
        top.plot(mean["steps"], _smooth(mean["reward"]), color=color, label=name)
        middle.plot(mean["steps"], _smooth(mean["invalid"]), color=color, label=name)
        if "changed" in mean:
            bottom.plot(mean["steps"], _smooth(mean["changed"]), color=color, ls=":", label=f"{name}: changed")
        if "dropped" in mean:
            bottom.plot(mean["steps"], _smooth(mean["dropped"]), color=color, label=f"{name}: dropped")
    top.set_ylabel("mean reward")
    top.set_title("training batches, sampled from the policy being trained (mean over trials, smoothed)",
                  fontsize=9)
    middle.set_ylabel("invalid share")
    bottom.set_ylabel("changed / dropped\nshare of moves")
    bottom.set_xlabel("env steps")
    for ax in (top, middle, bottom):
        ax.legend(fontsize=7)
    _save(fig, path)
    return True


CURVE_EXPLANATION = (
    "Top: the mean reward of the training batches (a right answer broken +1, an answer changed +0.1, "
    "a valid move that changed nothing -0.1, an invalid scene -0.8). Middle: the share of the policy's moves "
    "that the referee rejected (an object off the board, overlapping or hidden). Bottom: the share of moves "
    "that changed the player's answer (dotted) and that broke a right answer (solid). The batches are sampled "
    "from the policy being trained, so each curve estimates what evaluating that policy at that step would "
    "give; the table's scores come from a separate evaluation of the final policy."
)


def _trend(name: str, start: float, end: float, tolerance: float, digits: int) -> str:
    if abs(end - start) <= tolerance:
        return f"{name} stayed at about {end:.{digits}f}"
    return f"{name} {'rose' if end > start else 'fell'} from {start:.{digits}f} to {end:.{digits}f}"


def _ends(values: np.ndarray) -> tuple[float, float]:
    """Means of the first and the last fifth of a curve."""
    fifth = max(1, len(values) // 5)
    return float(np.mean(values[:fifth])), float(np.mean(values[-fifth:]))


def curve_account(records: list[dict]) -> list[str]:
    """One sentence per player saying how each curve moved: the first fifth of training against the last."""
    sentences = []
    for player, mean in _mean_curves(records).items():
        parts = [_trend("the invalid share", *_ends(mean["invalid"]), 0.01, 2)]
        for key, name in (("changed", "the changed share"), ("dropped", "the dropped share")):
            if key in mean:
                parts.append(_trend(name, *_ends(mean[key]), 0.002, 3))
        if "dropped" not in mean:
            parts.append("the dropped share was not recorded (trials of an older version)")
        parts.append(_trend("the mean reward", *_ends(mean["reward"]), 0.01, 2))
        sentences.append(
            f"{player}: over {int(mean['steps'][-1]):,} training steps ({mean['trials']} trial(s), first fifth "
            f"of training against the last) {', '.join(parts[:-1])} and {parts[-1]}.")
    return sentences


def family_plot(by_family: list[dict], by_kind: list[dict], path: Path) -> None:
    """Consistency and drop per question family and per kind, one bar per player."""
    plt = _plt()
    fig, axes = plt.subplots(2, 2, figsize=(11, 6), layout="constrained",
                             gridspec_kw={"width_ratios": [3, 1.3]})
    for column, (rows, key) in enumerate(((by_family, "family"), (by_kind, "kind"))):
        groups = sorted({r[key] for r in rows})
        players = sorted({r["player"] for r in rows})
        width = 0.8 / max(1, len(players))
        for line, metric in enumerate(("consistency", "drop")):
            ax = axes[line][column]
            for k, player in enumerate(players):
                values = {r[key]: r[metric]["mean"] for r in rows if r["player"] == player}
                x = np.arange(len(groups)) + (k - (len(players) - 1) / 2) * width
                ax.bar(x, [values.get(g, 0.0) for g in groups], width, label=_short(player))
            ax.set_xticks(range(len(groups)), groups, rotation=30, ha="right", fontsize=8)
            ax.set_ylabel(metric)
            ax.set_title(f"{metric} by question {key}", fontsize=9)
    axes[0][0].legend(fontsize=7)
    _save(fig, path)


def input_plot(records: list[dict], path: Path) -> bool:
    """Question 1: each trial pair's drop, state-input adversary against pixel-input; False without pairs."""
    pairs = table2.drop_pairs(records)
    if not pairs:
        return False
    plt = _plt()
    fig, ax = plt.subplots(figsize=(5, 4.6), layout="constrained")
    for player in sorted({key[0] for key in pairs}):
        state, pixel = zip(*[pairs[key] for key in pairs if key[0] == player], strict=True)
        ax.scatter(pixel, state, s=18, alpha=0.7, label=_short(player))
    top = max(max(max(v) for v in pairs.values()), 1e-3) * 1.05
    ax.plot([0, top], [0, top], color="gray", lw=1, ls="--")
    ax.set_xlim(-top * 0.02, top)
    ax.set_ylim(-top * 0.02, top)
    ax.set_xlabel("drop, pixel-input adversary")
    ax.set_ylabel("drop, state-input adversary")
    ax.set_title("one point per player, size, mini-game and seed\n(above the diagonal: the state input is stronger)",
                 fontsize=9)
    ax.legend(fontsize=7)
    _save(fig, path)
    return True


def accuracy_plot(answer: dict, path: Path) -> bool:
    """Question 3: mean drop and worst mini-game's consistency against clean accuracy, per player."""
    adversaries = answer.get("adversaries", {})
    if not adversaries:
        return False
    plt = _plt()
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 4), layout="constrained")
    for label, entry in sorted(adversaries.items()):
        players = sorted(entry["players"])
        x = [entry["players"][p]["clean_accuracy"] for p in players]
        marker = "o" if label == "trained" else "s"
        name = table2.ADVERSARY_LABELS[label]
        left.scatter(x, [entry["players"][p]["mean_drop"] for p in players], marker=marker, label=name)
        right.scatter(x, [entry["players"][p]["max_consistency"] for p in players], marker=marker, label=name)
        for p, xv in zip(players, x, strict=True):
            left.annotate(_short(p, 18), (xv, entry["players"][p]["mean_drop"]), fontsize=7,
                          xytext=(3, 3), textcoords="offset points")
            right.annotate(_short(p, 18), (xv, entry["players"][p]["max_consistency"]), fontsize=7,
                           xytext=(3, 3), textcoords="offset points")
    left.set_ylabel("mean drop")
    right.set_ylabel("maximal consistency (worst mini-game)")
    for ax in (left, right):
        ax.set_xlabel("clean accuracy")
        ax.legend(fontsize=7)
    _save(fig, path)
    return True


def manipulation_plot(rows: list[dict], path: Path) -> bool:
    """Question 5: shares of successful manipulations by moved objects and by total displacement."""
    rows = [r for r in rows if r["changed"]["objects"]["count"]]
    if not rows:
        return False
    plt = _plt()
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4), layout="constrained")
    width = 0.8 / len(rows)
    for k, row in enumerate(rows):
        name = f"{_short(row['player'], 22)}, {table2.ADVERSARY_LABELS[row['adversary']]}"
        objects = {int(v): c for v, c in row["changed"]["moved_objects"].items()}
        total = sum(objects.values())
        xs = sorted(objects)
        left.bar(np.array(xs) + (k - (len(rows) - 1) / 2) * width, [objects[x] / total for x in xs], width,
                 label=name)
        displacement = {float(v): c for v, c in row["changed"]["displacement"].items()}
        values = sorted(displacement)
        shares = np.cumsum([displacement[v] for v in values]) / sum(displacement.values())
        right.step([0.0, *values], [0.0, *shares], where="post", label=name)
    left.set_xlabel("objects moved")
    left.set_ylabel("share of successful manipulations")
    left.xaxis.get_major_locator().set_params(integer=True)
    right.set_xlabel("total displacement (scene units; one bin = 0.3)")
    right.set_ylabel("cumulative share")
    right.set_ylim(0, 1.02)
    for ax in (left, right):
        ax.legend(fontsize=7)
    fig.suptitle("manipulations of the trained adversaries that changed an answer", fontsize=10)
    _save(fig, path)
    return True


def _short(player: str, limit: int = 30) -> str:
    """A legend label: long specs keep both ends (`subprocess:pyt...model_a.py`), where they differ most."""
    if len(player) <= limit:
        return player
    head = (limit - 3) // 2
    return f"{player[:head]}...{player[-(limit - 3 - head):]}"


# ------------------------------------------------------------------ text


def _fmt(summary: dict) -> str:
    low, high = summary["ci95"]
    return f"{summary['mean']:.3f} [{low:.3f}, {high:.3f}]"


def _p(value: float) -> str:
    return "n/a" if value != value else f"{value:.2g}"


_HEADER = ["player", "size", "adversary", "consistency (mean, 95% CI)", "max", "p", "drop (mean, 95% CI)",
           "max", "p", "drop p vs random", "clean acc.", "player errors", "trials"]


def _cells(row: dict) -> list[str]:
    c, d = row["consistency"], row["drop"]
    return [row["player"], str(row["size"]), row["adversary"], _fmt(c), f"{c['max_over_minigames']:.3f}",
            _p(c["p_value"]), _fmt(d), f"{d['max_over_minigames']:.3f}", _p(d["p_value"]),
            _p(row["drop_p_vs_random"]) if "drop_p_vs_random" in row else "",
            f"{row['clean_accuracy']:.3f}", _errors(row), str(row["trials"])]


def _breakdown_header(key: str) -> list[str]:
    return ["player", key, "consistency (mean, 95% CI)", "drop (mean, 95% CI)", "item results (items)"]


def _breakdown_cells(row: dict, key: str) -> list[str]:
    return [row["player"], row[key], _fmt(row["consistency"]), _fmt(row["drop"]),
            f"{row['items']} ({row['distinct_items']})"]


def _fragile(rows: list[dict], key: str) -> list[str]:
    """Per player, the family (or kind) with the highest drop, else the highest consistency."""
    lines = []
    for player in sorted({r["player"] for r in rows}):
        mine = [r for r in rows if r["player"] == player]
        worst = max(mine, key=lambda r: (r["drop"]["mean"], r["consistency"]["mean"]))
        if worst["consistency"]["mean"] == 0:
            lines.append(f"{player}: no {key} had an answer changed.")
        else:
            lines.append(f"{player}: most fragile {key} {worst[key]} (drop {worst['drop']['mean']:.3f}, "
                         f"consistency {worst['consistency']['mean']:.3f}, {worst['items']} item results).")
    return lines


def _errors(row: dict) -> str:
    queries = row.get("player_queries", 0)
    if not queries:
        return "n/a"
    unscored = row.get("unscored_items", 0)
    return f"{row['player_errors']} ({row['player_errors'] / queries:.2%})" + (
        f"; {unscored} items unscored" if unscored else "")


def _failed_line(record: dict) -> str:
    rate = record.get("player_error_rate")
    counted = f" ({record['player_errors']} of {record['player_queries']} queries failed)" if rate is not None else ""
    return f"{record['trial']}: {record['error']}{counted}"


def _gallery_line(entry: dict) -> str:
    outcome = "right answer broken" if entry["dropped"] else "answer changed"
    return (f"{entry['player']}, item {entry['item_id']} ({entry['trial']}): {entry['question']} "
            f"true answer: {entry['true']}; before: {entry['old']}; after: {entry['new']} ({outcome}); "
            f"moved: {', '.join(entry['moved'])}")


TITLE = "clevr-game robustness benchmark"

# ------------------------------------------------------------------ Table 2 and the five questions
# Blocks, written once and rendered into both pages: ("h2", text), ("p", text),
# ("table", header, rows), ("img", file, alt), ("ul", lines).


def _num(value: float | None, digits: int = 4) -> str:
    return "n/a" if value is None or value != value else f"{value:.{digits}g}"


def _pv(value: float | None) -> str:
    return "n/a" if value is None else _p(value)


def _verdict(p_value: float | None) -> str:
    if p_value is None:
        return "not testable"
    return "significant at the 0.05 level" if p_value < 0.05 else "not significant at the 0.05 level"


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
            line += [_fmt(c), f"{c['max_over_minigames']:.3f}", _fmt(d), f"{d['max_over_minigames']:.3f}"]
        cells.append(line)
    return [("h2", "Table 2"),
            ("p", "Laid out as the paper's Table 2: per player and adversary, for each mini-game size, the mean "
                  "consistency and drop over mini-games and seeds with bootstrap 95% CIs, and the maximum over "
                  "mini-games (each mini-game's mean over its seeds). Every adversary plays the same items with "
                  "the same number of evaluation samples."),
            ("table", header, cells)]


def _question_1(answer: dict, figure: bool) -> list[tuple]:
    blocks: list[tuple] = [("h2", "1. State-input vs pixel-input adversary")]
    overall = answer["all"]
    if not overall["pairs"]:
        return blocks + [("p", "No trial has both a state-input and a pixel-input adversary on the same player, "
                               "mini-game and seed (run the benchmark with `--adversaries state,pixel`).")]
    stronger = {"state": "the state-input adversary is the stronger", "pixel": "the pixel-input adversary is the "
                "stronger", "neither": "neither adversary is stronger"}[overall["stronger"]]
    blocks.append(("p", f"Over {overall['pairs']} pairs (player x size x mini-game x seed) the state-input "
                        f"adversary's mean drop is {_num(overall['mean_drop_state'])} and the pixel-input one's "
                        f"{_num(overall['mean_drop_pixel'])}: {stronger} on average. Wilcoxon signed-rank "
                        f"W = {_num(overall['statistic'])}, p = {_pv(overall['p_value'])} ({overall['note']}), "
                        f"{_verdict(overall['p_value'])}."))
    header = ["player", "pairs", "mean drop, state", "mean drop, pixel", "W", "p", "note"]
    blocks.append(("table", header, [[player, str(e["pairs"]), _num(e["mean_drop_state"]),
                                      _num(e["mean_drop_pixel"]), _num(e["statistic"]), _pv(e["p_value"]),
                                      e["note"]] for player, e in answer["players"].items()]))
    if figure:
        blocks.append(("img", "adversary_inputs.png", "drop of the state- against the pixel-input adversary"))
    return blocks


def _question_2(rows: list[dict]) -> list[tuple]:
    blocks: list[tuple] = [("h2", "2. Drop vs mini-game size")]
    if not rows or all(len(r["sizes"]) < 2 for r in rows):
        return blocks + [("p", "The trials cover one mini-game size: there is no trend to test.")]
    tested = [r for r in rows if r["p_value"] is not None]
    falls = sum(r["direction"] == "falls" and r["p_value"] < 0.05 for r in tested)
    rises = sum(r["direction"] == "rises" and r["p_value"] < 0.05 for r in tested)
    blocks.append(("p", f"Jonckheere-Terpstra trend test of the drop across sizes (unit: a mini-game, the mean "
                        f"over its seeds). Of {len(tested)} testable player-adversary pairs, the drop falls "
                        f"significantly (p < 0.05) with size for {falls} and rises for {rises}."))
    header = ["player", "adversary", "mean drop by size (mini-games)", "J", "z", "p", "trend"]
    cells = [[r["player"], table2.ADVERSARY_LABELS.get(r["adversary"], r["adversary"]),
              ", ".join(f"{size}: {drop:.4f} ({n})" for size, drop, n in zip(r["sizes"], r["mean_drop"],
                                                                               r["minigames"], strict=True)),
              _num(r["statistic"]), _num(r.get("z"), 3), _pv(r["p_value"]), r["direction"]] for r in rows]
    return blocks + [("table", header, cells), ("img", "drop_by_size.png", "drop by size and adversary")]


def _question_3(answer: dict, figure: bool) -> list[tuple]:
    blocks: list[tuple] = [("h2", "3. Clean accuracy vs robustness")]
    if not answer["adversaries"]:
        return blocks + [("p", "No trained adversary has finished trials.")]
    for label, entry in sorted(answer["adversaries"].items()):
        name = table2.ADVERSARY_LABELS[label]
        by_drop, by_consistency = entry["accuracy_vs_drop"], entry["accuracy_vs_consistency"]
        blocks.append(("p", f"{name}: Spearman's rank correlation across {by_drop['n']} players of clean accuracy "
                            f"with the mean drop rho = {_num(by_drop['statistic'], 3)}, p = "
                            f"{_pv(by_drop['p_value'])}; with the mean consistency rho = "
                            f"{_num(by_consistency['statistic'], 3)}, p = {_pv(by_consistency['p_value'])}"
                            f"{' (' + by_drop['note'] + ')' if by_drop['note'] else ''}. A negative rho would "
                            f"mean that the more accurate players are the more robust."))
        header = ["player", "clean acc.", "mean consistency", "mean drop", "max consistency (size, mini-game)",
                  "max drop"]
        blocks.append(("table", header, [
            [player, f"{e['clean_accuracy']:.3f}", f"{e['mean_consistency']:.4f}", f"{e['mean_drop']:.4f}",
             f"{e['max_consistency']:.3f} ({e['max_consistency_size']}, {e['max_consistency_minigame']})",
             f"{e['max_drop']:.3f}"] for player, e in sorted(entry["players"].items())]))
    if figure:
        blocks.append(("img", "accuracy_vs_robustness.png", "clean accuracy against mean drop and worst mini-game"))
    return blocks


def _question_4(answer: dict, parts: _Parts) -> list[tuple]:
    blocks: list[tuple] = [("h2", "4. Which questions break")]
    if not answer["family"]:
        return blocks + [("p", "No per-item results: the trials' records predate them and their run folders "
                               "are not here.")]
    blocks.append(("p", "Kruskal-Wallis test of the per-item dropped share across question families and across "
                        "question kinds, per player (do some questions break more often than others?). The "
                        "means per family and kind follow under \"By question family\"."))
    header = ["player", "families: H", "p", "kinds: H", "p", "item results"]
    blocks.append(("table", header, [
        [player, _num(e["statistic"]), _pv(e["p_value"]), _num(answer["kind"][player]["statistic"]),
         _pv(answer["kind"][player]["p_value"]), str(e["n"])] for player, e in answer["family"].items()]))
    if parts.records_without_items:
        blocks.append(("p", f"{parts.records_without_items} finished trial(s) have no per-item results (older "
                            "records whose run folders are not here) and are left out of this question."))
    return blocks


def _question_5(rows: list[dict], figure: bool) -> list[tuple]:
    blocks: list[tuple] = [("h2", "5. How small the manipulations are")]
    if not rows:
        return blocks + [("p", "No trial recorded the sizes of its manipulations (older records).")]
    blocks.append(("p", "Every move of the trained adversaries' evaluations that changed an answer (a "
                        "successful manipulation): how many objects it moved and how far in all (the sum of the "
                        "moved objects' move lengths in scene units; the board is 6 wide, one bin 0.3). "
                        "Mann-Whitney U compares that displacement with the valid moves that changed nothing."))
    header = ["player", "adversary", "successful (dropped)", "one object", "objects mean / median",
              "displacement mean / median / max", "U", "p", "median vs unchanged"]
    cells = []
    for r in rows:
        changed, test = r["changed"], r["displacement_vs_unchanged"]
        objects, moved = changed["objects"], changed["total_displacement"]
        cells.append([r["player"], table2.ADVERSARY_LABELS[r["adversary"]],
                      f"{objects['count']} ({r['dropped']['objects']['count']})",
                      "n/a" if changed["one_object_share"] is None else f"{changed['one_object_share']:.1%}",
                      f"{_num(objects['mean'], 3)} / {_num(objects['median'], 3)}",
                      f"{_num(moved['mean'], 3)} / {_num(moved['median'], 3)} / {_num(moved['max'], 3)}",
                      _num(test["statistic"]), _pv(test["p_value"]), test["note"]])
    blocks.append(("table", header, cells))
    if figure:
        blocks.append(("img", "manipulation_sizes.png", "moved objects and displacement of successful manipulations"))
    return blocks


def _question_blocks(parts: _Parts) -> list[tuple]:
    answers = parts.answers
    return (_paper_table(parts.rows)
            + _question_1(answers["1_adversary_inputs"], parts.figures.get("adversary_inputs", False))
            + _question_2(answers["2_size_trend"])
            + _question_3(answers["3_accuracy_vs_robustness"], parts.figures.get("accuracy_vs_robustness", False))
            + _question_4(answers["4_families"], parts)
            + _question_5(answers["5_manipulation_sizes"], parts.figures.get("manipulation_sizes", False)))


def _blocks_md(blocks: list[tuple]) -> list[str]:
    lines: list[str] = []
    for block in blocks:
        kind = block[0]
        if kind == "h2":
            lines += ["", f"## {block[1]}", ""]
        elif kind == "p":
            lines += [block[1], ""]
        elif kind == "table":
            lines += _md_table(block[1], block[2]) + [""]
        elif kind == "img":
            lines += [f"![{block[2]}]({block[1]})", ""]
        else:
            lines += [f"- {line}" for line in block[1]] + [""]
    return lines


def _blocks_html(blocks: list[tuple]) -> list[str]:
    esc = html.escape
    out: list[str] = []
    for block in blocks:
        kind = block[0]
        if kind == "h2":
            out.append(f"<h2>{esc(block[1])}</h2>")
        elif kind == "p":
            out.append(f"<p>{esc(block[1])}</p>")
        elif kind == "table":
            out.append(_html_table(block[1], block[2]))
        elif kind == "img":
            out.append(f"<p><img src='{esc(block[1])}' alt='{esc(block[2])}'></p>")
        else:
            out.append("<ul>" + "".join(f"<li>{esc(line)}</li>" for line in block[1]) + "</ul>")
    return out


def _md_cell(text: str) -> str:
    return str(text).replace("|", "\\|")


def _md_table(header: list[str], rows: list[list[str]]) -> list[str]:
    return (["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
            + ["| " + " | ".join(_md_cell(c) for c in cells) + " |" for cells in rows])


def _family_blocks(parts: _Parts) -> list[tuple]:
    if not parts.family_rows:
        return []
    return [("h2", "By question family"),
            ("table", _breakdown_header("family"), [_breakdown_cells(r, "family") for r in parts.family_rows]),
            ("table", _breakdown_header("kind"), [_breakdown_cells(r, "kind") for r in parts.kind_rows]),
            ("img", "families.png", "consistency and drop by question family and kind"),
            ("ul", _fragile(parts.family_rows, "family") + _fragile(parts.kind_rows, "kind"))]


def _body_blocks(parts: _Parts) -> tuple[list[tuple], list[tuple]]:
    """The blocks before the metric definitions and those after them (learning curves)."""
    questions = _question_blocks(parts)
    fifth = next(k for k, block in enumerate(questions) if block[:2] == ("h2", "5. How small the manipulations are"))
    before = questions[:fifth] + _family_blocks(parts) + questions[fifth:]
    if any("jaccard_loss" in r for r in parts.rows):  # CLEVR-POC trials: set answers
        before += [("h2", "Results"), ("table", [*_HEADER, "Jaccard loss (mean, 95% CI)"],
                                      [[*_cells(r), _fmt(r["jaccard_loss"]) if "jaccard_loss" in r else ""]
                                       for r in parts.rows])]
    else:
        before += [("h2", "Results"), ("table", _HEADER, [_cells(r) for r in parts.rows])]
    if parts.rows and not any(block[:2] == ("img", "drop_by_size.png") for block in questions):
        before.append(("img", "drop_by_size.png", "drop by size and adversary"))
    after: list[tuple] = []
    if parts.curves:
        after = [("h2", "Learning curves"), ("img", "learning_curves.png", "learning curves"),
                 ("p", CURVE_EXPLANATION), ("ul", parts.curve_text)]
    return before, after


def _markdown(parts: _Parts) -> str:
    before, after = _body_blocks(parts)
    lines = [f"# {TITLE}"] + _blocks_md(before)
    lines += ["## What the numbers mean", ""] + [f"- **{term}**: {text}" for term, text in METRICS]
    lines += _blocks_md(after)
    lines += ["", "## Gallery", ""]
    if parts.gallery_note:
        lines += [parts.gallery_note, ""]
    if not parts.gallery and parts.gallery_note is None:
        lines += ["No move of any adversary changed an answer, so there is nothing to show."]
    for entry in parts.gallery:
        lines += [_md_cell(_gallery_line(entry)), "", f"![{entry['item_id']}]({entry['image']})", ""]
    if parts.failed:
        lines += ["", "## Failed trials", ""] + [f"- {_failed_line(r)}" for r in parts.failed]
    return "\n".join(lines) + "\n"


_STYLE = ("body{font-family:sans-serif;max-width:1200px;margin:auto;padding:0 12px}"
          "table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ccc;padding:3px 6px;font-size:13px}"
          "img{max-width:100%}dt{font-weight:bold}dd{margin:0 0 6px 20px}figure{margin:16px 0}"
          "figcaption{font-size:14px;margin-top:4px}.note{color:#555}")


def _html_table(header: list[str], rows: list[list[str]]) -> str:
    esc = html.escape
    head = "".join(f"<th>{esc(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in cells) + "</tr>" for cells in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _html(parts: _Parts) -> str:
    esc = html.escape
    before, after = _body_blocks(parts)
    out = [f"<!doctype html><html><head><meta charset='utf-8'><title>{TITLE}</title>",
           f"<style>{_STYLE}</style></head><body>", f"<h1>{TITLE}</h1>"] + _blocks_html(before)
    out += ["<h2>What the numbers mean</h2><dl>"]
    out += [f"<dt>{esc(term)}</dt><dd>{esc(text)}</dd>" for term, text in METRICS] + ["</dl>"]
    out += _blocks_html(after)
    out += ["<h2>Gallery</h2>"]
    if parts.gallery_note:
        out += [f"<p class='note'>{esc(parts.gallery_note)}</p>"]
    if not parts.gallery and parts.gallery_note is None:
        out += ["<p>No move of any adversary changed an answer, so there is nothing to show.</p>"]
    for entry in parts.gallery:
        outcome = "right answer broken" if entry["dropped"] else "answer changed"
        out += [f"<figure><img src='{esc(entry['image'])}' alt='{esc(entry['item_id'])} before and after'>"
                f"<figcaption><b>{esc(entry['question'])}</b><br>true answer: {esc(entry['true'])}; "
                f"before: {esc(entry['old'])}; after: {esc(entry['new'])} ({outcome})<br>"
                f"{esc(entry['player'])}, item {esc(entry['item_id'])} ({esc(entry['trial'])}); "
                f"moved: {esc(', '.join(entry['moved']))}</figcaption></figure>"]
    if parts.failed:
        out += ["<h2>Failed trials</h2><ul>"] + [f"<li>{esc(_failed_line(r))}</li>" for r in parts.failed] + ["</ul>"]
    out += ["</body></html>"]
    return "\n".join(out) + "\n"
