#!/bin/bash
# Step 3 twice more from the same step 2 (seeds 2 and 3, 1,789 updates each as the time-bound run
# made, side by side on one thread each), best.pt decoded at beam 5 with length penalties 0.8-2.5
# on val and test2016. -> seeds.txt
cd "$(dirname "$0")/../../.."
STEPS="-s train.max_minutes=0 -s train.lr_horizon=max_steps -s train.max_steps=1789 -s train.amp=bf16"
for s in 2 3; do
    OMP_NUM_THREADS=1 mt train --config configs/multi30k-bit-finetune.yaml $STEPS -s train.seed=$s \
        -s run_dir=runs/bitft-s$s > runs/bitft-s$s.log 2>&1 &
done
wait
for s in 2 3; do
    for SPLIT in val test2016; do
        for LP in 0.8 1.5 2.0 2.5; do
            echo "seed $s lp$LP $SPLIT $(mt eval --run runs/bitft-s$s --split $SPLIT --beam 5 --length-penalty $LP --json |
                python -c 'import json, sys; d = json.load(sys.stdin); print(round(d["bleu"], 2), round(d["chrf"], 2))')"
        done
    done
done
