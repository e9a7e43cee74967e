#!/bin/bash
# Run from the repository root on a trained run:
#   bash scripts/batch-independence.sh RUN SOURCE [COMPUTE_TYPE ...]   # default: float32 bfloat16
# Translates SOURCE (one sentence a line) with `mt translate` at --buffer-size 64 and 7, greedy and
# beam 5, in each compute type, and prints how many lines differ between the two buffer sizes: a
# line's translation should not depend on what it is batched with (docs/benchmarks.md).
set -euo pipefail
run=$1 source=$2
shift 2
types=("$@")
[ ${#types[@]} -eq 0 ] && types=(float32 bfloat16)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for type in "${types[@]}"; do
    for beam in 1 5; do
        for size in 64 7; do
            mt translate --run "$run" --compute-type "$type" --beam "$beam" --buffer-size "$size" \
                -i "$source" -o "$out/$type.$beam.$size" 2>/dev/null
        done
        changed=$(diff "$out/$type.$beam.64" "$out/$type.$beam.7" | grep -c '^<' || true)
        echo "$type beam $beam: $changed of $(wc -l < "$source") lines differ between --buffer-size 64 and 7"
    done
done
