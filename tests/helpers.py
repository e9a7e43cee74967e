"""What more than one test module uses, other than fixtures (those are in conftest.py): the
shipped recipes and the fast training overrides, the tiny corpus and the many-to-English slices
the fixtures build, child processes started and ended as a terminal would, random models for the
search tests, and a `mt serve` process with the requests the serve tests send it. Test modules
import from here (``from helpers import ...``) or from marian_models.py, never from one another
nor from conftest.py (test_package checks it).

Heavy imports (torch, the model) are made inside the functions that need them: conftest imports
this module in every session, including those that never build a model.
"""

from __future__ import annotations

import collections
import io
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import pytest

from mt_cli.config.options import TranslateOptions
from mt_cli.disk.reading import read_lines
from mt_cli.disk.resources import SHIPPED_MULTI30K

if TYPE_CHECKING:
    import datasets
    from torch import Tensor

    from mt_cli.config.options import Sampling
    from mt_cli.config.sections import Config
    from mt_cli.data.prepare import TrainingData
    from mt_cli.decode.ctranslate2 import CTranslate2Engine
    from mt_cli.decode.hypotheses import Decoder, Found
    from mt_cli.decode.results import Translation
    from mt_cli.decode.translator import Translator
    from mt_cli.model.transformer import Transformer
    from mt_cli.text.tokenizer import Tokenizer

# --- the recipes, the tiny corpus and the many-to-English slices ------------------------------

CONFIGS = Path(__file__).resolve().parent.parent / "configs"
# Small, deterministic, quick: fp32, no BLEU during validation, no test scoring at the end.
FAST_TRAINING = [
    "data.train_limit=800",
    "train.amp=off",
    "train.val_bleu=false",
    "train.test_at_end=false",
    "train.max_tokens=1024",
    "train.log_every_steps=1",
    "train.save_every_steps=1000",
]


def torchrun_train(torchrun_args: Sequence[str], run_dir: Path, overrides: Sequence[str]) -> list[str]:
    """The command line of `mt train --config tiny` under torchrun with ``torchrun_args``. As
    documented, the run is --run-dir: torchrun's parser takes --run for its own --run-path."""
    sets = [arg for override in overrides for arg in ("--set", override)]
    return [sys.executable, "-m", "torch.distributed.run", *torchrun_args, "-m", "mt_cli", "train",
            "--config", "tiny", "--run-dir", str(run_dir), *sets]  # fmt: skip


def quiet(message: str) -> None:
    """A log that says nothing."""


@dataclass(frozen=True)
class TinyCorpus:
    """The tiny recipe's evaluation splits and its two tokenizers, saved in ``root``."""

    root: Path
    splits: datasets.DatasetDict
    src_tok: Tokenizer
    tgt_tok: Tokenizer

    def training_data(self, cfg: Config) -> TrainingData:
        """What the trainer reads for ``cfg``; its prepared corpus goes under ``root`` (shared)."""
        from mt_cli.data.prepare import prepare_corpus, training_data

        toks = (self.src_tok, self.tgt_tok)
        return training_data(cfg, self.splits, *toks, prepare_corpus(cfg, self.root, *toks, quiet))


MANY_TO_ENGLISH_SOURCES = ("de", "fr", "cs")
MANY_TO_ENGLISH_SLICES = {"train": ("train", 600), "val": ("val", 30), "test2016": ("test_2016_flickr", 30)}
MANY_TO_ENGLISH_LINE = 3  # the test sentence: line 4 of test2016 in each language (the same image)


def many_to_english_corpora(root: Path) -> list[dict[str, Any]]:
    """A files corpus per source language into English: slices of the shipped Multi30k."""
    for split, (stem, count) in MANY_TO_ENGLISH_SLICES.items():
        for lang in (*MANY_TO_ENGLISH_SOURCES, "en"):
            lines = read_lines(SHIPPED_MULTI30K / f"{stem}.{lang}.gz")[:count]
            (root / f"{split}.{lang}").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return [
        {
            "source": "files",
            "src_lang": lang,
            "files": {
                split: [str(root / f"{split}.{lang}"), str(root / f"{split}.en")]
                for split in MANY_TO_ENGLISH_SLICES
            },
        }
        for lang in MANY_TO_ENGLISH_SOURCES
    ]


