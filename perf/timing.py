"""Small timing helpers shared by the performance benchmarks."""

from __future__ import annotations

import time
from collections.abc import Callable


def rate(work: Callable[[], int], repeats: int = 3, min_seconds: float = 0.2) -> float:
    """Best items-per-second over `repeats` runs of `work` (which returns how many items it did)."""
    best = 0.0
    for _ in range(repeats):
        done, start = 0, time.perf_counter()
        while True:
            done += work()
            elapsed = time.perf_counter() - start
            if elapsed >= min_seconds:
                break
        best = max(best, done / elapsed)
    return best


def row(name: str, unit: str, baseline: float, value: float, goal: str = "") -> dict:
    return {"name": name, "unit": unit, "baseline": baseline, "value": value,
            "ratio": value / baseline if baseline else float("inf"), "goal": goal}


def figure(value: float) -> str:
    """One decimal from 1 up; three significant digits below, so a slow baseline (0.0025 tests/s) is not 0.0."""
    return f"{value:.1f}" if abs(value) >= 1 or value == 0 else f"{value:.3g}"


def print_table(rows: list[dict]) -> None:
    header = f"{'benchmark':<48} {'baseline':>12} {'value':>12} {'ratio':>8}  unit  goal"
    print(header)
    print("-" * len(header))
    for r in rows:
        print(f"{r['name']:<48} {figure(r['baseline']):>12} {figure(r['value']):>12} {r['ratio']:>7.1f}x  "
              f"{r['unit']}  {r.get('goal', '')}")
