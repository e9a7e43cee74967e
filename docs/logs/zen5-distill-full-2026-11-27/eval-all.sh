#!/bin/bash
# Outputs, scores and significance of each step of the full-length pipeline, into D.
set -uo pipefail
cd /work/pipe2
D=/work/main/docs/logs/zen5-distill-full-2026-11-27; mkdir -p $D
REF=data/multi30k/test_2016_flickr.en.gz
for run in multi30k-bt multi30k-bt-finetune multi30k-distill multi30k-distill-ablation-real; do
  for beam in 1 5; do
    python -m mt_cli eval --run runs/$run --beam $beam --output $D/$run-beam$beam.en --json > $D/$run-beam$beam.json
  done
  cp runs/$run/config.yaml $D/$run-config.yaml; cp runs/$run/metrics.jsonl $D/$run-metrics.jsonl
  cp runs/$run/train.log $D/$run-train.log; cp runs/$run/test.json $D/$run-test.json
done
cp runs/multi30k-en-de/test.json $D/multi30k-en-de-test.json; cp runs/multi30k-en-de/train.log $D/multi30k-en-de-train.log
BT=/work/main/docs/logs/zen4-bt-2026-11-25/multi30k-bt-finetune-beam5.en
python -m mt_cli eval --hyp $BT --hyp $D/multi30k-bt-finetune-beam5.en --hyp $D/multi30k-distill-beam5.en \
  --hyp $D/multi30k-distill-ablation-real-beam5.en --ref $REF --json > $D/significance-vs-bt-recipe.json
python -m mt_cli eval --hyp $D/multi30k-distill-beam5.en --hyp $D/multi30k-distill-ablation-real-beam5.en \
  --hyp $D/multi30k-bt-finetune-beam5.en --ref $REF --json > $D/significance-vs-student.json
echo "eval done $(date -u +%H:%M:%S)"
