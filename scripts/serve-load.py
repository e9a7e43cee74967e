# Start a server, make the expected translations (optional), then run the load from the repository root:
#   mt serve --run runs/multi30k --port 5000 &
#   mt translate --run runs/multi30k -i data/multi30k/test_2016_flickr.de.gz -o /tmp/test2016.en
#   python scripts/serve-load.py --url http://127.0.0.1:5000 -n 32 -T 60 --expected /tmp/test2016.en
# and with one request in five a file (/translate_file, then its download):
#   python scripts/serve-load.py --url http://127.0.0.1:5000 -n 32 -T 60 --expected /tmp/test2016.en --files 5
# and with one request in ten malformed (each client's every tenth):
#   python scripts/serve-load.py --url http://127.0.0.1:5000 -n 32 -T 60 --expected /tmp/test2016.en \
#       --malformed 10
"""Load test of a running `mt serve`: N clients for T seconds, each sending random test2016
sentences (POST /translate, JSON, one request at a time per client, the next as soon as the
answer arrives).

Reports requests/s, lines/s, p50/p99 latency, the failures (any answer but 200, or no answer)
and, with --expected (the `mt translate` output aligned with test2016), the answers that differ
from it. With --malformed K, each client's every K-th request is a malformed one instead (a lone
surrogate in q or source, JSON nested past the parser, broken JSON, a body over the size limit,
an unknown language, format docx, a missing q, a file field, a plain-text body, in turn), whose answer
must be a 4xx with a JSON error: anything else counts in ``malformed_not_4xx``. With --files K,
each client's every K-th request is a file of three sentences, a .txt (one a line), a .srt (one
a cue) or an .odt (one a paragraph, zip and XML), in turn, posted to /translate_file and
downloaded from the URL it answers: a failure if either is not a 200, or the .srt's number and
timing lines did not come back as sent; its lines are checked against --expected as the others
are. Exits 1 if any well-formed request failed or a
malformed one got no 4xx. Differences are not failures: the
engine's results depend slightly on what else shares the batch (padding changes the sums; in
bf16, the default on a CPU with native bf16, enough to flip some lines), and the server's
batches are whatever requests arrived together, while `mt translate` batches the file by length.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import random
import signal
import sys
import time
import zipfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from xml.etree import ElementTree
from xml.sax.saxutils import escape

import httpx

from mt_cli.disk.reading import read_lines
from mt_cli.disk.resources import SHIPPED_MULTI30K

TEST2016 = SHIPPED_MULTI30K / "test_2016_flickr.de.gz"
POPULAR = 64  # --repeat: the sentences repeated requests draw from


@dataclass
class Tally:
    """What the clients saw, added to as answers arrive."""

    latencies: list[float] = field(default_factory=list)  # seconds, of the 200 answers
    lines: int = 0
    failures: Counter[str] = field(default_factory=Counter)  # "HTTP 429", "ReadTimeout", ...
    mismatches: list[tuple[str, str, str]] = field(default_factory=list)  # (source, expected, answer)
    checked: int = 0
    malformed: Counter[str] = field(default_factory=Counter)  # their statuses: "400", "413", ...
    malformed_not_4xx: int = 0  # malformed requests answered anything but a 4xx with a JSON error
    files: int = 0  # files translated and downloaded
    fresh: int = 0  # --repeat: lines sent past the popular ones (the next to send)
    health: dict[str, object] = field(default_factory=dict)  # the server's /health after the load


def malformed_requests(sentence: str, api_key: str | None) -> list[tuple[str, dict[str, object]]]:
    """(what is wrong, httpx arguments) for each kind of malformed request, built around ``sentence``."""
    good: dict[str, object] = {"q": sentence, "source": "de", "target": "en"}
    if api_key:
        good["api_key"] = api_key
    as_json = {"Content-Type": "application/json"}
    return [
        (
            "surrogate in q",
            {"content": json.dumps({**good, "q": sentence + "\ud800"}).encode(), "headers": as_json},
        ),
        (
            "surrogate in source",
            {"content": json.dumps({**good, "source": "\udfff"}).encode(), "headers": as_json},
        ),
        ("nested JSON", {"content": b"[" * 60_000, "headers": as_json}),
        ("broken JSON", {"content": json.dumps(good).encode()[:-3], "headers": as_json}),
        ("over the size limit", {"content": b" " * 200_000, "headers": as_json}),
        ("unknown language", {"json": {**good, "source": "xx"}}),
        ("a format /translate does not take", {"json": {**good, "format": "docx"}}),
        ("no q", {"json": {key: value for key, value in good.items() if key != "q"}}),
        (
            "a file field",
            {"files": {"q": ("q.txt", sentence.encode())}, "data": {"source": "de", "target": "en"}},
        ),
        ("plain text", {"content": sentence.encode(), "headers": {"Content-Type": "text/plain"}}),
    ]


ODT_TEXT = "urn:oasis:names:tc:opendocument:xmlns:text:1.0"


def file_of(sentences: list[str], kind: int) -> tuple[str, bytes]:
    """A file of ``sentences``: kind 0 a .txt of one line each, 1 a .srt of one cue each, 2 an
    .odt of one paragraph each."""
    if kind == 0:
        return "load.txt", "".join(f"{line}\n" for line in sentences).encode()
    if kind == 2:
        return "load.odt", odt_of(sentences)
    cues = [f"{i + 1}\n00:00:0{i},000 --> 00:00:0{i},900\n{line}\n" for i, line in enumerate(sentences)]
    return "load.srt", "\n".join(cues).encode()


def odt_of(sentences: list[str]) -> bytes:
    """An OpenDocument text of one paragraph a sentence: its mimetype and content.xml."""
    paragraphs = "".join(f"<text:p>{escape(line)}</text:p>" for line in sentences)
    content = (
        '<?xml version="1.0" encoding="UTF-8"?>\n<office:document-content xmlns:office='
        f'"urn:oasis:names:tc:opendocument:xmlns:office:1.0" xmlns:text="{ODT_TEXT}" office:version="1.3">'
        f"<office:body><office:text>{paragraphs}</office:text></office:body></office:document-content>"
    )
    written = io.BytesIO()
    with zipfile.ZipFile(written, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("mimetype", "application/vnd.oasis.opendocument.text", zipfile.ZIP_STORED)
        archive.writestr("content.xml", content)
    return written.getvalue()


def translated_lines(name: str, sent: bytes, got: bytes) -> list[str] | None:
    """The translations in a downloaded file, one per sentence sent; None if a .srt's number or
    timing lines are not those sent."""
    if name.endswith(".odt"):
        with zipfile.ZipFile(io.BytesIO(got)) as archive:
            content = ElementTree.fromstring(archive.read("content.xml"))
        return ["".join(paragraph.itertext()) for paragraph in content.iter(f"{{{ODT_TEXT}}}p")]
    lines = got.decode("utf-8").split("\n")
    if name.endswith(".txt"):
        return lines[:-1]
    kept = [(i, line) for i, line in enumerate(sent.decode("utf-8").split("\n")) if i % 4 != 2]
    if any(i >= len(lines) or lines[i] != line for i, line in kept):
        return None
    return lines[2::4]


async def send_file(
    http: httpx.AsyncClient, args: argparse.Namespace, sentences: list[str], kind: int, tally: Tally
) -> list[str] | None:
    """One file translated and downloaded; its translated lines, or None after counting a failure."""
    name, data = file_of(sentences, kind)
    fields = {"source": "de", "target": "en", **({"api_key": args.api_key} if args.api_key else {})}
    try:
        answer = await http.post(f"{args.url}/translate_file", files={"file": (name, data)}, data=fields)
        if answer.status_code != 200:
            tally.failures[f"file HTTP {answer.status_code}"] += 1
            return None
        download = await http.get(answer.json()["translatedFileUrl"])
    except httpx.HTTPError as err:
        tally.failures[f"file {type(err).__name__}"] += 1
        return None
    if download.status_code != 200:
        tally.failures[f"download HTTP {download.status_code}"] += 1
        return None
    lines = translated_lines(name, data, download.content)
    if lines is None or len(lines) != len(sentences):
        tally.failures["file not kept"] += 1
        return None
    tally.files += 1
    return lines


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:5000", help="the server (default: %(default)s)")
    parser.add_argument("-n", "--clients", type=int, default=32, help="concurrent clients (default: 32)")
    parser.add_argument("-T", "--seconds", type=float, default=60, help="how long to send (default: 60)")
    parser.add_argument(
        "--lines", type=int, default=1, help="sentences per request, sent as a list (default: 1)"
    )
    parser.add_argument("--expected", type=Path, help="`mt translate` output for test2016, line by line")
    parser.add_argument("--source", type=Path, default=TEST2016, help="sentences to send (default: test2016)")
    parser.add_argument("--api-key", help="the api_key to send")
    parser.add_argument("--seed", type=int, default=1, help="random seed of the sentence choice")
    parser.add_argument(
        "--repeat",
        type=float,
        default=None,
        metavar="F",
        help="fresh sentences: each request takes the next unsent line of --source, in order, except a "
        f"share F of them, drawn from its first {POPULAR} lines (a load a sentence cache helps); "
        "default: every line drawn at random, repeats and all",
    )
    parser.add_argument(
        "--kill-worker",
        type=float,
        default=None,
        metavar="S",
        help="SIGKILL the server's first decoding worker S seconds into the load (same machine)",
    )
    parser.add_argument("--timeout", type=float, default=120, help="seconds to wait for one answer")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    parser.add_argument(
        "--files", type=int, default=0, metavar="K", help="make each client's every K-th request a file"
    )
    parser.add_argument(
        "--malformed",
        type=int,
        default=0,
        metavar="K",
        help="make each client's every K-th request malformed",
    )
    return parser.parse_args()


async def client(
    http: httpx.AsyncClient,
    args: argparse.Namespace,
    sources: list[str],
    expected: list[str] | None,
    rng: random.Random,
    deadline: float,
    tally: Tally,
) -> None:
    """One client: a request, wait for its answer, the next, until the deadline."""
    sent = 0
    while time.monotonic() < deadline:
        sent += 1
        picks = [pick(args, sources, rng, tally) for _ in range(args.lines)]
        if args.malformed and sent % args.malformed == 0:
            kinds = malformed_requests(sources[picks[0]], args.api_key)
            await send_malformed(http, args.url, kinds[(sent // args.malformed) % len(kinds)][1], tally)
            continue
        if args.files and sent % args.files == 0:
            picks = [rng.randrange(len(sources)) for _ in range(3)]
            start = time.monotonic()
            lines = await send_file(http, args, [sources[i] for i in picks], (sent // args.files) % 3, tally)
            if lines is not None:
                tally.latencies.append(time.monotonic() - start)
                tally.lines += len(picks)
                check(picks, lines, sources, expected, tally)
            continue
        body: dict[str, object] = {
            "q": [sources[i] for i in picks] if args.lines > 1 else sources[picks[0]],
            "source": "de",
            "target": "en",
            "format": "text",
        }
        if args.api_key:
            body["api_key"] = args.api_key
        start = time.monotonic()
        try:
            response = await http.post(f"{args.url}/translate", json=body)
        except httpx.HTTPError as err:
            tally.failures[type(err).__name__] += 1
            continue
        if response.status_code != 200:
            tally.failures[f"HTTP {response.status_code}"] += 1
            continue
        tally.latencies.append(time.monotonic() - start)
        tally.lines += len(picks)
        answer = response.json()["translatedText"]
        check(picks, answer if args.lines > 1 else [answer], sources, expected, tally)


def pick(args: argparse.Namespace, sources: list[str], rng: random.Random, tally: Tally) -> int:
    """The index of the next sentence to send (see --repeat)."""
    if args.repeat is None:
        return rng.randrange(len(sources))
    if rng.random() < args.repeat:
        return rng.randrange(min(POPULAR, len(sources)))
    tally.fresh += 1
    return POPULAR + (tally.fresh - 1) % max(1, len(sources) - POPULAR)


def check(
    picks: list[int], answers: list[str], sources: list[str], expected: list[str] | None, tally: Tally
) -> None:
    """Count the answers that differ from the expected translations of the sentences picked."""
    if expected is None:
        return
    for index, text in zip(picks, answers):
        tally.checked += 1
        if text != expected[index]:
            tally.mismatches.append((sources[index], expected[index], text))


async def send_malformed(
    http: httpx.AsyncClient, url: str, arguments: dict[str, object], tally: Tally
) -> None:
    """One malformed request; its status is counted, and whether it was a 4xx with a JSON error."""
    try:
        response = await http.post(f"{url}/translate", **arguments)  # type: ignore[arg-type]
    except httpx.HTTPError as err:
        tally.malformed[type(err).__name__] += 1
        tally.malformed_not_4xx += 1
        return
    tally.malformed[str(response.status_code)] += 1
    try:
        error = response.json().get("error")
    except ValueError:  # not JSON
        error = None
    if not (400 <= response.status_code < 500 and isinstance(error, str)):
        tally.malformed_not_4xx += 1


async def run(
    args: argparse.Namespace, sources: list[str], expected: list[str] | None
) -> tuple[Tally, float]:
    tally = Tally()
    limits = httpx.Limits(max_connections=args.clients, max_keepalive_connections=args.clients)
    async with httpx.AsyncClient(timeout=args.timeout, limits=limits) as http:
        (await http.get(f"{args.url}/health")).raise_for_status()  # fail at once if nothing listens
        start = time.monotonic()
        deadline = start + args.seconds
        rngs = [random.Random(args.seed * 1000 + i) for i in range(args.clients)]
        clients = [client(http, args, sources, expected, rng, deadline, tally) for rng in rngs]
        if args.kill_worker is not None:
            clients.append(kill_worker(http, args.url, args.kill_worker))
        await asyncio.gather(*clients)
        seconds = time.monotonic() - start
        tally.health = (await http.get(f"{args.url}/health")).json()
    return tally, seconds


async def kill_worker(http: httpx.AsyncClient, url: str, after: float) -> None:
    await asyncio.sleep(after)
    pids = (await http.get(f"{url}/health")).json().get("workerPids") or []
    if not pids:
        raise SystemExit("--kill-worker: the server has no decoding worker processes (see --workers)")
    os.kill(pids[0], signal.SIGKILL)


def percentile(values: list[float], fraction: float) -> float:
    """The nearest-rank percentile (0 for no values)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(fraction * len(ordered)) - 1))]


