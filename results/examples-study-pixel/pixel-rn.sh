#!/usr/bin/env bash
# pixel-rn's trials of the examples study, one object count per process, into a side folder
# runs/exhaustive/rn-{2,3}obj that is merged into results/examples-study-pixel afterwards
# (docs/exhaustive.md, "Where it stands"). Run from the checkout's root:
#   results/examples-study-pixel/pixel-rn.sh {2obj|3obj} MAX_MINUTES
# A trial cut by MAX_MINUTES is checkpointed under the side folder's work/; a copy committed under
# results/examples-study-pixel/cut/ (made by save-cut.sh) is restored when the side folder has none.
set -euo pipefail
objects=${1:?2obj or 3obj}
minutes=${2:?MAX_MINUTES}
case $objects in
  2obj) count=2 ;;
  3obj) count=3 ;;
  *) echo "pixel-rn.sh: $objects: expected 2obj or 3obj" >&2; exit 2 ;;
esac
d=runs/exhaustive
side=$d/rn-$objects
committed=results/examples-study-pixel
mkdir -p "$side"
[ -f "$side/study.jsonl" ] || cp "$committed/study.jsonl" "$side/study.jsonl"
if [ ! -d "$side/work" ] && [ -d "$committed/cut/rn-$objects" ]; then
  mkdir -p "$side/work"
  cp -r "$committed/cut/rn-$objects/." "$side/work/"
fi
exec clevr-game study examples --data "$d/$count-one,$d/$count-two,$d/$count-mix" \
  --players pixel-rn --fractions 0.01,0.05,0.1,0.25,0.5,0.75,0.9 --trials 3 \
  --out "$side" --steps 2000 --batch-size 128 --learning-rate 0.001 \
  --eval-every 100 --patience 5 --seed 0 --preset fast --image-size 128x96 \
  --workers 1 --max-minutes "$minutes"
