"""The Table 2 report's exact Spearman p-values, and the whole report rebuilt from the committed trials.

Baseline, measured in the same run on the same players' figures (`results/table2`,
question 3: clean accuracy against mean drop, per trained adversary): scipy's
`permutation_test` given both samples, which permutes each of them ((n!)^2
statistics, one `spearmanr` call each; the report's earlier form).
Ours: `table2.spearman`, y's ranks permuted alone (n! statistics, vectorised). Both
give the same p. Then `clevr-game report` on a copy of the committed folder, once.

Run: python -m perf.report [--results results/table2]
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from scipy import stats as scipy_stats

from benchmarks import table2
from benchmarks.report import build_report
from perf.timing import print_table, row

T = TypeVar("T")


def _spearman_permuting_both(x: list[float], y: list[float]) -> float:
    return float(scipy_stats.permutation_test(
        (x, y), lambda a, b: scipy_stats.spearmanr(a, b).statistic,
        permutation_type="pairings", n_resamples=math.inf).pvalue)


def _timed(work: Callable[..., T], *args: object) -> tuple[T, float]:
    started = time.perf_counter()
    value = work(*args)
    return value, time.perf_counter() - started


def run(results: Path) -> list[dict]:
    answers = json.loads((results / "table2.json").read_text())["3_accuracy_vs_robustness"]
    rows = []
    for label, adversary in answers["adversaries"].items():
        players = adversary["players"]
        x = [players[p]["clean_accuracy"] for p in sorted(players)]
        y = [players[p]["mean_drop"] for p in sorted(players)]
        old_p, old_seconds = _timed(_spearman_permuting_both, x, y)
        new, new_seconds = _timed(table2.spearman, x, y)
        if not math.isclose(old_p, new.p_value, rel_tol=1e-9):
            raise SystemExit(f"{label}: the two p-values differ ({old_p} against {new.p_value})")
        rows.append(row(f"exact Spearman p, {len(x)} players, {label} (p = {new.p_value:.4f})", "tests/s",
                        1 / old_seconds, 1 / new_seconds))
        print(f"{label}: both samples permuted {old_seconds:.2f} s, y's ranks alone {new_seconds:.4f} s")
    with tempfile.TemporaryDirectory() as scratch:
        copy = Path(scratch) / results.name
        shutil.copytree(results, copy)
        _, seconds = _timed(build_report, copy)
    print(f"clevr-game report {results}: {seconds:.1f} s (on a copy)")
    return rows


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=Path("results/table2"),
                        help="a benchmark folder with trials.jsonl and table2.json (default: results/table2)")
    print_table(run(parser.parse_args().results))
