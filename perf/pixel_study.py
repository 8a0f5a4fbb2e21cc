"""What a pixel player's trial of the examples study costs: seconds per training step and evaluation rate.

For `film`, `pixel-rn` and `object-transformer` with the study's configs
(`STUDY_PIXEL_CONFIGS`: film and pixel-rn read the frozen perception's
features, pixel-rn's relations in bfloat16), pixel-rn's relations in float32
as its baseline (and, on a CPU without bfloat16 instructions, where the
study's pixel-rn takes float32 products of bfloat16 values, also oneDNN's
emulated bfloat16 products) and, for film and pixel-rn, also learning from pixels
(`backbone` none), on every other scene of a rendered `clevr-game exhaustive` dataset
(rendered first when missing, `fast` 128x96): the median seconds of a training
step (batch 128, forward, backward, AdamW) and the questions answered per
second in evaluation, through the pixel trainer's own tasks. A frozen
perception reads each image once per trial (features, or the
object-transformer's detections); that rate is shown too. These are the
per-step and per-question costs of docs/exhaustive.md's time estimate.

Its last line is the object-transformer's trial set-up: its three parts'
detections, detected part by part against sliced from the dataset's
(`--detections-only` prints that line alone).

Run: python -m perf.pixel_study [--data runs/exhaustive/2-one] [--threads 1] [--detections-only]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

import numpy as np
import torch

BATCH = 128
STEPS = 12
WARM_STEPS = 2
"""Steps left out of the median: the first ones allocate."""
EVALUATED = 2048


def run(data: str, threads: int = 1) -> list[str]:
    """One line per player: parameters, seconds per step, questions per second (and detections per second)."""
    from experiments.examples_study import PIXEL_PLAYERS, STUDY_PIXEL_CONFIGS
    from players.pixel.checkpoint import PLAYER_KINDS, build_model
    from players.pixel.data import select_scenes
    from players.pixel.models import cpu_computes_bfloat16
    from players.pixel.object_training import (
        ObjectTransformerTask,
        fresh_network,
        perception_source,
    )
    from players.pixel.training import AnsweringTask
    from players.state.features import ANSWERS

    pixels, vocabulary = _load(data, threads)
    part = select_scenes(pixels, np.arange(0, len(pixels.images), 2))
    _, perception_weights = perception_source(None)
    lines = []
    exact_rn = {**STUDY_PIXEL_CONFIGS["pixel-rn"], "relation_precision": "float32"}  # bfloat16's baseline
    runs: list[tuple[str, dict[str, Any], bool | None]] = [
        *((player, STUDY_PIXEL_CONFIGS.get(player, {}), None) for player in PIXEL_PLAYERS),
        ("pixel-rn", exact_rn, None), ("film", {"backbone": "none"}, None), ("pixel-rn", {"backbone": "none"}, None),
    ]
    if not cpu_computes_bfloat16():  # the study's pixel-rn took float32 products above; oneDNN's emulation too
        runs.insert(len(PIXEL_PLAYERS), ("pixel-rn", STUDY_PIXEL_CONFIGS["pixel-rn"], False))
    for player, config, emulate in runs:
        torch.manual_seed(0)
        kind, note = PLAYER_KINDS[player], ""
        task: AnsweringTask | ObjectTransformerTask
        started = time.perf_counter()
        if kind == "object-transformer":
            model = fresh_network(config, len(vocabulary))
            task = ObjectTransformerTask(model, torch.device("cpu"))
            task.detections(part)  # once per trial in the study, before the first step
            note = f", detections {len(part.images) / (time.perf_counter() - started):.0f} images/s"
        else:
            model = build_model(kind, config, len(vocabulary), len(ANSWERS))
            if config.get("relation_precision") == "bfloat16":
                model.emulate_bfloat16 = emulate
                products = "float32" if (not cpu_computes_bfloat16() if emulate is None else emulate) else "oneDNN's"
                note = f", bfloat16 relations with {products} products"
            if model.backbone is not None:
                model.backbone.load_perception(perception_weights)
            task = AnsweringTask(model, torch.device("cpu"))
            if task.cached:
                task.image_features(part)  # once per trial in the study, before the first step
                note += f", features {len(part.images) / (time.perf_counter() - started):.0f} images/s"
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
        model.train()
        generator = torch.Generator().manual_seed(0)
        seconds = []
        for _ in range(STEPS):
            indices = torch.randint(0, len(part), (BATCH,), generator=generator)
            started = time.perf_counter()
            loss, _ = task.loss(part, indices)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            seconds.append(time.perf_counter() - started)
        started = time.perf_counter()
        task.evaluate(part, limit=EVALUATED)
        answered = min(EVALUATED, len(part)) / (time.perf_counter() - started)
        lines.append(f"{player} {json.dumps(config)}: {sum(p.numel() for p in model.parameters()):,} parameters "
                     f"({sum(p.numel() for p in model.parameters() if p.requires_grad):,} trained), "
                     f"{statistics.median(seconds[WARM_STEPS:]):.3f} s/step (batch {BATCH}), "
                     f"evaluation {answered:.0f} questions/s{note}")
    return lines


def _load(data: str, threads: int) -> tuple[Any, Any]:
    """(PixelData, vocabulary) of the dataset at the default image spec, rendered first when missing."""
    from clevr_game.text import default_word_vocabulary
    from players.pixel.data import load_pixel_data
    from players.pixel.images import ImageSpec
    from players.state.features import ANSWERS

    torch.set_num_threads(threads)
    return load_pixel_data(data, default_word_vocabulary(), list(ANSWERS), ImageSpec(), extend_vocabulary=True,
                           progress=True)


def trial_detections(data: str, threads: int = 1) -> str:
    """The object-transformer's detections for one trial's three parts (fraction 0.25): detected part by part
    (as each trial once did) against sliced from the dataset's, detected once per dataset load."""
    from experiments.examples_study import split_scenes
    from players.pixel.data import select_scenes
    from players.pixel.object_training import ObjectTransformerTask, fresh_network

    pixels, vocabulary = _load(data, threads)

    def fresh_task() -> ObjectTransformerTask:
        return ObjectTransformerTask(fresh_network({}, len(vocabulary)), torch.device("cpu"))

    split = split_scenes(np.arange(len(pixels.images)), 0.25, 0, 0, 0.1, 500)
    started = time.perf_counter()
    task = fresh_task()
    for rows in (split.train, split.validation, split.test):
        task.detections(select_scenes(pixels, rows))
    per_part = time.perf_counter() - started
    started = time.perf_counter()
    fresh_task().remember_detections(pixels)
    once = time.perf_counter() - started
    started = time.perf_counter()
    task = fresh_task()
    for rows in (split.train, split.validation, split.test):
        task.detections(select_scenes(pixels, rows))
    sliced = time.perf_counter() - started
    return (f"object-transformer trial set-up, {len(pixels.images)} images: detecting its parts {per_part:.1f} s, "
            f"slicing the dataset's detections {sliced:.2f} s ({per_part / sliced:.0f}x; detected once per dataset "
            f"in {once:.1f} s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="runs/exhaustive/2-one", help="a `clevr-game exhaustive` folder")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--detections-only", action="store_true",
                        help="only the object-transformer's trial set-up: its parts detected, or sliced")
    args = parser.parse_args()
    if not args.detections_only:
        print(f"{args.data}, every other scene, {args.threads} thread(s)")
        for line in run(args.data, args.threads):
            print(line)
    print(trial_detections(args.data, args.threads))


if __name__ == "__main__":
    main()
