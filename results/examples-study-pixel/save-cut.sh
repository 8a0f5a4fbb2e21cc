#!/usr/bin/env bash
# Copies the checkpoints of pixel-rn's cut trials (runs/exhaustive/rn-MODE/work/) into
# results/examples-study-pixel/cut/rn-MODE/ to be committed: runs/ does not survive a new machine,
# and pixel-rn.sh restores them from there. A side folder that ran (it has a study.jsonl) replaces its
# saved copy, or removes it when no trial of it is cut; one that is absent leaves its copy alone.
# A trial cut before step MIN_STEPS (default 200, a few minutes) is not kept: it starts again.
set -euo pipefail
min_steps=${MIN_STEPS:-200}
committed=results/examples-study-pixel
# A running study still moves its checkpoints on; every folder is checked before any is touched.
for objects in 2obj 3obj 3obj-b 3obj-c; do
  if pgrep -f "study examples .*--out runs/exhaustive/rn-$objects( |$)" >/dev/null; then
    echo "save-cut.sh: a study is still running into runs/exhaustive/rn-$objects; run this after it has ended" >&2
    exit 1
  fi
done
for objects in 2obj 3obj 3obj-b 3obj-c; do
  side=runs/exhaustive/rn-$objects
  saved=$committed/cut/rn-$objects
  [ -f "$side/study.jsonl" ] || continue
  rm -rf "$saved"
  if [ -d "$side/work" ] && [ -n "$(ls -A "$side/work")" ]; then
    for run in "$side"/work/*/; do
      [ -f "$run/player.pt.ckpt" ] || continue  # cut before its first checkpoint: nothing to keep
      steps=$(python -c "import sys, torch; print(torch.load(sys.argv[1], weights_only=False, map_location='cpu')['step'])" "$run/player.pt.ckpt")
      if [ "$steps" -lt "$min_steps" ]; then  # minutes of training are not worth 4.4 MB of history
        echo "$run: step $steps, under $min_steps: not kept"
        continue
      fi
      mkdir -p "$saved/$(basename "$run")"
      # The checkpoint alone resumes a trial (about 4.4 MB); the player file beside it is written again.
      cp "$run/trial.json" "$run/player.pt.ckpt" "$saved/$(basename "$run")/"
    done
    echo "saved $(ls "$saved" 2>/dev/null | wc -l) cut trial(s) of $side into $saved"
  else
    echo "$side: no cut trial"
  fi
done
