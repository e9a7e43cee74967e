#!/bin/bash
# usage: gpu-sweep.sh LISTFILE [TARNAME] -- all runs of the list side by side on the GPU.
# Each line of LISTFILE: NAME followed by `--set section.key=value` overrides. The repository and the
# Multi30k files were copied to the GPU machine, MT_DATA_DIR pointing at them.
# FIXED: overrides every run gets. Default: the third session's `--set train.max_minutes=0`; the
#   seventh used `--set train.lr_horizon=max_steps --set train.max_steps=6200 --set train.max_minutes=0`
#   (the recipe with its cosine ending at the CPU hour's update budget).
# VAL_ALPHAS: length penalties of the val beam-5 scores, NAME.valALPHA.json. Default "1.0 2.5" (third
#   session); "recipe" is the config's own, NAME.val.json (seventh).
list=$1; R=/tmp/runs; mkdir -p $R
FIXED=${FIXED:---set train.max_minutes=0}
VAL_ALPHAS=${VAL_ALPHAS:-1.0 2.5}
one() {
  name=$1; shift
  python3 -m mt_cli train --config configs/multi30k.yaml --run-dir $R/$name $FIXED "$@" > $R/$name.log 2>&1
  for alpha in $VAL_ALPHAS; do
    if [ "$alpha" = recipe ]; then penalty=(); suffix=""; else penalty=(--length-penalty "$alpha"); suffix=$alpha; fi
    python3 -m mt_cli eval --run $R/$name --split val --beam 5 "${penalty[@]}" --json > $R/$name.val$suffix.json 2>>$R/$name.log
  done
}
while read -r name rest; do [ -n "$name" ] && { one $name $rest & }; done < $list
wait
python3 docs/logs/gpu-sweep-summary.py $R $(awk '{print $1}' $list) --val-files $VAL_ALPHAS
tar czf $OUT/${2:-sweep}.tgz -C $R $(cd $R && ls -d *.log */metrics.jsonl */test.json *.json */config.yaml 2>/dev/null)
