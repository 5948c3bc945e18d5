"""Documents of every format mtkit.documents reads, made at random (seeded), and the check that a translation of
one kept its structure: tags, cues and timings, paragraphs and lines, msgids, inline codes, runs' formatting,
Markdown's blocks, link targets and code, and every placeholder byte for byte."""

from __future__ import annotations

import io
import random
import re
from collections import Counter
from collections.abc import Callable
from typing import Any

WORDS = (
    "a man woman dog child girl boy rides runs sits plays sings red blue green big small old young the in on "
    "at with near street park water snow bike car house tree ball shirt hat dress crowd stage"
).split()
PLACEHOLDERS = [
    "{name}",
    "{{count}}",
    "%s",
    "%(city)s",
    "${HOME}",
    "https://example.org/a?b=1&c=2",
    "mail@example.com",
    "%d",
    "{0}",
    ":blobcat:",
]


def sentence(rng: random.Random, placeholders: bool = True) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(2, 9))]
    if placeholders and rng.random() < 0.4:
        words.insert(rng.randint(1, len(words)), rng.choice(PLACEHOLDERS))
    words[0] = words[0].capitalize()
    return " ".join(words) + rng.choice([".", ".", "!", "?"])


def paragraph(rng: random.Random, placeholders: bool = True) -> str:
    return " ".join(sentence(rng, placeholders) for _ in range(rng.randint(1, 4)))


def make_paragraphs(rng: random.Random) -> bytes:
    paras = []
    for _ in range(rng.randint(1, 6)):
        lines = [paragraph(rng) for _ in range(rng.randint(1, 3))]
        paras.append(rng.choice(["", "  "]) + "\n".join(lines))
    newline = rng.choice(["\n", "\r\n"])
    return (("\n" * rng.randint(2, 3)).join(paras) + "\n").replace("\n", newline).encode()


def make_html(rng: random.Random) -> bytes:
    inline = [
        '<b>{}</b>',
        '<i>{}</i>',
        '<a href="https://example.org/x?a=1&amp;b=2" title="t">{}</a>',
        '<span class="x">{}</span>',
        '{} <img src="a.png" alt="pic">',
        '<code>x = 1</code> {}',
        '<span translate="no">Keep This</span> {}',
        '<a href="https://m.s/@al" class="u-url mention">@<span>al</span></a> {}',
    ]
    blocks = []
    for _ in range(rng.randint(1, 6)):
        words = sentence(rng).split()
        k = rng.randrange(len(words))
        words[k] = rng.choice(inline).format(words[k])
        tag = rng.choice(["p", "li", "h2", "td", "div"])
        body = " ".join(words)
        blocks.append(
            f"<ul><li>{body}</li></ul>"
            if tag == "li"
            else f"<table><tr><td>{body}</td></tr></table>"
            if tag == "td"
            else f"<{tag}>{body}</{tag}>"
        )
    extra = rng.choice(["", "<!-- a comment -->", "<script>var a = '<b>x</b>';</script>", "<pre>  kept\n  as is</pre>"])
    body = "\n".join(blocks) + extra
    if rng.random() < 0.5:
        head = f'<!DOCTYPE html>\n<html lang="en"><head><title>{sentence(rng, False)}</title></head>\n'
        return f"{head}<body>\n{body}\n</body></html>\n".encode()
    return body.encode()


def make_markdown(rng: random.Random) -> bytes:
    parts = []
    for _ in range(rng.randint(2, 7)):
        kind = rng.choice(["p", "h", "list", "quote", "table", "code", "link"])
        s = sentence(rng)
        if kind == "h":
            parts.append("#" * rng.randint(1, 3) + " " + s)
        elif kind == "list":
            parts.append("\n".join(f"- {sentence(rng)}" for _ in range(rng.randint(1, 3))))
        elif kind == "quote":
            parts.append(f"> {s}\n> {sentence(rng)}")
        elif kind == "table":
            parts.append(f"| {rng.choice(WORDS)} | {rng.choice(WORDS)} |\n|---|---|\n| {s} | {rng.choice(WORDS)} |")
        elif kind == "code":
            parts.append("```python\nprint('a man rides')\n```")
        elif kind == "link":
            words = s.split()
            parts.append(
                f"{words[0]} *{' '.join(words[1:3])}* see [the {rng.choice(WORDS)}](https://example.org/p \"T\") "
                f"and `code here` {' '.join(words[3:])}"
            )
        else:
            parts.append(paragraph(rng) + "\n" + paragraph(rng))
    return ("\n\n".join(parts) + "\n").encode()


