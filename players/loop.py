"""The optimisation loop both player trainers share.

AdamW with decay on weight matrices only, a warmup-stable-decay schedule, gradient
clipping, held-out evaluation every few steps, checkpoints by wall time, a time
limit, and exact resume: everything a checkpoint must restore lives in
`Optimisation`, and the trainers add their model and data around it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

LossAt = Callable[[int], tuple[torch.Tensor, dict[str, float]]]
"""step -> (loss to minimise, named parts to log)."""


@dataclass(frozen=True)
class LoopSettings:
    steps: int
    eval_every: int
    checkpoint_minutes: float
    max_minutes: float | None
    clip_norm: float
    progress: bool
    log_every: int
    smoothing: float  # weight of the newest loss in the running average


class LoopOptions:
    """What a trainer's options dataclass gives the loop; mixed into both trainers' options."""

    out: str
    steps: int
    decay_steps: int | None
    eval_every: int
    checkpoint_minutes: float
    max_minutes: float | None
    clip_norm: float
    progress: bool

    @property
    def decay(self) -> int:
        """Steps of the final decay: `decay_steps`, or a fifth of the run."""
        return self.decay_steps if self.decay_steps is not None else self.steps // 5

    @property
    def checkpoint_path(self) -> Path:
        return Path(f"{self.out}.ckpt")

    def loop_settings(self, log_every: int, smoothing: float) -> LoopSettings:
        return LoopSettings(self.steps, self.eval_every, self.checkpoint_minutes, self.max_minutes,
                            self.clip_norm, self.progress, log_every, smoothing)


@dataclass
class LoopResult:
    loss_average: float
    first_loss: float
    out_of_time: bool = False
    """The run ended at its time limit, before its step budget and any early stop."""


def learning_rate_factor(step: int, warmup_steps: int, total_steps: int, decay_steps: int) -> float:
    """Warmup, stable, decay: linear warmup to 1, flat, then a linear fall to 0.02 over the last `decay_steps`.

    The flat middle is what makes a run extendable: resuming with a larger
    `--steps` before the decay started continues the same schedule, and the
    decay is the run's last `decay_steps` whatever the total turned out to be.
    """
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    decay_start = total_steps - decay_steps
    if step < decay_start:
        return 1.0
    return max(0.02, 1.0 - 0.98 * (step - decay_start + 1) / max(1, decay_steps))


def decoupled_optimizer(model: nn.Module, learning_rate: float, weight_decay: float,
                        betas: tuple[float, float] = (0.9, 0.999)) -> torch.optim.Optimizer:
    """AdamW that decays weight matrices and kernels only: embeddings, biases and norms keep their scale."""
    embedded = {id(m.weight) for m in model.modules() if isinstance(m, nn.Embedding)}
    decayed = [p for p in model.parameters() if p.dim() >= 2 and id(p) not in embedded]
    kept = [p for p in model.parameters() if not (p.dim() >= 2 and id(p) not in embedded)]
    groups = [{"params": decayed, "weight_decay": weight_decay}, {"params": kept, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=learning_rate, betas=betas)


class Optimisation:
    """Optimizer, schedule, step, training seconds and learning curve: what a checkpoint restores."""

    def __init__(self, optimizer: torch.optim.Optimizer, warmup_steps: int, steps: int, decay: float):
        self.optimizer = optimizer
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            optimizer, lambda s: learning_rate_factor(s, warmup_steps, steps, decay)
        )
        self.step = 0
        self.curve: list[dict[str, float]] = []
        self._seconds_before = 0.0
        self._run_started = time.monotonic()

    def restore(self, checkpoint: dict[str, Any]) -> None:
        self.optimizer.load_state_dict(checkpoint["optimizer"])
        self.scheduler.load_state_dict(checkpoint["scheduler"])
        torch.set_rng_state(checkpoint["torch_rng"])
        self.step, self._seconds_before, self.curve = checkpoint["step"], checkpoint["train_seconds"], checkpoint["curve"]
        self._run_started = time.monotonic()

    def seconds(self) -> float:
        return self._seconds_before + time.monotonic() - self._run_started

    @property
    def carried_seconds(self) -> float:
        """The training seconds of the runs before this one (0 for a fresh run)."""
        return self._seconds_before

    def checkpoint_fields(self) -> dict[str, Any]:
        return {
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "torch_rng": torch.get_rng_state(),
            "step": self.step,
            "train_seconds": self.seconds(),
            "curve": self.curve,
        }

    def learning_rate(self) -> float:
        return self.scheduler.get_last_lr()[0]


def run_loop(model: nn.Module, state: Optimisation, settings: LoopSettings, loss_at: LossAt,
             save: Callable[[], None], evaluate: Callable[[], bool | None], *, started: float,
             writer: Any = None) -> LoopResult:
    """Train from `state.step` to `settings.steps`, saving and evaluating on the way.

    `started` is the `time.monotonic()` at which the run began: the time limit counts from it.
    `evaluate` returns True to end the run early (the trainer's early stopping); it is saved first.
    """
    from tqdm import tqdm

    model.train()
    last_checkpoint = time.monotonic()
    loss_average = first_loss = float("nan")
    out_of_time = stop_early = False
    bar = tqdm(total=settings.steps, initial=state.step, disable=not settings.progress, unit="step", smoothing=0.05)
    while state.step < settings.steps:
        loss, parts = loss_at(state.step)
        state.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), settings.clip_norm)
        state.optimizer.step()
        state.scheduler.step()
        state.step += 1
        value = loss.item()
        first_loss = value if math.isnan(first_loss) else first_loss
        loss_average = value if math.isnan(loss_average) else (
            (1.0 - settings.smoothing) * loss_average + settings.smoothing * value)
        bar.update(1)
        if state.step % settings.log_every == 0:
            bar.set_postfix(loss=f"{loss_average:.3f}", lr=f"{state.learning_rate():.2e}",
                            **{k: f"{v:.3f}" for k, v in parts.items()})
            if writer is not None:
                writer.add_scalar("train/loss", loss_average, state.step)
                writer.add_scalar("train/learning_rate", state.learning_rate(), state.step)
                for name, part in parts.items():
                    writer.add_scalar(f"train/{name}", part, state.step)
        stop_early = False
        if state.step % settings.eval_every == 0 or state.step == settings.steps:
            stop_early = bool(evaluate())
            model.train()
        out_of_time = settings.max_minutes is not None and time.monotonic() - started > settings.max_minutes * 60
        if (state.step == settings.steps or out_of_time or stop_early
                or time.monotonic() - last_checkpoint > settings.checkpoint_minutes * 60):
            save()
            last_checkpoint = time.monotonic()
        if stop_early:
            break
        if out_of_time:
            tqdm.write(f"stopping at step {state.step}: --max-minutes {settings.max_minutes} reached "
                       "(resume with --resume)")
            break
    bar.close()
    return LoopResult(loss_average, first_loss, out_of_time and not stop_early and state.step < settings.steps)
