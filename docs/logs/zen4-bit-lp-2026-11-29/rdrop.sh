#!/bin/bash
# R-Drop at weight 1 in step 3, time-bound (15 minutes each, one after the other, nothing else
# running), without and with token dropout; scored at the recipe's length penalty (1.5) and
# compared with the time-bound step 3 by paired bootstrap. -> p-rdrop.json
cd "$(dirname "$0")/../../.."
N=docs/logs/zen4-bit-lp-2026-11-29
mt train --config configs/multi30k-bit-finetune.yaml -s train.rdrop=1 -s model.src_token_dropout=0 \
    -s model.tgt_token_dropout=0 -s run_dir=runs/bitft-rdrop1-notok
mt train --config configs/multi30k-bit-finetune.yaml -s train.rdrop=1 -s run_dir=runs/bitft-rdrop1
for r in bitft-rdrop1-notok bitft-rdrop1; do
    mt eval --run runs/$r --split val --beam 5 --json > $N/$r-val-beam5.json
    mt eval --run runs/$r --beam 5 --output $N/$r-beam5.en --json > $N/$r-beam5.json
done
mt eval --hyp docs/logs/heldout/multi30k-bit-zen4-lp1.5/test_2016_flickr.en --hyp $N/bitft-rdrop1-notok-beam5.en \
    --hyp $N/bitft-rdrop1-beam5.en --ref data/multi30k/test_2016_flickr.en.gz --json > $N/p-rdrop.json
