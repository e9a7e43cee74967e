#!/bin/bash
# BiT pipeline on a Zen 4 (the budget's machine), time-bound as the configs' headers run it, with
# step 2 given 90 minutes instead of 75: 35 + back-translation + 90 + 15 <= 150 Zen 4 minutes.
cd /work/main
date -u +%FT%TZ > runs/logs/step1.start
/usr/bin/time -v mt train --config configs/multi30k-bit.yaml > runs/logs/step1.log 2>&1 || exit 1
date -u +%FT%TZ > runs/logs/step2.start
/usr/bin/time -v mt train --config configs/multi30k-bit-bt.yaml -s train.max_minutes=90 > runs/logs/step2.log 2>&1 || exit 2
date -u +%FT%TZ > runs/logs/step3.start
/usr/bin/time -v mt train --config configs/multi30k-bit-finetune.yaml > runs/logs/step3.log 2>&1 || exit 3
date -u +%FT%TZ > runs/logs/chain.end
