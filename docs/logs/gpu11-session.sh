#!/bin/bash
# Eleventh session on the H100, run from the repository root on the device machine, which got the
# datasets wheels in .whl and the Multi30k files in .m30k (both carried):
#   setsid bash docs/logs/gpu11-session.sh LIST TARNAME > /tmp/sweep.out 2>&1 &
# Every run of LIST side by side (docs/logs/gpu-sweep.sh): the committed recipe with its cosine
# ending at each run's max_steps, no time budget. The sweep outlasts one device call (10 min), so it
# runs in its own process session and writes to /tmp/out11; a later call copies that into $OUT.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
export PYTHONPATH=/tmp/site:$PWD MT_DATA_DIR=$PWD/.m30k OMP_NUM_THREADS=1 PYTHONUNBUFFERED=1 OUT=/tmp/out11
mkdir -p $OUT
list=$1; tarname=$2
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv; python3 -c "import torch; print(torch.__version__, torch.version.cuda)"; date -u; } > $OUT/gpu.txt 2>&1
python3 -m pytest -q -p no:cacheprovider -m cuda tests > $OUT/tests-cuda.log 2>&1; echo "rc=$?" >> $OUT/tests-cuda.log
FIXED="--set train.lr_horizon=max_steps --set train.max_minutes=0" VAL_ALPHAS=recipe \
  bash docs/logs/gpu-sweep.sh "$list" "$tarname" > $OUT/summary.txt 2>&1
date -u >> $OUT/gpu.txt
touch $OUT/DONE
