"""HTML read as a browser reads it, and written so that a browser reads the same tree back.

`parse(source)` runs html5lib, the WHATWG specification's parsing algorithm in Python: a comment ends
where a browser ends it (`<!-- a -- > <img> -->` is one comment), `&lt;` inside a `<textarea>` is text,
`<svg><script>` is not HTML's script. A tolerant tokenizer of its own (Python's `html.parser`) once
disagreed with browsers on exactly such inputs, and text it had read as inert came out as live tags.

`Element.html()` writes the tree back by the specification's serialization algorithm ("Serializing HTML
fragments"): start tags rebuilt from their name and attributes, every attribute value quoted and escaped,
every text node escaped, except the text of HTML's raw-text elements (script, style, ...), which the
parser ended at its end tag and so cannot hold one. No text or attribute value can become markup; the
price is that tags come out in that canonical form (`<img src=a>` as `<img src="a">`, `&eacute;` as `é`).

Elements nest at most `MAX_DEPTH` deep: the tree is walked recursively further on (one call a level), and
a browser's own parser stops nesting at a depth of that order (Blink's at 512).
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from typing import Any

from mtkit.errors import MtkitError

MAX_DEPTH = 256
# HTML's void elements: no end tag, no content.
VOID = frozenset(
    "area base basefont bgsound br col embed frame hr img input keygen link meta param source track wbr".split()
)
# HTML's raw-text elements (scripting on, as in a browser): their text is not markup and is written as it is.
RAW = frozenset("script style xmp iframe noembed noframes noscript plaintext".split())
# Phrasing elements: their words belong to the sentence around them.
INLINE = frozenset(
    "a abbr b bdi bdo cite code data del dfn em font i ins kbd mark q s samp small span strong sub sup time tt u var"
    " img wbr".split()
)
# What the spec's serializer writes before a foreign attribute's local name.
PREFIXES = {
    "http://www.w3.org/XML/1998/namespace": "xml:",
    "http://www.w3.org/1999/xlink": "xlink:",
    "http://www.w3.org/2000/xmlns/": "xmlns:",
}
# A whole document rather than a fragment: it starts (after blanks and comments) with a doctype or <html>.
WHOLE = re.compile(r"\A\ufeff?(?:\s|<!--.*?-->)*<(?:!doctype|html[\s>/])", re.IGNORECASE | re.DOTALL)


def escape_text(text: str) -> str:
    """A text node as the spec serializes it: &, <, > and no-break spaces escaped (and NUL, which a parser drops
    from text, dropped)."""
    return html.escape(text, quote=False).replace("\xa0", "&nbsp;").replace("\x00", "")


def escape_attribute(value: str) -> str:
    """An attribute value for double quotes: &, <, >, " (and ') and no-break spaces escaped."""
    return html.escape(value, quote=True).replace("\xa0", "&nbsp;")


@dataclass(eq=False)
class Element:
    """One node: an element with its start tag as written back, its children (text or elements); or, void, a
    comment or doctype whose `start` is all of it. `raw`: an HTML raw-text element; `inline`: a phrasing
    element holding only text and phrasing elements (its words belong to the sentence around it)."""

    name: str
    start: str
    children: list[Element | str] = field(default_factory=list)
    void: bool = False
    raw: bool = False
    inline: bool = False
    attrs: dict[str, str] = field(default_factory=dict)

    @property
    def end(self) -> str:
        if self.name.startswith("#"):  # a span of another format (a Markdown link): its end as written
            return self.attrs.get("end", "")
        # plaintext: nothing ends it, so a parser would read its end tag as text
        return "" if self.void or not self.name or (self.raw and self.name == "plaintext") else f"</{self.name}>"

    @property
    def opening(self) -> str:
        """The start tag, and the newline a parser drops after <pre>, <textarea> and <listing> when their text
        starts with one (so that the text reads back whole)."""
        first = self.children[0] if self.children else ""
        extra = isinstance(first, str) and first.startswith("\n") and self.name in ("pre", "textarea", "listing")
        return self.start + "\n" if extra else self.start

    def html(self) -> str:
        """The element written back (iteratively: no recursion however deep)."""
        parts: list[str] = []
        todo: list[Element | str | tuple[str]] = [self]
        raw_parent: list[bool] = [False]
        while todo:
            item = todo.pop()
            if isinstance(item, tuple):  # an end tag, after the children
                parts.append(item[0])
                raw_parent.pop()
            elif isinstance(item, str):
                parts.append(item if raw_parent[-1] else escape_text(item))
            else:
                parts.append(item.opening)
                if not item.void:
                    todo.append((item.end,))
                    raw_parent.append(item.raw)
                    todo.extend(reversed(item.children))
        return "".join(parts)


def start_tag(name: str, attrs: dict[str, str]) -> tuple[str, dict[str, str]]:
    """The start tag as the spec serializes it, and the attributes by their written names (html5lib names a
    foreign attribute {namespace}local)."""
    named: dict[str, str] = {}
    for key, value in attrs.items():
        ns, _, local = key[1:].partition("}") if key.startswith("{") else ("", "", key)
        written = PREFIXES.get(ns, "") + local if ns else local
        named["xmlns" if written == "xmlns:xmlns" else written] = value
    written_attrs = "".join(f' {k}="{escape_attribute(v)}"' for k, v in named.items())
    return f"<{name}{written_attrs}>", named


