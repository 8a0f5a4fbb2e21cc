"""Gradient norms per block of a state relation network on a few training batches, and the sizes that explain them.

For each player file (or `fresh`: the seed-0 initialisation a new run starts from, width 192), on BATCHES batches of
BATCH questions of DATA (seeded, train mode as in training), prints one JSON line with the mean over batches of:
the loss; the total gradient norm before clipping (training clips at 1.0); the gradient norm and the weight norm of
each block (question: word embedding + LSTM; objects: the object encoder; g1: g's first layer, the three
projections and the relation-code table; g_rest: g's other three layers; f: f's three layers); the norm of the
summed g output (f's input) and of the mean over pairs, and the mean cosine between two questions' f inputs; the share of g's last-layer and f's hidden ReLUs that are
zero; the number of present pairs per question.

    python results/player-diagnosis/state-rn/grad_norms.py DATA BATCH BATCHES LABEL=FILE|fresh [LABEL=FILE ...]
"""
import json
import sys

import numpy as np
import torch
from torch import nn

from clevr_game.text import default_word_vocabulary
from players.state.checkpoint import load_player_file
from players.state.data import tensorise
from players.state.features import ANSWERS
from players.state.models import build_model

BLOCKS = {
    "question": ("words.", "question."),
    "objects": ("objects.",),
    "g1": ("first_i.", "first_j.", "first_q.", "first_relation."),
    "g_rest": ("g_rest.",),
    "f": ("f.",),
}


def block_of(name):
    return next(block for block, prefixes in BLOCKS.items() if name.startswith(prefixes))


def measure(model, tensors, batch_size, batches):
    rng = np.random.default_rng(0)
    rows = []
    captured = {}
    hooks = [model.g_rest.register_forward_hook(lambda m, i, o: captured.__setitem__("g", o)),
             model.f[3].register_forward_hook(lambda m, i, o: captured.__setitem__("f_hidden", o))]
    model.train()
    torch.manual_seed(0)
    for _ in range(batches):
        indices = torch.from_numpy(rng.choice(len(tensors), batch_size, replace=False))
        batch, targets = tensors.batch(indices)
        model.zero_grad(set_to_none=True)
        summed, _ = model.relations(batch)
        logits = model.f(summed)
        loss = nn.functional.cross_entropy(logits, targets)
        loss.backward()
        grads = {b: 0.0 for b in BLOCKS}
        weights = {b: 0.0 for b in BLOCKS}
        for name, p in model.named_parameters():
            b = block_of(name)
            weights[b] += float(p.detach().pow(2).sum())
            if p.grad is not None:
                grads[b] += float(p.grad.pow(2).sum())
        pairs = (batch.present.sum(dim=1).float() ** 2)
        unit = nn.functional.normalize(summed.detach(), dim=1)
        cosine = unit @ unit.T  # how alike f's inputs are across the batch's questions
        both = batch.present.unsqueeze(2) & batch.present.unsqueeze(1)
        g_active = captured["g"].detach()[both]  # (present pairs, width): g's last ReLU on real pairs only
        row = {
            "loss": float(loss.detach()),
            "total_grad": sum(grads.values()) ** 0.5,
            **{f"grad_{b}": v ** 0.5 for b, v in grads.items()},
            **{f"weight_{b}": v ** 0.5 for b, v in weights.items()},
            "f_input_norm_sum": float(summed.detach().norm(dim=1).mean()),
            "f_input_cosine": float(cosine.sum() - cosine.diagonal().sum()) / (batch_size * (batch_size - 1)),
            "f_input_norm_mean": float((summed.detach() / pairs[:, None]).norm(dim=1).mean()),
            "g_last_relu_zero": float((g_active == 0).float().mean()),
            "g_units_dead": int(((g_active > 0).sum(dim=0) == 0).sum()),
            "f_hidden_relu_zero": float((captured["f_hidden"] == 0).float().mean()),
            "f_units_dead": int(((captured["f_hidden"] > 0).sum(dim=0) == 0).sum()),
            "pairs_per_question": float(pairs.mean()),
            "logit_std": float(logits.detach().std(dim=1).mean()),
        }
        rows.append(row)
    for h in hooks:
        h.remove()
    out = {k: round(float(np.mean([r[k] for r in rows])), 4) for k in rows[0]}
    out["g_units_dead"] = round(float(np.mean([r["g_units_dead"] for r in rows])), 1)
    out["f_units_dead"] = round(float(np.mean([r["f_units_dead"] for r in rows])), 1)
    out["clipped_batches"] = sum(r["total_grad"] > 1.0 for r in rows)
    for b in BLOCKS:
        out[f"ratio_{b}"] = round(out[f"grad_{b}"] / max(out[f"weight_{b}"], 1e-12), 6)
    return out


def main():
    torch.set_num_threads(1)
    data, batch_size, batches = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    train, vocabulary = tensorise(data, default_word_vocabulary(), list(ANSWERS), extend_vocabulary=True)
    for spec in sys.argv[4:]:
        label, path = spec.split("=", 1)
        if path == "fresh":
            torch.manual_seed(0)
            model = build_model("relation-network", {"width": 192}, len(vocabulary), len(ANSWERS))
            tensors = train
        else:
            player = load_player_file(path)
            model = player.build()
            tensors, _ = tensorise(data, player.vocabulary(), list(player.answers))
        print(json.dumps({"model": label, "data": data.rstrip("/").split("/")[-1], "batch": batch_size,
                          "batches": batches, **measure(model, tensors, batch_size, batches)}), flush=True)


if __name__ == "__main__":
    main()
