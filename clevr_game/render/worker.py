"""The render worker process: imports bpy once, keeps one Stage, answers jobs from a pipe.

Started with the `spawn` method only: a process forked after bpy was imported
hangs. Replies are tuples: ("ready", pid, device), ("ok", value) or
("error", one-line message) for a job that failed while the worker lives on.
"""

from __future__ import annotations

import os
import sys
import traceback
from multiprocessing.connection import Connection
from typing import Any

from clevr_game.render.frame import Frame
from clevr_game.render.worker_config import WorkerConfig


def _silence(log_path: str | None) -> None:
    # Blender prints a line per render tile and frame; keep it out of the parent's terminal
    # (and progress bar), in a log the parent can point to when a worker dies.
    target = os.open(log_path or os.devnull, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(target, 1)
    os.dup2(target, 2)
    os.close(target)


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"


def _handle(stage: Any, message: tuple) -> Any:
    kind = message[0]
    if kind == "render":
        _, frame, path, rebuild = message
        if rebuild:
            stage.build()
        stage.render(frame, path)
        return path
    if kind == "coverage":
        frame: Frame = message[1]
        return stage.coverage(frame)
    if kind == "ping":
        return os.getpid()
    raise ValueError(f"unknown job {kind!r}")


def worker_main(connection: Connection, config: WorkerConfig) -> None:
    """Entry point of a worker process."""
    _silence(config.log_path)
    try:
        from clevr_game.render.blender.stage import Stage

        stage = Stage(config)
    except Exception as exc:  # reported to the parent, which raises it as one line
        traceback.print_exc()
        connection.send(("error", f"render worker could not start: {_one_line(exc)}"))
        return
    connection.send(("ready", os.getpid(), stage.device))
    while True:
        try:
            message = connection.recv()
        except (EOFError, OSError):  # the parent went away
            return
        if message[0] == "close":
            return
        try:
            reply = ("ok", _handle(stage, message))
        except Exception as exc:
            traceback.print_exc()
            reply = ("error", _one_line(exc))
        try:
            connection.send(reply)
        except (BrokenPipeError, OSError):
            return
