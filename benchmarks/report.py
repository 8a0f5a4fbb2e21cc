"""RESULTS/report.md and RESULTS/report.html from trials.jsonl and the trials' run folders.

Both files hold the same parts (docs/report.md says what each shows): the metric
definitions, the table of consistency and drop per player, size and adversary,
the drop plot, the learning curves with a generated account of what they show,
the breakdown per question family and kind, the gallery of distinct broken
items rendered before and after (benchmarks/gallery.py), and the failed trials.
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

from benchmarks.gallery import GALLERY_SIZE, SCHEMATIC, Candidate, draw_gallery, pick
from benchmarks.runner import read_trials
from benchmarks.stats import breakdown, table
from clevr_game.errors import InputError
from clevr_game.scene import Scene, parse_scene

__all__ = ["GALLERY_SIZE", "build_report"]

METRICS = [
    ("consistency", "share of items whose answer one move of the final adversary changed, with a valid "
                    "scene, averaged over the evaluation samples (how often the player is inconsistent)."),
    ("drop", "share of items answered right before the move and wrong after it (the accuracy the "
             "player loses to one move)."),
    ("adversary", "trained: the adversary trained by RL on the mini-game; random: random moves with the same "
                  "number of samples on the same items; search: greedy search over single-object moves "
                  "within a query budget (first seed of each mini-game only)."),
    ("mean, 95% CI", "mean over mini-games and seeds with a bootstrap 95% confidence interval; max: the "
                     "highest mini-game mean (over its seeds); p: one-sample t-test against 0 "
                     "(no manipulation succeeds)."),
    ("drop p vs random", "paired t-test of the trained adversary's drop against the random adversary's "
                         "on the same trials."),
    ("clean acc.", "the player's accuracy on the unmoved scenes of the mini-games."),
    ("player errors", "queries the player failed to answer (crash, time-out, garbage), over all queries of "
                      "the trials; a moved scene whose answer failed is left out of consistency and drop, "
                      "and a trial with more than 5% failed queries (or its --max-error-rate) is failed."),
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
    items: _ItemsFolder | None


@dataclass
class _ItemsFolder:
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
    records = list(read_trials(folder).values())
    if not records:
        raise InputError(f"{folder}: no trials.jsonl with finished trials (run `clevr-game benchmark` first)")
    ok = [r for r in records if "error" not in r]
    failed = [r for r in records if "error" in r]
    rows = table(ok)
    _write(folder / "table.json", json.dumps(rows, indent=1))
    runs = _runs(folder, ok)
    item_rows = _item_rows(runs)
    by_family, by_kind = breakdown(item_rows, "family"), breakdown(item_rows, "kind")
    _write(folder / "families.json", json.dumps({"family": by_family, "kind": by_kind}, indent=1))
    parts = _Parts(rows=rows, failed=failed, family_rows=by_family, kind_rows=by_kind)
    if ok:
        size_plot(rows, folder / "drop_by_size.png")
        parts.curves = curve_plot(ok, folder / "learning_curves.png")
        parts.curve_text = curve_account(ok)
    if by_family:
        family_plot(by_family, by_kind, folder / "families.png")
    parts.gallery, parts.gallery_note = draw_gallery(pick(_candidates(runs, rows)), folder, gallery_preset)
    if parts.gallery and parts.gallery_note is None and gallery_preset != SCHEMATIC:
        parts.gallery_note = f"Rendered with the `{gallery_preset}` preset of the game's Blender renderer."
    _write(folder / "report.md", _markdown(parts))
    _write(folder / "report.html", _html(parts))
    return folder / "report.md", folder / "report.html"


@dataclass
class _Parts:
    rows: list[dict]
    failed: list[dict]
    family_rows: list[dict]
    kind_rows: list[dict]
    curves: bool = False
    curve_text: list[str] = field(default_factory=list)
    gallery: list[dict] = field(default_factory=list)
    gallery_note: str | None = None


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


# ------------------------------------------------------------------ reading the runs


def _runs(folder: Path, records: list[dict]) -> list[_Run]:
    """The finished trials whose result.json is still there, with their item folders (read once each)."""
    folders: dict[str, _ItemsFolder | None] = {}
    runs = []
    for record in records:
        result_path = _run_dir(folder, record) / "result.json"
        if not result_path.is_file():
            continue
        try:
            result = json.loads(result_path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            continue
        items_dir = _items_dir(folder, result)
        if items_dir is not None and items_dir not in folders:
            folders[items_dir] = _read_items(items_dir)
        runs.append(_Run(record, result, folders.get(items_dir) if items_dir else None))
    return runs


def _run_dir(folder: Path, record: dict) -> Path:
    """The trial's run folder as recorded, else where the benchmark puts it (a results folder moved whole)."""
    recorded = Path(record.get("run", ""))
    if (recorded / "result.json").is_file():
        return recorded
    return folder / "runs" / record["trial"]


def _items_dir(folder: Path, result: dict) -> str | None:
    given = result.get("options", {}).get("items")
    for candidate in ([Path(given)] if given else []) + [folder / "items"]:
        if candidate.is_dir():
            return str(candidate.resolve())
    return None


