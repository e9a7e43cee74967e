#!/bin/bash
# Wheels for a lent GPU machine that has torch but not mt's other packages, and no network:
#   bash scripts/gpu-wheels.sh [PYTHON_VERSION]      # default 3.12, the H200 image's of 2026-11-26
# downloads them into .gpu-wheels/ (git-ignored, under the 64 MiB a `run` call carries); pass
# `.gpu-wheels` in that call's carry, and scripts/gpu-check.sh installs what does not import.
# CTranslate2's wheel (43 MB, CUDA 12) is left out: on the CUDA 13 image it finds no libcublas.so.12,
# and gpu-decode.py then compares with transformers.
set -euo pipefail
version=${1:-3.12}
rm -rf .gpu-wheels
python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version "$version" \
  --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 \
  -d .gpu-wheels datasets dill multiprocess xxhash sacrebleu portalocker sentencepiece typer \
  transformers tokenizers safetensors huggingface_hub
du -sh .gpu-wheels
