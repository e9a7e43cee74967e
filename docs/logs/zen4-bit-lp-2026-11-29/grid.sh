#!/bin/bash
# Step 3 of the Zen 4 BiT run (runs/multi30k-bit-finetune, docs/logs/zen4-bit-2026-11-29/) decoded
# at beam 5 with length penalties 0.6-2.5: best.pt, last.pt and the averages of its last 3 and 5
# validation checkpoints, on val and test2016; greedy val for the checkpoint choice. -> grid.txt
cd "$(dirname "$0")/../../.."
R=runs/multi30k-bit-finetune
mt average --run $R --last 5 -o $R/checkpoints/avg5.pt
mt average --run $R --last 3 -o $R/checkpoints/avg3.pt
score() {  # CHECKPOINT SPLIT BEAM [LP]
    mt eval --run $R --checkpoint "$1" --split "$2" --beam "$3" ${4:+--length-penalty $4} --json |
        python -c 'import json, sys; d = json.load(sys.stdin); print(round(d["bleu"], 2), round(d["chrf"], 2))'
}
for C in best avg5.pt avg3.pt last; do
    echo "$C greedy val $(score $C val 1)"
    for S in val test2016; do
        for LP in 0.6 0.8 1.0 1.2 1.5 2.0 2.5; do echo "$C lp$LP $S $(score $C $S 5 $LP)"; done
    done
done
