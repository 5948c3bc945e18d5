"""Markup kept intact: HTML taken apart into text to translate, and its tags put back around the words they belonged to.

The source is read as a browser reads it and written back escaped (mtkit/decode/htmltree.py). The
text is cut into units at block elements (p, div, li, br, ...): each unit is one line to translate,
its inline elements (a, b, em, span, img, ...) spans of its words; the text of script, style and
textarea is copied, never translated. `Unit.render(target, links)` writes the translation back with
each inline element around the target words aligned to its source words (`links[j]`: the source word
target word j is aligned to, from the model's cross-attention: mtkit/decode/alignment.py), so the
output holds the source's elements and attributes, well-formed.

`Markup(fragments)` is the algorithm, written once for every caller: its `texts` to translate, then
`pairs(found)` to align, then `render(found, links)`; `translate_fragments` runs it on a Translator,
the server (mtkit/serve/libretranslate.py) on its batcher.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import TYPE_CHECKING

from mtkit.config import DEFAULT_BATCH_TOKENS, DEFAULT_CHUNK_LINES, DecodeConfig
from mtkit.decode.batches import chunks
from mtkit.decode.htmltree import VOID, Element, check_reads_back, escape_attribute, escape_text, parse
from mtkit.decode.placeholders import protect
from mtkit.decode.placement import Span, place, proportional, render_tree

if TYPE_CHECKING:
    from mtkit.decode.glossary import Glossary
    from mtkit.decode.translator import Translator

WORD = re.compile(r"\S+")
ATTRIBUTE = re.compile("\x00(\\d+)\x00")  # a translated attribute value's place in a start tag: its unit


@dataclass
class Unit:
    """One line to translate: its words, its inline elements as word spans, and the whitespace around it."""

    words: list[str]
    spans: list[Span]
    lead: str
    trail: str
    escape: Callable[[str], str] = escape_text  # text as the format writes it: HTML's escaped, plain as it is

    @property
    def text(self) -> str:
        return " ".join(self.words)

    @property
    def tagged(self) -> bool:
        """Whether its elements need the translation aligned to be placed: not when it has none, nor when one element
        holds every word and nothing else (a .docx paragraph of one run, `<p><b>...</b></p>`): that one holds the
        whole translation, so the model's alignment pass is skipped for it."""
        whole = len(self.spans) == 1 and (self.spans[0].first, self.spans[0].last) == (0, len(self.words))
        return bool(self.spans) and not (whole and not self.spans[0].children)

    def render(self, target: str, links: Sequence[int | None] | None = None) -> str:
        """The translation with the unit's elements around the target words aligned to their source words.

        `links[j]`: the source word target word j is aligned to (None: none); without links (or a
        unit with no elements) each source position maps to the target proportionally.
        """
        words = target.split()
        if not self.spans:
            return self.escape(self.lead + " ".join(words) + self.trail)
        known = links is not None and len(links) == len(words) and any(i is not None for i in links)
        links = list(links) if known and links is not None else proportional(self, len(words))
        placed = place(self.spans, links, len(self.words), 0, len(words))
        return self.escape(self.lead) + render_tree(words, placed, self.escape) + self.escape(self.trail)


def alignment_pairs(units: Iterable[Unit], found: Sequence[str]) -> list[tuple[list[str], list[str]]]:
    """(source words, translation words) of each unit that holds tags, `found` its translation: what to align
    (a unit without tags, or whose one element holds every word, is placed without the alignment pass)."""
    return [(u.words, t.split()) for u, t in zip(units, found) if u.tagged]


def word_range(words: list[tuple[int, int]], start: int, end: int) -> tuple[int, int]:
    """The words [first, last) that characters [start, end) touch; an empty range (between words) if none."""
    touched = [k for k, (a, b) in enumerate(words) if a < end and b > start]
    if touched:
        return touched[0], touched[-1] + 1
    before = sum(1 for _, b in words if b <= start)
    return before, before


