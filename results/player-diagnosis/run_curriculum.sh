#!/bin/bash
# pixel-rn on the 500 training questions, 400 steps, without and with a 200-step curriculum (short questions first).
cd "$(dirname "$0")/../.."
set -e
W=results/player-diagnosis/work
for C in 0 200; do
  /usr/bin/time -f "curriculum $C: %e s" clevr-game players train --player pixel-rn --config '{"backbone": "perception"}' --data $W/train500 --eval-data $W/train500 \
    --out $W/prn-curr$C.pt --steps 400 --batch-size 32 --learning-rate 1e-3 --warmup-steps 50 --decay-steps 0 \
    --eval-every 50 --eval-size 500 --checkpoint-minutes 100 --seed 0 --threads 1 --render-workers 1 \
    --no-progress --log-dir "" --curriculum-steps $C
done
