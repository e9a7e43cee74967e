# Run from the repository root, alone on the machine:
#   python scripts/engine-rounds.py RUN_DIR BEAM ROUNDS [--threads N] [--max-tokens 8192,4096]
#       [--engine mt-fp32 --engine ctranslate2-float32 --engine mt-fp32@/path/to/other/checkout]
"""Rows of ``mt bench --engines`` (each its own process: load, warm up, a cold and a steady pass
over all of test2016), several engines taking turns for ROUNDS rounds, so that the machine's
drift between minutes falls on every engine alike. Prints each row's steady sentences a second,
then per ``decode.max_tokens`` the mean of each engine and its ratio to the last engine, and the
share of lines identical to the first engine's.

``--threads`` is each row's ``threads`` (mt: that many decoding processes; CTranslate2: that
many batches at once); ``--max-tokens`` replaces ``decode.max_tokens`` in both engines (CTranslate2's
batches are max_tokens / beam source tokens, as in ``mt bench``). ``ENGINE@PATH`` runs the row
with PATH first on PYTHONPATH: another checkout of mt, for a before/after comparison.
"""

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from mt_cli.data.corpus import load_corpus
from mt_cli.export.ctranslate2 import Quantization, export_ctranslate2
from mt_cli.tools import engines
from mt_cli.trained import load_trained


def child(job: dict, max_tokens: int) -> None:
    """``engines.child`` with ``decode.max_tokens`` replaced in the engine's card."""
    opened = engines._open

    def with_max_tokens(*args):  # noqa: ANN002, ANN202
        engine = opened(*args)
        decode = dataclasses.replace(engine.card.decode, max_tokens=max_tokens)
        object.__setattr__(engine, "card", dataclasses.replace(engine.card, decode=decode))
        return engine

    engines._open = with_max_tokens
    engines.child(job)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("run", type=Path)
    parser.add_argument("beam", type=int)
    parser.add_argument("rounds", type=int)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--max-tokens", default="8192")
    parser.add_argument("--engine", action="append", dest="engines")
    args = parser.parse_args()
    specs = args.engines or ["mt-fp32", "ctranslate2-float32"]
    sizes = [int(size) for size in args.max_tokens.split(",")]
    trained = load_trained(args.run, None)
    sources = load_corpus(trained.card.data, ["test2016"])["test2016"]["src"]
    rates: dict[tuple[str, int], list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="mt-engine-rounds-") as tmp:
        work = Path(tmp)
        export = export_ctranslate2(trained, work / "ct2", Quantization.FLOAT32)
        lines = work / "lines.txt"
        lines.write_text("".join(line + "\n" for line in sources), encoding="utf-8")
        for round_ in range(args.rounds):
            for size in sizes:
                for index, spec in enumerate(specs):
                    name, _, path = spec.partition("@")
                    case = engines.Case(name)
                    model_dir = export if name.startswith("ctranslate2") else None
                    out = work / f"{index}-{size}.txt"
                    job = engines.bench_job(
                        case, args.beam, args.run.resolve(), None, model_dir, lines, out, args.threads
                    )
                    env = dict(os.environ, PYTHONPATH=path) if path else None
                    command = [sys.executable, __file__, "--child", json.dumps(job), str(size)]
                    done = subprocess.run(command, capture_output=True, text=True, env=env, check=True)
                    timing = json.loads(done.stdout.strip().splitlines()[-1])
                    rate = len(sources) / timing["seconds"]
                    rates.setdefault((spec, size), []).append(rate)
                    print(f"round {round_} max_tokens {size} {spec}: {rate:.1f} sentences/s", flush=True)
        for size in sizes:
            means = {spec: sum(rates[spec, size]) / args.rounds for spec in specs}
            outputs = [
                (work / f"{i}-{size}.txt").read_text(encoding="utf-8").splitlines() for i in range(len(specs))
            ]
            for spec, out in zip(specs, outputs):
                same = sum(a == b for a, b in zip(out, outputs[0])) / len(out)
                print(
                    f"beam {args.beam}, max_tokens {size}, {args.threads} threads: {spec} {means[spec]:.1f}"
                    f" sentences/s, {means[spec] / means[specs[-1]]:.3f}x the last,"
                    f" {same:.1%} lines as the first"
                )


if __name__ == "__main__":
    if sys.argv[1] == "--child":
        child(json.loads(sys.argv[2]), int(sys.argv[3]))
    else:
        main()
