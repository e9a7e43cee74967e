#!/bin/bash
# Each line of a list: NAME followed by `--set section.key=value` overrides; the repository and the
# Multi30k files were copied to the GPU machine, MT_DATA_DIR pointing at them.
# usage: sweep.sh LISTFILE  -- each line: NAME OVERRIDES... ; all runs in parallel on the GPU
list=$1; R=/tmp/runs; mkdir -p $R
one() {
  name=$1; shift
  python3 -m mt_cli train --config configs/multi30k.yaml --run-dir $R/$name --set train.max_minutes=0 "$@" > $R/$name.log 2>&1
  for lp in 1.0 2.5; do python3 -m mt_cli eval --run $R/$name --split val --beam 5 --length-penalty $lp --json > $R/$name.val$lp.json 2>>$R/$name.log; done
}
while read -r name rest; do [ -n "$name" ] && { one $name $rest & }; done < $list
wait
python3 docs/logs/gpu-sweep-summary.py $R $(awk '{print $1}' $list)
tar czf $OUT/${2:-sweep}.tgz -C $R $(cd $R && ls -d *.log */metrics.jsonl */test.json *.json */config.yaml 2>/dev/null)
