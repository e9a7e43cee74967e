# From the repository root:  python scripts/sigterm-during-uploads.py --run RUN
"""SIGTERM to `mt serve` while it reads two 1 MiB .html uploads: one of hostile markup (``<a ``
repeated) and one of 20,000 distinct sentences. Prints the exit status, the seconds from the
signal to the exit (bounded by --timeout-graceful-shutdown, 8 s by default) and each upload's
answer (200 if it was finished in time, 503 if not)."""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import threading
import time

import httpx

MIB = 1 << 20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", required=True)
    parser.add_argument("--port", type=int, default=5095)
    args = parser.parse_args()
    command = [sys.executable, "-m", "mt_cli", "serve", "--run", args.run, "--port", str(args.port)]
    server = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    for line in server.stderr:  # type: ignore[union-attr]
        if line.startswith("mt serve:"):
            break
    hostile = ("<a " * (MIB // 3)).encode()
    sentences = b"".join(f"<p>Ein Hund Nummer {i} läuft.</p>\n".encode() for i in range(20000))[: MIB - 10]
    answers: dict[str, object] = {}

    def upload(name: str, data: bytes) -> None:
        url = f"http://127.0.0.1:{args.port}/translate_file"
        try:
            fields = {"source": "de", "target": "en"}
            answers[name] = httpx.post(url, files={"file": (name, data)}, data=fields, timeout=60).status_code
        except httpx.HTTPError as err:
            answers[name] = type(err).__name__

    uploads = [
        threading.Thread(target=upload, args=pair) for pair in (("a.html", hostile), ("b.html", sentences))
    ]
    for thread in uploads:
        thread.start()
    time.sleep(0.5)
    started = time.monotonic()
    server.send_signal(signal.SIGTERM)
    status = server.wait(60)
    seconds = time.monotonic() - started
    for thread in uploads:
        thread.join()
    print(json.dumps({"exit": status, "seconds_to_exit": round(seconds, 2), "answers": answers}))


if __name__ == "__main__":
    main()