def _read_items(items_dir: str) -> _ItemsFolder | None:
    """Item folder contents by item id; None when the folder cannot be read any more."""
    from agents.evaluation import question_kind
    from clevr_game.dataset import load_dataset
    from envs.items import load_items

    found = _ItemsFolder()
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
                kind = question_kind(item.program)
                if kind is not None:
                    found.kinds[item.item_id] = kind
    except InputError:
        return None
    return found


def _item_rows(runs: list[_Run]) -> list[dict]:
    """Per-item results of the trained adversary, labelled with player, family and kind."""
    rows = []
    for run in runs:
        for item in run.result.get("items", []):
            if item.get("tries", 1) <= item.get("player_errors", 0):
                continue  # no move of this item got an answer: it counts nowhere
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
    tmp = path.with_name(f".{path.stem}.tmp{path.suffix}")
    fig.savefig(tmp, dpi=100)
    _plt().close(fig)
    os.replace(tmp, path)


_ADVERSARIES = ("trained", "random", "search")


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
            x = np.array([i for i, _ in points]) + (k - 1) * width
            means = np.array([r["drop"]["mean"] for _, r in points])
            lows, highs = np.array([r["drop"]["ci95"] for _, r in points], dtype=np.float64).T
            ax.bar(x, means, width, yerr=_whiskers(means, lows, highs),
                   capsize=3, label=adversary)
        ax.set_xticks(range(len(players)), [_short(p) for p in players], fontsize=8)
        ax.set_title(f"drop at mini-game size {sizes[0]} (bars: mean, whiskers: 95% CI)", fontsize=10)
    else:
        for player in players:
            for adversary, style in (("trained", "-"), ("random", ":")):
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
    return f"{row['player_errors']} ({row['player_errors'] / queries:.2%})"


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


def _md_cell(text: str) -> str:
    return str(text).replace("|", "\\|")


def _md_table(header: list[str], rows: list[list[str]]) -> list[str]:
    return (["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
            + ["| " + " | ".join(_md_cell(c) for c in cells) + " |" for cells in rows])


def _markdown(parts: _Parts) -> str:
    lines = [f"# {TITLE}", "", "## Results", ""] + _md_table(_HEADER, [_cells(r) for r in parts.rows])
    if parts.rows:
        lines += ["", "![drop by size and adversary](drop_by_size.png)"]
    lines += ["", "## What the numbers mean", ""] + [f"- **{term}**: {text}" for term, text in METRICS]
    if parts.curves:
        lines += ["", "## Learning curves", "", "![learning curves](learning_curves.png)", "", CURVE_EXPLANATION,
                  ""] + [f"- {s}" for s in parts.curve_text]
    if parts.family_rows:
        lines += ["", "## By question family", ""]
        lines += _md_table(_breakdown_header("family"), [_breakdown_cells(r, "family") for r in parts.family_rows])
        lines += [""] + _md_table(_breakdown_header("kind"), [_breakdown_cells(r, "kind") for r in parts.kind_rows])
        lines += ["", "![consistency and drop by question family and kind](families.png)", ""]
        lines += [f"- {s}" for s in _fragile(parts.family_rows, "family") + _fragile(parts.kind_rows, "kind")]
    lines += ["", "## Gallery", ""]
    if parts.gallery_note:
        lines += [parts.gallery_note, ""]
    if not parts.gallery:
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
    out = [f"<!doctype html><html><head><meta charset='utf-8'><title>{TITLE}</title>",
           f"<style>{_STYLE}</style></head><body>", f"<h1>{TITLE}</h1>", "<h2>Results</h2>",
           _html_table(_HEADER, [_cells(r) for r in parts.rows])]
    if parts.rows:
        out += ["<p><img src='drop_by_size.png' alt='drop by size and adversary'></p>"]
    out += ["<h2>What the numbers mean</h2><dl>"]
    out += [f"<dt>{esc(term)}</dt><dd>{esc(text)}</dd>" for term, text in METRICS] + ["</dl>"]
    if parts.curves:
        out += ["<h2>Learning curves</h2><p><img src='learning_curves.png' alt='learning curves'></p>",
                f"<p>{esc(CURVE_EXPLANATION)}</p><ul>"] + [f"<li>{esc(s)}</li>" for s in parts.curve_text] + ["</ul>"]
    if parts.family_rows:
        out += ["<h2>By question family</h2>",
                _html_table(_breakdown_header("family"), [_breakdown_cells(r, "family") for r in parts.family_rows]),
                _html_table(_breakdown_header("kind"), [_breakdown_cells(r, "kind") for r in parts.kind_rows]),
                "<p><img src='families.png' alt='consistency and drop by question family and kind'></p><ul>"]
        out += [f"<li>{esc(s)}</li>" for s in _fragile(parts.family_rows, "family") + _fragile(parts.kind_rows, "kind")]
        out += ["</ul>"]
    out += ["<h2>Gallery</h2>"]
    if parts.gallery_note:
        out += [f"<p class='note'>{esc(parts.gallery_note)}</p>"]
    if not parts.gallery:
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
