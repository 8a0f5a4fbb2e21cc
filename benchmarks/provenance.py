"""How a results folder was made: the command, its options, the package version, the commit, the date, the cores.

The benchmark writes RESULTS/run_info.json when it runs; the report prints it, so a
report read alone says what made it. The report itself stays a function of the
folder's files (a rebuild gives the same bytes).
"""

from __future__ import annotations

import datetime
import json
import os
import shlex
import subprocess
from pathlib import Path
from typing import Any

from clevr_game.atomic import write_json_atomic

RUN_INFO_FILE = "run_info.json"


def package_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("clevr-game")
    except PackageNotFoundError:
        return "unknown"


def source_commit() -> str | None:
    """The git commit of the checkout the package runs from (with `+changes` when it has some), or None."""
    root = Path(__file__).resolve().parents[1]
    try:
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                                timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{commit}+changes" if dirty else commit


def run_info(argv: list[str], options: dict[str, Any]) -> dict[str, Any]:
    return {
        "command": shlex.join(["clevr-game", *argv]),
        "options": {k: v for k, v in sorted(options.items()) if isinstance(v, str | int | float | bool | type(None))},
        "version": package_version(),
        "commit": source_commit(),
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "cores": os.cpu_count(),
    }


def write_run_info(folder: str | os.PathLike[str], info: dict[str, Any]) -> None:
    write_json_atomic(Path(folder) / RUN_INFO_FILE, info, indent=1, sort_keys=True)


def read_run_info(folder: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The folder's run_info.json, or None when there is none (or it cannot be read: the report still stands)."""
    path = Path(folder) / RUN_INFO_FILE
    try:
        info = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return info if isinstance(info, dict) else None