def unit_of(run: Sequence[Element | str], escape: Callable[[str], str] = escape_text) -> Unit | None:
    """A run of text and inline elements as one unit: its words (tags taken out: words glued across a tag stay
    one word), its elements as spans of them (a void one between words); None when it has no word."""
    text: list[str] = []
    size = 0
    marks: list[tuple[Element, int, int, int]] = []  # (element, depth, start, end) in characters

    def walk(items: Sequence[Element | str], depth: int) -> None:
        nonlocal size
        for item in items:
            if isinstance(item, str):
                text.append(item)
                size += len(item)
                continue
            start = size
            walk(item.children, depth + 1)
            marks.append((item, depth, start, size))

    walk(run, 0)
    full = "".join(text)
    cuts = sorted({start for _, _, start, end in marks if start == end})  # an element with no text parts words
    found = [piece for m in WORD.finditer(full) for piece in cut(m.start(), m.end(), cuts)]
    if not found:
        return None
    words = [full[a:b] for a, b in found]
    spans = {}
    for e, _, start, end in marks:
        if start < end:
            spans[id(e)] = Span(e, *word_range(found, start, end))
        else:
            left = next((full[a:b] for a, b in found if b == start), "")
            right = next((full[a:b] for a, b in found if a == start), "")
            spans[id(e)] = Span(e, *between(found, start), at=start, glue=(left, right))
    tops: list[Span] = []
    for e, depth, _, _ in sorted(marks, key=lambda m: m[1]):  # stable: siblings stay in source order
        if depth == 0:
            tops.append(spans[id(e)])
        spans[id(e)].children = [spans[id(c)] for c in e.children if isinstance(c, Element)]
    lead = full[: found[0][0]] if isinstance(run[0], str) else ""
    trail = full[found[-1][1] :] if isinstance(run[-1], str) else ""
    return Unit(words, tops, lead, trail, escape)


def cut(a: int, b: int, cuts: list[int]) -> list[tuple[int, int]]:
    """The word [a, b) cut at the places inside it where an element with no text stood."""
    inside = [c for c in cuts if a < c < b]
    edges = [a, *inside, b]
    return list(zip(edges, edges[1:]))


def between(words: list[tuple[int, int]], at: int) -> tuple[int, int]:
    """An element with no text at character `at`: before the first word that does not end before it."""
    before = sum(1 for _, b in words if b <= at)
    return before, before


def copied(element: Element) -> bool:
    """Written as it is, never translated: comments, void elements, raw text (script, style), a textarea's text,
    and what says it is not to be translated (code, pre, translate="no", class="notranslate")."""
    return element.void or element.raw or element.name == "textarea" or kept(element)


# Classes whose elements are not language: notranslate (Google's, LibreTranslate's), a Mastodon post's mentions
# and hashtags (class "mention"), and the parts of a shortened link it hides ("invisible", "ellipsis").
KEEP_CLASSES = frozenset("notranslate mention hashtag invisible ellipsis".split())


def kept(element: Element) -> bool:
    """Not to be translated: code, pre, kbd, samp, var, translate="no", or a class of KEEP_CLASSES."""
    if element.name in ("code", "pre", "kbd", "samp", "var"):
        return True
    if element.attrs.get("translate", "").strip().lower() == "no":
        return True
    return bool(KEEP_CLASSES & set(element.attrs.get("class", "").split()))


def opaque(element: Element) -> Element:
    """An inline element kept whole: one void element written as it was, placed between the translation's words."""
    return Element(element.name, element.html(), void=True, inline=True)


class Document:
    """An HTML fragment (or whole document) cut into units to translate; `render(outputs)` puts it together."""

    def __init__(self, source: str, attributes: Collection[str] = ()) -> None:
        """`attributes`: the attributes whose values are translated too (e.g. title, alt), each value a unit."""
        self.root = parse(source)
        self.units: list[Unit] = []
        self.attributes = frozenset(attributes)
        self._pieces: list[str | int] = []  # markup as it is, or the index of a unit
        self._walk(self.root.children)

    def _attributed(self, element: Element) -> Element:
        """The element with each value of `attributes` that holds words a unit, marked in its start tag."""
        chosen = {k: v for k, v in element.attrs.items() if k in self.attributes and WORD.search(v)}
        if not chosen or element.name.startswith(("#", "!")) or not element.name:
            return element
        written = []
        for key, value in element.attrs.items():
            found = unit_of(protect(value, escape_attribute), escape_attribute) if key in chosen else None
            if found is None:
                written.append(f' {key}="{escape_attribute(value)}"')
            else:
                written.append(f' {key}="\x00{len(self.units)}\x00"')
                self.units.append(found)
        return dataclasses.replace(element, start=f"<{element.name}{''.join(written)}>")

    def _walk(self, children: list[Element | str]) -> None:
        run: list[Element | str] = []
        for child in children:
            if isinstance(child, str):
                run.extend(protect(child, escape_text))
                continue
            if not kept(child):
                child = self._attributed(child)
            if child.inline:
                run.append(opaque(child) if kept(child) else self._protected(child))
                continue
            self._flush(run)
            run = []
            if copied(child):
                self._pieces.append(child.html())
            else:
                self._pieces.append(child.opening)
                self._walk(child.children)
                self._pieces.append(child.end)
        self._flush(run)

    def _protected(self, element: Element) -> Element:
        """An inline element with its placeholders (and its kept children) as void elements of their own."""
        children: list[Element | str] = []
        for child in element.children:
            if isinstance(child, str):
                children.extend(protect(child, escape_text))
            else:
                children.append(opaque(child) if kept(child) else self._protected(self._attributed(child)))
        return dataclasses.replace(element, children=children)

    def _flush(self, run: list[Element | str]) -> None:
        if not run:
            return
        unit = unit_of(run)
        if unit is None:  # nothing to translate: the markup as it was
            self._pieces.append("".join(escape_text(c) if isinstance(c, str) else c.html() for c in run))
            return
        self._pieces.append(len(self.units))
        self.units.append(unit)

    def render(self, outputs: Sequence[str]) -> str:
        """The fragment with unit i replaced by outputs[i] (each from `Unit.render`), checked to read back in a
        browser as the tree it was written from (`check_reads_back`: refused in one sentence if not)."""
        written = "".join(p if isinstance(p, str) else outputs[p] for p in self._pieces)
        written = ATTRIBUTE.sub(lambda m: outputs[int(m.group(1))], written)  # translated attribute values
        return check_reads_back(written)


