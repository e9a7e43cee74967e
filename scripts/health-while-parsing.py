# Against a running server (mt serve --run R --port 5000 &), from the repository root:
#   python scripts/health-while-parsing.py --url http://127.0.0.1:5000
"""How long GET /health takes while the server reads the largest documents it allows: an .html
file of --max-file-size bytes (1 MiB by default) of hostile markup (``<a `` repeated, which made
Python's html.parser quadratic) and of ordinary markup, and a /translate request of --max-chars
characters of HTML. /health is asked every 10 ms while each upload is read; prints one JSON line
per document: its status, seconds to answer and the slowest /health answer in milliseconds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

import httpx

SENTENCE = "<p>Ein <b>Hund</b> läuft über die <a href='/wiese'>Wiese</a>.</p>\n"


async def slowest_health(http: httpx.AsyncClient, url: str, done: asyncio.Event) -> float:
    slowest = 0.0
    while not done.is_set():
        started = time.monotonic()
        (await http.get(f"{url}/health")).raise_for_status()
        slowest = max(slowest, time.monotonic() - started)
        await asyncio.sleep(0.01)
    return slowest


async def measure(url: str, name: str, send: dict[str, object], path: str) -> dict[str, object]:
    async with httpx.AsyncClient(timeout=600) as http:
        done = asyncio.Event()
        watcher = asyncio.ensure_future(slowest_health(http, url, done))
        started = time.monotonic()
        answer = await http.post(f"{url}{path}", **send)  # type: ignore[arg-type]
        seconds = time.monotonic() - started
        done.set()
        slowest = await watcher
    return {
        "document": name,
        "status": answer.status_code,
        "answer": answer.text[:120],
        "seconds": round(seconds, 2),
        "slowest_health_ms": round(1000 * slowest, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:5000")
    parser.add_argument("--file-bytes", type=int, default=1 << 20, help="the server's --max-file-size")
    parser.add_argument("--chars", type=int, default=5000, help="the server's --max-chars")
    args = parser.parse_args()
    fields = {"source": "de", "target": "en"}
    hostile = ("<a " * (args.file_bytes // 3)).encode()
    ordinary = (SENTENCE * (args.file_bytes // len(SENTENCE.encode()))).encode()
    html_text = SENTENCE * (args.chars // len(SENTENCE))
    cases = [
        ("hostile .html file", {"files": {"file": ("a.html", hostile)}, "data": fields}, "/translate_file"),
        ("ordinary .html file", {"files": {"file": ("b.html", ordinary)}, "data": fields}, "/translate_file"),
        ("largest /translate HTML", {"json": {"q": html_text, "format": "html", **fields}}, "/translate"),
    ]
    for name, send, path in cases:
        print(json.dumps(asyncio.run(measure(args.url, name, send, path))), flush=True)


if __name__ == "__main__":
    main()
