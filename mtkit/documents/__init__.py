"""Documents translated with their structure kept: a file in, the same file out in the other language.

`translate_document(data, format, translator)` is the one entry, for `mtkit translate -i FILE -o OUT` and for
the server: the format's reader cuts the file into units (mtkit/decode/markup.py's `Unit`: words, with the
format's inline markup and placeholders as spans of them), the translator translates their texts in one
stream (sentences split and joined back, mtkit/decode/sentences.py), the units that hold markup are
aligned, and the reader's plan writes the file again with every translation in its unit's place. Each
format is one module with `read(data: bytes) -> Plan`; what is not text (tags, timings, code, msgids,
placeholders) is copied byte for byte.

`translate_document_with_report` gives the same bytes with each segment (unit) as it was translated: its text,
its translation and, when a `confidence` is given, its confidence and the document's summary
(mtkit/decode/confidence.py's `summary`). A `glossary`'s terms are enforced in each segment's text, the words the
model sees (tags and placeholders taken out: a term matches across them, and they come back byte for byte).
"""

from __future__ import annotations

import dataclasses
import importlib
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from mtkit.config import DEFAULT_BATCH_TOKENS, DecodeConfig
from mtkit.decode.confidence import summary
from mtkit.decode.glossary import Glossary
from mtkit.decode.translator import Rater, Translator
from mtkit.errors import MtkitError
from mtkit.textio import one_line

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
# .txt is no document: a test set one sentence a line is often kept in one, and its line alignment must never
# be at risk (Multi30k's captions often lack a final period: no segmenter can tell a wrapped line from a
# sentence a line). Paragraphs are asked for with --format paragraphs.
EXTENSIONS = {
    ".html": "html", ".htm": "html", ".xhtml": "html", ".md": "markdown",
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


@dataclass(frozen=True)
class Segment:
    """One unit of a document as it was translated: `index` from 1 in document order (the numbers of the summary's
    `to_check`), `source` the text the model saw (the unit's words: markup and placeholders taken out), its
    `translation`, and its `confidence` when one was asked for (the mean of its sentences')."""

    index: int
    source: str
    translation: str
    confidence: float | None = None


@dataclass(frozen=True)
class DocumentTranslation:
    """A translated document: the file's bytes (`data`, what `translate_document` returns), its segments, and with
    a confidence its `summary` (expected acceptable share, lowest, segments to check; None without a confidence or
    without a segment); `record()` as JSON."""

    data: bytes
    format: str
    segments: list[Segment]

    @property
    def summary(self) -> dict[str, Any] | None:
        rated = [s.confidence for s in self.segments if s.confidence is not None]
        return summary(rated) if len(rated) == len(self.segments) and rated else None

    def record(self) -> dict[str, Any]:
        """The report `mtkit translate --confidence-report FILE` writes: the summary, then each segment."""
        return {
            "format": self.format,
            "summary": self.summary,
            "segments": [dataclasses.asdict(s) for s in self.segments],
        }


def document_text(text: str) -> str:
    """A translation as any document format can hold it: line breaks made spaces (`one_line`) and other control
    characters dropped. A byte-fallback piece can decode to one, and XML (.docx, XLIFF) refuses it outright."""
    return "".join(c for c in one_line(text) if unicodedata.category(c) != "Cc")


def translate_document(
    data: bytes,
    format: str,
    translator: Translator,
    config: DecodeConfig | None = None,
    *,
    target_lang: str = "",
    batch_tokens: int = DEFAULT_BATCH_TOKENS,
    progress: Callable[[int, int], None] | None = None,
    attributes: Sequence[str] = (),
    glossary: Glossary | None = None,
) -> bytes:
    """The document `data` (a file's bytes, in `format`: one of FORMATS) translated, its structure kept.

    `config`: the translator's own defaults (`translator.defaults`) when None. `progress(done, total)` is called
    as units come back; `attributes`: HTML attributes translated too (title, alt); `glossary`: terms enforced in
    each segment (refused in one sentence where the engine cannot, as `Translator.translate` refuses it). A
    damaged file, or a binary one given as text, is refused in one sentence (MtkitError) before anything is
    translated.
    """
    return translate_document_with_report(
        data,
        format,
        translator,
        config,
        target_lang=target_lang,
        batch_tokens=batch_tokens,
        progress=progress,
        attributes=attributes,
        glossary=glossary,
    ).data


def translate_document_with_report(
    data: bytes,
    format: str,
    translator: Translator,
    config: DecodeConfig | None = None,
    *,
    target_lang: str = "",
    batch_tokens: int = DEFAULT_BATCH_TOKENS,
    progress: Callable[[int, int], None] | None = None,
    attributes: Sequence[str] = (),
    glossary: Glossary | None = None,
    confidence: Rater | None = None,
) -> DocumentTranslation:
    """`translate_document`, with each segment's text and translation; with a `confidence` (a
    `mtkit.Confidence`), each segment rated and the document summarised (`DocumentTranslation.summary`)."""
    plan = read(data, format, attributes)
    texts = plan.texts
    config = dataclasses.replace(translator.defaults if config is None else config, nbest=1)
    found: list[str] = []
    rated: list[float | None] = []
    stream = translator.translate_stream(
        texts, config, batch_tokens, target_lang=target_lang, confidence=confidence, glossary=glossary
    )
    for translation in stream:
        found.append(translation.text)
        rated.append(translation.confidence)
        if progress is not None:
            progress(len(found), len(texts))
    written = [document_text(text) for text in found]
    pairs = plan.pairs(written)
    links = translator.align(pairs, target_lang) if pairs else []
    segments = [Segment(k + 1, *row) for k, row in enumerate(zip(texts, found, rated))]
    return DocumentTranslation(plan.render(written, links), format, segments)
