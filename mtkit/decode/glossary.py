"""A glossary: source terms whose translation is given, each enforced where its source side occurs.

The value is read once and checked (`Glossary.read` from a TSV or CSV file, DeepL's glossary entries formats;
`Glossary.of` from entries in hand, as a server's request gives them) and then only asked which terms a line
holds (`Glossary.find`). A term applies to a line when its source side occurs there: case-insensitively, on word
boundaries (a term that begins or ends with a letter or digit of a spaced script does not match inside a longer
word; Chinese, Japanese, Korean and Thai terms match anywhere), any run of spaces in the line matching a space of
a multi-word term, leftmost first and, of the terms that start at one place, the longest. The decoder must then
produce each term's target side (mtkit/decode/constraints.py), as often as its source side occurs.

No torch here: the Translator (mtkit/decode/translator.py) and the server read glossaries without it.
"""

from __future__ import annotations

import csv
import functools
import io
import os
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from mtkit.config import SamplingConfig
from mtkit.data.tokenizer import Tokenizer
from mtkit.errors import MtkitError

MAX_BYTES = 10 * 1024 * 1024  # DeepL's limit for a glossary's entries
# Scripts written without spaces between words: no word boundary to ask for.
UNSPACED = re.compile(r"[\u0e00-\u0e7f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")


@dataclass(frozen=True)
class Glossary:
    """(source, target) entries, in the order given, each side a stripped, non-empty single line, no source twice
    (sources compared case-insensitively). Build it with `read`, `parse` or `of`: they check the entries."""

    entries: tuple[tuple[str, str], ...]
    _pattern: re.Pattern[str] | None = field(default=None, init=False, repr=False, compare=False)
    _targets: dict[str, str] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        check(self.entries, "the glossary")
        # Longest sources first: of the terms that start at one place, the regex engine takes the first that matches.
        ordered = sorted((source for source, _ in self.entries), key=len, reverse=True)
        pattern = re.compile("|".join(term_pattern(source) for source in ordered), re.IGNORECASE) if ordered else None
        object.__setattr__(self, "_pattern", pattern)
        object.__setattr__(self, "_targets", {normal(source): target for source, target in self.entries})

    @classmethod
    def of(cls, entries: Mapping[str, str] | Iterable[tuple[str, str]], name: str = "the glossary") -> Glossary:
        """A glossary of entries in hand (a dict, or (source, target) pairs); a bad one refused in one sentence."""
        pairs = list(entries.items() if isinstance(entries, Mapping) else entries)
        cleaned = []
        for number, pair in enumerate(pairs, 1):
            if not (isinstance(pair, (tuple, list)) and len(pair) == 2 and all(isinstance(s, str) for s in pair)):
                raise MtkitError(f"{name}: entry {number} is not a (source, target) pair of strings.")
            cleaned.append((pair[0].strip(), pair[1].strip()))
        check(cleaned, name, "entry")
        return cls(tuple(cleaned))

    @classmethod
    def read(cls, path: str | os.PathLike[str]) -> Glossary:
        """A glossary file: `source<TAB>target` lines (TSV), or CSV (a `.csv` file) with two fields a row."""
        path = Path(path)
        try:
            with path.open("rb") as f:
                data = f.read(MAX_BYTES + 1)
        except OSError as exc:
            raise MtkitError(f"cannot read the glossary {path} ({exc.strerror or exc}).") from None
        if len(data) > MAX_BYTES:
            raise MtkitError(f"the glossary {path} is over {MAX_BYTES // 2**20} MiB.")
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise MtkitError(f"the glossary {path} is not UTF-8 (byte {exc.start}).") from None
        return cls.parse(text, "csv" if path.suffix.lower() == ".csv" else "tsv", str(path))

    @classmethod
    def parse(cls, text: str, format: str = "tsv", name: str = "the glossary") -> Glossary:
        """Entries in DeepL's `tsv` or `csv` format (blank lines skipped); a bad line refused naming it."""
        if format not in ("tsv", "csv"):
            raise MtkitError(f"a glossary's format is tsv or csv, not {format!r}.")
        rows = []
        if format == "tsv":
            for number, line in enumerate(text.splitlines(), 1):
                if not line.strip():
                    continue
                if line.count("\t") != 1:
                    said = "has no TAB between" if "\t" not in line else "has more than one TAB between"
                    raise MtkitError(f"{name}, line {number}, {said} its source and target: {short(line)}")
                source, target = line.split("\t")
                rows.append((number, source.strip(), target.strip()))
        else:
            reader = csv.reader(io.StringIO(text, newline=""), strict=True)
            try:
                for fields in reader:
                    if not any(f.strip() for f in fields):
                        continue
                    if len(fields) != 2:
                        raise MtkitError(
                            f"{name}, line {reader.line_num}, has {len(fields)} fields; a row is source,target."
                        )
                    rows.append((reader.line_num, fields[0].strip(), fields[1].strip()))
            except csv.Error as exc:
                raise MtkitError(f"{name}, line {reader.line_num}, is not valid CSV ({exc}).") from None
        check([(s, t) for _, s, t in rows], name, "line", [n for n, _, _ in rows])
        return cls(tuple((s, t) for _, s, t in rows))

    def __len__(self) -> int:
        return len(self.entries)

    def find(self, line: str) -> list[tuple[str, str]]:
        """The (source as written in `line`, target) of each term occurrence in `line`, in line order."""
        if self._pattern is None:
            return []
        return [(m.group(0), self.target_of(m.group(0))) for m in self._pattern.finditer(line)]

    def target_of(self, found: str) -> str:
        """The target of a source term as the line wrote it (a case-insensitive match whose case folding differs,
        as the long s does, is looked up by its pattern)."""
        target = self._targets.get(normal(found))
        if target is None:
            source = next(s for s, _ in self.entries if re.fullmatch(term_pattern(s), found, re.IGNORECASE))
            target = self._targets[normal(source)]
        return target

    def targets(self, line: str) -> list[str]:
        """The target side of each term occurrence in `line`: what its translation must contain."""
        return [target for _, target in self.find(line)]


