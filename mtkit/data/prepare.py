"""`mtkit prepare`: fetch -> extract -> clean -> DIR/raw/{train,valid,test}.{src,tgt} + DIR/prepare.json.

Every output is written under a temporary directory inside DIR and moved into DIR/raw only
once all of it is complete, so a failed or interrupted run (error, Ctrl-C, SIGTERM) leaves
no half-written raw/ files and no temporary directory; one left by a killed run is swept at
the next start. A re-run with the same corpus, files and cleaning settings finds
DIR/prepare.json and the files it lists intact and does nothing.

DIR may hold the user's own files: prepare replaces only the files that DIR/prepare.json
says it wrote, and refuses to overwrite any other. It holds DIR/.mtkit.lock for its whole run,
so that two runs never mix their raw/ sides: a second `prepare` (or a `bpe`) on DIR meanwhile
is refused in one sentence naming the first.
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import os
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mtkit import __version__
from mtkit.atomic import write_atomic
from mtkit.data.clean import CleanConfig
from mtkit.data.corpora import SPLITS, Registry, custom_corpus, default_registry, shipped_copy, unpinned
from mtkit.data.corpus_model import Corpus, Part
from mtkit.data.fetch import CHECKED_RECORD, RECORDED, Fetched, Fetcher
from mtkit.data.owned import inside, listed, previous_record, refuse_foreign
from mtkit.data.prepare_splits import SplitWriter, is_local, stage
from mtkit.errors import MtkitError
from mtkit.files import data_dir_locked, sweep_stale, work_dir

logger = logging.getLogger(__name__)

FORMAT = 1
TEMP_PREFIX = ".prepare-"


@dataclass
class PrepareOptions:
    out: Path | None = None
    cache: Path | None = None
    mirror: Path | Sequence[Path] | None = None  # several: searched in order
    base_url: str | None = None
    retries: int = 5
    backoff: float = 1.0
    timeout: float = 60.0
    workers: int | None = None
    dedup: bool = False
    max_words: int | None = None  # None: the corpus's own setting (corpora.py)
    max_ratio: float | None = None
    max_chars: int = 0  # characters (code points); 0: no limit
    max_char_ratio: float = 0.0
    progress: bool = False
    force: bool = False


def default_out(name: str) -> Path:
    return Path("data") / name


# Your own files by split: (source, target); a side None where it was not given.
Files = Mapping[str, tuple["str | os.PathLike[str] | None", "str | os.PathLike[str] | None"]]


def prepare(
    name: str | None,
    options: PrepareOptions | None = None,
    *,
    registry: Registry | None = None,
    custom_files: Files | None = None,
    langs: tuple[str | None, str | None] | None = None,
) -> dict[str, Any]:
    """Prepare the named corpus (or `custom` with `custom_files` and `langs`, each language None for the file
    suffix's); returns prepare.json's content. A name missing, or files given with a name other than `custom`,
    is one sentence that says what to give."""
    opts = options or PrepareOptions()
    corpus = _corpus(name, opts, registry, custom_files, langs)
    out = Path(opts.out) if opts.out else default_out(corpus.name)
    clean = CleanConfig(
        max_words=corpus.max_words if opts.max_words is None else opts.max_words,
        max_ratio=corpus.max_ratio if opts.max_ratio is None else opts.max_ratio,
        dedup=opts.dedup,
        max_chars=opts.max_chars,
        max_char_ratio=opts.max_char_ratio,
    )
    clean.check_script(corpus.src, corpus.tgt)
    if out.exists() and not out.is_dir():
        raise MtkitError(f"--out {out} is a file, not a directory; give a directory path (it is created if missing).")
    # DIR is ours for the whole run: a second `prepare` (or a `bpe`) on it is refused at once.
    with data_dir_locked(out, "mtkit prepare"):
        return _prepare(corpus, opts, out, clean)


def _prepare(corpus: Corpus, opts: PrepareOptions, out: Path, clean: CleanConfig) -> dict[str, Any]:
    # 1. Every file at hand and checked, before anything is written.
    fetched = _fetch(corpus, opts)
    settings = _settings(corpus, clean, fetched)
    sweep_stale(out, TEMP_PREFIX)
    previous = previous_record(out / "prepare.json")
    # 2. Nothing to do when the same files and settings made what DIR/raw holds.
    if not opts.force and _up_to_date(out, previous, settings):
        logger.info("%s/raw is already prepared with these files and settings; nothing to do (--force redoes it)", out)
        return {**previous, "reused": True}
    # 3. Never overwrite a file that mtkit did not write.
    owned = {rel for rel in listed(previous.get("files")) if rel.startswith("raw/")}
    _refuse_foreign(out, _outputs(corpus), owned)
    with work_dir(out, TEMP_PREFIX) as tmp:
        # 4. The archive members each split needs, copied out of their archives.
        paths = stage(corpus, fetched, tmp / "staged")
        # 5. Each split written in full under tmp/raw.
        result = tmp / "raw"
        result.mkdir()
        writer = SplitWriter(corpus, paths, result, clean, opts.workers, opts.progress)
        splits = {split: writer.write(split, parts) for split in SPLITS if (parts := corpus.parts(split))}
        record = _record(corpus, settings, fetched, clean, splits, result, writer.timings)
        # 6. The finished files moved into DIR/raw, then prepare.json.
        _publish(result, out, record, owned)
    return {**record, "reused": False}


# --------------------------------------------------------------------------- what to prepare
def _corpus(
    name: str | None,
    opts: PrepareOptions,
    registry: Registry | None,
    custom_files: Files | None,
    langs: tuple[str | None, str | None] | None,
) -> Corpus:
    files = {split: pair for split, pair in (custom_files or {}).items() if tuple(pair) != (None, None)}
    src_lang, tgt_lang = langs or (None, None)
    if not name:
        if files:
            raise MtkitError(
                "your own files need the name `custom`: did you mean `mtkit prepare custom --train-src ...`?"
            )
        raise MtkitError("name a corpus (`mtkit prepare --list` shows them), e.g. `mtkit prepare wmt14-en-de`.")
    if name == "custom":
        for split, (a, b) in files.items():
            if a is None or b is None:
                raise MtkitError(f"give both --{split}-src and --{split}-tgt.")
        if (src_lang is None) != (tgt_lang is None):
            raise MtkitError("give both --src-lang and --tgt-lang, or neither.")
        given = (src_lang, tgt_lang) if src_lang and tgt_lang else None
        return _custom({split: (str(a), str(b)) for split, (a, b) in files.items()}, given)
    if files or src_lang or tgt_lang:
        raise MtkitError(
            f"--train-src/--valid-src/--test-src and --src-lang/--tgt-lang are for your own files, not {name}: "
            f"did you mean `mtkit prepare custom ...`?"
        )
    registry = registry or default_registry()
    if opts.base_url:
        _check_base_url(opts.base_url)
        registry = registry.override(base_url=opts.base_url)
    return registry.get(name)


def _check_base_url(url: str) -> None:
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https", "ftp") or not parts.netloc:
        raise MtkitError(
            f"--base-url {url!r} is not a URL; give one with a scheme and a host, "
            f"e.g. https://mirror.example.org/wmt14 (a local directory is --mirror DIR)."
        )


def _custom(files: Mapping[str, tuple[str, str]], langs: tuple[str, str] | None) -> Corpus:
    if "train" not in files:
        raise MtkitError("`mtkit prepare custom` needs --train-src and --train-tgt (and --valid-src/--valid-tgt).")
    if "valid" not in files:
        raise MtkitError("`mtkit prepare custom` needs a validation set: --valid-src and --valid-tgt.")
    src, tgt = langs or (lang_of(files["train"][0]), lang_of(files["train"][1]))
    return custom_corpus(src, tgt, files)


def lang_of(path: str) -> str:
    """'train.en' -> 'en', 'corpus.de.gz' -> 'de': the last suffix of two or three letters."""
    name = Path(path).name
    if name.endswith(".gz"):
        name = name[:-3]
    suffix = Path(name).suffix.lstrip(".")
    if 2 <= len(suffix) <= 3 and suffix.isalpha():
        return suffix.lower()
    raise MtkitError(f"cannot tell the language of {path} from its name; give --src-lang and --tgt-lang.")


def _fetch(corpus: Corpus, opts: PrepareOptions) -> dict[str, Fetched]:
    """Each named corpus's file from the cache, the mirror or its URL, checked; {} for local files. Without
    --mirror or --base-url, a corpus whose files ship with mtkit (Multi30k) reads them as its mirror."""
    if is_local(corpus):
        for source in corpus.sources:
            if not Path(source.filename).is_file():
                raise MtkitError(f"{source.filename} does not exist.")
        return {}
    mirror = opts.mirror
    if not mirror and not opts.base_url and (mirror := shipped_copy(corpus)) is not None:
        logger.info("reading the copy of %s that ships with mtkit (%s); no download", corpus.name, mirror)
    fetcher = Fetcher(
        opts.cache, mirror, progress=opts.progress, retries=opts.retries, backoff=opts.backoff, timeout=opts.timeout
    )
    missing = fetcher.missing_in_mirror(corpus.sources)
    if missing:
        listing = "; ".join(f"{s.filename} from {s.url}" for s in missing)
        raise MtkitError(
            f"the mirror directory {' + '.join(map(str, fetcher.mirrors))} lacks {len(missing)} file(s) that "
            f"{corpus.name} needs; download {listing}, and put them there."
        )
    fetched = {}
    loose = unpinned(Registry({corpus.name: corpus}))
    for source in corpus.sources:
        logger.info("fetching %s", source.filename)
        got = fetched[source.filename] = fetcher.fetch(source)
        if source.filename in loose:
            logger.warning(
                "%s has no pinned sha256 (%s); its sha256 %s was %s",
                source.filename,
                loose[source.filename],
                got.sha256,
                "recorded now, and later runs are checked against it"
                if got.checksum == RECORDED
                else "checked against the one recorded at its first download"
                if got.checksum == CHECKED_RECORD
                else "computed; its md5 is what was verified",
            )
    return fetched


def _settings(corpus: Corpus, clean: CleanConfig, fetched: Mapping[str, Fetched]) -> dict[str, Any]:
    """What the output depends on: re-running with equal settings reuses DIR/raw."""
    if is_local(corpus):
        files: dict[str, Any] = {}
        for s in corpus.sources:
            st = Path(s.filename).stat()
            files[str(Path(s.filename).resolve())] = {"bytes": st.st_size, "mtime_ns": st.st_mtime_ns}
    else:
        files = {name: f.sha256 for name, f in fetched.items()}
    return {
        "corpus": corpus.name,
        "files": files,
        "splits": [[split, [_part_key(p) for p in parts]] for split, parts in corpus.splits],
        "clean": {
            "max_words": clean.max_words,
            "max_ratio": clean.max_ratio,
            "max_chars": clean.max_chars,
            "max_char_ratio": clean.max_char_ratio,
            "dedup": clean.dedup,
            "normalize": clean.normalize,
        },
        "mtkit_clean_version": 1,
    }


def _part_key(part: Part) -> list[Any]:
    return [part.name, [[lang, m.source, m.path, m.fmt] for lang, m in part.sides]]


# --------------------------------------------------------------------------- what DIR holds
def _up_to_date(out: Path, previous: Mapping[str, Any], settings: dict[str, Any]) -> bool:
    if not previous or json.loads(json.dumps(settings)) != previous.get("settings"):
        return False
    for rel, info in previous.get("files", {}).items():
        path = out / rel
        if not path.is_file() or path.stat().st_size != info.get("bytes"):
            return False
    return True


def _outputs(corpus: Corpus) -> set[str]:
    return {f"raw/{split}.{lang}" for split in SPLITS if corpus.parts(split) for lang in (corpus.src, corpus.tgt)}


def _refuse_foreign(out: Path, outputs: set[str], owned: set[str]) -> None:
    if (out / "raw").exists() and not (out / "raw").is_dir():
        raise MtkitError(f"{out / 'raw'} is a file, not a directory; move it away or choose another --out.")
    refuse_foreign(out, outputs, owned, "mtkit prepare", "prepare.json")


def _record(
    corpus: Corpus,
    settings: dict[str, Any],
    fetched: Mapping[str, Fetched],
    clean: CleanConfig,
    splits: dict[str, Any],
    result: Path,
    timings: dict[str, float],
) -> dict[str, Any]:
    """prepare.json: what was fetched, how it was cleaned, what was written (the files mtkit owns)."""
    sources = (
        [{"file": str(Path(s.filename).resolve()), "origin": "local"} for s in corpus.sources]
        if is_local(corpus)
        else [fetched[s.filename].record() for s in corpus.sources]
    )
    return {
        "format": FORMAT,
        "corpus": corpus.name,
        "src_lang": corpus.src,
        "tgt_lang": corpus.tgt,
        "description": corpus.description,
        "mtkit_version": __version__,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "settings": settings,
        "sources": sources,
        "cleaning": clean.describe(corpus.src, corpus.tgt),
        "splits": splits,
        "files": {f"raw/{p.name}": {"bytes": p.stat().st_size} for p in sorted(result.iterdir())},
        "timings": timings,
    }


def _write_record(out: Path, record: Mapping[str, Any]) -> None:
    write_atomic(out / "prepare.json", json.dumps(record, indent=1, ensure_ascii=False) + "\n")


def _publish(result: Path, out: Path, record: dict[str, Any], owned: set[str]) -> None:
    """Move the finished files into out/raw, remove the ones mtkit wrote before and no longer writes.

    First prepare.json becomes a record of both sets of files, without settings: at every later
    moment DIR/raw is described by no valid record (so nothing reuses a mix of old and new
    files) while every file mtkit wrote is still known as its own. The full record comes last.
    """
    raw = out / "raw"
    raw.mkdir(exist_ok=True)
    _refuse_foreign(out, {f"raw/{p.name}" for p in result.iterdir()}, owned)  # nothing appeared meanwhile
    _write_record(
        out,
        {"format": FORMAT, "state": "publishing", "files": {rel: {} for rel in sorted(owned | set(record["files"]))}},
    )
    for path in sorted(result.iterdir()):
        os.replace(path, raw / path.name)
    for rel in sorted(inside(out, owned - set(record["files"]))):  # never through a link out of DIR
        (out / rel).unlink(missing_ok=True)
    _write_record(out, record)
