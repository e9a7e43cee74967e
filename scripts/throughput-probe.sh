#!/bin/bash
# Run from the repository root, alone on the machine (needs the tokenizers of a run in runs/multi30k,
# e.g. from `mt prepare --config configs/multi30k.yaml --run runs/multi30k`):
#   bash scripts/throughput-probe.sh NAME UPDATES [--set key=value ...]
# Training-throughput probe: UPDATES updates of configs/multi30k.yaml plus the overrides, then the
# tokens/s of each 20-update window and the elapsed seconds. Same seed -> the same batches, so the
# elapsed seconds compare settings directly; interleave repeats (A B A B) on a noisy machine.
set -euo pipefail
name=$1; steps=$2; shift 2
dir=/tmp/probe-$name
rm -rf "$dir"; mkdir -p "$dir"; cp runs/multi30k/spm.* "$dir"/
mt train --config configs/multi30k.yaml --run "$dir" \
  --set train.max_steps="$steps" --set train.schedule=inverse_sqrt --set train.val_bleu=false \
  --set train.test_at_end=false --set train.average_last=0 --set train.log_every_steps=20 "$@" > "$dir.log" 2>&1
python3 - "$dir" <<'PY'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1] + "/metrics.jsonl") if '"train"' in line]
print(sys.argv[1], [round(r["tokens_per_s"]) for r in rows], "elapsed", round(rows[-1]["elapsed"], 1))
PY
