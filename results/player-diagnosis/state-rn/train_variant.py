"""`clevr-game players train` with the relation network's sum over pairs replaced, in this process only (the
player's code is unchanged): `mean` divides the sum of g over the present pairs by their number; `scaled` divides it
by a constant (the mean number of pairs in a 3-10 object scene, 42.5, rounded to 40). The in-run curve is the
comparison (the saved file is a plain relation network and would be scored with the sum by other tools).

    python results/player-diagnosis/state-rn/train_variant.py mean|scaled CLEVR-GAME-TRAIN-ARGS...
"""
import sys

from clevr_game.cli import main
from players.state import models

original = models.StateRelationNetwork.relations
variant = sys.argv[1]


def relations(self, batch):
    summed, objects = original(self, batch)
    if variant == "mean":
        pairs = batch.present.sum(dim=1).float().pow(2).clamp(min=1.0)
        return summed / pairs[:, None], objects
    if variant == "scaled":
        return summed / 40.0, objects
    raise SystemExit(f"unknown variant {variant!r}")


models.StateRelationNetwork.relations = relations
raise SystemExit(main(["players", "train", *sys.argv[2:]]))
