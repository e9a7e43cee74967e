#!/bin/bash
# BiT pipeline, step-bound at 0.81x the two-model pipeline's Zen 4 updates (BiT's update costs 1/0.81 of theirs), bf16
cd /work/main
S="-s train.max_minutes=0 -s train.lr_horizon=max_steps -s train.amp=bf16"
date -u +%FT%TZ > runs/logs/step1.start
/usr/bin/time -v mt train --config configs/multi30k-bit.yaml $S -s train.max_steps=3064 > runs/logs/step1.log 2>&1 || exit 1
date -u +%FT%TZ > runs/logs/step2.start
/usr/bin/time -v mt train --config configs/multi30k-bit-bt.yaml $S -s train.max_steps=7431 > runs/logs/step2.log 2>&1 || exit 2
date -u +%FT%TZ > runs/logs/step3.start
# the fine-tune and its R-Drop ablation at equal cost (an R-Drop update passes each batch twice), one thread each
OMP_NUM_THREADS=1 /usr/bin/time -v mt train --config configs/multi30k-bit-finetune.yaml $S -s train.max_steps=1593 > runs/logs/step3.log 2>&1 &
OMP_NUM_THREADS=1 /usr/bin/time -v mt train --config configs/multi30k-bit-finetune.yaml $S -s train.max_steps=797 \
    -s train.rdrop=5 -s run_dir=runs/multi30k-bit-finetune-rdrop > runs/logs/step3r.log 2>&1 &
wait
date -u +%FT%TZ > runs/logs/chain.end
