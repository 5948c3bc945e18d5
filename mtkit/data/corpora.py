"""The registry of named corpora: where each file comes from, which archive members to read, checksums.

A corpus is data, not code: its `Source`s (files to fetch, with sha256/md5 where they are
published) and, for each split, the `Part`s that make it up (one parallel text each, a
`Member` per language). A reverse direction (`wmt14-de-en`) is the same corpus with the
languages swapped: it names the same files, so it reuses the same downloads. The only
thing that differs by direction is the newstest2014 SGML pair (`-src.en`/`-ref.de` for
En->De, `-src.de`/`-ref.en` for De->En), exactly as sacreBLEU reads it.

Facts (URLs, sizes, sha256, members) are those published with WMT14 (statmt.org, TensorFlow
Datasets' checksums, sacreBLEU) and those of mtkit/data/multi30k/README.md, where the Multi30k files
ship with mtkit (`shipped_copy`). Tests and private mirrors point the registry at
another server with `Registry.override(base_url=...)`: every file is then fetched from
`base_url/<file name>`, the same flat layout a `--mirror` directory has.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from mtkit.data.corpus_model import Corpus, Member, Part, Source
from mtkit.errors import MtkitError

SPLITS = ("train", "valid", "test")


def _part(name: str, note: str = "", **sides: Member) -> Part:
    return Part(name, tuple(sides.items()), note)


def _reverse(corpus: Corpus, name: str, test: tuple[Part, ...] | None = None) -> Corpus:
    splits = tuple((split, test if (split == "test" and test is not None) else parts) for split, parts in corpus.splits)
    return dataclasses.replace(
        corpus,
        name=name,
        src=corpus.tgt,
        tgt=corpus.src,
        splits=splits,
        description=corpus.description.replace(f"{corpus.src}->{corpus.tgt}", f"{corpus.tgt}->{corpus.src}"),
        family=corpus.name,
    )


# --------------------------------------------------------------------------- WMT14
# www.statmt.org serves these paths over https (fairseq's and other toolkits' WMT scripts fetch them so);
# WMT14-SOURCES.md records the http form of the same URLs.
STATMT = "https://www.statmt.org"
EUROPARL = Source(
    "training-parallel-europarl-v7.tgz",
    f"{STATMT}/wmt13/training-parallel-europarl-v7.tgz",
    sha256="0224c7c710c8a063dfd893b0cc0830202d61f4c75c17eb8e31836103d27d96e7",
    size=657_632_379,
    group="wmt",
)
COMMONCRAWL = Source(
    "training-parallel-commoncrawl.tgz",
    f"{STATMT}/wmt13/training-parallel-commoncrawl.tgz",
    sha256="c7a74e2ea01ac6c920123108627e35278d4ccb5701e15428ffa34de86fa3a9e5",
    size=918_311_367,
    group="wmt",
)
NC9 = Source(
    "training-parallel-nc-v9.tgz",
    f"{STATMT}/wmt14/training-parallel-nc-v9.tgz",
    sha256="cb8953f292298e6877ae433c98912b927cb0766b303f4540512ddd286c748485",
    size=80_418_416,
    group="wmt",
)
UN = Source("training-parallel-un.tgz", f"{STATMT}/wmt13/training-parallel-un.tgz", about="2.3 GB", group="wmt")
GIGA = Source("training-giga-fren.tar", f"{STATMT}/wmt10/training-giga-fren.tar", about="2.3 GB", group="wmt")
DEV = Source("dev.tgz", f"{STATMT}/wmt14/dev.tgz", group="wmt")
TEST_FULL = Source(
    "test-full.tgz", f"{STATMT}/wmt14/test-full.tgz", md5="a8cd784e006feb32ac6f3d9ec7eb389a", group="wmt"
)


def _wmt14(src: str, tgt: str) -> Corpus:
    """The forward corpus en->{de,fr}; the archives' member names use the pair 'de-en' / 'fr-en'."""
    other = tgt  # "de" or "fr"
    pair = f"{other}-en"

    def side(source: Source, prefix: str) -> dict[str, Member]:
        return {lang: Member(source.filename, f"{prefix}.{lang}") for lang in ("en", other)}

    train = [
        _part("europarl-v7", **side(EUROPARL, f"training/europarl-v7.{pair}")),
        _part("commoncrawl", **side(COMMONCRAWL, f"commoncrawl.{pair}")),
    ]
    sources = [EUROPARL, COMMONCRAWL, NC9]
    if other == "fr":
        train.append(_part("un", **side(UN, f"un/undoc.2000.{pair}")))
        train.append(_part("news-commentary-v9", **side(NC9, f"training/news-commentary-v9.{pair}")))
        train.append(
            _part(
                "giga-fren",
                **{lang: Member(GIGA.filename, f"giga-fren.release2.fixed.{lang}.gz") for lang in ("en", "fr")},
            )
        )
        sources += [UN, GIGA]
    else:
        train.append(_part("news-commentary-v9", **side(NC9, f"training/news-commentary-v9.{pair}")))
    sources += [DEV, TEST_FULL]
    valid = [
        _part(
            "newstest2013", "3000", **{lang: Member(DEV.filename, f"dev/newstest2013.{lang}") for lang in ("en", other)}
        )
    ]
    what = {
        "de": "Europarl v7 + CommonCrawl + News Commentary v9 (the paper's En-De set)",
        "fr": "Europarl v7 + CommonCrawl + UN + News Commentary v9 + Gigaword fr-en (the paper's 36M)",
    }[other]
    return Corpus(
        name=f"wmt14-{src}-{tgt}",
        src=src,
        tgt=tgt,
        description=f"WMT14 {src}->{tgt}: train {what}; valid newstest2013 (3000); test newstest2014 full (3003, SGML)",
        splits=(("train", tuple(train)), ("valid", tuple(valid)), ("test", _newstest2014(src, tgt))),
        sources=tuple(sources),
        vocab_size={"de": 37000, "fr": 32000}[other],
        pairs={"de": "4.5M", "fr": "36M"}[other],
        family=f"wmt14-{src}-{tgt}",
    )


