"""CLEVR-POC constraint checking: the grounded-once checkers against a fresh clingo program per check.

Baseline: build, ground and solve a new clingo program (background + environment
+ the scene as facts) for every check. Compared: the compiled numpy/Python check
(one scene per call, as the game's enforcer calls it), clingo solving the
once-grounded program under assumptions, and the compiled check on batches.
Environments are generated (9 objects, up to 15 constraints); scenes are valid
samples and perturbed copies, so both verdicts occur.

Run: python -m perf.asp
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import numpy as np

from clevr_game.asp import Environment, SceneSampler, environment_text, generate_environment
from clevr_game.asp.checker import fresh_check
from clevr_game.vocab import ATTRIBUTES, CLEVR_POC
from perf.timing import print_table, rate, row

NUM_OBJECTS = 9
BATCH = 256


def _scenes(environment: Environment, rng: np.random.Generator, valid: int, variants: int):
    """Valid samples and copies with one value or region changed (many of which break a constraint)."""
    counts = [len(CLEVR_POC.values(a)) for a in ATTRIBUTES] + [4]
    sampler = SceneSampler(environment, rng)
    ids_out, regions_out = [], []
    for _ in range(valid):
        ids, regions = sampler.sample_assignment()
        ids_out.append(ids)
        regions_out.append(regions)
        for _ in range(variants):
            new_ids, new_regions = ids.copy(), regions.copy()
            obj, slot = int(rng.integers(NUM_OBJECTS)), int(rng.integers(5))
            if slot == 4:
                new_regions[obj] = rng.integers(counts[4])
            else:
                new_ids[obj, slot] = rng.integers(counts[slot])
            ids_out.append(new_ids)
            regions_out.append(new_regions)
    return np.array(ids_out), np.array(regions_out)


def _median_us(check: Callable[[int], object], count: int) -> float:
    """Median wall time of single calls, in microseconds."""
    times = []
    for k in range(count):
        start = time.perf_counter_ns()
        check(k)
        times.append(time.perf_counter_ns() - start)
    return statistics.median(times) / 1000.0


def _cycling(environment: Environment, ids: np.ndarray, regions: np.ndarray, method: str, chunk: int):
    state = {"k": 0}

    def work() -> int:
        for _ in range(chunk):
            k = state["k"] = (state["k"] + 1) % len(ids)
            environment.check_ids(ids[k], regions[k], method=method)
        return chunk

    return work


def run(quick: bool = False) -> list[dict]:
    rng = np.random.default_rng(0)
    environments = []
    for _ in range(2 if quick else 3):
        text = environment_text(generate_environment(rng, NUM_OBJECTS), NUM_OBJECTS)
        environments.append(Environment.from_text(text, "bench.lp"))
    samples = [_scenes(e, rng, 10 if quick else 40, 9) for e in environments]
    environment, (ids, regions) = environments[0], samples[0]
    for env, (env_ids, env_regions) in zip(environments, samples, strict=True):
        assert env.check_method == "compiled"
        fresh = [fresh_check(env, env_ids[k], env_regions[k]) for k in range(0, len(env_ids), 7)]
        assert fresh == [r.ok for r in env.check_many(env_ids[::7], env_regions[::7])]

    state = {"k": 0}

    def fresh_work() -> int:
        for _ in range(10):
            k = state["k"] = (state["k"] + 1) % len(ids)
            fresh_check(environment, ids[k], regions[k])
        return 10

    seconds = 0.1 if quick else 0.3
    baseline = rate(fresh_work, min_seconds=seconds)
    compiled = rate(_cycling(environment, ids, regions, "compiled", 100), min_seconds=seconds)
    assumptions = rate(_cycling(environment, ids, regions, "clingo", 50), min_seconds=seconds)
    batch_ids, batch_regions = ids[:BATCH], regions[:BATCH]
    batched = rate(lambda: len(environment.check_many(batch_ids, batch_regions)), min_seconds=seconds)

    count = 300 if quick else 2000
    fresh_median = _median_us(lambda k: fresh_check(environment, ids[k % len(ids)], regions[k % len(ids)]),
                              count // 10)
    compiled_median = _median_us(lambda k: environment.check_ids(ids[k % len(ids)], regions[k % len(ids)]), count)
    clingo_median = _median_us(
        lambda k: environment.check_ids(ids[k % len(ids)], regions[k % len(ids)], method="clingo"), count)
    failing = sum(not r.ok for r in environment.check_many(ids, regions))

    rows = [
        row("ASP check, compiled (one scene per call)", "checks/s", baseline, compiled,
            ">= 20x fresh, median < 100 us"),
        row("ASP check, clingo under assumptions", "checks/s", baseline, assumptions, ">= 20x fresh"),
        row(f"ASP check, compiled batches of {BATCH}", "checks/s", baseline, batched, ""),
    ]
    rows[0]["median_us"], rows[1]["median_us"] = compiled_median, clingo_median
    for r in rows:
        r["baseline_median_us"] = fresh_median
        r["scenes"] = len(ids)
        r["failing_scenes"] = failing
    return rows


if __name__ == "__main__":
    results = run()
    print_table(results)
    print(f"median us per check: fresh ground+solve {results[0]['baseline_median_us']:.1f}, "
          f"compiled {results[0]['median_us']:.1f}, clingo under assumptions {results[1]['median_us']:.1f} "
          f"({results[0]['scenes']} scenes, {results[0]['failing_scenes']} violating)")