def timestamp(ms: int, sep: str) -> str:
    return f"{ms // 3600000:02d}:{ms // 60000 % 60:02d}:{ms // 1000 % 60:02d}{sep}{ms % 1000:03d}"


def make_subtitles(rng: random.Random, kind: str) -> bytes:
    sep = "," if kind == "srt" else "."
    out, t = ([] if kind == "srt" else ["WEBVTT\n"]), rng.randint(0, 5000)
    if kind == "vtt" and rng.random() < 0.5:
        out.append("NOTE made by a test\n")
    for n in range(1, rng.randint(2, 8)):
        words = sentence(rng, placeholders=False).split()
        if rng.random() < 0.4:  # a sentence that runs into the next cue
            words[-1] = words[-1].rstrip(".!?")
        lines = (
            [" ".join(words)] if len(words) < 5 or rng.random() < 0.5 else [" ".join(words[:3]), " ".join(words[3:])]
        )
        if rng.random() < 0.2:
            lines[0] = "<i>" + lines[0] + "</i>"
        start, t = t, t + rng.randint(800, 4000)
        head = f"{n}\n" if kind == "srt" or rng.random() < 0.5 else ""
        settings = " align:start" if kind == "vtt" and rng.random() < 0.3 else ""
        out.append(f"{head}{timestamp(start, sep)} --> {timestamp(t, sep)}{settings}\n" + "\n".join(lines) + "\n")
        t += rng.randint(0, 500)
    return "\n".join(out).encode()


def make_po(rng: random.Random) -> bytes:
    entries = [
        'msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=UTF-8\\n"\n'
        '"Plural-Forms: nplurals=2; plural=(n != 1);\\n"\n'
    ]
    for k in range(rng.randint(1, 8)):
        s = sentence(rng).replace('"', "")
        if rng.random() < 0.25:
            entries.append(f'#: app.py:{k}\nmsgid "{s}"\nmsgid_plural "%d {s}"\nmsgstr[0] ""\nmsgstr[1] ""\n')
        elif rng.random() < 0.2:
            done = sentence(rng, placeholders=False).replace('"', "")
            entries.append(f'msgctxt "menu"\nmsgid "{done}"\nmsgstr "already done"\n')
        else:
            flag = "#, python-format\n" if "%" in s or "{" in s else ""
            entries.append(f'#: app.py:{k}\n{flag}msgid "{s}"\nmsgstr ""\n')
    return "\n".join(entries).encode()


def make_xliff(rng: random.Random) -> bytes:
    v2 = rng.random() < 0.5
    units = []
    for k in range(1, rng.randint(2, 6)):
        words = sentence(rng).replace("&", "and").replace("<", "").split()
        j = rng.randrange(len(words))
        code = (
            (f'<pc id="{k}">{words[j]}</pc>' if v2 else f'<g id="{k}">{words[j]}</g>')
            if rng.random() < 0.5
            else (f'{words[j]} <ph id="{k}"/>' if v2 else f'{words[j]} <x id="{k}"/>')
        )
        words[j] = code
        text = " ".join(words)
        units.append(
            f'<unit id="u{k}"><segment><source>{text}</source></segment></unit>'
            if v2
            else f'<trans-unit id="t{k}"><source>{text}</source></trans-unit>'
        )
    if v2:
        return (
            '<?xml version="1.0" encoding="UTF-8"?>\n<xliff xmlns="urn:oasis:names:tc:xliff:document:2.0" '
            f'version="2.0" srcLang="en" trgLang="de"><file id="f">{"".join(units)}</file></xliff>\n'
        ).encode()
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n<xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2">'
        f'<file source-language="en" target-language="de" datatype="plaintext" original="x"><body>{"".join(units)}'
        "</body></file></xliff>\n"
    ).encode()


def make_docx(rng: random.Random) -> bytes:
    import docx

    document = docx.Document()
    for _ in range(rng.randint(1, 4)):
        p = document.add_paragraph()
        for word in sentence(rng).split():
            run = p.add_run(word + " ")
            run.bold, run.italic = rng.random() < 0.2, rng.random() < 0.2
    table = document.add_table(rows=2, cols=2)
    for cell in (table.cell(0, 0), table.cell(1, 1)):
        cell.text = sentence(rng)
    document.sections[0].header.paragraphs[0].text = sentence(rng, False)
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