def _newstest2014(src: str, tgt: str) -> tuple[Part, ...]:
    """newstest2014 'full' as sacreBLEU reads it: the source side from -src.SRC, the target from -ref.TGT."""
    other = tgt if src == "en" else src
    prefix = f"test-full/newstest2014-{other}en"
    return (
        _part(
            "newstest2014",
            "full, 3003, SGML",
            **{
                src: Member(TEST_FULL.filename, f"{prefix}-src.{src}.sgm", "sgml"),
                tgt: Member(TEST_FULL.filename, f"{prefix}-ref.{tgt}.sgm", "sgml"),
            },
        ),
    )


# --------------------------------------------------------------------------- Multi30k
# The same 31,014 captions in four languages (line N of every file is the same caption): English and German
# (Elliott et al. 2016), French (Elliott et al. 2017) and Czech (Barrault et al. 2018). Every pair of
# English with another language is a corpus, and a multilingual model takes several (docs/multilingual.md).
MULTI30K_COMMIT = "a3d2e0d26b56f3846f66a952536ffed4e401d05a"
MULTI30K_URL = f"https://raw.githubusercontent.com/multi30k/dataset/{MULTI30K_COMMIT}/data/task1/raw"
_MULTI30K_FILES = {  # file -> (sha256 of the .gz, bytes), as listed in mtkit/data/multi30k/README.md
    "train.en.gz": ("d79cfa999dd4c51d2cb42499b6796d5a882c3a8a961923c25a898c90f8bbd56f", 568_929),
    "train.de.gz": ("726e39b2fa9eb9ffb6dc763fb35a179f80fae06ffc5d28b6ace5faa883de28a6", 637_044),
    "train.fr.gz": ("622e75069e9f4c577425c4f277116ce66e63a2401c0a2312d90073cb12379a3c", 604_242),
    "train.cs.gz": ("a65adb8b32e3bc664f21ecba7a6e7f6950fd1f405e135f7c312faabdb6255077", 593_827),
    "val.en.gz": ("14f7d25ddd868909a9213e361768460edcacdd6ab9d1e77b92560dc10c10dc28", 21_650),
    "val.de.gz": ("f0cba2f995189cf5770f29a8a9a537a3ad3f51657ad873405082ff6863a5e75a", 24_681),
    "val.fr.gz": ("ca3106f1a72390591d25f6c45cb4cd39dec4cd3f123e099748a3ce5256c160e9", 23_001),
    "val.cs.gz": ("b63226e05c4bd5dd6a42897d74b86a1b9d2c31498252c572b1ea7f7996927fcc", 22_096),
    "test_2016_flickr.en.gz": ("611d361c6334bc7246101d48097c13cf5c4413c5befc793cc629934359d532d9", 21_077),
    "test_2016_flickr.de.gz": ("9204244e408ccb38d2a55cfcd344df15005fc42a07a6e55ca6c52b6ababb8cc8", 22_890),
    "test_2016_flickr.fr.gz": ("6d326e188d259fb1d04ac19eae3af956559b3a0b93d7635e56c90987c40c8b90", 22_310),
    "test_2016_flickr.cs.gz": ("200a4a74cc9560f051924abb9803be008d1908d77f747e9141aeb86dfd2797f1", 22_572),
}
MULTI30K_SOURCES = tuple(
    Source(name, f"{MULTI30K_URL}/{name}", sha256=sha, size=size, group=f"multi30k-{MULTI30K_COMMIT[:7]}")
    for name, (sha, size) in _MULTI30K_FILES.items()
)
MULTI30K_LANGS = ("de", "fr", "cs")  # the languages paired with English, in the order they were published
# The twelve files ship inside the package (2.5 MB; their source and terms in its README.md), so that
# `mtkit prepare multi30k-en-de` needs neither a network nor a directory beside the clone or the wheel.
SHIPPED_MULTI30K = Path(__file__).resolve().with_name("multi30k")