def report(args: argparse.Namespace, tally: Tally, seconds: float) -> dict[str, object]:
    done = len(tally.latencies)
    return {
        "url": args.url,
        "clients": args.clients,
        "lines_per_request": args.lines,
        "seconds": round(seconds, 2),
        "requests": done,
        "requests_per_s": round(done / seconds, 2),
        "lines_per_s": round(tally.lines / seconds, 2),
        "latency_p50_ms": round(1000 * percentile(tally.latencies, 0.50), 1),
        "latency_p99_ms": round(1000 * percentile(tally.latencies, 0.99), 1),
        "failed": sum(tally.failures.values()),
        "failures": dict(tally.failures),
        "checked": tally.checked,
        "mismatched": len(tally.mismatches),
        "malformed": sum(tally.malformed.values()),
        "malformed_statuses": dict(tally.malformed),
        "malformed_not_4xx": tally.malformed_not_4xx,
        "files": tally.files,
        "fresh_lines": tally.fresh,
        "cache_hits": tally.health.get("cacheHits"),
        "cache_misses": tally.health.get("cacheMisses"),
        "server_batches": tally.health.get("batches"),
        "server_lines_decoded": tally.health.get("lines"),
        "worker_restarts": tally.health.get("workerRestarts"),
    }


def main() -> int:
    args = parse_args()
    sources = read_lines(args.source)
    expected = read_lines(args.expected) if args.expected is not None else None
    if expected is not None and len(expected) != len(sources):
        sys.exit(f"error: --expected has {len(expected)} lines, {args.source} has {len(sources)}")
    try:
        tally, seconds = asyncio.run(run(args, sources, expected))
    except httpx.HTTPError as err:
        sys.exit(f"error: cannot reach {args.url}: {err}")
    result = report(args, tally, seconds)
    if args.json:
        print(json.dumps(result))
    else:
        print(
            f"{result['requests']} requests in {result['seconds']} s from {args.clients} clients: "
            f"{result['requests_per_s']} requests/s, {result['lines_per_s']} lines/s, "
            f"latency p50 {result['latency_p50_ms']} ms, p99 {result['latency_p99_ms']} ms, "
            f"failed {result['failed']} {result['failures'] or ''}".rstrip()
        )
        if expected is not None:
            print(f"checked {tally.checked} answers against {args.expected}: {len(tally.mismatches)} differ")
            for source, wanted, got in tally.mismatches[:3]:
                print(f"  {source}\n    expected: {wanted}\n    answered: {got}")
        if args.malformed:
            print(
                f"malformed: {result['malformed']} requests, statuses {result['malformed_statuses']}, "
                f"{result['malformed_not_4xx']} not a 4xx with a JSON error"
            )
    return 1 if result["failed"] or result["malformed_not_4xx"] else 0


if __name__ == "__main__":
    sys.exit(main())
