"""What every format shares: text as UTF-8 (binary refused), a piece of text as a unit with its placeholders,
and a plan of units between copied pieces."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from mtkit.decode.htmltree import Element
from mtkit.decode.markup import Unit, alignment_pairs, unit_of
from mtkit.decode.placeholders import protect
from mtkit.errors import MtkitError


def plain(text: str) -> str:
    return text


def decode(data: bytes, what: str) -> str:
    """`data` as text: UTF-8 (a byte-order mark dropped); binary data (NUL bytes) or another encoding refused."""
    if b"\x00" in data[:65536]:
        raise MtkitError(f"the input is binary (it holds NUL bytes), not {what}; give its own format with --format.")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise MtkitError(f"the input is not UTF-8 text (byte {exc.start}), so it is no {what} mtkit reads.") from None


def unit(text: str, escape: Callable[[str], str] = plain, breaks: bool = False) -> Unit | None:
    """`text` as a unit: placeholders taken out as void spans; with `breaks`, each line break a void span too
    (the translation keeps as many lines, each break where its words went). None: no word to translate."""
    run: list[Element | str] = []
    lines = text.splitlines(keepends=True) if breaks else [text]
    for line in lines:
        body = line.rstrip("\r\n")
        run.extend(p for p in protect(body, escape) if p != "")
        end = line[len(body) :]
        if end:
            run.append(Element("#break", end, void=True, inline=True))
            run.append(" ")
    return unit_of(run, escape) if run else None


def spread(text: str, sizes: list[int]) -> list[str]:
    """`text`'s words over len(sizes) lines in proportion to `sizes`, each line one word at least (a line of
    "…" where there are fewer words than lines)."""
    words, total = text.split(), max(sum(sizes), 1)
    out, at = [], 0
    for k, size in enumerate(sizes):
        left = len(sizes) - k - 1
        take = len(words) - at - left if not left else round(len(words) * size / total)
        take = max(1, min(take, len(words) - at - left))
        out.append(" ".join(words[at : at + take]))
        at += take
    return [o or "…" for o in out]


def keep_lines(out: str, source: str) -> str:
    """A unit's rendering with as many lines as its source and none blank: where alignment put two line breaks
    together or at an end, the words are spread over the lines by their count instead."""
    ends = re.findall(r"\r?\n", source)
    if not ends:
        return out
    parts = re.split(r"\r?\n", out)
    if len(parts) == len(ends) + 1 and all(p.strip() for p in parts):
        return out
    sizes = [len(line.split()) for line in re.split(r"\r?\n", source)]
    spread_out = spread(" ".join(p.strip() for p in parts), sizes)
    lead = out[: len(out) - len(out.lstrip(" \t"))]  # the paragraph's indent, never a line break
    return lead + "".join(line + end for line, end in zip(spread_out, [*ends, ""]))


@dataclass
class Pieces:
    """A document as copied pieces and units, in order: `texts` to translate, `render` to write it again."""

    parts: list[str | int] = field(default_factory=list)  # copied text, or the index of a unit
    units: list[Unit] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)  # each unit's text as written (its line breaks)
    tidy: Callable[[str], str] = plain  # applied to each rendered unit (e.g. spaces around line breaks)

    def copy(self, text: str) -> None:
        if text:
            self.parts.append(text)

    def add(self, text: str, escape: Callable[[str], str] = plain, breaks: bool = False) -> int | None:
        """`text` as a unit in its place (copied as it is when it has no word); the unit's index, or None."""
        found = unit(text, escape, breaks)
        if found is None:
            self.copy(escape(text))
            return None
        self.parts.append(len(self.units))
        self.units.append(found)
        self.sources.append(text if breaks else "")
        return len(self.units) - 1

    @property
    def texts(self) -> list[str]:
        return [u.text for u in self.units]

    def pairs(self, found: Sequence[str]) -> list[tuple[list[str], list[str]]]:
        return alignment_pairs(self.units, found)

    def outputs(self, found: Sequence[str], links: Sequence[Sequence[int | None]] | None) -> list[str]:
        """Each unit's translation with its spans placed (by `links`, one a tagged unit; else proportionally)."""
        aligned = iter(links or [])
        return [
            keep_lines(self.tidy(u.render(t, next(aligned, None) if u.tagged else None)), source)
            for u, t, source in zip(self.units, found, self.sources)
        ]

    def join(self, outputs: Sequence[str]) -> str:
        return "".join(p if isinstance(p, str) else outputs[p] for p in self.parts)

    def render(self, found: Sequence[str], links: Sequence[Sequence[int | None]] | None) -> bytes:
        return self.join(self.outputs(found, links)).encode("utf-8")


def tidy_breaks(text: str) -> str:
    """No space around a line break a unit put back."""
    return re.sub(r"[ \t]*(\r?\n)[ \t]*", r"\1", text)
