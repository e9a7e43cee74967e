#!/bin/bash
# usage: gpu7-sweep.sh LISTFILE -- each line: NAME OVERRIDES...; all runs side by side on the GPU at
# the CPU hour's update budget (cosine to zero at 6,200 updates, no time limit)
list=$1; R=/tmp/runs; mkdir -p $R
one() {
  name=$1; shift
  python3 -m mt_cli train --config configs/multi30k.yaml --run-dir $R/$name --set train.lr_horizon=max_steps \
    --set train.max_steps=6200 --set train.max_minutes=0 "$@" > $R/$name.log 2>&1
  python3 -m mt_cli eval --run $R/$name --split val --json > $R/$name.val.json 2>>$R/$name.log
}
while read -r name rest; do [ -n "$name" ] && { one $name $rest & }; done < $list
wait
