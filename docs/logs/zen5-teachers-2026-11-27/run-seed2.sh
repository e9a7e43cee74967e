#!/bin/bash
# The second teacher: the BT main stage and fine-tuning again with train.seed=2, the same reverse
# model and back-translated pairs (cached), so its tokenizers equal the first teacher's.
set -e
cd /work/pipe2
S="--set train.max_minutes=0 --set train.lr_horizon=max_steps --set train.seed=2"
/usr/bin/time -v mt train --config multi30k-bt --run runs/multi30k-bt-s2 $S --set train.max_steps=9174
/usr/bin/time -v mt train --config multi30k-bt-finetune --run runs/multi30k-bt-finetune-s2 $S --set train.max_steps=1967 --set train.init_from=runs/multi30k-bt-s2
echo SEED2-DONE
