"""Persistent render worker processes and a scheduler that keeps each busy with one job at a time.

A worker that dies or hangs is reported (one line), killed, and started again
for the next job; the job it held is retried up to `retries` times.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import signal
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import wait
from typing import Any

from clevr_game.errors import ClevrGameError
from clevr_game.render.worker import WorkerConfig, worker_main

LOG = logging.getLogger("clevr_game.render")


class RenderWorkerError(ClevrGameError):
    """A render worker could not start, died, or hung."""


class RenderJobError(ClevrGameError):
    """Blender raised while doing a job; the worker itself is still fine."""


@dataclass
class Job:
    message: tuple
    label: str
    """What the job is, for messages: `rendering CLEVR_new_000003.png`."""
    on_done: Callable[[Any], None] | None = None
    attempts: int = 0
    result: Any = field(default=None, repr=False)


def _exit_description(exitcode: int | None) -> str:
    if exitcode is None:
        return "stopped answering"
    if exitcode < 0:
        try:
            return f"was killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"was killed by signal {-exitcode}"
    return f"exited with status {exitcode}"


class WorkerProcess:
    """One spawned Blender process and the parent's end of its pipe."""

    def __init__(self, slot: int, config: WorkerConfig, start_timeout: float):
        self.slot = slot
        self.config = config
        self.start_timeout = start_timeout
        self.process: multiprocessing.process.BaseProcess | None = None
        self.connection: Any = None
        self.pid: int | None = None
        self.device: str | None = None

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.is_alive()

    def start(self) -> None:
        # spawn, never fork: a process forked after bpy was imported hangs.
        context = multiprocessing.get_context("spawn")
        parent, child = context.Pipe()
        process = context.Process(target=worker_main, args=(child, self.config),
                                  name=f"clevr-render-{self.slot}", daemon=True)
        process.start()
        child.close()
        self.process, self.connection = process, parent
        deadline = time.monotonic() + self.start_timeout
        while not parent.poll(0.1):
            if not process.is_alive():
                self.reap()
                raise RenderWorkerError(
                    f"render worker {self.slot} {_exit_description(process.exitcode)} while starting")
            if time.monotonic() > deadline:
                self.kill()
                raise RenderWorkerError(f"render worker {self.slot} did not start within {self.start_timeout:.0f} s")
        try:
            reply = parent.recv()
        except EOFError:
            self.kill()
            raise RenderWorkerError(f"render worker {self.slot} died while starting") from None
        if reply[0] != "ready":
            self.kill()
            raise RenderWorkerError(reply[1])
        _, self.pid, self.device = reply

    def ensure_started(self) -> None:
        if not self.running:
            if self.process is not None:
                self.reap()
            self.start()

    def kill(self) -> None:
        if self.process is not None and self.process.is_alive():
            self.process.kill()
        self.reap()

    def reap(self) -> None:
        """Wait for the process to end and drop it (it must be dead or dying)."""
        if self.process is not None:
            self.process.join(10)
        if self.connection is not None:
            self.connection.close()
        self.process = self.connection = None

    def stop(self, timeout: float = 10.0) -> None:
        if self.running:
            with contextlib.suppress(BrokenPipeError, OSError):
                self.connection.send(("close",))
            self.process.join(timeout)
        self.kill()


