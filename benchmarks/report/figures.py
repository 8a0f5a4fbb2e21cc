"""The report's figures: drop by size, learning curves (with their generated account), families, inputs, accuracy, manipulation sizes."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import table2
from clevr_game.atomic import atomic_path

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
    """Question 1: each mini-game pair's drop, state-input adversary against pixel-input; False without pairs."""
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
    ax.set_title("one point per player, size and mini-game, seeds averaged\n(above the diagonal: the state input "
                 "is stronger)",
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


