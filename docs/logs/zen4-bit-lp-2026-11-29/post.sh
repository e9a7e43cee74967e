#!/bin/bash
# Step 3 of the Zen 4 run (docs/logs/zen4-bit-2026-11-29/) at the length penalty chosen on val,
# 1.5: the held-out sets translated, test2016 and val scored, and paired bootstrap against the
# same model at 0.8, the Zen 4's two-model pipeline and the Xeon's default recipe.
#   post.sh HELDOUT    (HELDOUT: the folder of the three held-out .de.gz, as scripts/heldout.sh takes)
HELDOUT=$(realpath "${1:?usage: post.sh HELDOUT}")
cd "$(dirname "$0")/../../.."
N=docs/logs/zen4-bit-lp-2026-11-29; D=docs/logs/zen4-bit-2026-11-29; REF=data/multi30k/test_2016_flickr.en.gz
R=runs/multi30k-bit-finetune
H=docs/logs/heldout/multi30k-bit-zen4-lp1.5
scripts/heldout.sh $R "$HELDOUT" $H --length-penalty 1.5
mt eval --run $R --split val --beam 5 --length-penalty 1.5 --json > $N/multi30k-bit-finetune-val-beam5-lp1.5.json
mt eval --hyp $H/test_2016_flickr.en --hyp $D/multi30k-bit-finetune-beam5.en \
    --hyp docs/logs/zen4-bt-2026-11-25/multi30k-bt-finetune-beam5.en \
    --hyp docs/logs/heldout/multi30k/test_2016_flickr.en --ref $REF --json > $N/p-lp1.5.json