MAKERS: dict[str, Callable[[random.Random], bytes]] = {
    "paragraphs": make_paragraphs,
    "html": make_html,
    "markdown": make_markdown,
    "srt": lambda rng: make_subtitles(rng, "srt"),
    "vtt": lambda rng: make_subtitles(rng, "vtt"),
    "po": make_po,
    "xliff": make_xliff,
    "docx": make_docx,
}


def placeholders_of(text: str) -> Counter[str]:
    from mtkit.decode.placeholders import placeholders

    return Counter(p for p in placeholders(text) if not p.startswith("<"))


def structure(data: bytes, format: str) -> dict[str, Any]:
    """What a translation must keep of a document, as data two documents can be compared by."""
    if format == "docx":
        import docx

        d = docx.Document(io.BytesIO(data))
        paras = [p for p in d.paragraphs]
        return {
            "paragraphs": len(paras),
            "tables": [(len(t.rows), len(t.columns)) for t in d.tables],
            "placeholders": placeholders_of("\n".join(p.text for p in paras)),
        }
    text = data.decode("utf-8")
    found: dict[str, Any] = {"placeholders": placeholders_of(text)}
    if format == "html":
        from mtkit.decode.htmltree import tree_tokens

        found["markup"] = [t for t in tree_tokens(text) if t[0] != "text"]
        found["placeholders"] = Counter()  # attributes hold URLs too; checked by the markup
    elif format in ("srt", "vtt"):
        found["heads"] = re.findall(r"^(?:.*\n)?.*-->.*$", text, re.MULTILINE)
        found["blocks"] = len(re.split(r"\n\s*\n", text.strip()))
    elif format == "paragraphs":
        paras = re.split(r"(?:\r?\n[ \t]*){2,}", text.strip("\r\n"))
        found["lines"] = [len(p.splitlines()) for p in paras]
        found["breaks"] = re.findall(r"(?:\r?\n[ \t]*){2,}", text)
    elif format == "markdown":
        from markdown_it import MarkdownIt

        tokens = MarkdownIt("commonmark").enable("table").enable("strikethrough").parse(text)
        found["blocks"] = [t.type for t in tokens if t.type != "inline"]
        found["inline"] = Counter(
            (c.type, c.attrs.get("href"), c.content if c.type == "code_inline" else "")
            for t in tokens
            if t.type == "inline"
            for c in t.children or []
            if c.type not in ("text", "softbreak")
        )
        found["code"] = [t.content for t in tokens if t.type in ("fence", "code_block")]
    elif format == "po":
        import polib

        po = polib.pofile(text)
        found["msgids"] = [(e.msgctxt, e.msgid, e.msgid_plural, tuple(e.flags)) for e in po]
        found["filled"] = all(e.msgstr or all(e.msgstr_plural.values()) for e in po if e.msgid)
        found["placeholders"] = Counter()
        found["entries"] = [
            (placeholders_of(e.msgid), placeholders_of(e.msgstr)) for e in po if e.msgid and not e.msgid_plural
        ]
    elif format == "xliff":
        sources = re.findall(r"<source>(.*?)</source>", text, re.DOTALL)
        found["placeholders"] = placeholders_of("\n".join(sources))
        found["codes"] = [
            sorted([c.replace("/>", ">") for c in re.findall(r"<(?:g|x|pc|ph)\b[^>]*>", s)]) for s in sources
        ]
        found["units"] = len(sources)
    return found


def same_structure(source: bytes, translated: bytes, format: str) -> list[str]:
    """What differs between a document's structure and its translation's (nothing: [])."""
    a, b = structure(source, format), structure(translated, format)
    problems = [f"{k}: {a[k]!r} != {b.get(k)!r}" for k in a if k not in ("filled", "entries") and a[k] != b.get(k)]
    if format == "po":
        if not b["filled"]:
            problems.append("a msgstr is empty")
        problems += [f"placeholders {x} != {y}" for x, y in b["entries"] if x != y and y]
    if format == "xliff":
        text = translated.decode()
        targets = re.findall(r"<target>(.*?)</target>", text, re.DOTALL)
        codes = [sorted([c.replace("/>", ">") for c in re.findall(r"<(?:g|x|pc|ph)\b[^>]*>", t)]) for t in targets]
        if len(targets) != a["units"] or codes != a["codes"]:
            problems.append(f"targets' codes {codes} != sources' {a['codes']}")
        if placeholders_of("\n".join(targets)) != a["placeholders"]:
            problems.append(f"targets' placeholders {placeholders_of(''.join(targets))} != {a['placeholders']}")
    return problems
