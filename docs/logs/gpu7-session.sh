#!/bin/bash
# Run on the device machine from the repository root, with PYTHONPATH (carried datasets wheels and the
# repo), MT_DATA_DIR (the Multi30k files) and OMP_NUM_THREADS=1 exported.
# Seventh session on the GPU: tests, the default alone (minutes to the goal), then a seed sweep.
export PYTHONUNBUFFERED=1
R=/tmp/runs; mkdir -p $R
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv; python3 -c "import torch;print(torch.__version__, torch.version.cuda)"; date -u; } > $R/gpu.txt 2>&1
python3 -m pytest -q -p no:cacheprovider -m "not slow" -n 8 tests > $R/tests-all.log 2>&1
echo "rc=$?" >> $R/tests-all.log
python3 -m pytest -q -p no:cacheprovider -m cuda tests/test_cuda.py > $R/tests-cuda.log 2>&1
echo "rc=$?" >> $R/tests-cuda.log
date -u > $R/alone.start
/usr/bin/time -v python3 -m mt_cli train --config configs/multi30k.yaml --run-dir $R/alone > $R/alone.log 2>&1
date -u > $R/alone.end
python3 -m mt_cli eval --run $R/alone --split val --json > $R/alone.val.json 2>>$R/alone.log
# The sweep ran as two lists, the first nine lines of gpu7-sweep-runs.txt, then the last six.
FIXED="--set train.lr_horizon=max_steps --set train.max_steps=6200 --set train.max_minutes=0" VAL_ALPHAS=recipe \
  bash docs/logs/gpu-sweep.sh docs/logs/gpu7-sweep-runs.txt gpu7-sweep
touch $R/DONE