def doctype(name: str, public: str | None, system: str | None) -> str:
    """A doctype as written back; its identifiers only where they can be quoted as they are."""
    ids = ""
    if public and '"' not in public:
        ids = f' PUBLIC "{public}"'
    if system and '"' not in system:
        ids += f' "{system}"' if ids else f' SYSTEM "{system}"'
    return f"<!DOCTYPE {name or 'html'}{ids}>"


TOO_DEEP = f"this HTML nests elements more than {MAX_DEPTH} deep; markup is translated up to {MAX_DEPTH} levels."


class _TooDeep(Exception):
    pass


class _DepthLimited(list):  # type: ignore[type-arg]
    """html5lib's stack of open elements, refused past MAX_DEPTH (+ html, body and the fragment's container):
    the parser's scope checks walk this stack at every tag: quadratic in the nesting without a bound."""

    def append(self, item: Any) -> None:
        if len(self) > MAX_DEPTH + 4:
            raise _TooDeep
        super().append(item)


def _bounded_builder() -> Any:
    import html5lib

    base = html5lib.getTreeBuilder("etree", fullTree=True)

    class Bounded(base):  # type: ignore[misc,valid-type]
        def reset(self) -> None:
            super().reset()
            self.openElements = _DepthLimited()

    return Bounded


def parse(source: str) -> Element:
    """The tree a browser builds from `source`: a whole document (it starts with a doctype or <html>) or a
    fragment (as inside a <div>); the root is a nameless element. Refused in one sentence past MAX_DEPTH."""
    import html5lib  # the WHATWG parsing algorithm (pure Python)

    parser = html5lib.HTMLParser(tree=_bounded_builder(), namespaceHTMLElements=False)
    try:
        tree = parser.parse(source) if WHOLE.match(source) else parser.parseFragment(source, container="div")
    except _TooDeep:
        tree = None
    if tree is None:
        raise MtkitError(TOO_DEEP)
    return _convert(tree)


def _convert(tree: Any) -> Element:
    """html5lib's ElementTree as Elements, walked with a stack of its own (no recursion; html5lib's tree walker
    finds each parent by a search of its siblings, quadratic in a long document)."""
    from xml.etree.ElementTree import Comment

    root = Element("", "")
    # (html5lib node | text | an Element whose children are done, the Element it goes into, its depth)
    todo: list[tuple[Any, Element, int]] = [(tree, root, 0)]
    while todo:
        node, parent, depth = todo.pop()
        if isinstance(node, str):
            if parent.children and isinstance(parent.children[-1], str):
                parent.children[-1] += node
            else:
                parent.children.append(node)
            continue
        if isinstance(node, Element):  # an inline element holds only text and inline elements
            if not node.inline:
                parent.inline = False
            continue
        if node.tail:
            todo.append((node.tail, parent, depth))
        tag = node.tag
        if tag is Comment:
            parent.children.append(Element("!--", f"<!--{node.text or ''}-->", void=True))
            parent.inline = False
            continue
        if tag == "<!DOCTYPE>":
            written = doctype(node.text, node.get("publicId"), node.get("systemId"))
            parent.children.append(Element("!", written, void=True))
            continue
        if tag in ("DOCUMENT_ROOT", "DOCUMENT_FRAGMENT"):
            element = parent
        else:
            if depth > MAX_DEPTH:
                raise MtkitError(TOO_DEEP)
            namespace, _, name = tag[1:].partition("}") if tag.startswith("{") else ("", "", tag)
            html_ns = not namespace
            start, attrs = start_tag(name, dict(node.attrib))
            void = html_ns and name in VOID
            element = Element(name, start, void=void, raw=html_ns and name in RAW, attrs=attrs)
            element.inline = html_ns and name in INLINE  # till a child says otherwise
            parent.children.append(element)
            todo.append((element, parent, depth))
        todo.extend((child, element, depth + 1) for child in reversed(node))
        if node.text:
            todo.append((node.text, element, depth + 1))
    return root


def check_reads_back(written: str) -> str:
    """`written`, when a browser reads back exactly the tree it was written from (parsed and written again, it
    is the same); else refused in one sentence. A tree the parser built does not always read back so: HTML
    inside svg or math and nested forms, the shapes of mutation-XSS attacks, move on a second reading, and text
    written as a raw-text element's could become markup."""
    if parse(written).html() != written:
        raise MtkitError("this HTML does not read back as it was read (elements nested as mutation-XSS attacks "
                         "nest them, e.g. HTML inside svg or math); it is not translated.")  # fmt: skip
    return written


def tree_tokens(source: str) -> list[tuple[Any, ...]]:
    """What a browser reads in `source`, flattened: elements with their attributes, comments, text: two
    sources a browser reads alike give the same list (the check that markup's output holds no new markup)."""
    out: list[tuple[Any, ...]] = []
    todo: list[Element | str | None] = [parse(source)]
    while todo:
        item = todo.pop()
        if item is None:
            out.append(("end",))
        elif isinstance(item, str):
            out.append(("text", item))
        else:
            out.append(("element", item.name, tuple(sorted(item.attrs.items())), item.start if item.void else ""))
            if not item.void:
                todo.append(None)
                todo.extend(reversed(item.children))
    return out
