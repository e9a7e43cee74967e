#!/bin/bash
# Run from the repository root, alone on the machine, on a corpus from scripts/synthetic-corpus.py:
#   bash scripts/scale-probe.sh CORPUS_DIR RUN_DIR [more --set overrides]
# `mt prepare`, then `mt train` for 200 updates reusing what prepare wrote, each under
# /usr/bin/time -v; prints their wall time and peak RSS, and the median training tokens/s of the
# log intervals after the first 50 updates. CORPUS_DIR=multi30k trains on the shipped Multi30k;
# CORPUS_DIR=mix:DIR trains on two corpora (data.corpora): the shipped Multi30k with weight 3 (it
# gives validation and test) and DIR's files with weight 1.
set -euo pipefail
corpus=$1 run=$2
shift 2
sets=(--set train.test_at_end=false --set train.log_every_steps=10 --set train.max_steps=200
  --set train.warmup_steps=100 "$@")
if [[ "$corpus" == mix:* ]]; then
  files="[${corpus#mix:}/train.de, ${corpus#mix:}/train.en]"
  sets+=(--set "data.corpora=[{source: multi30k, weight: 3}, {source: files, files: {train: $files}}]")
  corpus=multi30k
fi
if [ "$corpus" != multi30k ]; then
  sets+=(--set data.source=files
    --set "data.files.train=[$corpus/train.de,$corpus/train.en]"
    --set "data.files.val=[data/multi30k/val.de.gz,data/multi30k/val.en.gz]"
    --set "data.files.test2016=[data/multi30k/test_2016_flickr.de.gz,data/multi30k/test_2016_flickr.en.gz]")
fi
for command in prepare train; do
  /usr/bin/time -v mt "$command" --config multi30k --run "$run" "${sets[@]}" >"$run.$command.out" 2>"$run.$command.err" || {
    tail -5 "$run.$command.err"
    exit 1
  }
  wall=$(grep "Elapsed (wall clock)" "$run.$command.err" | awk '{print $NF}')
  rss=$(grep "Maximum resident set size" "$run.$command.err" | awk '{printf "%.0f", $NF / 1024}')
  echo "$command: wall $wall, peak RSS $rss MiB"
done
python - "$run/metrics.jsonl" <<'EOF'
import json, statistics, sys
rates = [r["tokens_per_s"] for r in map(json.loads, open(sys.argv[1])) if r["event"] == "train" and r["step"] > 50]
print(f"train: median {statistics.median(rates):.0f} tokens/s over {len(rates)} intervals of 10 updates after update 50")
EOF
