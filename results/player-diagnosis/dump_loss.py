"""Smoothed training loss (the loop's running average, weight 0.05 on the newest step) of each run, from its
TensorBoard folder work/LABEL.pt.logs, written to logs/LABEL.loss.json.

    python results/player-diagnosis/dump_loss.py LABEL [LABEL ...]
"""
import glob
import json
import sys
from pathlib import Path

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

here = Path(__file__).parent
for label in sys.argv[1:]:
    points = {}
    for f in sorted(glob.glob(str(here / "work" / f"{label}.pt.logs" / "*"))):
        events = EventAccumulator(f)
        events.Reload()
        if "train/loss" in events.Tags()["scalars"]:
            points.update({e.step: round(e.value, 4) for e in events.Scalars("train/loss")})
    (here / "logs" / f"{label}.loss.json").write_text(json.dumps(dict(sorted(points.items()))) + "\n")
    print(label, {s: v for s, v in sorted(points.items()) if s % 100 == 0})
