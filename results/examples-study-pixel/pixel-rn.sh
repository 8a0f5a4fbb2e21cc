#!/usr/bin/env bash
# pixel-rn's trials of the examples study, one process per side folder runs/exhaustive/rn-MODE, merged
# into results/examples-study-pixel afterwards (docs/exhaustive.md, "Where it stands"). Run from the
# checkout's root:
#   results/examples-study-pixel/pixel-rn.sh {2obj|3obj|3obj-b|3obj-c} MAX_MINUTES
# Since commit 28cafd2 (2026-12-06) the three-object trials are split between two processes that never share a
# dataset, so they never run the same trial: 3obj runs 3-mix, 3obj-b runs 3-two and 3-one (only their
# round 3 was left; before, 3obj ran all three). Run both, side by side or one after the other.
# 3obj-c (2026-12-07, commit b686d8f) runs 3-one alone in a side folder of its own: it took 3-one at 90%, trial 2,
# while 3obj-b finished 3-one at 75%; run it instead of 3obj-b, never beside it.
# A trial cut by MAX_MINUTES is checkpointed under the side folder's work/; a copy committed under
# results/examples-study-pixel/cut/ (made by save-cut.sh) is restored when the side folder has none.
set -euo pipefail
objects=${1:?2obj, 3obj, 3obj-b or 3obj-c}
minutes=${2:?MAX_MINUTES}
case $objects in
  2obj) datasets=(2-one 2-two 2-mix) ;;
  3obj) datasets=(3-mix) ;;
  3obj-b) datasets=(3-two 3-one) ;;
  3obj-c) datasets=(3-one) ;;
  *) echo "pixel-rn.sh: $objects: expected 2obj, 3obj, 3obj-b or 3obj-c" >&2; exit 2 ;;
esac
d=runs/exhaustive
data=$(printf "$d/%s," "${datasets[@]}")
side=$d/rn-$objects
committed=results/examples-study-pixel
mkdir -p "$side"
[ -f "$side/study.jsonl" ] || cp "$committed/study.jsonl" "$side/study.jsonl"
if [ ! -d "$side/work" ] && [ -d "$committed/cut/rn-$objects" ]; then
  mkdir -p "$side/work"
  cp -r "$committed/cut/rn-$objects/." "$side/work/"
fi
# Merging the committed records in lets a side folder kept from an earlier run skip the trials
# another process has recorded since.
exec clevr-game study examples --data "${data%,}" --merge-from "$committed" \
  --players pixel-rn --fractions 0.01,0.05,0.1,0.25,0.5,0.75,0.9 --trials 3 \
  --out "$side" --steps 2000 --batch-size 128 --learning-rate 0.001 \
  --eval-every 100 --patience 5 --seed 0 --preset fast --image-size 128x96 \
  --workers 1 --max-minutes "$minutes"
