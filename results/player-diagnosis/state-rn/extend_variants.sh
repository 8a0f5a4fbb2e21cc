#!/bin/bash
# The two sum-over-pairs variants of run_sweep.sh resumed from step 1,000 to 2,500 (same flags, --resume).
cd "$(dirname "$0")/../../.."
set -e
D=results/player-diagnosis/state-rn; W=$D/work
for V in mean scaled; do
  T0=$(date +%s.%N)
  python $D/train_variant.py $V --player state-rn --config '{"width": 192}' --data $W/train20k --eval-data $W/heldout \
    --out $W/variant-$V-lr1e-3-b128.pt --steps 2500 --batch-size 128 --learning-rate 1e-3 --warmup-steps 50 \
    --decay-steps 0 --eval-every 100 --eval-size 1000 --checkpoint-minutes 100 --seed 0 --threads 1 --no-progress --resume \
    >> $D/logs/variant-$V-lr1e-3-b128.train.log 2>&1
  T1=$(date +%s.%N)
  echo "resumed run to step 2500: $(python -c "print(round($T1-$T0,1))") s" >> $D/logs/variant-$V-lr1e-3-b128.train.log
done
