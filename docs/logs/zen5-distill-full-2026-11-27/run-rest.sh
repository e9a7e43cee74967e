#!/bin/bash
# After the reverse model (started by run-pipeline.sh): BT, the teacher, its translations, then the
# student and the real-pairs ablation side by side, one thread each.
set -uo pipefail
cd /work/pipe2
S="--set train.max_minutes=0 --set train.lr_horizon=max_steps"
step() { echo "=== $(date -u +%H:%M:%S) $*"; /usr/bin/time -v python -m mt_cli "$@" 2> >(grep -E "Elapsed|Maximum resident" >&2); echo "=== $(date -u +%H:%M:%S) exit $?"; }
while pgrep -f "max_steps=3783" > /dev/null; do sleep 10; done
echo "=== $(date -u +%H:%M:%S) reverse model ended"
[ -f runs/multi30k-en-de/test.json ] || { echo "no test.json for the reverse model"; exit 1; }
step train --config multi30k-bt $S --set train.max_steps=9174
step train --config multi30k-bt-finetune $S --set train.max_steps=1967
step prepare --config multi30k-distill
echo "=== $(date -u +%H:%M:%S) student and ablation"
OMP_NUM_THREADS=1 python -m mt_cli train --config multi30k-distill > /work/scratch/s26/student.log 2>&1 &
OMP_NUM_THREADS=1 python -m mt_cli train --config multi30k-bt-finetune --run runs/multi30k-distill-ablation-real $S \
  --set train.init_from=runs/multi30k-bt-finetune --set train.max_steps=2900 \
  --set train.validate_every_steps=500 > /work/scratch/s26/ablation.log 2>&1 &
wait
echo "=== $(date -u +%H:%M:%S) done"
