"""Documents translated with their structure kept: a file in, the same file out in the other language.

`translate_document(data, format, translator)` is the one entry, for `mtkit translate -i FILE -o OUT` and for
the server: the format's reader cuts the file into units (mtkit/decode/markup.py's `Unit`: words, with the
format's inline markup and placeholders as spans of them), the translator translates their texts in one
stream (sentences split and joined back, mtkit/decode/sentences.py), the units that hold markup are
aligned, and the reader's plan writes the file again with every translation in its unit's place. Each
format is one module with `read(data: bytes) -> Plan`; what is not text (tags, timings, code, msgids,
placeholders) is copied byte for byte.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

from mtkit.config import DEFAULT_BATCH_TOKENS, DecodeConfig
from mtkit.decode.translator import Translator
from mtkit.errors import MtkitError

# format -> (module, what it is); the file extensions each is picked for
FORMATS = {
    "paragraphs": ("paragraphs", "plain text: paragraphs between blank lines, each translated whole"),
    "html": ("html", "an HTML document (or fragment): tags, attributes, comments, scripts and code kept"),
    "markdown": ("markdown", "Markdown: headings, lists, tables, link targets, code kept"),
    "srt": ("subtitles", "SubRip subtitles: numbers and timings kept, sentences across cues translated whole"),
    "vtt": ("subtitles", "WebVTT subtitles: as srt, the header, notes and cue settings kept"),
    "po": ("po", "a gettext catalogue: every msgstr filled, msgids and flags kept"),
    "xliff": ("xliff", "XLIFF 1.2 or 2.0: each <target> filled, inline codes kept"),
    "docx": ("docx", "a Word document: paragraphs, runs' formatting, tables, headers and footers"),
}
EXTENSIONS = {
    ".txt": "paragraphs", ".html": "html", ".htm": "html", ".xhtml": "html", ".md": "markdown",
    ".markdown": "markdown", ".srt": "srt", ".vtt": "vtt", ".po": "po", ".pot": "po", ".xlf": "xliff",
    ".xliff": "xliff", ".docx": "docx",
}  # fmt: skip


class Plan(Protocol):
    """A document cut into units: translate `texts`, align `pairs(found)`, then `render(found, links)`."""

    @property
    def texts(self) -> list[str]: ...

    def pairs(self, found: Sequence[str]) -> list[tuple[list[str], list[str]]]: ...

    def render(self, found: Sequence[str], links: Sequence[Sequence[int | None]] | None) -> bytes: ...


def format_of(path: str | Path | None) -> str | None:
    """The document format a file name calls for (by its extension), or None: lines of text."""
    return None if path is None else EXTENSIONS.get(Path(str(path)).suffix.lower())


def read(data: bytes, format: str, attributes: Sequence[str] = ()) -> Plan:
    """The document cut into units by its format's reader; a damaged one refused in one sentence. `attributes`:
    HTML attributes whose values are translated too (title, alt)."""
    if format not in FORMATS:
        raise MtkitError(f"{format!r} is not a document format; the formats are {', '.join(FORMATS)}.")
    module = importlib.import_module(f"mtkit.documents.{FORMATS[format][0]}")
    try:
        if format in ("srt", "vtt"):
            plan: Plan = module.read(data, format)
        else:
            plan = module.read(data, attributes) if format == "html" else module.read(data)
    except ImportError as exc:  # the format's parser is an optional dependency
        raise MtkitError(f"the {format} format needs {exc.name}: pip install 'mtkit[documents]'.") from None
    return plan


def translate_document(
    data: bytes,
    format: str,
    translator: Translator,
    config: DecodeConfig = DecodeConfig(),
    *,
    target_lang: str = "",
    batch_tokens: int = DEFAULT_BATCH_TOKENS,
    progress: Callable[[int, int], None] | None = None,
    attributes: Sequence[str] = (),
) -> bytes:
    """The document `data` (a file's bytes, in `format`: one of FORMATS) translated, its structure kept.

    `progress(done, total)` is called as units come back; `attributes`: HTML attributes translated too (title,
    alt). A damaged file, or a binary one given as text, is refused in one sentence (MtkitError) before anything
    is translated.
    """
    plan = read(data, format, attributes)
    texts = plan.texts
    config = dataclasses.replace(config, nbest=1)
    found: list[str] = []
    for translation in translator.translate_stream(texts, config, batch_tokens, target_lang=target_lang):
        found.append(translation.text)
        if progress is not None:
            progress(len(found), len(texts))
    pairs = plan.pairs(found)
    links = translator.align(pairs, target_lang) if pairs else []
    return plan.render(found, links)
