#!/usr/bin/env bash
# The beam-5 translations of Multi30k's held-out German test sets and of test2016, one line per
# source line, for others to score (issue 53: the references of the held-out sets stay with them):
#   scripts/heldout.sh RUN SOURCES OUT [OPTION ...]
# RUN: a run directory; SOURCES: a folder holding test_2017_flickr.de.gz, test_2017_mscoco.de.gz
# and test_2018_flickr.de.gz; OUT: where test_2017_flickr.en, ... and test_2016_flickr.en go;
# OPTIONs go to `mt translate` as they are (an ensemble: --ensemble RUN2).
set -euo pipefail
if [ $# -lt 3 ]; then
    echo "usage: scripts/heldout.sh RUN SOURCES OUT [OPTION ...]" >&2
    exit 2
fi
run=$1 sources=$2 out=$3
shift 3
options=("$@")
cd "$(dirname "$0")/.."
mkdir -p "$out"

# translate SOURCE NAME: OUT/NAME.en, checked to hold one line per source line.
translate() {
    python -m mt_cli translate --run "$run" --beam 5 ${options[@]+"${options[@]}"} -i "$1" -o "$out/$2.en"
    lines=$(zcat "$1" | wc -l)
    [ "$(wc -l < "$out/$2.en")" -eq "$lines" ] || { echo "error: $out/$2.en is not $lines lines" >&2; exit 1; }
}

for name in test_2017_flickr test_2017_mscoco test_2018_flickr; do
    translate "$sources/$name.de.gz" "$name"
done
translate data/multi30k/test_2016_flickr.de.gz test_2016_flickr
