"""Sentences inside a line: a paragraph split into sentences, each translated in the batch with the others, and
joined back on its line (`DecodeConfig.split`, on by default; `--no-split` keeps a line whole).

A model trained on one sentence a line translates the first sentence of a paragraph and drops the rest; split,
each sentence is translated as it was trained. The segmenter is sentencex (Wikimedia's, about 300 languages,
rules and abbreviation lists per language with fallbacks between related languages; compiled), chosen over
pysbd by a measurement (docs/results/paragraphs.json, "segmenters"): on Multi30k paragraphs
both split as many right, sentencex at a small fraction of the time; of hand-made hard cases pysbd cut a URL
at its `?` and Czech `např.`, sentencex French `M. Dupont`. A boundary it finds inside a URL, an e-mail
address or a placeholder (`{name}`, `%(x)s`) is not one. Translations are joined by a space, or by nothing
into a language written without spaces (Chinese, Japanese, Thai, ...).

Every segment whose translation comes back empty, or as long as the length limit lets it be (cut), is counted
and said once at the end of the stream, with the lines it came from.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mtkit.decode.lengths import max_output_length

logger = logging.getLogger(__name__)

# Languages written without spaces between words (and sentences): translations into them are joined by nothing.
NO_SPACES = frozenset("zh ja th lo km my bo yue wuu".split())
# Where a segmenter's boundary is never one: URLs, e-mail addresses, placeholders.
UNBREAKABLE = re.compile(
    r"(?:https?|ftp)://\S+|www\.\S+|[\w.+-]+@[\w-]+(?:\.[\w-]+)+|\{\{[^{}\s]*\}\}|\{[^{}\s]*\}|%\([^)\s]*\)\w|\$\{[^}\s]*\}"
)


def split(text: str, language: str) -> list[str]:
    """The sentences of `text`, stripped, in order (none for a blank text); `language` picks sentencex's rules
    (an ISO 639 code; an unknown one gets its generic rules)."""
    import sentencex

    pieces = [p for p in sentencex.segment(language or "en", text) if p]
    keep = {a for m in UNBREAKABLE.finditer(text) for a in range(m.start() + 1, m.end())}
    out: list[str] = []
    at = 0
    for piece in pieces:
        start = text.find(piece, at)
        at = start + len(piece) if start >= 0 else at + len(piece)
        if out and (start in keep or not out[-1].strip()):  # a boundary inside something unbreakable: none
            out[-1] += piece
        else:
            out.append(piece)
    return [s.strip() for s in out if s.strip()]


def source_language(languages: Any) -> str:
    """The segmenter's language from a model's recorded (source, target): a language code, or "" (generic)."""
    if isinstance(languages, (list, tuple)) and languages and isinstance(languages[0], str):
        code = languages[0].lower()
        return code if re.fullmatch(r"[a-z]{2,3}(?:[-_][a-z0-9]+)*", code) and code not in ("src", "tgt") else ""
    return ""


def joiner(target: str) -> str:
    """What goes between two translated sentences in `target` (a language code or a >>xx<< token)."""
    code = target.strip("><").lower().replace("_", "-").split("-")[0]
    return "" if code in NO_SPACES else " "


@dataclass
class Losses:
    """Segments whose translation came back empty or cut, by line number: said once, at the end."""

    segments: int = 0
    empty: list[int] = field(default_factory=list)
    cut: list[int] = field(default_factory=list)

    def say(self) -> None:
        for what, lines in (
            ("came back empty", self.empty),
            ("reached the length limit and may be cut; a longer --max-len-b may help", self.cut),
        ):
            if lines:
                shown = ", ".join(map(str, sorted(set(lines))[:10])) + (", ..." if len(set(lines)) > 10 else "")
                logger.warning("%d of %d sentences %s (lines %s).", len(lines), self.segments, what, shown)


@dataclass
class Pieces:
    """A chunk's lines as sentences: `segments` to translate (a line with a prefix, or that is one sentence,
    stays whole), `owner[k]` the chunk index of segment k."""

    segments: list[Any]
    owner: list[int]
    count: int

    @classmethod
    def of(cls, items: Sequence[Any], language: str) -> Pieces:
        segments, owner = [], []
        for i, item in enumerate(items):
            parts = split(item, language) if isinstance(item, str) else []
            for part in parts if len(parts) > 1 else [item]:
                segments.append(part)
                owner.append(i)
        return cls(segments, owner, len(items))

    def join(
        self, found: Iterable[Any], first: int, glue: str, make: Callable[[int, list[tuple[str, float]]], Any]
    ) -> Iterator[Any]:
        """Each line's translation (`make(line, hypotheses)`), its sentences' hypotheses joined rank by rank
        (scores added), in order as its last sentence comes."""
        parts: list[list[list[tuple[str, float]]]] = [[] for _ in range(self.count)]
        todo = [self.owner.count(i) for i in range(self.count)]
        for k, translation in enumerate(found):
            i = self.owner[k]
            parts[i].append(translation.hypotheses)
            if len(parts[i]) == todo[i]:
                yield make(first + i, joined(parts[i], glue))
                parts[i] = []

    def means(self, confidences: Sequence[float | None]) -> dict[int, float]:
        """Per chunk line, the mean of its segments' `confidences` (one a segment; None counts as 1)."""
        sums: dict[int, list[float]] = {}
        for i, c in zip(self.owner, confidences):
            sums.setdefault(i, []).append(1.0 if c is None else c)
        return {i: sum(v) / len(v) for i, v in sums.items()}

    def losses(
        self,
        texts: Sequence[str],
        lengths: Mapping[int, tuple[int, int]],
        config: Any,
        positions: int,
        first: int,
        into: Losses,
    ) -> None:
        """Count this chunk's segments whose translation (`texts`, one a segment) is empty or ran to its length
        limit: `lengths[k]`, segment k's (source tokens as the model read them, its best output's tokens), the
        search's own, so that the limit is the one the search had (mtkit/decode/lengths.py)."""
        sources = [s if isinstance(s, str) else s[0] for s in self.segments]
        for k, (source, text) in enumerate(zip(sources, texts)):
            if not source.strip():
                continue
            into.segments += 1
            read, written = lengths[k]
            if not text.strip():
                into.empty.append(first + self.owner[k])
            elif written >= max_output_length(read, config, positions + 1):
                into.cut.append(first + self.owner[k])


def joined(parts: list[list[tuple[str, float]]], glue: str) -> list[tuple[str, float]]:
    """The k-th hypothesis of a line: its sentences' k-th (or last) hypotheses joined, their scores added."""
    if len(parts) == 1:
        return parts[0]
    ranks = max(len(p) for p in parts)
    out = []
    for r in range(ranks):
        chosen = [p[min(r, len(p) - 1)] for p in parts]
        out.append((glue.join(t for t, _ in chosen if t), sum(s for _, s in chosen)))
    return out
