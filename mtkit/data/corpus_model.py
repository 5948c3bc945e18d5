"""The corpus data model: `Source` (a file to fetch), `Member`, `Part` and `Corpus`."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Source:
    """One file to fetch. `filename` is its name in the cache and in a `--mirror` directory."""

    filename: str
    url: str
    sha256: str | None = None
    md5: str | None = None
    size: int | None = None  # exact bytes, when published
    about: str = ""  # a human size for `--list` when the exact one is unknown ("2.3 GB")
    group: str = "misc"  # cache sub-directory: keeps equal file names of different origins apart

    @property
    def pinned(self) -> str | None:
        """Which published checksum the download is checked against: "sha256", "md5", or None
        (then its sha256 is recorded at the first download and checked from then on)."""
        return "sha256" if self.sha256 else "md5" if self.md5 else None

    @property
    def kind(self) -> str:
        """How to open it: 'tar' (also .tgz), 'zip', 'gz' (one compressed text) or 'text'."""
        name = self.filename.lower()
        if name.endswith((".tgz", ".tar.gz", ".tar", ".tar.bz2", ".tbz2", ".tar.xz", ".txz")):
            return "tar"
        if name.endswith(".zip"):
            return "zip"
        if name.endswith(".gz"):
            return "gz"
        return "text"


@dataclass(frozen=True)
class Member:
    """One language side of a part: a file, or a member of an archive file.

    `path` is the member's name inside the archive (None for a plain or gzipped file,
    which is the text itself). A member whose name ends in .gz is decompressed on reading
    (giga-fren keeps gzip files inside a plain tar). `fmt` is 'text' (one sentence a
    line) or 'sgml' (WMT test sets: one `<seg id="N">...</seg>` a line, XML-escaped).
    """

    source: str
    path: str | None = None
    fmt: str = "text"

    def describe(self) -> str:
        return f"{self.path} in {self.source}" if self.path else self.source


@dataclass(frozen=True)
class Part:
    """One parallel text within a split (e.g. Europarl v7 within train), a Member per language."""

    name: str
    sides: tuple[tuple[str, Member], ...]
    note: str = ""  # for `--list`, e.g. "3003 lines"

    def member(self, lang: str) -> Member:
        for code, member in self.sides:
            if code == lang:
                return member
        raise KeyError(lang)


@dataclass(frozen=True)
class Corpus:
    name: str
    src: str
    tgt: str
    description: str
    splits: tuple[tuple[str, tuple[Part, ...]], ...]
    sources: tuple[Source, ...]
    vocab_size: int  # the default of `mtkit bpe`
    pairs: str = ""  # training pairs, for `--list` ("4.5M")
    family: str = ""  # the forward name this one reverses, or its own name
    # Length filters of the cleaning step (0 = off). On for web-crawled and parliament text;
    # off for Multi30k, curated caption translations where German compounds make 3% of
    # the pairs exceed a 1.5 word ratio although they are good translations (and the
    # canonical 29,000 training pairs are what every Multi30k result uses).
    max_words: int = 250
    max_ratio: float = 1.5

    def parts(self, split: str) -> tuple[Part, ...]:
        return dict(self.splits).get(split, ())

    def source(self, filename: str) -> Source:
        for src in self.sources:
            if src.filename == filename:
                return src
        raise KeyError(filename)

    def download_size(self) -> str:
        """Sum of the file sizes for `--list`: 'about' when some are only known roughly."""
        total, rough, unknown = 0.0, False, 0
        for s in self.sources:
            if s.size is not None:
                total += s.size
            elif s.about:
                number, unit = s.about.split()
                total += float(number) * {"kB": 1e3, "MB": 1e6, "GB": 1e9}[unit]
                rough = True
            else:
                unknown += 1
        text = ("about " if rough else "") + _human(int(total))
        if unknown:
            text += f" + {unknown} file{'s' if unknown > 1 else ''} of unpublished size"
        return text

    def contents(self, split: str) -> str:
        return " + ".join(f"{part.name} ({part.note})" if part.note else part.name for part in self.parts(split))


def _human(n: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"
