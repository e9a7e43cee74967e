#!/bin/bash
# After chain.sh: the logs kept, step 3 scored on test2016 and val (beam 5), the held-out sets
# translated, and paired bootstrap against the Zen 4's two-model pipeline and the Xeon's BiT runs.
cd /work/main
D=docs/logs/zen4-bit-2026-11-29; X=docs/logs/xeon-bit-2026-11-29; REF=data/multi30k/test_2016_flickr.en.gz
for r in multi30k-bit multi30k-bit-bt multi30k-bit-finetune; do
  cp runs/$r/metrics.jsonl $D/$r-metrics.jsonl
done
cp runs/logs/step1.log $D/multi30k-bit-train.log
cp runs/logs/step2.log $D/multi30k-bit-bt-train.log
cp runs/logs/step3.log $D/multi30k-bit-finetune-train.log
R=runs/multi30k-bit-finetune
mt eval --run $R --beam 5 --output $D/multi30k-bit-finetune-beam5.en --json > $D/multi30k-bit-finetune-beam5.json
mt eval --run $R --split val --beam 5 --json > $D/multi30k-bit-finetune-val-beam5.json
mt eval --run runs/multi30k-bit-bt --beam 5 --output $D/multi30k-bit-bt-beam5.en --json > $D/multi30k-bit-bt-beam5.json
scripts/heldout.sh $R /work/shared/heldout docs/logs/heldout/multi30k-bit-zen4
mt eval --hyp docs/logs/zen4-bt-2026-11-25/multi30k-bt-finetune-beam5.en --hyp $X/multi30k-bit-finetune-beam5.en \
    --hyp $X/multi30k-bit-finetune-s2-beam5.en --hyp $D/multi30k-bit-finetune-beam5.en \
    --ref $REF --json > $D/p-vs-zen4-two-model-and-xeon-bit.json
mt eval --hyp docs/logs/heldout/multi30k/test_2016_flickr.en --hyp $D/multi30k-bit-finetune-beam5.en \
    --ref $REF --json > $D/p-vs-xeon-default.json
