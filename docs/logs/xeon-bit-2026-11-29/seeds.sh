#!/bin/bash
# Step 3 of the BiT pipeline twice more, seeds 2 and 3, from the same step 2 (2026-11-29 07:13-07:34 UTC,
# side by side, one thread each), then each scored, ensembled and averaged (mt average --file).
cd /work/main
S="-s train.max_minutes=0 -s train.lr_horizon=max_steps -s train.amp=bf16 -s train.max_steps=1593"
for s in 2 3; do
  OMP_NUM_THREADS=1 mt train --config configs/multi30k-bit-finetune.yaml $S -s train.seed=$s \
      -s run_dir=runs/multi30k-bit-finetune-s$s > runs/logs/finetune-s$s.log 2>&1 &
done
wait
D=docs/logs/xeon-bit-2026-11-29; R=runs/multi30k-bit-finetune
for s in 2 3; do mt eval --run $R-s$s --beam 5 --output $D/multi30k-bit-finetune-s$s-beam5.en --json; done
mt eval --run $R --ensemble $R-s2 --beam 5 --output $D/finetune-seeds-e12-beam5.en --json
mt eval --run $R --ensemble $R-s2 --ensemble $R-s3 --beam 5 --output $D/finetune-seeds-e123-beam5.en --json
for c in last best; do
  mt average --run $R --file $R/checkpoints/$c.pt --file $R-s2/checkpoints/$c.pt --file $R-s3/checkpoints/$c.pt \
      -o $R/checkpoints/soup-$c.pt
  mt eval --run $R --checkpoint soup-$c --beam 5 --output $D/finetune-seeds-soup-$c-beam5.en --json
  mt eval --run $R --checkpoint soup-$c --split val --beam 5 --json          # finetune-seeds-soup-$c-val-beam5.json
done
mt eval --hyp docs/logs/zen4-bt-2026-11-25/multi30k-bt-finetune-beam5.en --hyp $D/multi30k-bit-finetune-beam5.en \
    --hyp $D/multi30k-bit-finetune-s2-beam5.en --hyp $D/multi30k-bit-finetune-s3-beam5.en \
    --hyp $D/finetune-seeds-e12-beam5.en --hyp $D/finetune-seeds-e123-beam5.en \
    --hyp $D/finetune-seeds-soup-last-beam5.en --hyp $D/finetune-seeds-soup-best-beam5.en \
    --ref data/multi30k/test_2016_flickr.en.gz --json                          # p-seeds-vs-zen4-beam5.json
