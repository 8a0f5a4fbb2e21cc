"""Run a benchmark plan on a local process pool or on Ray, resumably.

`RESULTS/trials.jsonl` gets one line appended (and flushed to disk) per finished
trial, so a killed run loses at most the trials in flight and a restart skips
every trial already recorded; at the end of a run the file is rewritten sorted by
trial id, one line per trial. One run writes a results folder at a time: a second
is refused (clevr_game.folder_lock). Failed trials are recorded with their error;
a restart tries them again, and the later record of a trial counts. The file is
read strictly: a damaged line is an error naming the file and line, never a
silent change of the published numbers.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass
from itertools import islice
from multiprocessing import get_context
from typing import Any

from benchmarks.records import TRIALS_FILE, append_trial, read_trials, write_trials
from benchmarks.trials import Plan, prepare_minigames, run_trial, same_trial
from clevr_game.folder_lock import sole_writer

__all__ = ["TRIALS_FILE", "Progress", "pending_trials", "prepare", "read_trials", "run_plan", "write_trials"]


@dataclass(frozen=True)
class Progress:
    """Where a benchmark run stands when one more trial has finished."""

    record: dict
    done: int
    """Trials of the plan finished, failed ones included; a resumed run counts those recorded before it."""
    total: int
    elapsed_s: float
    """Since this run started."""
    remaining_s: float
    """This run's pace so far times the trials left."""

    def line(self) -> str:
        """`[3/12] 0:01:10 elapsed, ~0:03:30 left  TRIAL: consistency 0.012 drop 0.000 (35 s)`."""
        record = self.record
        state = f"error: {record['error']}" if "error" in record else (
            f"consistency {record['consistency']:.3f} drop {record['drop']:.3f}")
        return (f"[{self.done}/{self.total}] {_clock(self.elapsed_s)} elapsed, ~{_clock(self.remaining_s)} left  "
                f"{record['trial']}: {state} ({record.get('seconds', 0):.0f} s)")


def _clock(seconds: float) -> str:
    whole = int(round(seconds))
    return f"{whole // 3600}:{whole // 60 % 60:02d}:{whole % 60:02d}"


def pending_trials(plan: Plan) -> list[dict[str, Any]]:
    """Trials with no finished record of the same player, size, mini-game, seed and steps."""
    records = read_trials(plan.out)
    pending = [t for t in plan.trials()
               if not (t["trial"] in records and "error" not in records[t["trial"]]
                       and same_trial(records[t["trial"]], t))]
    # A run folder older than the weights field of its options.json began with its record's weights.
    return [{**t, "folder_weights": records[t["trial"]].get("player_weights")} if t["trial"] in records else t
            for t in pending]


def prepare(plan: Plan) -> None:
    """Split the item pool into mini-games once, disjoint across sizes, shared by every player and seed."""
    from envs.items import load_items

    prepare_minigames(plan, [it.item_id for it in load_items(plan.items)])


def _local(trials: list[dict], workers: int, may_start: Callable[[], bool]) -> Iterable[dict]:
    if workers <= 1:
        for trial in trials:
            if not may_start():
                return
            yield run_trial(trial)
        return
    # spawn: a forked child of a process that imported torch or bpy can hang.
    with ProcessPoolExecutor(workers, mp_context=get_context("spawn")) as pool:
        waiting = iter(trials)
        running = {pool.submit(run_trial, t) for t in islice(waiting, workers)} if may_start() else set()
        while running:
            done, running = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                yield future.result()
                trial = next(waiting, None) if may_start() else None
                if trial is not None:
                    running.add(pool.submit(run_trial, trial))


def _ray(trials: list[dict], address: str | None, workers: int, may_start: Callable[[], bool]) -> Iterable[dict]:
    import ray

    if not ray.is_initialized():
        if address:
            ray.init(address=address, ignore_reinit_error=True, log_to_driver=False)
        else:
            ray.init(num_cpus=max(1, workers), include_dashboard=False, ignore_reinit_error=True,
                     log_to_driver=False)
    remote = ray.remote(num_cpus=1)(run_trial)
    # As many trials in flight as the cluster has cores, each next one started only while the time allows.
    window = max(1, int(ray.cluster_resources().get("CPU", workers)))
    waiting = iter(trials)
    running = [remote.remote(t) for t in islice(waiting, window)] if may_start() else []
    while running:
        done, running = ray.wait(running, num_returns=1)
        yield ray.get(done[0])
        trial = next(waiting, None) if may_start() else None
        if trial is not None:
            running.append(remote.remote(trial))


def run_plan(
    plan: Plan,
    *,
    workers: int = 1,
    ray: bool = False,
    ray_address: str | None = None,
    on_record: Callable[[dict], None] | None = None,
    on_progress: Callable[[Progress], None] | None = None,
    max_minutes: float | None = None,
) -> dict[str, dict]:
    """Run every trial not yet recorded; returns all records.

    `on_record` gets each finished trial's record; `on_progress` the same with
    the count of trials done, the time elapsed and an estimate of the time left.
    After `max_minutes` no trial starts; those under way finish and are recorded,
    and the same plan run again plays the rest.
    """
    with sole_writer(plan.out, "benchmark"):
        started = time.monotonic()
        prepare(plan)
        records = read_trials(plan.out)
        trials = pending_trials(plan)
        total = len(plan.trials())
        deadline = None if max_minutes is None else started + 60 * max_minutes

        def may_start() -> bool:
            return deadline is None or time.monotonic() < deadline

        stream = (_ray(trials, ray_address, workers, may_start) if (ray or ray_address)
                  else _local(trials, workers, may_start))
        for finished_here, record in enumerate(stream, start=1):
            records[record["trial"]] = record
            append_trial(plan.out, record)
            if on_record is not None:
                on_record(record)
            if on_progress is not None:
                elapsed = time.monotonic() - started
                # Trials run side by side: this run's own throughput already accounts for the workers.
                left = len(trials) - finished_here
                on_progress(Progress(record, total - left, total, elapsed, elapsed / finished_here * left))
        if trials:
            write_trials(plan.out, records)  # one sorted line per trial, superseded records dropped
    return records
