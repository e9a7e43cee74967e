#!/bin/bash
# Interleaved step probes of smaller models against the default (tenth session, fp32 Zen 3).
# Run alone on the machine: bash docs/logs/size-probe.sh RUN_DIR (RUN_DIR holds the tokenizers).
cd "$(dirname "$0")/../.."
export MT_DATA_DIR=../shared/data/multi30k
for round in 1 2; do
  for cfg in "" "model.d_model=128 model.d_ff=512 model.encoder_layers=4 model.decoder_layers=4" "model.d_model=192 model.d_ff=768" "model.d_model=192 model.d_ff=768 model.encoder_layers=4 model.decoder_layers=4"; do
    echo "== round $round: [$cfg]"
    python docs/logs/step-profile.py "$1" $cfg 2>&1 | grep "ms per update"
  done
done
