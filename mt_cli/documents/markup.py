"""HTML as a list of tokens that hold every character of the source, as written.

mt cuts the source at the places where HTML's tokenizer (the WHATWG standard's, which every
browser runs) starts and ends each token, and keeps each tag, attribute, comment, doctype and
entity byte for byte, changing only the text it translates. A tree parser (lxml, html5lib,
selectolax) would serialize its own tree instead: attributes requoted, entities rewritten, broken
markup repaired. The tokens' source texts joined are the input, always.

The tokenizer is mt's own (``_Scanner``), a handful of compiled regular expressions applied once
each from left to right: linear in the input, whatever it holds. Python's ``html.parser``, used
before, rescans an unfinished tag on every ``<`` after it (60 KB of ``<a `` took 36 s, 1 MiB
hours), hides the rest of a page in a text after a bare ``&#``, translated an unclosed ``<!--``,
and changes its reading between Python releases. Where the input ends inside a tag, comment or
declaration, the rest is that markup, kept as written and never translated (a browser shows
none of it); a ``<`` that starts no markup (``a < b``, ``</`` at the end) and an ``&`` that starts
no character reference (``&#``, ``&x``) are text; NUL characters, which a browser does not show,
are kept where they are and never reach the engine.

Each token knows its context, from a stack of the open elements (an end tag closes the nearest
open element of its name and any inside it; one that closes nothing changes nothing):

* Text is translated unless it is inside ``script``, ``style``, ``pre``, ``textarea``, ``code``,
  ``kbd``, ``samp``, ``var`` or an element whose content HTML reads as raw text (``xmp``,
  ``iframe``, ``noembed``, ``noframes``, ``plaintext``), or inside an element whose nearest
  ``translate`` attribute says ``no`` (HTML's rule: ``translate="yes"`` inside it translates again).
* A tag of a text-level element (``b``, ``i``, ``a``, ``span``, ``code``, ``img`` ... the set
  ``INLINE``) sits inside a sentence; any other tag (``p``, ``div``, ``li``, ``br``, ``td`` ...,
  and unknown ones) ``breaks`` the text: no sentence crosses it.
"""

from __future__ import annotations

import enum
import html
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from html.entities import html5

INLINE = frozenset(
    "a abbr acronym b bdi bdo big cite code data del dfn em font i img ins kbd mark q s samp small "
    "span strike strong sub sup time tt u var wbr".split()
)
RAW_TEXT = frozenset("script style xmp iframe noembed noframes plaintext".split())  # content read as text
UNTRANSLATED = frozenset("pre textarea code kbd samp var".split()) | RAW_TEXT
VOID = frozenset("area base br col embed hr img input link meta param source track wbr".split())


class Kind(enum.Enum):
    TEXT = "text"  # characters (entities decoded in ``text``)
    START = "start"  # a start tag
    END = "end"  # an end tag
    OTHER = "other"  # a comment, doctype, bogus comment, markup the input ends in, NUL characters


@dataclass(frozen=True)
class Token:
    kind: Kind
    raw: str  # the source text of the token
    text: str = ""  # TEXT: the characters it stands for
    tag: str = ""  # START, END: the element's name, lower case
    translatable: bool = False  # TEXT: in a context whose text is translated
    breaks: bool = False  # START, END: a block's edge, which no sentence crosses
    partner: int | None = None  # END: the index of the START it closes


