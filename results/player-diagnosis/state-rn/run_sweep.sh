#!/bin/bash
# The learning-rate, batch and sum-over-pairs runs on the 20,000 generated questions, one after the other,
# 1,000 steps each (segments 250 / 500 / 1000 for the plain runs, scored by point.py after each), curve on
# the 1,000 held-out questions every 100 steps.
set -e
cd "$(dirname "$0")/../../.."
D=results/player-diagnosis/state-rn
W=$D/work
export EVAL_EVERY=100
$D/run.sh sweep-lr1e-3-b128 state-rn '{"width": 192}' $W/train20k 128 1e-3 "250 500 1000" $W/heldout
$D/run.sh sweep-lr3e-4-b128 state-rn '{"width": 192}' $W/train20k 128 3e-4 "250 500 1000" $W/heldout
$D/run.sh sweep-lr3e-3-b128 state-rn '{"width": 192}' $W/train20k 128 3e-3 "250 500 1000" $W/heldout
$D/run.sh sweep-lr1e-3-b64 state-rn '{"width": 192}' $W/train20k 64 1e-3 "250 500 1000" $W/heldout
$D/run.sh sweep-lr1e-3-b256 state-rn '{"width": 192}' $W/train20k 256 1e-3 "250 500 1000" $W/heldout
for V in mean scaled; do
  T0=$(date +%s.%N)
  python $D/train_variant.py $V --player state-rn --config '{"width": 192}' --data $W/train20k --eval-data $W/heldout \
    --out $W/variant-$V-lr1e-3-b128.pt --steps 1000 --batch-size 128 --learning-rate 1e-3 --warmup-steps 50 \
    --decay-steps 0 --eval-every 100 --eval-size 1000 --checkpoint-minutes 100 --seed 0 --threads 1 --no-progress \
    > $D/logs/variant-$V-lr1e-3-b128.train.log 2>&1
  T1=$(date +%s.%N)
  echo "run to step 1000: $(python -c "print(round($T1-$T0,1))") s" >> $D/logs/variant-$V-lr1e-3-b128.train.log
done
