#!/bin/bash
# After seed2.sh: score the second teacher and the two-teacher ensemble, then distil the ensemble.
set -e
while ! grep -q SEED2-DONE /work/scratch/s27/seed2.log; do sleep 20; done
cd /tmp
D=/work/scratch/s27/ens; mkdir -p $D; P=/work/pipe2/runs
for b in 5 1; do
  mt eval --run $P/multi30k-bt-s2 --beam $b --output $D/multi30k-bt-s2-beam$b.en --json > $D/multi30k-bt-s2-beam$b.json
  mt eval --run $P/multi30k-bt-finetune-s2 --beam $b --output $D/multi30k-bt-finetune-s2-beam$b.en --json > $D/multi30k-bt-finetune-s2-beam$b.json
  mt eval --run $P/multi30k-bt-finetune --ensemble $P/multi30k-bt-finetune-s2 --beam $b --output $D/teachers-ensemble-beam$b.en --json > $D/teachers-ensemble-beam$b.json
done
echo EVAL-DONE
cd /work/pipe2
/usr/bin/time -v mt train --config multi30k-distill-ens.yaml
cd /tmp
for b in 5 1; do
  mt eval --run $P/multi30k-distill-ens --beam $b --output $D/multi30k-distill-ens-beam$b.en --json > $D/multi30k-distill-ens-beam$b.json
done
echo ALL-DONE
