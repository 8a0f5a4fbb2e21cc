"""The study's figure and report.md: unseen accuracy against the training fraction and the scenes trained on."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from clevr_game.atomic import atomic_path, write_text_atomic

if TYPE_CHECKING:
    pass
from experiments.examples_study.options import (
    FIGURE_FILE,
    REPORT_FILE,
    SUPERSEDED_FILE,
    TARGET_ACCURACY,
)

# ------------------------------------------------------------------ figure and report


@dataclass(frozen=True)
class Point:
    fraction: float
    mean: float
    low: float
    high: float
    trials: int
    scenes: int = 0
    """Scenes of the share at this fraction (the train part and its validation slice), the same in every trial."""
    train_scenes: int = 0
    """Of them, the scenes the model is trained on (the rest choose when to stop)."""


def summarise(records: list[dict[str, Any]]) -> dict[tuple[str, str], list[Point]]:
    """(dataset, player) -> per fraction the mean unseen accuracy and its 95% bootstrap interval over trials."""
    from benchmarks.stats import bootstrap_ci

    groups: dict[tuple[str, str], dict[float, list[float]]] = defaultdict(lambda: defaultdict(list))
    scenes: dict[tuple[str, float], tuple[int, int]] = {}
    for record in records:
        groups[(record["dataset"], record["player"])][record["fraction"]].append(record["accuracy"])
        scenes[(record["dataset"], record["fraction"])] = (record["train_scenes"] + record["validation_scenes"],
                                                           record["train_scenes"])
    return {
        line: [Point(fraction, float(np.mean(values)), *bootstrap_ci(values), len(values),
                     *scenes[(line[0], fraction)])
               for fraction, values in sorted(by_fraction.items())]
        for line, by_fraction in sorted(groups.items())
    }


def budget_bound(records: list[dict[str, Any]]) -> dict[tuple[str, str, float], int]:
    """(dataset, player, fraction) -> trials that ran their whole step budget without early stopping.

    Such a run was still improving within its patience window when the budget ended, so
    its unseen accuracy is a lower bound set by the budget, not by the data.
    """
    counts: dict[tuple[str, str, float], int] = defaultdict(int)
    for record in records:
        if not record.get("stopped_early", True):
            counts[(record["dataset"], record["player"], record["fraction"])] += 1
    return counts


def smallest_fraction(points: list[Point], target: float = TARGET_ACCURACY) -> float | None:
    """The smallest training fraction whose mean unseen accuracy reaches `target`."""
    return next((p.fraction for p in points if p.mean >= target), None)


def plot(lines: dict[tuple[str, str], list[Point]], path: Path) -> None:
    """Unseen accuracy against the share of placements trained on (the paper's axis) and against the scenes."""
    import matplotlib
    import matplotlib.ticker

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (by_share, by_scenes) = plt.subplots(1, 2, figsize=(11.0, 4.2), sharey=True)
    # A colour per dataset and a line style per player: eleven or more lines would repeat the colour cycle.
    datasets = sorted({dataset for dataset, _ in lines})
    players = sorted({player for _, player in lines})
    colours = plt.get_cmap("tab10" if len(datasets) <= 10 else "tab20")
    styles = ["-", "--", ":", "-."]
    for (dataset, player), points in lines.items():
        look = {"color": colours(datasets.index(dataset)), "linestyle": styles[players.index(player) % len(styles)]}
        mean = np.array([p.mean for p in points])
        low, high = np.array([p.low for p in points]), np.array([p.high for p in points])
        # One (2, N) array: a list of two arrays makes matplotlib convert 1-element arrays to scalars (deprecated).
        whiskers = np.vstack([mean - low, high - mean])
        label = f"{dataset} ({player})"
        by_share.errorbar([p.fraction for p in points], mean, yerr=whiskers, marker="o", capsize=3, label=label,
                          **look)
        by_scenes.errorbar([p.scenes for p in points], mean, yerr=whiskers, marker="o", capsize=3, label=label,
                           **look)
    for ax in (by_share, by_scenes):
        ax.axhline(TARGET_ACCURACY, color="gray", linestyle=":", linewidth=1)
        ax.grid(alpha=0.3)
    # A logit axis spreads both ends of the fractions (1% and 5%, 75% and 90%) apart.
    by_share.set_xscale("logit")
    ticks = sorted({p.fraction for points in lines.values() for p in points})
    by_share.set_xticks(ticks, [f"{t * 100:g}%" for t in ticks])
    by_share.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    by_share.set_xlabel("scenes trained on (% of the dataset's valid placements)")
    by_share.set_ylabel("accuracy on unseen placements")
    by_scenes.set_xscale("log")
    by_scenes.set_xlabel("scenes trained on")
    by_scenes.legend(fontsize=7)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=100)
    plt.close(fig)


