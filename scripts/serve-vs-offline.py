# From the repository root, on an otherwise idle machine (server, load and offline run share its cores):
#   python scripts/serve-vs-offline.py --run runs/multi30k --engine mt -o /tmp/serve-mt.json
#   python scripts/serve-vs-offline.py --run runs/multi30k --engine ctranslate2 -o /tmp/serve-ct2.json
#   python scripts/serve-vs-offline.py --run runs/multi30k --repeat 0.5 --cache-sizes 0 10000 \
#       -o /tmp/cache.json
"""`mt serve` under load against the same engine offline, side by side on one machine.

First the offline rate: the run opened as `mt translate` opens it (same engine, beam, worker
processes), translating fresh lines of --source (the ones the load will send), sentences/s after
a warm-up. Then, for each --cache-sizes value, `mt serve` started on a free port and loaded by
scripts/serve-load.py (N clients for T seconds, one sentence a request, fresh lines or --repeat),
stopped with SIGTERM. Writes one JSON object: the offline rate, each load's report and its
sentences/s as a share of the offline rate.
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import mt_cli
from mt_cli.config.options import TranslateOptions
from mt_cli.disk.reading import read_lines
from mt_cli.disk.resources import SHIPPED_MULTI30K

READY = re.compile(r"mt serve: .* at (http://\S+) ")
POPULAR = 64  # serve-load.py's: fresh lines start after them


def offline_rate(args: argparse.Namespace, lines: list[str]) -> dict[str, float]:
    model = mt_cli.load(args.run, engine=args.engine, device="cpu")
    options = TranslateOptions(beam=args.beam, scores=False)
    model.translate(lines[:64], options)  # warm-up: worker processes started, first shapes met
    started = time.monotonic()
    model.translate(lines, options)
    seconds = time.monotonic() - started
    return {
        "lines": len(lines),
        "seconds": round(seconds, 2),
        "sentences_per_s": round(len(lines) / seconds, 2),
    }


def start_server(args: argparse.Namespace, cache_size: int) -> tuple[subprocess.Popen[str], str]:
    command = [sys.executable, "-m", "mt_cli", "serve", "--run", str(args.run), "--port", "0"]
    command += ["--engine", args.engine, "--beam", str(args.beam), "--cache-size", str(cache_size)]
    command += ["--device", "cpu", *args.serve_option]
    server = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    for line in server.stderr:  # type: ignore[union-attr]
        sys.stderr.write(line)
        if match := READY.match(line):
            return server, match.group(1)
    raise SystemExit(f"mt serve did not start (exit {server.wait()})")


def load(args: argparse.Namespace, url: str) -> dict[str, object]:
    command = [sys.executable, "scripts/serve-load.py", "--url", url, "-n", str(args.clients)]
    command += ["-T", str(args.seconds), "--source", str(args.source), "--json"]
    command += ["--repeat", str(args.repeat)]
    if args.kill_worker is not None:
        command += ["--kill-worker", str(args.kill_worker)]
    done = subprocess.run(command, capture_output=True, text=True)
    if not done.stdout.strip():
        raise SystemExit(f"serve-load.py failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=Path, required=True)
    parser.add_argument("--engine", default="mt", choices=["mt", "ctranslate2"])
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--source", type=Path, default=SHIPPED_MULTI30K / "train.de.gz")
    parser.add_argument("--offline-lines", type=int, default=2000)
    parser.add_argument("-n", "--clients", type=int, default=32)
    parser.add_argument("-T", "--seconds", type=float, default=60)
    parser.add_argument("--repeat", type=float, default=0.0, help="serve-load.py --repeat")
    parser.add_argument("--kill-worker", type=float, default=None, help="serve-load.py --kill-worker")
    parser.add_argument("--cache-sizes", type=int, nargs="+", default=[10000])
    parser.add_argument("--serve-option", action="append", default=[], help="another mt serve option")
    parser.add_argument("-o", "--output", type=Path, required=True)
    args = parser.parse_args()
    lines = read_lines(args.source)[POPULAR : POPULAR + args.offline_lines]
    result: dict[str, object] = {"run": str(args.run), "engine": args.engine, "beam": args.beam}
    result["offline"] = offline = offline_rate(args, lines)
    loads = []
    for cache_size in args.cache_sizes:
        server, url = start_server(args, cache_size)
        try:
            report = load(args, url)
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(60)
        report["cache_size"] = cache_size
        report["share_of_offline"] = round(float(report["lines_per_s"]) / offline["sentences_per_s"], 3)
        loads.append(report)
        print(json.dumps(report), file=sys.stderr)
    result["loads"] = loads
    args.output.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