def shipped_copy(corpus: Corpus) -> Path | None:
    """The directory that ships every file of `corpus`, or None: only Multi30k's own sources, unchanged (a
    registry pointed at another server or with other checksums, as the tests make, is fetched as it says)."""
    if not corpus.sources or any(s not in MULTI30K_SOURCES for s in corpus.sources):
        return None
    return SHIPPED_MULTI30K if all((SHIPPED_MULTI30K / s.filename).is_file() for s in corpus.sources) else None


def _multi30k(tgt: str) -> Corpus:
    """English -> `tgt`; its sources are only the six files of its two languages."""

    def part(name: str, stem: str, note: str) -> Part:
        return _part(name, note, **{lang: Member(f"{stem}.{lang}.gz") for lang in ("en", tgt)})

    return Corpus(
        name=f"multi30k-en-{tgt}",
        src="en",
        tgt=tgt,
        description=f"Multi30k task 1 en->{tgt} (image captions; research use): train 29000, valid 1014, "
        "test_2016_flickr 1000",
        splits=(
            ("train", (part("train", "train", "29000"),)),
            ("valid", (part("val", "val", "1014"),)),
            ("test", (part("test_2016_flickr", "test_2016_flickr", "1000"),)),
        ),
        sources=tuple(s for s in MULTI30K_SOURCES if s.filename.split(".")[-2] in ("en", tgt)),
        vocab_size=8000,
        pairs="29k",
        family=f"multi30k-en-{tgt}",
        max_words=0,
        max_ratio=0,
    )


# --------------------------------------------------------------------------- the registry
@dataclass
class Registry:
    """Named corpora; `get` fails with the list of known names."""

    corpora: dict[str, Corpus] = field(default_factory=dict)

    def add(self, corpus: Corpus) -> Registry:
        self.corpora[corpus.name] = corpus
        return self

    def names(self) -> list[str]:
        return list(self.corpora)

    def __contains__(self, name: str) -> bool:
        return name in self.corpora

    def __iter__(self) -> Iterator[Corpus]:
        return iter(self.corpora.values())

    def get(self, name: str) -> Corpus:
        if name not in self.corpora:
            known = ", ".join(self.names() + ["custom"])
            raise MtkitError(
                f"unknown corpus '{name}'; known corpora: {known} (`mtkit prepare --list` describes them)."
            )
        return self.corpora[name]

    def override(
        self, base_url: str | None = None, sources: Mapping[str, Mapping[str, object]] | None = None
    ) -> Registry:
        """A copy fetching from `base_url/<file name>` and/or with some Source fields replaced.

        `sources` maps a file name to new field values, e.g. {"dev.tgz": {"sha256": "..."}}:
        how a test serves its own small archives in the real corpora's shapes, and how a
        private mirror with re-packed files would be described.
        """
        sources = dict(sources or {})
        unknown = set(sources) - {s.filename for c in self for s in c.sources}
        if unknown:
            raise MtkitError(f"no corpus uses the file(s) {', '.join(sorted(unknown))}.")

        def fix(src: Source) -> Source:
            if base_url:
                src = dataclasses.replace(src, url=f"{base_url.rstrip('/')}/{src.filename}")
            if src.filename in sources:
                src = dataclasses.replace(src, **sources[src.filename])
            return src

        return Registry(
            {name: dataclasses.replace(c, sources=tuple(fix(s) for s in c.sources)) for name, c in self.corpora.items()}
        )


