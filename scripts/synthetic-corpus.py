# A WMT-sized parallel corpus for memory and speed benchmarks, made from the shipped Multi30k:
#   python scripts/synthetic-corpus.py --pairs 4500000 --out /tmp/synthetic-4.5m
# writes /tmp/synthetic-4.5m/train.de and train.en (about 1.3 GB for 4.5M pairs). Train on it with
#   mt train --config multi30k --set data.source=files \
#     --set data.files.train=[/tmp/synthetic-4.5m/train.de,/tmp/synthetic-4.5m/train.en] \
#     --set data.files.val=[data/multi30k/val.de.gz,data/multi30k/val.en.gz] \
#     --set data.files.test2016=[data/multi30k/test_2016_flickr.de.gz,data/multi30k/test_2016_flickr.en.gz]
"""Write N synthetic training pairs, each the join of K random Multi30k training pairs (both sides
joined in the same order, so every pair stays a translation)."""

from __future__ import annotations

import argparse
import random
from pathlib import Path

from mt_cli.disk.reading import read_lines
from mt_cli.disk.resources import SHIPPED_MULTI30K


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, required=True, help="pairs to write")
    parser.add_argument("--out", type=Path, required=True, help="directory for train.de and train.en")
    parser.add_argument("--join", type=int, default=2, help="Multi30k pairs per synthetic pair (default 2)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    de = read_lines(SHIPPED_MULTI30K / "train.de.gz")
    en = read_lines(SHIPPED_MULTI30K / "train.en.gz")
    rng = random.Random(args.seed)
    args.out.mkdir(parents=True, exist_ok=True)
    with (
        open(args.out / "train.de", "w", encoding="utf-8") as de_out,
        open(args.out / "train.en", "w", encoding="utf-8") as en_out,
    ):
        for _ in range(args.pairs):
            picks = rng.choices(range(len(de)), k=args.join)
            de_out.write(" ".join(de[i] for i in picks) + "\n")
            en_out.write(" ".join(en[i] for i in picks) + "\n")
    size = sum((args.out / name).stat().st_size for name in ("train.de", "train.en"))
    print(f"{args.pairs:,} pairs, {size / 2**30:.2f} GiB in {args.out}")


if __name__ == "__main__":
    main()
