#!/bin/bash
# usage: run_overfit.sh LABEL PLAYER CONFIG BATCH LR "STEP1 STEP2 ..."
# Trains PLAYER from scratch (above the config's backbone) on the 500 training questions in
# segments with a constant learning rate after warmup (--decay-steps 0), resuming each time;
# the in-run curve (--eval-data = the 500 training questions) is training accuracy; after each
# segment reliance_point.py scores the file on the training and held-out folders.
set -e
cd "$(dirname "$0")/../.."
L=$1; P=$2; C=$3; B=$4; LR=$5; STEPS=$6
D=results/player-diagnosis
W=$D/work
mkdir -p $D/logs
: > $D/logs/$L.jsonl
RES=""
for S in $STEPS; do
  T0=$(date +%s)
  clevr-game players train --player $P --config "$C" --data $W/train500 --eval-data $W/train500 \
    --out $W/$L.pt --steps $S --batch-size $B --learning-rate $LR --warmup-steps 50 --decay-steps 0 \
    --eval-every 50 --eval-size 500 --checkpoint-minutes 100 --seed 0 --threads 1 --render-workers 1 \
    --no-progress $RES >> $D/logs/$L.train.log 2>&1
  T1=$(date +%s)
  echo "segment to step $S: $((T1-T0)) s" >> $D/logs/$L.train.log
  python $D/reliance_point.py $W/$L.pt $W/train500 $W/heldout $S $L >> $D/logs/$L.jsonl
  RES="--resume"
done