def default_registry() -> Registry:
    reg = Registry()
    for other in ("de", "fr"):
        fwd = _wmt14("en", other)
        reg.add(fwd)
        reg.add(_reverse(fwd, f"wmt14-{other}-en", _newstest2014(other, "en")))
    for other in MULTI30K_LANGS:
        m30k = _multi30k(other)
        reg.add(m30k)
        reg.add(_reverse(m30k, f"multi30k-{other}-en"))
    return reg


def custom_corpus(src: str, tgt: str, files: Mapping[str, tuple[str, str]], name: str | None = None) -> Corpus:
    """A corpus of the user's own aligned files: {split: (src_path, tgt_path)}.

    Each path is its own Source with a `file://`-free url (the path itself): nothing is
    fetched or cached; `prepare` reads the files where they are.
    """
    if src == tgt:
        raise MtkitError(f"source and target language are both '{src}'; give two different language codes.")
    sources: list[Source] = []
    splits = []
    for split in SPLITS:
        if split not in files:
            continue
        src_path, tgt_path = files[split]
        for path in (src_path, tgt_path):
            if not any(s.filename == path for s in sources):
                sources.append(Source(path, url=path, group="local"))
        splits.append((split, (_part(split, **{src: Member(src_path), tgt: Member(tgt_path)}),)))
    return Corpus(
        name=name or f"custom-{src}-{tgt}",
        src=src,
        tgt=tgt,
        description="the user's own aligned files",
        splits=tuple(splits),
        sources=tuple(sources),
        vocab_size=0,
        pairs="",
        family="custom",
        # The user's own data gets only the rules asked for: WMT14's word limits would drop good pairs
        # of other scripts (all of them for a language without spaces).
        max_words=0,
        max_ratio=0,
    )


# Every file of a named corpus has a pinned sha256 or a line here that says why it has none. None of
# these is published with a sha256 by statmt.org, and none is in WMT14-SOURCES.md (TensorFlow Datasets'
# url_checksums, sacrebleu); mtkit cannot download them where it is built to pin them itself. Until a
# sha256 is pinned, `fetch` records the one of the first download and checks every later run against it,
# and `prepare` says so for each of them (prepare.json: "checksum": "recorded on first download ...").
UNPINNED_WHY = {
    DEV.filename: "no published checksum: neither statmt.org nor TensorFlow Datasets or sacrebleu list one",
    UN.filename: "no published checksum: TensorFlow Datasets and sacrebleu do not list this archive",
    GIGA.filename: "no published checksum: TensorFlow Datasets and sacrebleu do not list this archive",
    TEST_FULL.filename: "md5 only: sacrebleu's md5 is checked; no sha256 is published for it",
}


def unpinned(registry: Registry) -> dict[str, str]:
    """{file name: why} for every file of the registry without a pinned sha256 (local files aside)."""
    out = {}
    for corpus in registry:
        for s in corpus.sources:
            if s.pinned != "sha256" and s.group != "local":
                out[s.filename] = UNPINNED_WHY.get(s.filename, "md5 only" if s.pinned else "no published checksum")
    return out


def members_by_source(corpus: Corpus) -> dict[str, set[str]]:
    """Which members each archive must yield for this corpus (for a streaming single pass)."""
    wanted: dict[str, set[str]] = {}
    for _, parts in corpus.splits:
        for part in parts:
            for _, member in part.sides:
                if member.path is not None:
                    wanted.setdefault(member.source, set()).add(member.path)
    return wanted
