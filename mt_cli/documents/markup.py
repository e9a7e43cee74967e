"""HTML as a list of tokens that hold every character of the source, as written.

The tokenizer is CPython's ``html.parser`` (the one BeautifulSoup uses by default, and through it
LibreTranslate's HTML translation), chosen over a tree parser (lxml, html5lib, selectolax)
because it says where each token starts: mt cuts the source at those places and keeps each
tag, attribute, comment, doctype and entity byte for byte, changing only the text it translates.
A tree parser would serialize its own tree instead: attributes requoted, entities rewritten,
broken markup repaired. The tokens' source texts joined are the input, always.

Each token knows its context, from a stack of the open elements (an end tag closes the nearest
open element of its name and any inside it; one that closes nothing changes nothing):

* Text is translated unless it is inside ``script``, ``style``, ``pre``, ``textarea``, ``code``,
  ``kbd``, ``samp`` or ``var``, or inside an element whose nearest ``translate`` attribute says
  ``no`` (HTML's rule: ``translate="yes"`` inside it translates again).
* A tag of a text-level element (``b``, ``i``, ``a``, ``span``, ``code``, ``img`` ... the set
  ``INLINE``) sits inside a sentence; any other tag (``p``, ``div``, ``li``, ``br``, ``td`` ...,
  and unknown ones) ``breaks`` the text: no sentence crosses it.
"""

from __future__ import annotations

import enum
import html
from collections import Counter
from dataclasses import dataclass
from html.parser import HTMLParser

INLINE = frozenset(
    "a abbr acronym b bdi bdo big cite code data del dfn em font i img ins kbd mark q s samp small "
    "span strike strong sub sup time tt u var wbr".split()
)
UNTRANSLATED = frozenset("script style pre textarea code kbd samp var".split())
VOID = frozenset("area base br col embed hr img input link meta param source track wbr".split())


class Kind(enum.Enum):
    TEXT = "text"  # characters (entities decoded in ``text``)
    START = "start"  # a start tag
    END = "end"  # an end tag
    OTHER = "other"  # a comment, doctype, processing instruction, or bytes the parser skips


@dataclass(frozen=True)
class Token:
    kind: Kind
    raw: str  # the source text of the token
    text: str = ""  # TEXT: the characters it stands for
    tag: str = ""  # START, END: the element's name, lower case
    translatable: bool = False  # TEXT: in a context whose text is translated
    breaks: bool = False  # START, END: a block's edge, which no sentence crosses
    partner: int | None = None  # END: the index of the START it closes


@dataclass(frozen=True)
class _Event:
    start: int
    kind: Kind
    raw: str | None = None  # TEXT: its exact source text (None: up to the next event)
    tag: str = ""
    translate: bool | None = None  # START: its translate attribute (None: none, or neither yes nor no)
    void: bool = False  # START: an element without content (a void one, or written <x/>)


class _Scanner(HTMLParser):
    """Records where each token starts; ``convert_charrefs=False`` hands over text as written."""

    def __init__(self, source: str) -> None:
        super().__init__(convert_charrefs=False)
        self.source = source
        self.line_starts = [0] + [i + 1 for i, char in enumerate(source) if char == "\n"]
        self.events: list[_Event] = []

    def position(self) -> int:
        line, column = self.getpos()  # the parser counts lines by "\n" alone, as line_starts does
        return self.line_starts[line - 1] + column

    def handle_data(self, data: str) -> None:
        self.events.append(_Event(self.position(), Kind.TEXT, data))

    def handle_entityref(self, name: str) -> None:
        self._reference("&" + name)

    def handle_charref(self, name: str) -> None:
        self._reference("&#" + name)

    def _reference(self, raw: str) -> None:
        start = self.position()
        if self.source.startswith(";", start + len(raw)):
            raw += ";"
        self.events.append(_Event(start, Kind.TEXT, raw))

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.events.append(_Event(self.position(), Kind.START, None, tag, _translate(attrs), tag in VOID))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.events.append(_Event(self.position(), Kind.START, None, tag, _translate(attrs), True))

    def handle_endtag(self, tag: str) -> None:
        self.events.append(_Event(self.position(), Kind.END, None, tag))

    def handle_comment(self, data: str) -> None:
        self.events.append(_Event(self.position(), Kind.OTHER))

    handle_decl = handle_pi = unknown_decl = handle_comment

    def parse_marked_section(self, i: int, report: int = 1) -> int:
        # Python before 3.13.4 raises AssertionError on a malformed "<![...": HTML reads it as a
        # bogus comment up to the next ">", and so does mt (the failed attempt moved the position).
        line, column = self.lineno, self.offset
        try:
            return super().parse_marked_section(i, report)
        except AssertionError:
            self.lineno, self.offset = line, column
            return self.parse_bogus_comment(i)


