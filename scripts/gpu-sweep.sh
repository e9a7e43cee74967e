#!/bin/bash
# Run from the repository root on a GPU machine:
#   FIXED="--set ..." VAL_ALPHAS=recipe bash scripts/gpu-sweep.sh LISTFILE > SUMMARY.txt
# Trains every run of LISTFILE side by side on the one GPU, then scores each best.pt on val with
# beam 5 and prints the table of scripts/gpu-sweep-summary.py. Each line of LISTFILE: NAME followed
# by `--set section.key=value` overrides (docs/logs/h100-sweep-*-runs.txt).
# FIXED: overrides every run gets, before its own (a later --set wins). Default: --set train.max_minutes=0.
# VAL_ALPHAS: length penalties of the val scores, NAME.valALPHA.json; "recipe" is the config's own
#   (NAME.val.json). Default: recipe.
# RUNS: where the runs go (default /tmp/runs). One CPU thread per training process, as in the
# sweeps of docs/results.md.
list=$1
R=${RUNS:-/tmp/runs}
mkdir -p "$R"
FIXED=${FIXED:---set train.max_minutes=0}
VAL_ALPHAS=${VAL_ALPHAS:-recipe}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} PYTHONUNBUFFERED=1
one() {
  name=$1; shift
  # shellcheck disable=SC2086  # FIXED is a list of words
  python3 -m mt_cli train --config configs/multi30k.yaml --run "$R/$name" $FIXED "$@" > "$R/$name.log" 2>&1
  for alpha in $VAL_ALPHAS; do
    if [ "$alpha" = recipe ]; then penalty=(); suffix=""; else penalty=(--length-penalty "$alpha"); suffix=$alpha; fi
    python3 -m mt_cli eval --run "$R/$name" --split val --beam 5 "${penalty[@]}" --json > "$R/$name.val$suffix.json" 2>>"$R/$name.log"
  done
}
while read -r name rest; do
  # shellcheck disable=SC2086  # rest is the run's list of overrides
  [ -n "$name" ] && { one "$name" $rest & }
done < "$list"
wait
# shellcheck disable=SC2046,SC2086
python3 scripts/gpu-sweep-summary.py "$R" $(awk '{print $1}' "$list") --val-files $VAL_ALPHAS