# A tag as the standard's tag states read it, matching only a whole tag (one that ends in ">").
# Each piece is as long as it can be (the lookaheads after names and values) and the attributes
# are one atomic group (a lookahead, which Python never re-enters, and a reference to what it
# matched): a tag that does not end fails after one pass, no piece retried shorter.
_S = "\t\n\f\r "  # HTML's whitespace, and CR (which a browser turns into a line feed first)
_VALUE = rf"\"[^\"]*\"|'[^']*'|[^{_S}>\"'][^{_S}>]*(?![^{_S}>])"
_ATTRIBUTE = (
    rf"[^{_S}/>][^{_S}/>=]*(?![^{_S}/>=])"  # a name ("=" may begin one)
    rf"(?:[{_S}]*=[{_S}]*(?:{_VALUE}|(?=>))|(?![{_S}]*=))"  # "=" and a value (maybe none), or no "="
)
_TAG = re.compile(
    rf"</?(?P<name>[A-Za-z][^{_S}/>]*)(?![^{_S}/>])"
    rf"(?=(?P<attributes>(?:[{_S}]+|/(?!>)|{_ATTRIBUTE})*))(?P=attributes)(?P<closed>/?)>"
)
_NAMED = re.compile(rf"(?P<name>[^{_S}/>][^{_S}/>=]*)(?:[{_S}]*=[{_S}]*(?P<value>{_VALUE})?)?")
_COMMENT_END = re.compile(r"--!?>")
_TEXT_ELEMENTS = RAW_TEXT | {"title", "textarea"}  # their content has no markup: text up to their end tag
_TEXT_END = {name: re.compile(rf"</{name}[{_S}/>]", re.IGNORECASE) for name in _TEXT_ELEMENTS - {"plaintext"}}
# A character reference as html.unescape finds one (a named one may be a longer name's prefix:
# "&amplifier" is "&" and "lifier"), or NULs, which a browser does not show: kept, never text.
_REFERENCE = re.compile(r"&(?:#[0-9]+;?|#[xX][0-9a-fA-F]+;?|[^\t\n\f <&#;\0]{1,32};?)|\0+")
_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


@dataclass(frozen=True)
class _Event:
    kind: Kind
    start: int
    end: int
    text: str = ""  # TEXT: the characters it stands for
    tag: str = ""  # START, END
    translate: bool | None = None  # START: its translate attribute (None: none, or neither yes nor no)
    void: bool = False  # START: an element without content (a void one, or written <x/>)