def _translate(attrs: list[tuple[str, str | None]]) -> bool | None:
    values = [value for name, value in attrs if name == "translate"]
    if not values:
        return None
    value = (values[0] or "").strip().lower()
    return {"yes": True, "": True, "no": False}.get(value)


@dataclass(frozen=True)
class _Open:
    """An element still open: its name, its START token, and whether text inside it is translated."""

    tag: str
    index: int
    locked: bool  # inside an element whose text is never translated (``UNTRANSLATED``)
    translate: bool  # its nearest translate attribute's answer (True where there is none)


class _Elements:
    """The stack of open elements, with a count per name so that an end tag of an element that is
    not open is known at once (nested markup of any depth stays linear)."""

    def __init__(self) -> None:
        self.stack: list[_Open] = []
        self.open: Counter[str] = Counter()

    def translated(self) -> bool:
        top = self.stack[-1] if self.stack else None
        return top is None or (not top.locked and top.translate)

    def push(self, tag: str, index: int, translate: bool | None) -> None:
        top = self.stack[-1] if self.stack else None
        locked = tag in UNTRANSLATED or (top is not None and top.locked)
        inherited = True if top is None else top.translate
        self.stack.append(_Open(tag, index, locked, inherited if translate is None else translate))
        self.open[tag] += 1

    def close(self, tag: str) -> int | None:
        """Close the nearest open ``tag`` and every element inside it: the index of its START
        token, or None (nothing closed) if no ``tag`` is open."""
        if not self.open[tag]:
            return None
        while True:
            element = self.stack.pop()
            self.open[element.tag] -= 1
            if element.tag == tag:
                return element.index


def tokenize(source: str) -> list[Token]:
    """Every token of ``source`` in order, with its context; their ``raw`` joined is ``source``."""
    scanner = _Scanner(source)
    scanner.feed(source)
    scanner.close()
    tokens: list[Token] = []
    elements = _Elements()
    events, done = scanner.events, 0
    for index, event in enumerate(events):
        if event.start > done:  # bytes the parser passed over (such as "</>"): kept as they are
            tokens.append(Token(Kind.OTHER, source[done : event.start]))
        following = events[index + 1].start if index + 1 < len(events) else len(source)
        raw = source[event.start : following] if event.raw is None else event.raw
        breaks = event.tag not in INLINE
        if event.kind is Kind.TEXT:
            tokens.append(Token(Kind.TEXT, raw, html.unescape(raw), translatable=elements.translated()))
        elif event.kind is Kind.START:
            if not event.void:
                elements.push(event.tag, len(tokens), event.translate)
            tokens.append(Token(Kind.START, raw, tag=event.tag, breaks=breaks))
        elif event.kind is Kind.END:
            partner = elements.close(event.tag)
            tokens.append(Token(Kind.END, raw, tag=event.tag, breaks=breaks, partner=partner))
        else:
            tokens.append(Token(Kind.OTHER, raw))
        done = event.start + len(raw)
    if done < len(source):
        tokens.append(Token(Kind.OTHER, source[done:]))
    if "".join(token.raw for token in tokens) != source:
        raise RuntimeError("html.parser's token positions do not cover the source")
    return tokens