def check(entries: Iterable[tuple[str, str]], name: str, unit: str = "entry", numbers: list[int] | None = None) -> None:
    """Refuse, naming the line (or entry), an empty side, a side with a control character, or a repeated source."""
    seen: dict[str, int] = {}
    for index, (source, target) in enumerate(entries):
        number = numbers[index] if numbers is not None else index + 1
        for side, text in (("source", source), ("target", target)):
            if not text or not text.strip():
                raise MtkitError(f"{name}, {unit} {number}: the {side} term is empty.")
            if any(unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp") for c in text):
                raise MtkitError(f"{name}, {unit} {number}: the {side} term holds a control character or line break.")
        key = normal(source)
        if key in seen:
            raise MtkitError(f"{name}, {unit} {number}: the source term {source!r} is already {unit} {seen[key]}.")
        seen[key] = number


def normal(source: str) -> str:
    """What two spellings of a source term share: case folded, spaces single."""
    return " ".join(source.casefold().split())


def term_pattern(source: str) -> str:
    """A source term as a regex: its words with any run of spaces between, bounded where it begins or ends with a
    letter or digit of a spaced script."""
    body = r"\s+".join(re.escape(word) for word in source.split())
    before = r"(?<!\w)" if bounded(source[0]) else ""
    after = r"(?!\w)" if bounded(source[-1]) else ""
    return before + body + after


def bounded(char: str) -> bool:
    return (char.isalnum() or char == "_") and not UNSPACED.match(char)


def short(line: str, width: int = 60) -> str:
    return repr(line if len(line) <= width else line[:width] + "...")


@dataclass(frozen=True)
class Terms:
    """A batch's glossary terms in target ids: `sentences[i]`, one token list per term occurrence of sentence i
    (none: []); `joining`, the ids of the pieces that continue a word, which may not follow a term (its last word
    stays the word written, not the start of a longer one)."""

    sentences: list[list[list[int]]]
    joining: tuple[int, ...] = ()

    def __bool__(self) -> bool:
        return any(self.sentences)

    def of(self, rows: Sequence[int]) -> Terms:
        return Terms([self.sentences[i] for i in rows], self.joining)


def term_ids(vocab: Tokenizer, glossary: Glossary, lines: Sequence[str]) -> list[list[list[int]]]:
    """Each line's terms as the target tokens the decoder must produce, one list per occurrence: each term's target
    side cut once, as a target text of its own (its first word begins a word, as it does inside a sentence)."""
    found = [glossary.targets(line) for line in lines]
    distinct = sorted({target for targets in found for target in targets})
    tokens = dict(zip(distinct, vocab.encode_target_batch(distinct))) if distinct else {}
    return [[tokens[target] for target in targets if tokens[target]] for targets in found]


def joining_ids(vocab: Tokenizer) -> tuple[int, ...]:
    """The pieces that continue a word: no SentencePiece word start (U+2581), a letter or digit first; and the
    byte-fallback pieces (`<0x72>`) of a letter or digit byte, or of any byte of a multi-byte character, which
    would spell the same continuation a byte at a time."""
    return _joining(vocab)


BYTE_PIECE = re.compile(r"<0x([0-9A-Fa-f]{2})>")


def continues_a_word(piece: str) -> bool:
    byte = BYTE_PIECE.fullmatch(piece)
    if byte:
        value = int(byte.group(1), 16)
        return value >= 0x80 or chr(value).isalnum()
    return bool(piece) and piece[0] != "\u2581" and piece[0].isalnum()


@functools.lru_cache(maxsize=8)  # a vocabulary's are found once (tens of thousands of pieces: tens of ms)
def _joining(vocab: Any) -> tuple[int, ...]:
    return tuple(i for i in range(len(vocab)) if continues_a_word(vocab.piece(i)))


class Enforcing(Protocol):
    """What `checked` asks of an engine (mtkit/decode/engine.py's `Engine`)."""

    enforces_terms: bool


def checked(glossary: Glossary | None, engine: Enforcing, sampling: SamplingConfig | None) -> Glossary | None:
    """The glossary to enforce (None for none, or an empty one), refused in one sentence where `engine` cannot
    enforce one (CTranslate2) or with sampling."""
    if not glossary:
        return None
    if not engine.enforces_terms:
        raise MtkitError(
            "this model runs on CTranslate2, which cannot enforce a glossary; translate with the mtkit model file it "
            "was exported from (mtkit translate -m MODEL.pt --glossary FILE)."
        )
    if sampling is not None:
        raise MtkitError("a glossary is enforced by beam search; translate without --sampling to use one.")
    return glossary
