#!/bin/bash
# Run from the repository root on a CUDA machine, after `pip install -e ".[test]"`:
#   bash scripts/gpu-check.sh [STAGE ...]        # stages: tests default wmt compile (default: all four)
# Checks what only a GPU can: the CUDA and slow tests, the default recipe's 12,000 updates (wall
# time, test2016 BLEU), the WMT recipe's tokens/s and MFU on a synthetic corpus, compiled against
# eager training speed. Each stage appends its figures to one results file, RESULTS (default
# ${OUT:-/tmp}/gpu-check.md), to be copied into docs/benchmarks.md; runs and logs go to R
# (default /tmp/gpu-check). Stages are separate so that each fits a 10-minute slot.
# WMT_PAIRS (default 1000000) sets the synthetic corpus size; WMT_STEPS (default 30) the updates timed;
# TESTS (default: all) the test files the tests stage collects (an image without the extras' packages
# can collect only tests/test_cuda.py and tests/test_trainer.py).
#
# Without an install (a lent machine with torch but no network): `mt` falls back to `python3 -m
# mt_cli` from this checkout, and mt's packages that such an image lacks (on the H200 image of
# 2026-11-26: datasets, dill and multiprocess) go in as wheels downloaded elsewhere, e.g.
#   pip install --no-index --no-deps --target /tmp/site wheels/*.whl && export PYTHONPATH=/tmp/site
# Times on an H200 (2026-11-26, docs/benchmarks.md): tests with TESTS as above 2.5 min; wmt with
# WMT_PAIRS=300000 1 min; default about 8 min (estimated from its first 1,800 updates).
set -uo pipefail
R=${R:-/tmp/gpu-check}
RESULTS=${RESULTS:-${OUT:-/tmp}/gpu-check.md}
WMT_PAIRS=${WMT_PAIRS:-1000000}
WMT_STEPS=${WMT_STEPS:-30}
TESTS=${TESTS:-}
stages=("$@")
[ ${#stages[@]} -eq 0 ] && stages=(tests default wmt compile)
mkdir -p "$R" "$(dirname "$RESULTS")"
export PYTHONUNBUFFERED=1

say() { echo "$*" | tee -a "$RESULTS"; }

MT=(mt)
if ! command -v mt > /dev/null; then
  export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
  MT=(python3 -m mt_cli)
fi

header() {
  say "## GPU check, $(date -u '+%Y-%m-%d %H:%M UTC')"
  say ""
  say "- GPU: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | head -1)"
  say "- torch $(python3 -c 'import torch; print(torch.__version__, "CUDA", torch.version.cuda)')"
  say "- mt $(git rev-parse --short HEAD 2>/dev/null || echo '(no git)')"
  say ""
}

# The rate fields of the train events of a run's metrics.jsonl, skipping the first (warm-up) ones.
rates() {
  python3 - "$1" <<'PY'
import json, statistics, sys
rows = [json.loads(line) for line in open(sys.argv[1] + "/metrics.jsonl")]
train = [row for row in rows if row.get("event") == "train"][2:]
if not train:
    print("no train events past warm-up"); sys.exit()
median = lambda key: statistics.median(row[key] for row in train if row.get(key) is not None)
mfu = median("mfu") if any(row.get("mfu") is not None for row in train) else float("nan")
print(f"{median('tokens_per_s'):,.0f} tokens/s, {median('tflops'):.1f} TFLOP/s, MFU {mfu:.1%} "
      f"(median of {len(train)} log intervals after 2 of warm-up)")
PY
}

stage_tests() {
  say "### CUDA and slow tests"
  say "\`python3 -m pytest -m \"cuda or slow\" -q -rs $TESTS\`"
  # shellcheck disable=SC2086  # TESTS is a list of paths
  python3 -m pytest -m "cuda or slow" -q -rs $TESTS > "$R/tests.log" 2>&1
  say "exit $?: $(tail -1 "$R/tests.log")"
  say ""
}

stage_default() {
  local run=$R/default
  rm -rf "$run"
  say "### Default recipe, 12,000 updates"
  say "\`mt train --config multi30k --run $run --set train.max_minutes=0 --set train.lr_horizon=max_steps\`"
  local timer=() start=$SECONDS
  [ -x /usr/bin/time ] && timer=(/usr/bin/time -v)  # peak memory where GNU time is installed
  "${timer[@]}" "${MT[@]}" train --config multi30k --run "$run" --set train.max_minutes=0 --set train.lr_horizon=max_steps \
    > "$R/default.log" 2> "$R/default.err"
  local code=$?
  say "exit $code; wall time $((SECONDS - start)) s, \
peak RSS $(grep 'Maximum resident' "$R/default.err" | awk '{print $NF}') KB"
  say "$(rates "$run")"
  python3 - "$run/test.json" <<'PY' | tee -a "$RESULTS"
import json, sys
report = json.load(open(sys.argv[1]))
for name, scores in report["scores"].items():
    print(f"- {report['split']} {name}: BLEU {scores['bleu']:.2f}, chrF {scores['chrf']:.2f}")
PY
  say ""
}

wmt_corpus() {
  local corpus=$R/synthetic
  [ -f "$corpus/train.en" ] || python3 scripts/synthetic-corpus.py --pairs "$WMT_PAIRS" --out "$corpus" >&2
  echo "--set data.source=files --set data.files.train=[$corpus/train.en,$corpus/train.de]
    --set data.files.val=[data/multi30k/val.en.gz,data/multi30k/val.de.gz]
    --set data.files.test=[data/multi30k/test_2016_flickr.en.gz,data/multi30k/test_2016_flickr.de.gz]
    --set tokenizer.sample_sentences=300000 --set train.log_every_steps=5
    --set train.validate_every_steps=100000 --set train.val_bleu=false --set train.test_at_end=false
    --set train.max_minutes=0 --set train.max_steps=$WMT_STEPS --set data.prepared_dir=$R/prepared"
}

# Train the WMT recipe on the synthetic corpus into RUN with extra overrides; print its rates.
wmt_train() {
  local run=$1; shift
  rm -rf "$run"
  mkdir -p "$run"
  cp "$R/wmt-tokenizers/"spm.* "$run/"
  # shellcheck disable=SC2046  # the overrides are words
  "${MT[@]}" train --config configs/wmt14-de-en.yaml --run "$run" $(wmt_corpus) "$@" > "$run.log" 2>&1
  echo "exit $?: $(rates "$run")"
}

wmt_tokenizers() {
  if [ ! -f "$R/wmt-tokenizers/spm.en.model" ]; then
    # shellcheck disable=SC2046
    "${MT[@]}" prepare --config configs/wmt14-de-en.yaml --run "$R/wmt-tokenizers" $(wmt_corpus) > "$R/wmt-prepare.log" 2>&1
  fi
}

stage_wmt() {
  say "### WMT recipe (Transformer-base, joint 32k), synthetic corpus of $WMT_PAIRS pairs, $WMT_STEPS updates"
  wmt_tokenizers
  say "$(wmt_train "$R/wmt")"
  say ""
}

stage_compile() {
  say "### train.compile against eager (WMT recipe, $WMT_STEPS updates each)"
  wmt_tokenizers
  say "- eager: $(wmt_train "$R/wmt-eager" --set train.compile=false)"
  say "- compiled: $(wmt_train "$R/wmt-compiled" --set train.compile=true)"
  say ""
}

header
for stage in "${stages[@]}"; do
  case $stage in
    tests | default | wmt | compile) "stage_$stage" ;;
    *) echo "unknown stage $stage; choose from tests default wmt compile" >&2; exit 2 ;;
  esac
done
echo "results: $RESULTS" >&2
