"""Training accuracy and image reliance of one pixel player file at one point of a short run.

Prints one JSON line: accuracy on the training folder (own image) and, on the held-out folder,
accuracy with each question's own image and with another scene's image (experiments.image_reliance,
seed 0), plus the same two on the training folder.

    python results/player-diagnosis/reliance_point.py FILE TRAIN_DIR HELDOUT_DIR STEP LABEL
"""
import json
import sys

import torch

from experiments.image_reliance import measure


def main() -> None:
    torch.set_num_threads(1)
    path, train_dir, heldout_dir, step, label = sys.argv[1:6]
    train = measure(path, train_dir, seed=0)
    held = measure(path, heldout_dir, seed=0)
    print(json.dumps({"run": label, "step": int(step),
                      "train_own": round(train.own_image, 4), "train_other": round(train.other_image, 4),
                      "heldout_own": round(held.own_image, 4), "heldout_other": round(held.other_image, 4),
                      "heldout_from_image": round(held.from_image, 4), "heldout_questions": held.questions}),
          flush=True)


if __name__ == "__main__":
    main()
