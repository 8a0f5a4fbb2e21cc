"""RESULTS/report.md and RESULTS/report.html from trials.jsonl: table, plots, gallery.

The gallery shows the most convincing manipulations (a right answer broken with
the fewest moved objects first): the scene before and after from above, arrows
for the moves, the question, the true answer and both of the player's answers;
rendered images are added when a renderer is available.
"""

from __future__ import annotations

import html
import json
import os
from collections import defaultdict
from pathlib import Path

import numpy as np

from benchmarks.runner import read_trials
from benchmarks.stats import table
from clevr_game.errors import InputError
from clevr_game.scene import Scene, parse_scene
from clevr_game.vocab import COLOR_RGB

GALLERY_SIZE = 6
_MARKERS = {"cube": "s", "sphere": "o", "cylinder": "h", "cone": "^"}


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path: Path) -> None:
    tmp = path.with_name(f".{path.stem}.tmp{path.suffix}")
    fig.savefig(tmp, dpi=90)
    _plt().close(fig)
    os.replace(tmp, path)


def _fmt(summary: dict) -> str:
    low, high = summary["ci95"]
    return f"{summary['mean']:.3f} [{low:.3f}, {high:.3f}]"


def _p(value: float) -> str:
    return "n/a" if value != value else f"{value:.2g}"


def drop_plot(rows: list[dict], path: Path) -> None:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6, 3.5))
    by_player: dict[str, list[tuple[int, float, float, float]]] = defaultdict(list)
    for row in rows:
        if row["adversary"] == "trained":
            low, high = row["drop"]["ci95"]
            by_player[row["player"]].append((row["size"], row["drop"]["mean"], low, high))
    for player, points in sorted(by_player.items()):
        points.sort()
        sizes, means, lows, highs = map(np.array, zip(*points, strict=True))
        ax.errorbar(sizes, means, yerr=[means - lows, highs - means], marker="o", capsize=3, label=player)
    ax.set_xscale("log")
    ax.set_xlabel("mini-game size")
    ax.set_ylabel("drop (trained adversary)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    _save(fig, path)


def curve_plot(records: list[dict], path: Path) -> None:
    plt = _plt()
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(6, 4.5), sharex=True)
    by_player: dict[str, list[dict]] = defaultdict(list)
    for record in records:
        if "curve" in record:
            by_player[record["player"]].append(record["curve"])
    for player, curves in sorted(by_player.items()):
        length = min(len(c["steps"]) for c in curves)
        steps = np.array(curves[0]["steps"][:length])
        top.plot(steps, np.mean([c["reward"][:length] for c in curves], 0), label=player)
        bottom.plot(steps, np.mean([c["invalid"][:length] for c in curves], 0), label=player)
    top.set_ylabel("mean reward")
    bottom.set_ylabel("invalid share")
    bottom.set_xlabel("env steps")
    top.legend(fontsize=8)
    fig.tight_layout()
    _save(fig, path)


def _draw_scene(ax, scene: Scene, title: str, moves: list | None = None, before: Scene | None = None) -> None:
    for obj in scene.objects:
        x, y = obj.coords[:2]
        rgb = np.array(COLOR_RGB[obj.color]) / 255
        size = 260 if obj.size == "large" else (170 if obj.size == "medium" else 90)
        ax.scatter([x], [y], s=size, c=[rgb], marker=_MARKERS.get(obj.shape, "o"),
                   edgecolors="black" if obj.material == "metal" else "none", linewidths=1.5)
    if moves and before is not None:
        for obj, dx, dy in moves:
            x, y = before.objects[obj].coords[:2]
            ax.annotate("", xy=(x + dx, y + dy), xytext=(x, y), arrowprops={"arrowstyle": "->", "color": "red"})
    ax.set_xlim(-3, 3)
    ax.set_ylim(-3, 3)
    ax.set_aspect("equal")
    ax.set_title(title, fontsize=8)
    ax.tick_params(labelsize=6)


def gallery(records: list[dict], folder: Path, renderer: object | None = None) -> list[dict]:
    """The most convincing manipulations as before/after pictures; returns their captions."""
    from clevr_game.dataset import dataset_files, load_dataset

    candidates = []
    pools: dict[str, tuple] = {}
    for record in records:
        result_path = Path(record.get("run", "")) / "result.json"
        if "error" in record or not result_path.is_file():
            continue
        result = json.loads(result_path.read_text())
        items_dir = result["options"]["items"]
        for item in result["items"]:
            best = item.get("best_manipulation")
            if best and best.get("scene") and item["changed"]:
                rank = (not item["dropped"], len(best["moves"]))
                candidates.append((rank, record["player"], items_dir, item, best))
    candidates.sort(key=lambda c: (c[0], c[3]["item_id"], c[1]))
    plt = _plt()
    shown = []
    for k, (_, player, items_dir, item, best) in enumerate(candidates[:GALLERY_SIZE]):
        if items_dir not in pools:
            _, questions, scene_of = load_dataset(*dataset_files(items_dir))
            pools[items_dir] = {f"{s.image_index}:{q.index}": (s, q) for q, s in zip(questions, scene_of, strict=True)}
        original, question = pools[items_dir][item["item_id"]]
        after = parse_scene(best["scene"], vocabulary=original.vocabulary)
        fig, (left, right) = plt.subplots(1, 2, figsize=(7, 3.6))
        _draw_scene(left, original, f"before: {player} says {item['old_answer']}")
        _draw_scene(right, after, f"after: {player} says {best['new_answer']}", best["moves"], original)
        fig.suptitle(f"{question.text} (true answer: {item['true_answer']})", fontsize=8)
        fig.tight_layout()
        name = f"gallery_{k}.png"
        _save(fig, folder / name)
        shown.append({"image": name, "player": player, "question": question.text,
                      "true": item["true_answer"], "old": item["old_answer"], "new": best["new_answer"],
                      "dropped": item["dropped"], "moves": len(best["moves"])})
    return shown


