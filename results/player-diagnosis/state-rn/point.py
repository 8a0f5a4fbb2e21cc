"""Accuracy of one state player file at one point of a short run, with each question's own scene and with
another scene's, overall, by number of objects and by family.

Each question's scene is shifted by a seeded random non-zero offset (experiments.image_reliance.other_scenes,
seed 0), so no question keeps its own; a player that answers from the question alone loses nothing. Scored with
players.state.training.evaluate_tensors (argmax over all answer classes, as the training curve). Prints one JSON
line with one entry per folder (first LIMIT questions of each).

    python results/player-diagnosis/state-rn/point.py FILE STEP LABEL DIR [DIR ...] [--limit N]
"""
import dataclasses
import json
import sys

import torch

from experiments.image_reliance import other_scenes
from players.state.checkpoint import load_player_file
from players.state.data import tensorise


@torch.inference_mode()
def correct_of(model, tensors):
    model.eval()
    order = torch.argsort(tensors.lengths, stable=True)
    correct = torch.zeros(len(tensors), dtype=torch.bool)
    for start in range(0, len(tensors), 1024):
        indices = order[start : start + 1024]
        batch, answers = tensors.batch(indices)
        correct[indices] = model(batch).argmax(dim=1) == answers
    return correct


def score(model, tensors):
    correct = correct_of(model, tensors)
    objects = tensors.present.sum(dim=1)[tensors.scene_of]
    by_objects = {int(n): round(float(correct[objects == n].float().mean()), 3) for n in objects.unique()}
    by_family = {name: round(float(correct[tensors.families == i].float().mean()), 3)
                 for i, name in enumerate(tensors.family_names)}
    return round(float(correct.float().mean()), 4), by_objects, by_family


def main() -> None:
    torch.set_num_threads(1)
    args = sys.argv[1:]
    limit = None
    if "--limit" in args:
        at = args.index("--limit")
        limit = int(args[at + 1])
        del args[at : at + 2]
    path, step, label, folders = args[0], int(args[1]), args[2], args[3:]
    player = load_player_file(path)
    model = player.build()
    line = {"run": label, "step": step}
    for folder in folders:
        tensors, _ = tensorise(folder, player.vocabulary(), list(player.answers), limit=limit)
        own, by_objects, by_family = score(model, tensors)
        shifted = dataclasses.replace(
            tensors, scene_of=other_scenes(tensors.scene_of, int(tensors.positions.shape[0]), seed=0))
        other, other_by_objects, _ = score(model, shifted)
        name = folder.rstrip("/").split("/")[-1]
        line[name] = {"questions": len(tensors), "own": own, "other_scene": other,
                      "from_scene": round(own - other, 4), "by_objects": by_objects, "by_family": by_family}
    print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
