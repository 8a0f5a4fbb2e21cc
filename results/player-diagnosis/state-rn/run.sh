#!/bin/bash
# usage: run.sh LABEL PLAYER CONFIG DATA BATCH LR "STEP1 STEP2 ..." [EVAL_DATA]
# Trains PLAYER from scratch on DATA in segments with a constant learning rate after warmup
# (--decay-steps 0, warmup 50, seed 0, one thread), resuming each time; the in-run curve is on
# EVAL_DATA (default: DATA itself, so training accuracy). After each segment point.py scores the
# file with own and swapped scenes on train500 and heldout (by number of objects and family).
set -e
cd "$(dirname "$0")/../../.."
L=$1; P=$2; C=$3; DATA=$4; B=$5; LR=$6; STEPS=$7; EVAL=${8:-$4}
D=results/player-diagnosis/state-rn
W=$D/work
mkdir -p $D/logs
: > $D/logs/$L.jsonl
: > $D/logs/$L.train.log
RES=""
for S in $STEPS; do
  T0=$(date +%s.%N)
  clevr-game players train --player $P --config "$C" --data $DATA --eval-data $EVAL \
    --out $W/$L.pt --steps $S --batch-size $B --learning-rate $LR --warmup-steps 50 --decay-steps 0 \
    --eval-every ${EVAL_EVERY:-50} --eval-size 1000 --checkpoint-minutes 100 --seed 0 --threads 1 \
    --no-progress $RES >> $D/logs/$L.train.log 2>&1
  T1=$(date +%s.%N)
  echo "segment to step $S: $(python -c "print(round($T1-$T0,1))") s" >> $D/logs/$L.train.log
  cp $W/$L.pt $W/$L.step$S.pt
  python $D/point.py $W/$L.pt $S $L $W/train500 $W/heldout >> $D/logs/$L.jsonl
  RES="--resume"
done