# --- child processes -------------------------------------------------------------------------

SUITE_MARK = "MT_TESTS_SUITE_PID"  # in the environment of every process the suite starts


def sigint_at_its_default() -> None:
    """In the child, before exec: SIGINT back at its default, so Python installs its own handler
    and Ctrl-C is a KeyboardInterrupt. A job started in the background (``nohup``, ``&``, a CI
    runner) starts with SIGINT ignored, and a child inherits that: it would never see the signal."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start_child(command: Sequence[str], **popen: Any) -> subprocess.Popen:
    """``command`` as a terminal starts it: SIGINT at its default, in a process group of its own
    (the group holds whatever it starts, decoding workers included; :func:`end_group` ends it)."""
    return subprocess.Popen(command, start_new_session=True, preexec_fn=sigint_at_its_default, **popen)


def end_group(process: subprocess.Popen) -> None:
    """SIGKILL the process group ``process`` leads (whatever of it is left, even once the leader
    has exited), then reap the leader."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, parent pid) of ``pid`` from /proc, or None once it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = stat[stat.rindex(")") + 2 :].split()  # the name in parentheses may hold spaces
    return fields[0], int(fields[1])


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (is neither gone nor a zombie); /proc may vanish between open and read."""
    stat = _stat(pid)
    return stat is not None and stat[0] != "Z"


def _marked(pid: int, mark: bytes) -> bool:
    try:
        return mark in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except (FileNotFoundError, PermissionError, ProcessLookupError):
        return False


def command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except (FileNotFoundError, ProcessLookupError):
        return "?"


# Helpers multiprocessing starts in the pytest process itself; they end with it.
_OWN_HELPERS = ("multiprocessing.resource_tracker", "multiprocessing.forkserver")


def processes_left(root: int) -> dict[int, str]:
    """Every live process below ``root`` (pid: command line): its descendants by parent pid, and
    any process whose environment carries ``SUITE_MARK=root`` (one whose parent died was handed
    to init and is no descendant any more). Not multiprocessing's own helpers, nor forks of
    ``root`` itself (decoding workers of an engine in this process: they die with it)."""
    stats = {
        int(entry.name): _stat(int(entry.name)) for entry in Path("/proc").iterdir() if entry.name.isdigit()
    }
    live = {pid: stat[1] for pid, stat in stats.items() if stat is not None and stat[0] != "Z"}
    below, grew = {root}, True
    while grew:
        more = {pid for pid, parent in live.items() if parent in below} - below
        below |= more
        grew = bool(more)
    mark = f"{SUITE_MARK}={root}".encode()
    below |= {pid for pid in live if _marked(pid, mark)}
    below.discard(root)
    found = {pid: command_line(pid) for pid in below if pid in live}
    own = command_line(root)
    return {
        pid: line
        for pid, line in found.items()
        if not any(name in line for name in _OWN_HELPERS) and not (live[pid] == root and line == own)
    }


def wait_until(condition: Any, seconds: float = 30.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return bool(condition())


# --- random models for the search, sampling, scoring, ensemble and alignment tests ------------

VOCAB = 40


def random_model(seed: int = 0) -> Transformer:
    import torch

    from mt_cli.config.sections import ModelConfig
    from mt_cli.model.transformer import build_model

    torch.manual_seed(seed)
    cfg = ModelConfig(
        d_model=32, n_heads=4, d_ff=64, encoder_layers=2, decoder_layers=2, dropout=0.0, max_positions=64
    )
    return build_model(cfg, VOCAB, VOCAB).eval()


def other_model(seed: int = 10, vocab: int = VOCAB) -> Transformer:
    """A different architecture on the same vocabulary: wider, deeper decoder, pre-norm."""
    import torch

    from mt_cli.config.sections import ModelConfig
    from mt_cli.model.transformer import build_model

    torch.manual_seed(seed)
    cfg = ModelConfig(
        d_model=48,
        n_heads=6,
        d_ff=96,
        encoder_layers=1,
        decoder_layers=3,
        dropout=0.0,
        max_positions=48,
        norm_first=True,
    )
    return build_model(cfg, vocab, vocab).eval()


def random_sources(n: int, seed: int = 1) -> list[list[int]]:
    import torch

    from mt_cli.specials import EOS_ID

    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, 12, (n,), generator=g).tolist()
    return [torch.randint(4, VOCAB, (length,), generator=g).tolist() + [EOS_ID] for length in lengths]


def sample(model: Decoder, sources: list[list[int]], how: Sampling, seeds: list[int]) -> list[Found]:
    from mt_cli.data.batch import pad_sources
    from mt_cli.decode.sampling import sample_search

    src, src_mask = pad_sources(sources)
    return sample_search(model, src, src_mask, 1.5, 6, how, seeds)


def greedy_tokens(
    model: Decoder, src: Tensor, src_mask: Tensor, max_len_a: float, max_len_b: int
) -> list[list[int]]:
    """Each source's greedy search tokens, found as mt's engine finds them (unscored)."""
    from mt_cli.decode.search import ModelSearches

    found = ModelSearches(model, src, src_mask, max_len_a, max_len_b).greedy(0.0, scored=False)
    return [hypotheses[0].tokens for hypotheses in found]


def assert_ctranslate2_searches_agree(
    ours: Translator, engine: CTranslate2Engine, lines: list[str], options: TranslateOptions
) -> list[Translation]:
    """A run's fp32 CTranslate2 export finds what mt fp32 finds, line for line, on the lines where
    neither engine's best ran to its length limit (there mt scores a forced EOS and CTranslate2
    stops). Greedy search must agree everywhere. Beam search may differ on a few lines and for two
    reasons that are not the export's: a near-tie that the last bits of fp32 tip (the tiny test
    model, trained on the machine that runs the tests, has different ties on each CPU), and the
    stopping rules (mt ends a sentence once k hypotheses have finished; CTranslate2 has its own
    rule and can go on to a longer, better-normalised one). On each such line both engines must
    give both hypotheses the same log-probability: a wrong export scores differently. Returns
    CTranslate2's translations."""
    from mt_cli.decode.hypotheses import output_limit

    found, theirs = ours.translate(lines, options), engine.translate(lines, options)
    dec, positions = ours.card.decode, ours.card.model.max_positions
    sources = ours.encode_sources(lines, warn=quiet)
    limits = [output_limit(len(ids), dec.max_len_a, dec.max_len_b, positions) for ids in sources]
    ended = [
        i
        for i, limit in enumerate(limits)
        if max(len(found[i].best.tokens), len(theirs[i].best.tokens)) < limit - 1
    ]
    assert len(ended) >= len(lines) // 4  # a tiny model has its runaways
    differ = [i for i in ended if theirs[i].text != found[i].text]
    assert len(differ) <= (0 if options.beam == 1 else max(1, len(ended) // 25)), differ
    for i in differ:
        pair = ([lines[i]] * 2, [found[i].text, theirs[i].text])
        by_mt, by_export = ([s.log_prob for s in e.score(*pair)] for e in (ours, engine))
        assert by_export == pytest.approx(by_mt, abs=1e-3), (i, pair[1], by_mt, by_export)
    return theirs


# --- `mt serve` as a process, and what is sent to it -----------------------------------------

READY = re.compile(r"^mt serve: .* at (http://\S+)")
PAIR = {"source": "de", "target": "en"}


@dataclass
class ServeProcess:
    """A running `mt serve` and everything it wrote to stderr."""

    process: subprocess.Popen[str]
    url: str = ""
    stderr: list[str] = field(default_factory=list)

    def stop(self, timeout: float = 60) -> int:
        """SIGTERM, then its exit code once it has finished; killed (with all it started) if it
        has not finished within ``timeout``."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise

    def kill(self) -> None:
        """SIGKILL it and whatever it started (a test that failed half-way)."""
        end_group(self.process)


def start_server(run: Path, *options: str, timeout: float = 120) -> ServeProcess:
    """`mt serve` on a free port (--port 0), once its startup line names the URL."""
    command = [sys.executable, "-m", "mt_cli", "serve", "--run", str(run), "--port", "0", "--device", "cpu"]
    process = start_child([*command, *options], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    server, ready = ServeProcess(process), threading.Event()

    def read_stderr() -> None:  # read to the end, so a chatty server never blocks on a full pipe
        for line in process.stderr:  # type: ignore[union-attr]
            server.stderr.append(line)
            if match := READY.match(line):
                server.url = match.group(1)
                ready.set()
        ready.set()

    threading.Thread(target=read_stderr, daemon=True).start()
    if not ready.wait(timeout) or not server.url:
        server.kill()
        pytest.fail(f"mt serve did not start:\n{''.join(server.stderr)}")
    return server


def sentences_of_one_length(translator: Any) -> list[str]:
    """16 test2016 sentences of one source length (in pieces), the most common one."""
    sources = read_lines(SHIPPED_MULTI30K / "test_2016_flickr.de.gz")
    by_length = collections.defaultdict(list)
    for sentence, ids in zip(sources, translator.encode_sources(sources, lambda message: None)):
        by_length[len(ids)].append(sentence)
    return max(by_length.values(), key=len)[:16]


async def in_process(app: Any, scenario: Any) -> Any:
    """``scenario(http)`` against ``app`` with its startup and shutdown run."""
    import httpx

    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://app", timeout=10) as http:
            return await scenario(http)


def address(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    return parts.hostname or "127.0.0.1", parts.port or 80


def raw_post(path: str, body: bytes, length: int | None = None) -> bytes:
    """A raw HTTP/1.1 POST of a JSON body; ``length`` may claim more bytes than ``body`` has."""
    head = f"POST {path} HTTP/1.1\r\nHost: mt\r\nContent-Type: application/json\r\n"
    return f"{head}Content-Length: {len(body) if length is None else length}\r\n\r\n".encode() + body


BEAM = 4  # max(the tiny recipe's beam 3, 3 alternatives + 1)


def n_best_rows(run: Path, lines: list[str], folder: Path, *options: str) -> dict[str, list[str]]:
    """Each line's hypotheses, best first, as `mt translate --n-best 4 --beam 4` prints them."""
    (folder / "in.de").write_text("\n".join(lines) + "\n", encoding="utf-8")
    command = [sys.executable, "-m", "mt_cli", "translate", "--run", str(run), "--device", "cpu", *options]
    command += ["--n-best", "4", "--beam", str(BEAM), "-i", str(folder / "in.de")]
    printed = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    rows: list[list[str]] = [[] for _ in lines]
    for row in printed.splitlines():
        number, text, _ = row.split(" ||| ")
        rows[int(number)].append(text)
    return dict(zip(lines, rows))


def check_alternatives(url: str, rows: dict[str, list[str]]) -> None:
    """Three alternatives per text, each `mt translate --n-best 4` rows 2 to 4 of its line, for a
    string q (JSON and form), a list q and a text of several lines."""
    import httpx

    lines = list(rows)
    for hyps in rows.values():  # else the comparison below would prove less than it says
        assert len(hyps) == 4 and len(set(hyps)) == 4, hyps
    with httpx.Client(timeout=60) as http:
        for line in lines:
            one = http.post(f"{url}/translate", json={"q": line, **PAIR, "alternatives": 3}).json()
            assert one == {"translatedText": rows[line][0], "alternatives": rows[line][1:]}
            form = http.post(f"{url}/translate", data={"q": line, **PAIR, "alternatives": "3"}).json()
            assert form == one
        listed = http.post(f"{url}/translate", json={"q": lines, **PAIR, "alternatives": 3}).json()
        assert listed == {
            "translatedText": [rows[line][0] for line in lines],
            "alternatives": [rows[line][1:] for line in lines],
        }
        text = http.post(f"{url}/translate", json={"q": "\n".join(lines), **PAIR, "alternatives": 3}).json()
        assert text == {
            "translatedText": "\n".join(rows[line][0] for line in lines),
            "alternatives": ["\n".join(rows[line][k] for line in lines) for k in (1, 2, 3)],
        }


def word_file() -> bytes:
    """A .docx of two German paragraphs (bold and italic runs inside sentences, a tab), a table
    cell and a header, as python-docx writes it."""
    import docx

    document = docx.Document()
    paragraph = document.add_paragraph("Ein ")
    paragraph.add_run("Mann").bold = True
    paragraph.add_run(" fährt Fahrrad. Zwei ")
    paragraph.add_run("Hunde").italic = True
    paragraph.add_run(" spielen.\tEnde")
    document.add_paragraph("42")
    document.add_table(rows=1, cols=1).cell(0, 0).text = "Im Tisch. Hallo."
    document.sections[0].header.paragraphs[0].text = "Kopf."
    written = io.BytesIO()
    document.save(written)
    return written.getvalue()


def slides_file() -> bytes:
    """A .pptx of two slides, as python-pptx writes it: a title, a body paragraph whose sentence
    has a bold run inside it, and speaker notes on the first; a title on the second."""
    import pptx

    presentation = pptx.Presentation()
    first = presentation.slides.add_slide(presentation.slide_layouts[1])
    first.shapes.title.text = "Ein Titel."
    paragraph = first.placeholders[1].text_frame.paragraphs[0]
    for text, bold in (("Ein ", None), ("Mann", True), (" fährt Fahrrad. Zwei Hunde.", None)):
        run = paragraph.add_run()
        run.text, run.font.bold = text, bold
    first.notes_slide.notes_text_frame.text = "Eine Notiz."
    presentation.slides.add_slide(presentation.slide_layouts[5]).shapes.title.text = "Zweite Folie."
    written = io.BytesIO()
    presentation.save(written)
    return written.getvalue()


ODF_NAMESPACES = " ".join(
    f'xmlns:{prefix}="urn:oasis:names:tc:opendocument:xmlns:{name}"'
    for prefix, name in [
        ("office", "office:1.0"), ("style", "style:1.0"), ("text", "text:1.0"), ("table", "table:1.0"),
        ("draw", "drawing:1.0"), ("presentation", "presentation:1.0"), ("fo", "xsl-fo-compatible:1.0"),
        ("svg", "svg-compatible:1.0"),
    ]
)  # fmt: skip
ODF_STYLES = (
    '<style:style style:name="T1" style:family="text"><style:text-properties fo:font-weight="bold"/>'
    '</style:style><style:style style:name="T2" style:family="text">'
    '<style:text-properties fo:font-style="italic"/></style:style>'
)
ODT_BODY = (
    '<office:text><text:h text:outline-level="1">Eine Überschrift.</text:h>'
    '<text:p>Ein <text:span text:style-name="T1">Mann</text:span> fährt Fahrrad. Zwei<text:s/>'
    '<text:span text:style-name="T2">Hunde</text:span> spielen.<text:tab/>Ende</text:p>'
    "<text:p>42</text:p><text:list><text:list-item><text:p>Im Garten.</text:p></text:list-item></text:list>"
    '<text:p>Mit Notiz<text:note text:id="n1" text:note-class="footnote"><text:note-citation>1'
    "</text:note-citation><text:note-body><text:p>Die Notiz.</text:p></text:note-body></text:note>"
    " hier.</text:p></office:text>"
)
ODP_PAGE = (
    '<draw:page draw:name="{name}" draw:master-page-name="Default"><draw:frame svg:x="2cm" svg:y="2cm" '
    'svg:width="20cm" svg:height="4cm"><draw:text-box>{text}</draw:text-box></draw:frame>'
    '<presentation:notes><draw:frame svg:x="2cm" svg:y="12cm" svg:width="17cm" svg:height="10cm">'
    "<draw:text-box><text:p>{notes}</text:p></draw:text-box></draw:frame></presentation:notes></draw:page>"
)
ODP_BODY = "<office:presentation>{}</office:presentation>".format(
    ODP_PAGE.format(
        name="p1",
        text='<text:p>Ein <text:span text:style-name="T1">Mann</text:span> fährt Fahrrad.</text:p>',
        notes="Eine Notiz.",
    )
    + ODP_PAGE.format(name="p2", text="<text:p>Zweite Folie.</text:p>", notes="")
)


def odf_file(kind: str = "text", body: str | None = None) -> bytes:
    """An OpenDocument text (``kind`` "text": a heading, a paragraph with bold and italic spans
    inside sentences, a space and a tab, a list, a footnote, a page header) or presentation
    ("presentation": two slides, each with a text box and notes), as zip and XML, with a
    picture that only the manifest names."""
    import zipfile

    body = body or (ODT_BODY if kind == "text" else ODP_BODY)
    header = "<style:header><text:p>Kopf.</text:p></style:header>" if kind == "text" else ""
    declaration = '<?xml version="1.0" encoding="UTF-8"?>\n'
    content = (
        f'{declaration}<office:document-content {ODF_NAMESPACES} office:version="1.3">'
        f"<office:automatic-styles>{ODF_STYLES}</office:automatic-styles>"
        f"<office:body>{body}</office:body></office:document-content>"
    )
    styles = (
        f'{declaration}<office:document-styles {ODF_NAMESPACES} office:version="1.3">'
        '<office:automatic-styles><style:page-layout style:name="pm1"/></office:automatic-styles>'
        "<office:master-styles>"
        f'<style:master-page style:name="{"Standard" if kind == "text" else "Default"}" '
        f'style:page-layout-name="pm1">{header}</style:master-page></office:master-styles></office:document-styles>'
    )
    media = f"application/vnd.oasis.opendocument.{kind}"
    entries = "".join(
        f'<manifest:file-entry manifest:full-path="{path}" manifest:media-type="{kind}"{version}/>'
        for path, kind, version in [
            ("/", media, ' manifest:version="1.3"'), ("content.xml", "text/xml", ""),
            ("styles.xml", "text/xml", ""), ("Pictures/unnamed.png", "image/png", ""),
        ]
    )  # fmt: skip
    manifest = (
        f'{declaration}<manifest:manifest xmlns:manifest="urn:oasis:names:tc:opendocument:xmlns:manifest:1.0"'
        f' manifest:version="1.3">{entries}</manifest:manifest>'
    )
    written = io.BytesIO()
    with zipfile.ZipFile(written, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(zipfile.ZipInfo("mimetype", (2020, 1, 2, 3, 4, 6)), media, zipfile.ZIP_STORED)
        for name, data in [
            ("content.xml", content), ("styles.xml", styles), ("META-INF/manifest.xml", manifest),
            ("Pictures/unnamed.png", b"\x89PNG not really"),
        ]:  # fmt: skip
            archive.writestr(zipfile.ZipInfo(name, (2020, 1, 2, 3, 4, 6)), data, zipfile.ZIP_DEFLATED)
    return written.getvalue()


XHTML = (
    '<?xml version="1.0" encoding="utf-8"?>\n<!DOCTYPE html>\n<html xmlns="http://www.w3.org/1999/xhtml" '
    'xmlns:epub="http://www.idpf.org/2007/ops"><head><title>{title}</title></head><body>{body}</body></html>'
)
CHAPTERS = {
    "Text/eins.xhtml": XHTML.format(
        title="Kapitel eins",
        body='<h1>Kapitel eins</h1><p>Ein <em class="x">Mann</em> fährt Fahrrad. Zwei Hunde spielen.'
        "<br/>Eine Frau liest.</p><p>42</p><!-- Ein Kommentar. --><ul><li>Im <b>Garten</b>.</li></ul>"
        '<p>Ein Bild <img src="../Images/a.png" alt="Ein Bild"/> hier.</p><script>var x = "Nein.";</script>',
    ),
    "Text/zwei.xhtml": XHTML.format(title="Kapitel zwei", body="<div><p>Ein Hund.</p> Und eine Katze.</div>"),
}


def epub_file(chapters: dict[str, str] | None = None) -> bytes:
    """An EPUB 3 of two chapters (XHTML with inline markup, a line break, an image, a script and
    a comment) in its spine, a navigation document outside it, a stylesheet and an image."""
    import zipfile

    chapters = CHAPTERS if chapters is None else chapters
    items = "".join(
        f'<item id="c{number}" href="{name}" media-type="application/xhtml+xml"/>'
        for number, name in enumerate(chapters)
    )
    spine = "".join(f'<itemref idref="c{number}"/>' for number in range(len(chapters)))
    opf = (
        '<?xml version="1.0" encoding="utf-8"?>\n<package xmlns="http://www.idpf.org/2007/opf" version="3.0" '
        'unique-identifier="id"><metadata xmlns:dc="http://purl.org/dc/elements/1.1/">'
        '<dc:identifier id="id">urn:uuid:0</dc:identifier><dc:title>Ein Buch</dc:title>'
        '<dc:language>de</dc:language><meta property="dcterms:modified">2020-01-01T00:00:00Z</meta>'
        f'</metadata><manifest><item id="nav" href="nav.xhtml" media-type="application/xhtml+xml" '
        f'properties="nav"/>{items}<item id="img" href="Images/a.png" media-type="image/png"/>'
        '<item id="css" href="Styles/s.css" media-type="text/css"/>'
        f"</manifest><spine>{spine}</spine></package>"
    )
    container = (
        '<?xml version="1.0"?>\n<container version="1.0" '
        'xmlns="urn:oasis:names:tc:opendocument:xmlns:container">'
        '<rootfiles><rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/>'
        "</rootfiles></container>"
    )
    nav = XHTML.format(
        title="Inhalt",
        body='<nav epub:type="toc"><ol><li><a href="Text/eins.xhtml">Kapitel eins</a></li></ol></nav>',
    )
    members = {
        "META-INF/container.xml": container, "OEBPS/content.opf": opf, "OEBPS/nav.xhtml": nav,
        **{f"OEBPS/{name}": text for name, text in chapters.items()},
        "OEBPS/Styles/s.css": "p { margin: 0 }", "OEBPS/Images/a.png": b"\x89PNG not really",
    }  # fmt: skip
    written = io.BytesIO()
    with zipfile.ZipFile(written, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("mimetype", "application/epub+zip", zipfile.ZIP_STORED)
        for name, data in members.items():
            archive.writestr(name, data)
    return written.getvalue()


class UpperEngine:
    """A de -> en engine that upper-cases each line: the serve tests' stand-in for a model."""

    src_lang, tgt_lang, beam_size, origin, parallel_batches = "de", "en", 4, "a fake", 1
    directions = (("de", "en"),)

    def count_pieces(self, lines: list[str]) -> list[int]:
        return [len(line.split()) + 1 for line in lines]

    def resolve(self, options: TranslateOptions) -> TranslateOptions:
        return options

    def translate_lines(self, lines: Sequence[str], options: TranslateOptions, **_: object) -> list[str]:
        return [line.upper() for line in lines]
