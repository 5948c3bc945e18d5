"""SubRip (.srt) and WebVTT (.vtt) subtitles: cue numbers, identifiers, timings, settings, the WebVTT header,
notes and styles copied byte for byte; only the cues' text changes.

A sentence often runs over two or three cues ("He said that" / "he would come."): cues are translated in
groups that end where a cue's text ends a sentence (at most MAX_GROUP cues), the group as one text whose cue
boundaries and line breaks are void spans, so each cue gets the translation's words aligned to its own (the
model's attention; proportionally without it) and keeps its number of lines. A cue whose share came back
empty gets its share of the group's words by their count instead: a cue is never left without text (a blank
line would end it). The timings are checked with the srt package and webvtt-py's reader, a damaged file
refused in one sentence.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from mtkit.decode.htmltree import Element
from mtkit.decode.markup import Unit, alignment_pairs, unit_of
from mtkit.decode.placeholders import protect
from mtkit.documents.units import decode
from mtkit.errors import MtkitError

MAX_GROUP = 4
ENDS = re.compile(r"[.!?…。！？](?:[\"'”’»)\]]|</?\w+>)*\s*$")
BLOCKS = re.compile(r"((?:^[ \t]*(?:\r?\n|$))+)", re.MULTILINE)
CUE = "\x00"  # a cue boundary inside a group's text: never in a translation
VTT_TIME = re.compile(r"^(?:\d{2,}:)?[0-5]\d:[0-5]\d\.\d{3}$")


@dataclass
class Cue:
    head: str  # the number / identifier and timing lines, as written, with their line endings
    lines: list[str]  # the text lines
    newline: str


class Subtitles:
    def __init__(self, text: str, kind: str) -> None:
        self.parts: list[str | Cue] = []
        blocks = BLOCKS.split(text)
        for k, block in enumerate(blocks):
            if k % 2 or not block:
                self.parts.append(block)
                continue
            cue = self._cue(block, kind, len([p for p in self.parts if isinstance(p, Cue)]) + 1, first=k == 0)
            self.parts.append(block if cue is None else cue)
        self.cues = [p for p in self.parts if isinstance(p, Cue)]
        if not self.cues:
            raise MtkitError(f"the input has no {kind} cue (a number or identifier, a timing line, text).")
        self.groups: list[list[Cue]] = []
        for cue in self.cues:
            if not self.groups or len(self.groups[-1]) >= MAX_GROUP or ENDS.search(" ".join(self.groups[-1][-1].lines)):
                self.groups.append([])
            self.groups[-1].append(cue)
        self.units: list[Unit | None] = [self._unit(g) for g in self.groups]

    @staticmethod
    def _cue(block: str, kind: str, number: int, first: bool) -> Cue | None:
        lines = block.splitlines(keepends=True)
        newline = "\r\n" if block.split("\n")[0].endswith("\r") else "\n"
        if kind == "vtt":
            if first:
                if not lines[0].lstrip("\ufeff").startswith("WEBVTT"):
                    raise MtkitError("the input is not WebVTT: its first line is not WEBVTT.")
                return None
            if lines[0].startswith(("NOTE", "STYLE", "REGION")):
                return None
            at = 0 if "-->" in lines[0] else 1
            if len(lines) <= at or "-->" not in lines[at]:
                raise MtkitError(f"WebVTT cue {number} is damaged: no timing line (START --> END).")
            start, _, rest = lines[at].strip().partition(" --> ")
            end = rest.split()[0] if rest.split() else ""
            if not (VTT_TIME.match(start) and VTT_TIME.match(end)):
                raise MtkitError(f"WebVTT cue {number} is damaged: {lines[at].strip()!r} is not START --> END.")
            return Cue("".join(lines[: at + 1]), [x.rstrip("\r\n") for x in lines[at + 1 :]], newline)
        import srt

        if len(lines) < 2 or not lines[0].strip().isdigit() or "-->" not in lines[1]:
            raise MtkitError(f"SubRip cue {number} is damaged: a cue is a number, START --> END, then its text.")
        start, _, end = lines[1].strip().partition("-->")
        try:
            srt.srt_timestamp_to_timedelta(start.strip())
            srt.srt_timestamp_to_timedelta(end.strip().split()[0] if end.strip() else "")
        except (ValueError, srt.TimestampParseError, IndexError):
            raise MtkitError(f"SubRip cue {number} is damaged: {lines[1].strip()!r} is not START --> END.") from None
        return Cue("".join(lines[:2]), [x.rstrip("\r\n") for x in lines[2:]], newline)

    @staticmethod
    def _unit(group: list[Cue]) -> Unit | None:
        run: list[Element | str] = []
        for k, cue in enumerate(group):
            if k:
                run += [Element("#cue", CUE, void=True, inline=True), " "]
            for j, line in enumerate(cue.lines):
                if j:
                    run += [Element("#break", "\n", void=True, inline=True), " "]
                run.extend(p for p in protect(line) if p != "")
        return unit_of(run, lambda s: s) if run else None

    @property
    def texts(self) -> list[str]:
        return [u.text for u in self.units if u is not None]

    def pairs(self, found: Sequence[str]) -> list[tuple[list[str], list[str]]]:
        return alignment_pairs((u for u in self.units if u is not None), found)

    def render(self, found: Sequence[str], links: Sequence[Sequence[int | None]] | None) -> bytes:
        answers, aligned = iter(found), iter(links or [])
        text: dict[int, list[str]] = {}
        for group, unit in zip(self.groups, self.units):
            if unit is None:
                continue
            target = next(answers)
            out = unit.render(target, next(aligned, None) if unit.tagged else None)
            shares = [re.sub(r"[ \t]*\n[ \t]*", "\n", s).strip() for s in out.split(CUE)]
            if len(shares) != len(group) or not all(s.strip() for s in shares):
                shares = by_count(target, [sum(len(x.split()) for x in c.lines) for c in group])
            for cue, share in zip(group, shares):
                text[id(cue)] = [line for line in share.split("\n") if line.strip()] or ["…"]
        written = []
        for part in self.parts:
            if isinstance(part, str):
                written.append(part)
            else:
                lines = text.get(id(part), part.lines)
                written.append(part.head + part.newline.join(lines) + (part.newline if lines else ""))
        return "".join(written).encode("utf-8")


def by_count(target: str, counts: list[int]) -> list[str]:
    """The target's words shared among cues in proportion to their source words, each cue one at least."""
    words, total = target.split(), max(sum(counts), 1)
    shares, at = [], 0
    for k, count in enumerate(counts):
        left = len(counts) - k - 1
        take = len(words) - at - left if k == len(counts) - 1 else round(len(words) * count / total)
        take = max(1, min(take, len(words) - at - left))
        shares.append(" ".join(words[at : at + take]))
        at += take
    return shares


def read(data: bytes, kind: str) -> Subtitles:
    text = decode(data, "SubRip" if kind == "srt" else "WebVTT")
    if kind == "vtt":
        import webvtt

        try:
            webvtt.from_string(text)
        except Exception as exc:  # webvtt-py's MalformedFileError and what a malformed cue raises inside it
            raise MtkitError(f"the input is not a well-formed WebVTT file ({exc}).") from None
    return Subtitles(text, kind)