def _protocol_notes(out: Path, records: list[dict[str, Any]]) -> list[str]:
    """Report lines on the minimum steps players' trials train and on records a protocol change took out."""
    minimums = sorted({(r["player"], r["settings"]["min_steps"]) for r in records
                       if r.get("settings", {}).get("min_steps")})
    notes = [f"{player}'s trials train at least {steps:,} steps before early stopping may end them "
             "(its records made before that minimum stand where their runs met no stop before it)."
             for player, steps in minimums]
    superseded = out / SUPERSEDED_FILE
    if superseded.is_file():
        count = sum(1 for line in superseded.read_text().splitlines() if line.strip())
        notes.append(f"{count} records taken out by a change of protocol are kept in `{SUPERSEDED_FILE}` "
                     "(not read by the study, which runs their trials again).")
    return ["", *notes] if notes else []


def write_report(out: Path, records: list[dict[str, Any]], command: str) -> Path:
    """RESULTS/report.md (and figure.png when there is a record)."""
    lines = summarise(records)
    text = ["# How many examples are enough?", "",
            "Accuracy on unseen placements against the share of placements trained on: mean over trials "
            "and 95% bootstrap interval. Datasets from `clevr-game exhaustive`; each trial trains a fresh model.", ""]
    if command:
        text += ["```", command, "```", ""]
    if lines:
        plot(lines, out / FIGURE_FILE)
        text += [f"![unseen accuracy against training fraction]({FIGURE_FILE})", "",
                 f"## Smallest training fraction reaching {TARGET_ACCURACY:.0%} on unseen scenes", "",
                 "A trial that ran its whole step budget was still improving when it ended (early stopping "
                 "had not stopped it): its accuracy is a lower bound, and a fraction not reached where such "
                 "trials are is not evidence that the data falls short.", "",
                 "| dataset | player | smallest fraction | scenes in the share (trained on + validation) "
                 "| trials per fraction |",
                 "|---|---|---|---|---|"]
        bound = budget_bound(records)
        top = max(p.fraction for points in lines.values() for p in points)
        for (dataset, player), points in lines.items():
            reached = smallest_fraction(points)
            shown = "not reached" if reached is None else f"{reached:g}"
            if reached is None and points[-1].fraction < top:  # a study under way: its larger shares are to come
                shown += f" up to {points[-1].fraction:g} (no trials above it yet)"
            below = [p for p in points if p.mean < TARGET_ACCURACY
                     and (reached is None or p.fraction < reached) and bound[(dataset, player, p.fraction)]]
            if below:
                shown += f" (budget-bound below it: {', '.join(f'{p.fraction:g}' for p in below)})"
            scenes = next((f"{p.scenes:,} ({p.train_scenes:,} + {p.scenes - p.train_scenes:,})"
                           for p in points if p.fraction == reached), "")
            text.append(f"| {dataset} | {player} | {shown} | {scenes} | {min(p.trials for p in points)} |")
        text += ["", "## Unseen accuracy per fraction", "",
                 "| dataset | player | fraction | mean [95% CI] | trials | ran out of steps |", "|---|---|---|---|---|---|"]
        for (dataset, player), points in lines.items():
            for p in points:
                text.append(f"| {dataset} | {player} | {p.fraction:g} | {p.mean:.4f} [{p.low:.4f}, {p.high:.4f}] "
                            f"| {p.trials} | {bound[(dataset, player, p.fraction)]} |")
        seconds = sum(r.get("seconds", 0.0) for r in records)
        text += ["", f"{len(records)} trials, {seconds / 60:.1f} minutes of training and evaluation in all."]
        text += _protocol_notes(out, records)
    else:
        text.append("No trial recorded yet.")
    path = out / REPORT_FILE
    write_text_atomic(path, "\n".join(text) + "\n")
    return path