class _Scanner:
    """The tokens of a source as events, in order, every character in one: one pass, left to
    right, each character looked at a bounded number of times."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.cdata_ends: tuple[int, int] | None = None  # (a place, the first "]]>" after it or -1)

    def events(self) -> Iterator[_Event]:
        source, done, position = self.source, 0, 0
        while (opening := source.find("<", position)) >= 0:
            markup = self.markup(opening)
            if markup is None:  # a "<" that is text
                position = opening + 1
                continue
            yield from _text(source, done, opening)
            yield markup
            done = position = markup.end
            if markup.kind is Kind.START and markup.tag in _TEXT_ELEMENTS:
                position = self.text_end(markup.tag, position)
                if markup.tag in RAW_TEXT and position > done:  # text as written
                    yield _Event(Kind.TEXT, done, position, source[done:position])
                elif markup.tag not in RAW_TEXT:  # title, textarea: text and character references
                    yield from _text(source, done, position)
                done = position
        yield from _text(source, done, len(source))

    def markup(self, at: int) -> _Event | None:
        """The markup that the ``<`` at ``at`` starts, or None if it is text."""
        source = self.source
        if tag := _TAG.match(source, at):
            name = tag["name"].translate(_LOWER)
            if source[at + 1] == "/":
                return _Event(Kind.END, at, tag.end(), tag=name)
            void = name in VOID or bool(tag["closed"]) and name not in _TEXT_ELEMENTS
            return _Event(
                Kind.START, at, tag.end(), tag=name, translate=_translate(tag["attributes"]), void=void
            )
        following = source[at + 1 : at + 3]
        if _letter(following[:1]) or following[:1] == "/" and _letter(following[1:]):
            return _Event(Kind.OTHER, at, len(source))  # a tag that the input ends in
        if following == "!-" and source.startswith("<!--", at):
            return _Event(Kind.OTHER, at, _comment_end(source, at))
        if source.startswith("<![CDATA[", at):
            return _Event(Kind.OTHER, at, self.cdata(at))
        if following[:1] in ("!", "?") or following[:1] == "/" and following[1:]:
            end = source.find(">", at)  # a doctype or bogus comment (<!x>, <?x>, </1>, </>)
            return _Event(Kind.OTHER, at, end + 1 if end >= 0 else len(source))
        return None  # "<" before a space, a digit, ...; or "<" or "</" at the end

    def cdata(self, at: int) -> int:
        """Where ``<![CDATA[`` at ``at`` ends: after the next "]]>" (as in SVG and MathML), or where
        HTML ends it, after the next ">" (or at the end). The search is remembered, so that a
        thousand of them without "]]>" do not each look to the end."""
        known = self.cdata_ends
        if known is None or at < known[0] or 0 <= known[1] < at:
            known = self.cdata_ends = (at, self.source.find("]]>", at))
        if known[1] >= 0:
            return known[1] + 3
        end = self.source.find(">", at)
        return end + 1 if end >= 0 else len(self.source)

    def text_end(self, tag: str, at: int) -> int:
        """Where the text of a raw text, ``title`` or ``textarea`` element opened before ``at`` ends:
        at its end tag, or at the end of the input (``plaintext`` has no end tag)."""
        end = _TEXT_END[tag].search(self.source, at) if tag in _TEXT_END else None
        return end.start() if end else len(self.source)


def _letter(char: str) -> bool:
    return char.isascii() and char.isalpha()


def _comment_end(source: str, at: int) -> int:
    """Where the comment ``<!--`` at ``at`` ends: after "-->" or "--!>", "<!-->" and "<!--->" are
    whole comments, and one that does not end runs to the end of the input (as in a browser)."""
    for abrupt in (">", "->"):
        if source.startswith(abrupt, at + 4):
            return at + 4 + len(abrupt)
    end = _COMMENT_END.search(source, at + 4)
    return end.end() if end else len(source)


def _text(source: str, start: int, end: int) -> Iterator[_Event]:
    """Events for the text ``source[start:end]``: plain text, each character reference, NULs."""
    if source.find("&", start, end) < 0 and source.find("\0", start, end) < 0:  # most text: at once
        if start < end:
            yield _Event(Kind.TEXT, start, end, source[start:end])
        return
    done = start
    for found in _REFERENCE.finditer(source, start, end):
        length = _reference(found[0])
        if not length:
            continue
        if found.start() > done:
            yield _Event(Kind.TEXT, done, found.start(), source[done : found.start()])
        raw = found[0][:length]
        if raw[0] == "\0":
            yield _Event(Kind.OTHER, found.start(), found.end())
        else:
            yield _Event(Kind.TEXT, found.start(), found.start() + length, html.unescape(raw))
        done = found.start() + length
    if done < end:
        yield _Event(Kind.TEXT, done, end, source[done:end])


def _reference(found: str) -> int:
    """How many characters of ``found`` (a ``_REFERENCE`` match) html.unescape decodes as one
    reference (a named one: the longest name it begins with), or NULs; 0: none."""
    if found[0] == "\0" or found[1] == "#" or found[1:] in html5:
        return len(found)
    return next((1 + n for n in range(len(found) - 2, 1, -1) if found[1 : 1 + n] in html5), 0)


def _translate(attributes: str) -> bool | None:
    """What a tag's (first) ``translate`` attribute says: yes, no, or None (none, or neither)."""
    if "translate" not in attributes.lower():
        return None
    for attribute in _NAMED.finditer(attributes):
        if attribute["name"].translate(_LOWER) == "translate":
            value = attribute["value"] or ""
            value = html.unescape(value[1:-1] if value[:1] in ("'", '"') else value)
            return {"yes": True, "": True, "no": False}.get(value.strip().lower())
    return None


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
    tokens: list[Token] = []
    elements = _Elements()
    for event in _Scanner(source).events():
        raw = source[event.start : event.end]
        breaks = event.tag not in INLINE
        if event.kind is Kind.TEXT:
            tokens.append(Token(Kind.TEXT, raw, event.text, translatable=elements.translated()))
        elif event.kind is Kind.START:
            if not event.void:
                elements.push(event.tag, len(tokens), event.translate)
            tokens.append(Token(Kind.START, raw, tag=event.tag, breaks=breaks))
        elif event.kind is Kind.END:
            partner = elements.close(event.tag)
            tokens.append(Token(Kind.END, raw, tag=event.tag, breaks=breaks, partner=partner))
        else:
            tokens.append(Token(Kind.OTHER, raw))
    if "".join(token.raw for token in tokens) != source:
        raise RuntimeError("the HTML tokens do not cover the source")
    return tokens
