"""Training the CLEVR-POC players: `clevr-game poc train --player NAME ...`.

- `poc-state-neuro-symbolic`: the parser, supervised on the first `pairs`
  training items' (question, program) pairs, then REINFORCE on the remaining
  items' answers (clingo reward). Program accuracy on the held-out items is
  measured after each stage (the paper's Table 3) and kept in the file's info.
- `poc-neuro-symbolic`: the parser of a trained `poc-state-neuro-symbolic`
  file, plus the perception trained on renders of the training items' visible
  scenes, starting from the CLEVR perception of `neuro-symbolic.pt`.
- `poc-neural`: the baseline; the answer threshold is tuned on the held-out
  items.

Every stage stops at `max_minutes` (shared by the whole run) and the file is
written with what was reached. Runs are short and not resumable: rerun with the
same seed to repeat one.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from clevr_game.errors import InputError
from players.pixel.images import ImageSpec
from players.pixel.perception import PerceptionConfig
from players.poc.data import HiddenObjectSolver, PocExample, load_examples
from players.poc.files import save_poc_player, shipped_file
from players.poc.neural import (
    NeuralConfig,
    NeuralEncoder,
    PocNeuralNetwork,
    config_dict,
    positive_weights,
    targets_of,
    tune_threshold,
)
from players.poc.parser import (
    PocParser,
    answer_accuracy,
    deadline,
    program_accuracy,
    train_reinforce,
    train_supervised,
)
from players.poc.perception import (
    PocPerceptionNetwork,
    ensure_item_images,
    load_images,
    perceive_scenes,
    perception_loss,
    scene_signature,
    scene_targets,
    transfer_clevr_perception,
)

Log = Callable[[str], None]


def _examples(folder: str | os.PathLike[str], limit: int | None, what: str) -> list[PocExample]:
    examples = load_examples(folder, limit)
    if len(examples) < 2:
        raise InputError(f"{folder}: {what} needs at least 2 items, found {len(examples)}")
    return examples


def train_state_neuro_symbolic(
    items: str, eval_items: str, out: str, *, pairs: int = 200, supervised_steps: int = 1200,
    reinforce_steps: int = 200, batch_size: int = 32, learning_rate: float = 3e-3,
    reinforce_learning_rate: float = 1e-4, seed: int = 0, limit: int | None = None, eval_limit: int | None = None,
    max_minutes: float | None = None, log: Log = print,
) -> dict[str, Any]:
    """Supervised then REINFORCE; writes the player file and returns its info (Table 3 figures)."""
    out_of_time = deadline(max_minutes)
    train = _examples(items, limit, "training")
    held = _examples(eval_items, eval_limit, "evaluation")
    if not 1 <= pairs <= len(train):
        raise InputError(f"--pairs {pairs}: must lie in 1..{len(train)} (the training items)")
    solver = HiddenObjectSolver()
    parser = PocParser(seed=seed)
    started = time.monotonic()
    stages = []

    def measure(stage: str, steps: int, reward: float | None = None) -> None:
        entry = {"stage": stage, "steps": steps, "minutes": round((time.monotonic() - started) / 60, 2),
                 "program_accuracy": round(program_accuracy(parser, held), 4),
                 "answer_exact": round(answer_accuracy(parser, held, solver), 4)}
        if reward is not None:
            entry["mean_reward"] = round(reward, 4)
        stages.append(entry)
        log(" ".join(f"{k}: {v}" for k, v in entry.items()))

    taken = train_supervised(parser, train[:pairs], steps=supervised_steps, batch_size=batch_size,
                             learning_rate=learning_rate, seed=seed, out_of_time=out_of_time)
    measure("supervised", taken)
    rest = train[pairs:]
    if reinforce_steps and rest:
        taken, reward = train_reinforce(parser, rest, solver, steps=reinforce_steps, batch_size=batch_size,
                                        learning_rate=reinforce_learning_rate, seed=seed, out_of_time=out_of_time)
        measure("reinforce", taken, reward)
    info = {"train_items": str(items), "train_count": len(train), "pairs": pairs, "eval_items": str(eval_items),
            "eval_count": len(held), "seed": seed, "batch_size": batch_size, "stages": stages}
    save_poc_player(out, "poc-state-neuro-symbolic", {"parser": parser.state()}, info)
    log(f"wrote {out}")
    return info


def train_neuro_symbolic(
    items: str, eval_items: str, out: str, *, parser_file: str | None = None, perception_init: str | None = None,
    images: int = 600, steps: int = 1500, batch_size: int = 16, learning_rate: float = 1e-3,
    spec: ImageSpec | None = None, seed: int = 0, eval_limit: int | None = None, render_workers: int = 2,
    max_minutes: float | None = None, log: Log = print,
) -> dict[str, Any]:
    """Perception on POC renders (from the CLEVR perception) + a trained parser; writes the player file."""
    from players.poc.files import load_poc_player
    from players.state.checkpoint import read_torch

    out_of_time = deadline(max_minutes)
    spec = (spec or ImageSpec()).checked()
    parser_path = parser_file or str(shipped_file("poc-state-neuro-symbolic"))
    parser_part = load_poc_player(parser_path, "poc-state-neuro-symbolic")["parser"]
    train = _examples(items, images, "perception training")
    held = _examples(eval_items, eval_limit, "evaluation")
    started = time.monotonic()
    paths = ensure_item_images(items, [e.item_id for e in train], [e.scene for e in train], spec,
                               workers=render_workers, progress=True)
    held_paths = ensure_item_images(eval_items, [e.item_id for e in held], [e.scene for e in held], spec,
                                    workers=render_workers, progress=True)
    log(f"images ready in {(time.monotonic() - started) / 60:.1f} min")
    pixels = torch.from_numpy(load_images(paths, spec))
    points, attributes, present = scene_targets([e.scene for e in train], spec.width, spec.height)
    torch.manual_seed(seed)
    config = PerceptionConfig()
    network = PocPerceptionNetwork(config)
    init = perception_init or str(shipped_file("neuro-symbolic"))
    if init != "none":
        saved = read_torch(init, "pixel player file")
        if isinstance(saved, dict) and saved.get("kind") == "poc-neuro-symbolic":
            # A POC player's own perception: training continues from it (detection threshold chosen again below).
            network.load_state_dict(load_poc_player(init, "poc-neuro-symbolic")["perception"]["state_dict"])
        else:
            state = saved.get("state_dict", {}) if isinstance(saved, dict) else {}
            perception = {k[len("perception."):]: v for k, v in state.items() if k.startswith("perception.")}
            if not perception:
                raise InputError(f"{init}: no perception weights (expected a neuro-symbolic pixel player file "
                                 "or a poc-neuro-symbolic file)")
            transfer_clevr_perception(network, perception)
    optimiser = torch.optim.AdamW(network.parameters(), lr=learning_rate, weight_decay=1e-4)
    # Cosine decay to zero: the last steps settle instead of ending on a noisy update.
    schedule = torch.optim.lr_scheduler.LambdaLR(optimiser, lambda step: 0.5 * (1 + np.cos(np.pi * min(step / max(steps, 1), 1.0))))
    rng = np.random.default_rng(seed)
    taken = 0
    network.train()
    for step in range(steps):
        if out_of_time():
            break
        batch = torch.from_numpy(rng.choice(len(train), min(batch_size, len(train)), replace=False))
        loss = perception_loss(network(pixels[batch]), points[batch], attributes[batch], present[batch],
                               config.heatmap_sigma)
        optimiser.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(network.parameters(), 5.0)
        optimiser.step()
        schedule.step()
        taken = step + 1
        if taken % 250 == 0:
            log(f"perception step {taken} loss {loss.item():.4f} ({(time.monotonic() - started) / 60:.1f} min)")
    held_images = load_images(held_paths, spec)
    truth = [scene_signature(e.scene) for e in held]
    scene_right = -1.0
    # The detection threshold is tuned on the held-out scenes (CenterNet's usual 0.3 finds extra objects here).
    for threshold in (0.3, 0.4, 0.5, 0.6, 0.7):
        network.config = config = dataclasses.replace(config, threshold=threshold)
        perceived = perceive_scenes(network, held_images, spec)
        right = float(np.mean([scene_signature(p) == t for p, t in zip(perceived, truth, strict=True)]))
        if right > scene_right:
            scene_right, best = right, threshold
    network.config = config = dataclasses.replace(config, threshold=best)
    info = {"train_items": str(items), "images": len(train), "perception_steps": taken, "batch_size": batch_size,
            "threshold": best,
            "perception_init": init, "parser_file": parser_path, "eval_items": str(eval_items),
            "eval_count": len(held), "scene_accuracy": round(scene_right, 4), "seed": seed,
            "minutes": round((time.monotonic() - started) / 60, 2)}
    log(f"perception: every visible object and region right on {scene_right:.4f} of {len(held)} held-out scenes")
    state_dict = {k: v.detach().clone() for k, v in network.state_dict().items()}
    save_poc_player(out, "poc-neuro-symbolic", {
        "parser": parser_part, "perception": {"config": dataclasses.asdict(config), "state_dict": state_dict},
        "image": spec.as_dict(),
    }, info)
    log(f"wrote {out}")
    return info


def train_neural(
    items: str, eval_items: str, out: str, *, knowledge: str = "none", steps: int = 3000, batch_size: int = 64,
    learning_rate: float = 1e-3, seed: int = 0, limit: int | None = None, eval_limit: int | None = None,
    max_minutes: float | None = None, log: Log = print,
) -> dict[str, Any]:
    """The baseline with `knowledge` none / nl / asp; the threshold tuned on `eval_items`."""
    out_of_time = deadline(max_minutes)
    train = _examples(items, limit, "training")
    held = _examples(eval_items, eval_limit, "validation")
    config = NeuralConfig(knowledge=knowledge)
    encoder = NeuralEncoder(knowledge)
    torch.manual_seed(seed)
    network = PocNeuralNetwork(config, len(encoder.question_words), max(len(encoder.knowledge_words), 2))
    inputs = encoder.batch([e.scene for e in train], [e.question for e in train], [e.environment for e in train])
    targets, masks = targets_of(train)
    weights = positive_weights(train)
    optimiser = torch.optim.AdamW(network.parameters(), lr=learning_rate, weight_decay=0.01)
    rng = np.random.default_rng(seed)
    started, taken = time.monotonic(), 0
    network.train()
    for step in range(steps):
        if out_of_time():
            break
        batch = torch.from_numpy(rng.choice(len(train), min(batch_size, len(train)), replace=False))
        logits = network(*(x[batch] for x in inputs.inputs()))
        losses = nn.functional.binary_cross_entropy_with_logits(logits, targets[batch], pos_weight=weights,
                                                                reduction="none")
        loss = (losses * masks[batch]).sum() / masks[batch].sum()
        optimiser.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(network.parameters(), 1.0)
        optimiser.step()
        taken = step + 1
        if taken % 500 == 0:
            log(f"step {taken} loss {loss.item():.4f} ({(time.monotonic() - started) / 60:.1f} min)")
    network.eval()
    with torch.no_grad():
        held_inputs = encoder.batch([e.scene for e in held], [e.question for e in held], [e.environment for e in held])
        probabilities = torch.sigmoid(network(*held_inputs.inputs())).numpy()
    threshold, accuracy = tune_threshold(probabilities, held)
    info = {"train_items": str(items), "train_count": len(train), "eval_items": str(eval_items),
            "eval_count": len(held), "knowledge": knowledge, "steps": taken, "batch_size": batch_size, "seed": seed,
            "threshold": threshold, "validation_exact": round(accuracy, 4),
            "minutes": round((time.monotonic() - started) / 60, 2)}
    log(f"threshold {threshold} (validation exact {accuracy:.4f})")
    state_dict = {k: v.detach().clone() for k, v in network.state_dict().items()}
    save_poc_player(out, "poc-neural", {"neural": {"config": config_dict(config), "state_dict": state_dict,
                                                   "threshold": threshold}}, info)
    log(f"wrote {out}")
    return info


def default_out(player: str, knowledge: str = "none") -> Path:
    return shipped_file(player, "" if knowledge == "none" else knowledge)