def build_report(results: str | os.PathLike[str]) -> tuple[Path, Path]:
    folder = Path(results)
    records = list(read_trials(folder).values())
    if not records:
        raise InputError(f"{folder}: no trials.jsonl with finished trials (run `clevr-game benchmark` first)")
    ok = [r for r in records if "error" not in r]
    failed = [r for r in records if "error" in r]
    rows = table(ok)
    (folder / "table.json").write_text(json.dumps(rows, indent=1))
    if ok:
        drop_plot(rows, folder / "drop_by_size.png")
        curve_plot(ok, folder / "learning_curves.png")
    shown = gallery(ok, folder) if ok else []
    md, page = _markdown(rows, shown, failed, bool(ok)), _html(rows, shown, failed, bool(ok))
    for name, text in (("report.md", md), ("report.html", page)):
        tmp = folder / f".{name}.tmp"
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, folder / name)
    return folder / "report.md", folder / "report.html"


_HEADER = ["player", "size", "adversary", "consistency (mean, 95% CI)", "max", "p", "drop (mean, 95% CI)",
           "max", "p", "drop p vs random", "clean acc.", "player errors", "trials"]


def _cells(row: dict) -> list[str]:
    c, d = row["consistency"], row["drop"]
    return [row["player"], str(row["size"]), row["adversary"], _fmt(c), f"{c['max_over_minigames']:.3f}",
            _p(c["p_value"]), _fmt(d), f"{d['max_over_minigames']:.3f}", _p(d["p_value"]),
            _p(row["drop_p_vs_random"]) if "drop_p_vs_random" in row else "",
            f"{row['clean_accuracy']:.3f}", _errors(row), str(row["trials"])]


def _errors(row: dict) -> str:
    queries = row.get("player_queries", 0)
    if not queries:
        return "n/a"
    return f"{row['player_errors']} ({row['player_errors'] / queries:.2%})"


def _failed_line(record: dict) -> str:
    rate = record.get("player_error_rate")
    counted = f" ({record['player_errors']} of {record['player_queries']} queries failed)" if rate is not None else ""
    return f"{record['trial']}: {record['error']}{counted}"


def _markdown(rows: list[dict], shown: list[dict], failed: list[dict], plots: bool) -> str:
    lines = ["# clevr-game robustness benchmark", "",
             "consistency: share of items whose answer one move of the final adversary changed with a valid "
             "scene (averaged over the evaluation samples); drop: share answered right before and wrong after. "
             "Means over mini-games and seeds with bootstrap 95% CIs, "
             "maximum over mini-games, p-value of a one-sample t-test against 0. "
             "player errors: queries the player failed to answer (crash, time-out, garbage), over all "
             "queries of the trials; a moved scene whose answer failed is left out of consistency and drop, "
             "and a trial with more than 5% failed queries (or its --max-error-rate) is failed, below.", "",
             "| " + " | ".join(_HEADER) + " |", "|" + "---|" * len(_HEADER)]
    lines += ["| " + " | ".join(_cells(r)) + " |" for r in rows]
    if plots:
        lines += ["", "![drop by size](drop_by_size.png)", "", "![learning curves](learning_curves.png)"]
    if shown:
        lines += ["", "## Gallery", ""]
        for s in shown:
            lines += [f"**{s['player']}**: {s['question']} true: {s['true']}, before: {s['old']}, after: "
                      f"{s['new']} ({s['moves']} object(s) moved)", "", f"![]({s['image']})", ""]
    if failed:
        lines += ["", "## Failed trials", ""] + [f"- {_failed_line(r)}" for r in failed]
    return "\n".join(lines) + "\n"


def _html(rows: list[dict], shown: list[dict], failed: list[dict], plots: bool) -> str:
    esc = html.escape
    head = "".join(f"<th>{esc(h)}</th>" for h in _HEADER)
    body = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in _cells(r)) + "</tr>" for r in rows)
    parts = ["<!doctype html><html><head><meta charset='utf-8'><title>clevr-game benchmark</title>",
             "<style>body{font-family:sans-serif;max-width:1100px;margin:auto}table{border-collapse:collapse}"
             "td,th{border:1px solid #ccc;padding:3px 6px;font-size:13px}</style></head><body>",
             "<h1>clevr-game robustness benchmark</h1>", f"<table><tr>{head}</tr>{body}</table>"]
    if plots:
        parts += ["<p><img src='drop_by_size.png'> <img src='learning_curves.png'></p>"]
    if shown:
        parts += ["<h2>Gallery</h2>"]
        for s in shown:
            parts += [f"<p><b>{esc(s['player'])}</b>: {esc(s['question'])} true: {esc(s['true'])}, before: "
                      f"{esc(str(s['old']))}, after: {esc(str(s['new']))}<br><img src='{esc(s['image'])}'></p>"]
    if failed:
        parts += ["<h2>Failed trials</h2><ul>"] + [f"<li>{esc(_failed_line(r))}</li>" for r in failed]
        parts += ["</ul>"]
    parts += ["</body></html>"]
    return "\n".join(parts)
