#!/bin/bash
# Run from the repository root, alone on the machine (RUN_DIR holds the tokenizers, e.g. from
# `mt prepare --config configs/multi30k.yaml --run RUN_DIR`):
#   bash scripts/size-probe.sh RUN_DIR
# Interleaved step probes (scripts/step-profile.py) of smaller models against the default, two rounds.
for round in 1 2; do
  for cfg in "" "model.d_model=128 model.d_ff=512 model.encoder_layers=4 model.decoder_layers=4" \
    "model.d_model=192 model.d_ff=768" "model.d_model=192 model.d_ff=768 model.encoder_layers=4 model.decoder_layers=4"; do
    echo "== round $round: [$cfg]"
    # shellcheck disable=SC2086  # cfg is a list of overrides
    python scripts/step-profile.py "$1" $cfg 2>&1 | grep "ms per update"
  done
done
