#!/bin/bash
# The full-length BT pipeline (the Zen 4 recipe's update counts) and the distilled student, on this code.
set -uo pipefail
cd /work/pipe2
S="--set train.max_minutes=0 --set train.lr_horizon=max_steps"
step() { echo "=== $(date -u +%H:%M:%S) $*"; /usr/bin/time -v python -m mt_cli "$@" 2> >(grep -E "Elapsed|Maximum resident" >&2); echo "=== $(date -u +%H:%M:%S) exit $?"; }
step train --config multi30k-en-de $S --set train.max_steps=3783
step train --config multi30k-bt $S --set train.max_steps=9174
step train --config multi30k-bt-finetune $S --set train.max_steps=1967
step train --config multi30k-distill
echo "=== $(date -u +%H:%M:%S) done"
