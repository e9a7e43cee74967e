# From the repository root, with a run trained with data.placeholders (configs/multi30k.yaml and
# -s data.placeholders=0.2):
#   python scripts/placeholder-test.py --run RUN -o docs/logs/placeholders/results.json
"""Placeholders kept through every way into mt: test2016 sentences with pieces put in (``{{...}}``,
``{0}``, ``%s``, ``%d``, ``%1$s``, URLs, e-mail addresses, ``<x/>``-style tags: one to three a
sentence, each at a random word boundary, seeded), translated by `mt translate` (a file), the
Python API, and `mt serve` over HTTP (a list ``q`` to /translate, and the text format), each
with mt's engine and the run's CTranslate2 export (the engines' default compute types).

A line counts as kept when each piece put into it is in its translation exactly as often as in
the source, and no placeholder symbol is left. Also reported: the lines the model carried
whole on its own, before ``restore`` mended anything (the API's warnings count the others).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import httpx

import mt_cli
from mt_cli.disk.reading import read_lines
from mt_cli.disk.resources import SHIPPED_MULTI30K

PIECES = [
    "{{user.name}}",
    "{{count}}",
    "{0}",
    "{name}",
    "%s",
    "%d",
    "%1$s",
    "%2$s",
    "https://example.com/path?id=42",
    "www.example.org/help",
    "info@example.com",
    "<x/>",
    '<g id="1"/>',
]
READY = re.compile(r"mt serve: .* at (http://\S+) ")


def test_lines(count: int, seed: int) -> list[tuple[str, list[str]]]:
    """(sentence with pieces put in, the pieces) for the first ``count`` test2016 sentences."""
    rng = random.Random(seed)
    made = []
    for sentence in read_lines(SHIPPED_MULTI30K / "test_2016_flickr.de.gz")[:count]:
        words = sentence.split()
        pieces = [rng.choice(PIECES) for _ in range(rng.randint(1, 3))]
        for piece in pieces:
            words.insert(rng.randint(0, len(words)), piece)
        made.append((" ".join(words), pieces))
    return made


def kept(source: str, pieces: list[str], translation: str) -> bool:
    return "<ph" not in translation and all(translation.count(p) == source.count(p) for p in set(pieces))


def by_cli(run: str, engine: str, sources: list[str], folder: Path) -> list[str]:
    given, out = folder / f"in-{engine}.txt", folder / f"out-{engine}.txt"
    given.write_text("\n".join(sources) + "\n", encoding="utf-8")
    command = [sys.executable, "-m", "mt_cli", "translate", "--run", run, "--engine", engine]
    subprocess.run([*command, "--device", "cpu", "-i", str(given), "-o", str(out)], check=True)
    return read_lines(out)


def by_api(run: str, engine: str, sources: list[str]) -> tuple[list[str], int]:
    """The translations, and how many lines the model carried whole (no warning)."""
    warnings: list[str] = []
    model = mt_cli.load(run, engine=engine, device="cpu", warn=warnings.append)
    texts = [t.text for t in model.translate(sources)]
    mended = sum("placeholder symbols" in warning for warning in warnings)
    return texts, len(sources) - mended


def by_serve(run: str, engine: str, sources: list[str]) -> dict[str, list[str]]:
    command = [sys.executable, "-m", "mt_cli", "serve", "--run", run, "--port", "0", "--engine", engine]
    server = subprocess.Popen([*command, "--device", "cpu"], stderr=subprocess.PIPE, text=True)
    try:
        for line in server.stderr:  # type: ignore[union-attr]
            if match := READY.match(line):
                url = match.group(1)
                break
        else:
            raise SystemExit(f"mt serve did not start (exit {server.wait()})")
        with httpx.Client(base_url=url, timeout=300) as client:
            listed = []
            for start in range(0, len(sources), 25):  # lists within the server's characters a request
                answer = client.post(
                    "/translate", json={"q": sources[start : start + 25], "source": "de", "target": "en"}
                )
                answer.raise_for_status()
                listed += answer.json()["translatedText"]
            texts = []
            for sentence in sources:  # one text a request, as a page would send it
                answer = client.post("/translate", json={"q": sentence, "source": "de", "target": "en"})
                answer.raise_for_status()
                texts.append(answer.json()["translatedText"])
        return {"serve (q list)": listed, "serve (one text a request)": texts}
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", required=True)
    parser.add_argument("--lines", type=int, default=250)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("-o", "--output", type=Path, required=True)
    args = parser.parse_args()
    made = test_lines(args.lines, args.seed)
    sources = [source for source, _ in made]
    result: dict[str, object] = {"run": args.run, "lines": len(made), "pieces": sum(len(p) for _, p in made)}
    paths: dict[str, dict[str, object]] = {}
    with tempfile.TemporaryDirectory() as folder:
        for engine in ("mt", "ctranslate2"):
            api, whole = by_api(args.run, engine, sources)
            outputs = {"mt translate": by_cli(args.run, engine, sources, Path(folder)), "API": api}
            outputs.update(by_serve(args.run, engine, sources))
            for way, texts in outputs.items():
                good = sum(
                    kept(source, pieces, text) for (source, pieces), text in zip(made, texts, strict=True)
                )
                paths[f"{way}, {engine}"] = {"kept": good, "share": round(good / len(made), 4)}
            paths[f"API, {engine}"]["carried_whole_by_the_model"] = whole
            print(json.dumps({k: v for k, v in paths.items() if k.endswith(engine)}), file=sys.stderr)
    result["paths"] = paths
    result["examples"] = [{"source": s} for s in sources[:5]]
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(json.dumps(result, ensure_ascii=False))


if __name__ == "__main__":
    main()
