#!/bin/bash
# What only a GPU can check, in one call of about 8 minutes, from the repository root of a CUDA machine:
#   bash scripts/gpu-check.sh OUT_DIR
# writes OUT_DIR/gpu-check.json (the figures docs/benchmarks.md records; null where a stage did not
# measure) and each stage's log and report beside it. Stages, each under a time cap (seconds, env):
#   tests    TESTS_CAP=100    pytest -m cuda tests/test_cuda.py tests/test_trainer.py
#   default  DEFAULT_CAP=210  mt train --config multi30k, 12,000 updates (train.max_minutes=0), test2016
#                             greedy and beam 5; capped runs report their rate, not the 12k time
#   launches LAUNCHES_CAP=60  kernel launches and ms per update of the default recipe (eager)
#   wmt      WMT_CAP=120      the WMT recipe (Transformer-base, joint 32k) for WMT_STEPS=30 updates on a
#                             synthetic corpus of WMT_PAIRS=100000 pairs (made while the tests run)
#   decode   DECODE_CAP=110   test2016 greedy and beam 5 on the GPU: mt bf16 against CTranslate2 float16,
#                             or transformers' generate of mt's export where CTranslate2's CUDA build fails
#   compile  COMPILE_CAP=240  launches and ms per update with train.compile=true (not in the default list)
# STAGES="tests default launches wmt decode" chooses (and orders) them.
#
# A lent machine has torch but may lack mt's other packages and has no network: wheels that
# scripts/gpu-wheels.sh downloaded into .gpu-wheels/ here (carried with the checkout) are installed
# for whatever does not import; `mt` runs as `python3 -m mt_cli` from this checkout.
set -uo pipefail
OUT=${1:?usage: bash scripts/gpu-check.sh OUT_DIR}
R=$OUT/runs
mkdir -p "$OUT" "$R"
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
STAGES=${STAGES:-tests default launches wmt decode}
WMT_PAIRS=${WMT_PAIRS:-100000}
WMT_STEPS=${WMT_STEPS:-30}
MT=(python3 -m mt_cli)
began=$SECONDS

note() { echo "[$((SECONDS - began)) s] $*" | tee -a "$OUT/gpu-check.log"; }

install_missing() {
  [ -d .gpu-wheels ] || return 0
  local missing=()
  for module in datasets dill multiprocess xxhash sacrebleu sentencepiece typer yaml portalocker transformers safetensors tokenizers ctranslate2; do
    python3 -c "import $module" 2> /dev/null || missing+=("$module")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  note "installing from .gpu-wheels for: ${missing[*]}"
  python3 -m pip install --quiet --no-index --no-deps --target "$OUT/site" .gpu-wheels/*.whl >> "$OUT/gpu-check.log" 2>&1
  export PYTHONPATH="$PYTHONPATH:$OUT/site"
}

wmt_overrides() {
  local corpus=$R/synthetic
  echo "--set data.source=files --set data.files.train=[$corpus/train.en,$corpus/train.de]
    --set data.files.val=[data/multi30k/val.en.gz,data/multi30k/val.de.gz]
    --set data.files.test=[data/multi30k/test_2016_flickr.en.gz,data/multi30k/test_2016_flickr.de.gz]
    --set tokenizer.sample_sentences=100000 --set train.log_every_steps=5
    --set train.validate_every_steps=100000 --set train.val_bleu=false --set train.test_at_end=false
    --set train.max_minutes=0 --set train.max_steps=$WMT_STEPS --set data.prepared_dir=$R/prepared"
}

# The synthetic corpus and the WMT tokenizers and prepared corpus take CPU only: made meanwhile.
wmt_prepare() {
  python3 scripts/synthetic-corpus.py --pairs "$WMT_PAIRS" --out "$R/synthetic" \
    && mkdir -p "$R/wmt" \
    && "${MT[@]}" prepare --config configs/wmt14-de-en.yaml --run "$R/wmt" $(wmt_overrides) --set train.device=cpu
}

stage_tests() {
  timeout "${TESTS_CAP:-100}" python3 -m pytest -m cuda -q -p no:cacheprovider tests/test_cuda.py tests/test_trainer.py \
    > "$OUT/tests.log" 2>&1
  note "tests (exit $?): $(tail -1 "$OUT/tests.log")"
}

stage_default() {
  rm -rf "$R/default"
  timeout "${DEFAULT_CAP:-210}" "${MT[@]}" train --config multi30k --run "$R/default" \
    --set train.max_minutes=0 --set train.lr_horizon=max_steps > "$OUT/default.log" 2>&1
  note "default recipe (exit $?): $(tail -1 "$OUT/default.log")"
  cp "$R/default/metrics.jsonl" "$OUT/default-metrics.jsonl" 2> /dev/null
  cp "$R/default/test.json" "$OUT/default-test.json" 2> /dev/null
}

stage_launches() {
  timeout "${LAUNCHES_CAP:-60}" python3 scripts/launches-per-update.py configs/multi30k.yaml "$R/default" \
    "$OUT/launches-default.json" > "$OUT/launches.log" 2>&1
  note "launches (exit $?): $(tail -1 "$OUT/launches.log")"
}

stage_compile() {
  timeout "${COMPILE_CAP:-240}" python3 scripts/launches-per-update.py configs/multi30k.yaml "$R/default" \
    "$OUT/launches-compiled.json" train.compile=true > "$OUT/compile.log" 2>&1
  note "compiled launches (exit $?): $(tail -1 "$OUT/compile.log")"
}

stage_wmt() {
  wait "$prepare_pid"
  note "wmt corpus and tokenizers (exit $?)"
  # shellcheck disable=SC2046  # the overrides are words
  timeout "${WMT_CAP:-120}" "${MT[@]}" train --config configs/wmt14-de-en.yaml --run "$R/wmt" $(wmt_overrides) \
    > "$OUT/wmt.log" 2>&1
  note "wmt recipe (exit $?): $(grep -c '"train"' "$R/wmt/metrics.jsonl" 2> /dev/null) log intervals"
  cp "$R/wmt/metrics.jsonl" "$OUT/wmt-metrics.jsonl" 2> /dev/null
}

stage_decode() {
  timeout "${DECODE_CAP:-110}" python3 scripts/gpu-decode.py "$R/default" "$OUT/decode.json" > "$OUT/decode.log" 2>&1
  note "decode (exit $?): $(tail -2 "$OUT/decode.log" | tr '\n' ' ')"
}

note "GPU check: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | head -1)"
install_missing
wmt_prepare > "$OUT/wmt-prepare.log" 2>&1 &
prepare_pid=$!
for stage in $STAGES; do
  case $stage in
    tests | default | launches | wmt | decode | compile) "stage_$stage" ;;
    *) note "unknown stage $stage; choose from tests default launches wmt decode compile" ;;
  esac
done
wait "$prepare_pid" 2> /dev/null
python3 scripts/gpu-check-summary.py "$OUT" > "$OUT/gpu-check.json"
note "done: $OUT/gpu-check.json"
cat "$OUT/gpu-check.json"