class Markup:
    """Fragments translated with their markup kept, in three steps any caller drives with its own model calls:
    translate `texts`, align `pairs(found)` (the units that hold tags), then `render(found, links)`."""

    def __init__(self, fragments: Iterable[str], attributes: Collection[str] = ()) -> None:
        self.docs = [Document(f, attributes) for f in fragments]
        self.units = [u for d in self.docs for u in d.units]

    @property
    def texts(self) -> list[str]:
        """The units' texts, each one line to translate."""
        return [u.text for u in self.units]

    def pairs(self, found: Sequence[str]) -> list[tuple[list[str], list[str]]]:
        return alignment_pairs(self.units, found)

    def render(self, found: Sequence[str], links: Sequence[Sequence[int | None]] | None) -> list[str]:
        """Each fragment with its units' translations (`found`, one a unit) and their tags placed by `links`
        (one a tagged unit, as `pairs` listed them; None: placed proportionally)."""
        aligned = iter(links or [])
        outputs = [u.render(t, next(aligned, None) if u.tagged else None) for u, t in zip(self.units, found)]
        rendered, start = [], 0
        for d in self.docs:
            rendered.append(d.render(outputs[start : start + len(d.units)]))
            start += len(d.units)
        return rendered


def translate_fragments(
    translator: Translator,
    lines: Iterable[str],
    config: DecodeConfig | None = None,
    batch_tokens: int = DEFAULT_BATCH_TOKENS,
    chunk_lines: int = DEFAULT_CHUNK_LINES,
    target_lang: str = "",
    attributes: Collection[str] = (),
    glossary: Glossary | None = None,
) -> Iterator[str]:
    """Each line, an HTML fragment, translated with its markup kept (`mtkit translate --format html-lines`), in
    order; into `target_lang` for a multilingual model; `attributes` (title, alt) translated too; `glossary`'s terms
    enforced in each unit's words. `config`: the translator's defaults when None."""
    config = dataclasses.replace(translator.defaults if config is None else config, nbest=1)
    for _, chunk in chunks(lines, chunk_lines):
        markup = Markup(chunk, attributes)
        stream = translator.translate_stream(
            markup.texts, config, batch_tokens, target_lang=target_lang, glossary=glossary
        )
        found = [t.text for t in stream]
        pairs = markup.pairs(found)
        yield from markup.render(found, translator.align(pairs, target_lang) if pairs else [])


def start_tags(fragment: str) -> list[str]:
    """The start tags of a fragment as a browser reads them, sorted: what the output must hold as the input did."""
    found: list[str] = []
    todo: list[Element | str] = list(parse(fragment).children)
    while todo:
        item = todo.pop()
        if isinstance(item, Element):
            found.append(item.start)
            todo.extend(item.children)
    return sorted(found)


def well_formed(fragment: str) -> bool:
    """Every end tag closes the element opened last, and every element is closed (void ones need no end)."""
    stack: list[str] = []
    ok = True

    class Checker(HTMLParser):
        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            if tag not in VOID:
                stack.append(tag)

        def handle_endtag(self, tag: str) -> None:
            nonlocal ok
            if tag in VOID:  # <br/>, or a stray </br>: no element to close
                return
            if not stack or stack.pop() != tag:
                ok = False

    checker = Checker(convert_charrefs=True)
    checker.feed(fragment)
    checker.close()
    return ok and not stack


def strip_tags(fragment: str) -> str:
    """The text of a fragment, its words joined by single spaces."""
    return " ".join(Markup([fragment]).texts)