class WorkerPool:
    """A fixed set of worker slots, started on first use; `run` spreads jobs over them."""

    def __init__(
        self,
        config_for: Callable[[int, int], WorkerConfig],
        size: int,
        *,
        job_timeout: float | None = None,
        start_timeout: float = 300.0,
        retries: int = 1,
        report: Callable[[str], None] | None = None,
    ):
        self._config_for = config_for
        self.job_timeout = job_timeout
        self.start_timeout = start_timeout
        self.retries = retries
        self.report = report or LOG.warning
        self.restarts = 0
        self.workers: list[WorkerProcess] = []
        self.resize(size)

    def resize(self, size: int) -> None:
        """Grow or shrink to `size` slots (threads per worker follow the new size after a restart)."""
        while len(self.workers) > size:
            self.workers.pop().stop()
        while len(self.workers) < size:
            slot = len(self.workers)
            self.workers.append(WorkerProcess(slot, self._config_for(slot, size), self.start_timeout))

    def pids(self) -> list[int | None]:
        return [w.pid if w.running else None for w in self.workers]

    def close(self) -> None:
        for worker in self.workers:
            worker.stop()

    def _died_idle(self, worker: WorkerProcess) -> None:
        """A worker that died between jobs lost nothing: report it and start a new one."""
        exitcode = worker.process.exitcode
        pid = worker.pid
        worker.reap()
        self.restarts += 1
        self.report(f"render worker {worker.slot} (pid {pid}) {_exit_description(exitcode)} while idle; restarting it")

    def _crashed(self, worker: WorkerProcess, job: Job, what: str | None, pending: deque[Job]) -> None:
        """The worker died (what=None: say how, from its exit status) or hung; retry or give up."""
        pid, process = worker.pid, worker.process
        if what is None and process is not None:
            process.join(2.0)  # a closed pipe can arrive just before the exit status
            what = _exit_description(process.exitcode)
        worker.kill()
        self.restarts += 1
        message = f"render worker {worker.slot} (pid {pid}) {what} while {job.label}"
        job.attempts += 1
        if job.attempts > self.retries:
            raise RenderWorkerError(f"{message}; gave up after {job.attempts} attempts")
        self.report(f"{message}; restarting it")
        pending.appendleft(job)

    def run(self, jobs: list[Job]) -> None:
        """Do every job; each job's `on_done(result)` runs as its result arrives."""
        pending = deque(jobs)
        busy: dict[int, tuple[WorkerProcess, Job, float]] = {}
        failure: ClevrGameError | None = None
        try:
            while busy or (pending and failure is None):
                for worker in self.workers:
                    if failure is not None or not pending or worker.slot in busy:
                        continue
                    job = pending.popleft()
                    if worker.process is not None and not worker.running:
                        self._died_idle(worker)
                    worker.ensure_started()
                    try:
                        worker.connection.send(job.message)
                    except (BrokenPipeError, ConnectionResetError, OSError):
                        self._crashed(worker, job, None, pending)
                        continue
                    deadline = time.monotonic() + self.job_timeout if self.job_timeout else float("inf")
                    busy[worker.slot] = (worker, job, deadline)
                if not busy:
                    continue
                nearest = min(d for _, _, d in busy.values())
                timeout = None if nearest == float("inf") else max(0.0, nearest - time.monotonic())
                wait([w.connection for w, _, _ in busy.values()] + [w.process.sentinel for w, _, _ in busy.values()],
                     timeout)
                for worker, job, deadline in list(busy.values()):
                    failure = self._collect(worker, job, deadline, busy, pending) or failure
        finally:
            for worker, _, _ in busy.values():  # interrupted mid-job: its reply would be misread later
                worker.kill()
        if failure is not None:
            raise failure

    def _collect(self, worker: WorkerProcess, job: Job, deadline: float,
                 busy: dict[int, tuple[WorkerProcess, Job, float]], pending: deque[Job]) -> ClevrGameError | None:
        """Take the worker's reply if there is one; handle death and timeout. Returns a job failure."""
        if worker.connection.poll():
            try:
                reply = worker.connection.recv()
            except (EOFError, OSError):
                del busy[worker.slot]
                self._crashed(worker, job, None, pending)
                return None
            del busy[worker.slot]
            if reply[0] == "ok":
                job.result = reply[1]
                if job.on_done is not None:
                    job.on_done(reply[1])
                return None
            return RenderJobError(f"{job.label}: {reply[1]}")
        if not worker.process.is_alive():
            del busy[worker.slot]
            self._crashed(worker, job, None, pending)
        elif time.monotonic() > deadline:
            del busy[worker.slot]
            self._crashed(worker, job, f"took longer than {self.job_timeout:g} s", pending)
        return None


def threads_per_worker(workers: int) -> int | None:
    """Split the cores between workers; one worker lets Blender take them all."""
    if workers <= 1:
        return None
    return max(1, (os.cpu_count() or 1) // workers)
