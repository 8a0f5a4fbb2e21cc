"""The `players train` options every trainer takes, each defaulting to that trainer's own figure.

Apart from the command modules so that the state and the pixel handlers both read them
without importing each other.
"""

from __future__ import annotations

import argparse
from typing import Any

TUNABLES = ("steps", "batch_size", "learning_rate", "weight_decay", "warmup_steps", "eval_every", "eval_size",
             "checkpoint_minutes")
"""`players train` options whose defaults are each trainer's options dataclass's."""


def given_tunables(args: argparse.Namespace) -> dict[str, Any]:
    """The tunables the command line gave; the trainer's own defaults fill in the rest."""
    return {name: getattr(args, name) for name in TUNABLES if hasattr(args, name)}
