"""`mtkit prepare`: fetch -> extract -> clean -> DIR/raw/{train,valid,test}.{src,tgt} + DIR/prepare.json.

Every output is written under a temporary directory inside DIR and moved into DIR/raw only
once all of it is complete, so a failed or interrupted run leaves no half-written raw/
files (a previous complete raw/ stays as it was). Staged archive members live in the same
temporary directory and are removed with it. A re-run with the same corpus, files and
cleaning settings finds DIR/prepare.json and the files it lists intact and does nothing.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping

from mtkit.atomic import write_atomic
from mtkit import __version__
from mtkit.data.clean import CleanConfig, Cleaner, CleanStats, check_parallel, dedup_files
from mtkit.data.corpora import SPLITS, Corpus, Member, Part, Registry, custom_corpus, default_registry, members_by_source
from mtkit.data.extract import read_sgml, read_text_lines, stage_members
from mtkit.data.fetch import Fetched, Fetcher
from mtkit.errors import MtkitError

FORMAT = 1
Log = Callable[[str], None]


@dataclass
class PrepareOptions:
    out: Path | None = None
    cache: Path | None = None
    mirror: Path | None = None
    base_url: str | None = None
    retries: int = 5
    backoff: float = 1.0
    timeout: float = 60.0
    workers: int | None = None
    dedup: bool = False
    max_words: int | None = None  # None: the corpus's own setting (corpora.py)
    max_ratio: float | None = None
    progress: bool = False
    force: bool = False


def default_out(name: str) -> Path:
    return Path("data") / name


def prepare(name: str, options: PrepareOptions | None = None, *, registry: Registry | None = None,
            custom_files: Mapping[str, tuple[str, str]] | None = None, langs: tuple[str, str] | None = None,
            log: Log | None = None) -> dict:
    """Prepare the named corpus (or `custom` with `custom_files` and `langs`); returns prepare.json's content."""
    opts = options or PrepareOptions()
    log = log or (lambda _msg: None)
    if name == "custom":
        corpus = _custom(custom_files or {}, langs)
    else:
        registry = registry or default_registry()
        if opts.base_url:
            registry = registry.override(base_url=opts.base_url)
        corpus = registry.get(name)
    out = Path(opts.out) if opts.out else default_out(corpus.name)
    clean = CleanConfig(max_words=corpus.max_words if opts.max_words is None else opts.max_words,
                        max_ratio=corpus.max_ratio if opts.max_ratio is None else opts.max_ratio, dedup=opts.dedup)

    local = corpus.family == "custom"
    fetched: dict[str, Fetched] = {}
    if not local:
        fetcher = Fetcher(opts.cache, opts.mirror, progress=opts.progress, retries=opts.retries,
                          backoff=opts.backoff, timeout=opts.timeout)
        missing = fetcher.missing_in_mirror(corpus.sources)
        if missing:
            listing = "; ".join(f"{s.filename} from {s.url}" for s in missing)
            raise MtkitError(f"the mirror directory {opts.mirror} lacks {len(missing)} file(s) that {corpus.name} "
                             f"needs; download {listing}, and put them there.")
        for source in corpus.sources:
            log(f"fetching {source.filename}")
            fetched[source.filename] = fetcher.fetch(source)
    else:
        for source in corpus.sources:
            path = Path(source.filename)
            if not path.is_file():
                raise MtkitError(f"{path} does not exist.")

    settings = _settings(corpus, clean, fetched, local)
    out.mkdir(parents=True, exist_ok=True)
    if not opts.force:
        previous = _up_to_date(out, settings)
        if previous is not None:
            log(f"{out}/raw is already prepared with these files and settings; nothing to do (--force redoes it)")
            previous["reused"] = True
            return previous

    tmp = Path(tempfile.mkdtemp(prefix=".prepare-", dir=out))
    timings: dict[str, float] = {}
    try:
        paths = _stage(corpus, fetched, tmp / "staged", local, log)
        result_dir = tmp / "raw"
        result_dir.mkdir()
        splits: dict[str, dict] = {}
        for split in SPLITS:
            parts = corpus.parts(split)
            if not parts:
                continue
            if split == "train":
                splits[split] = _write_train(corpus, parts, paths, result_dir, tmp, opts, clean, log, timings)
            else:
                splits[split] = _write_eval(corpus, split, parts, paths, result_dir, log)
        record = {
            "format": FORMAT,
            "corpus": corpus.name,
            "src_lang": corpus.src,
            "tgt_lang": corpus.tgt,
            "description": corpus.description,
            "mtkit_version": __version__,
            "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "settings": settings,
            "sources": [fetched[s.filename].record() for s in corpus.sources] if not local else
                        [{"file": str(Path(s.filename).resolve()), "origin": "local"} for s in corpus.sources],
            "cleaning": clean.describe(corpus.src, corpus.tgt),
            "splits": splits,
            "files": {f"raw/{p.name}": {"bytes": p.stat().st_size} for p in sorted(result_dir.iterdir())},
            "timings": timings,
        }
        _publish(result_dir, out, record)
        record["reused"] = False
        return record
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _custom(files: Mapping[str, tuple[str, str]], langs: tuple[str, str] | None) -> Corpus:
    if "train" not in files:
        raise MtkitError("`mtkit prepare custom` needs --train-src and --train-tgt (and --valid-src/--valid-tgt).")
    if "valid" not in files:
        raise MtkitError("`mtkit prepare custom` needs a validation set: --valid-src and --valid-tgt.")
    if not langs:
        langs = tuple(_lang_of(p) for p in files["train"])  # type: ignore[assignment]
    assert langs is not None
    return custom_corpus(langs[0], langs[1], files)


def _lang_of(path: str) -> str:
    """'train.en' -> 'en', 'corpus.de.gz' -> 'de': the last suffix of two or three letters."""
    name = Path(path).name
    if name.endswith(".gz"):
        name = name[:-3]
    suffix = Path(name).suffix.lstrip(".")
    if 2 <= len(suffix) <= 3 and suffix.isalpha():
        return suffix.lower()
    raise MtkitError(f"cannot tell the language of {path} from its name; give --src-lang and --tgt-lang.")


def _settings(corpus: Corpus, clean: CleanConfig, fetched: Mapping[str, Fetched], local: bool) -> dict:
    """What the output depends on: re-running with equal settings reuses DIR/raw."""
    if local:
        files = {}
        for s in corpus.sources:
            st = Path(s.filename).stat()
            files[str(Path(s.filename).resolve())] = {"bytes": st.st_size, "mtime_ns": st.st_mtime_ns}
    else:
        files = {name: f.sha256 for name, f in fetched.items()}
    return {"corpus": corpus.name, "files": files, "splits": [[split, [_part_key(p) for p in parts]]
                                                                for split, parts in corpus.splits],
            "clean": {"max_words": clean.max_words, "max_ratio": clean.max_ratio, "dedup": clean.dedup,
                      "normalize": clean.normalize}, "mtkit_clean_version": 1}


def _part_key(part: Part) -> list:
    return [part.name, [[lang, m.source, m.path, m.fmt] for lang, m in part.sides]]


def _up_to_date(out: Path, settings: dict) -> dict | None:
    try:
        prev = json.loads((out / "prepare.json").read_text())
    except (OSError, ValueError):
        return None
    if json.loads(json.dumps(settings)) != prev.get("settings"):
        return None
    for rel, info in prev.get("files", {}).items():
        path = out / rel
        if not path.is_file() or path.stat().st_size != info.get("bytes"):
            return None
    return prev


def _stage(corpus: Corpus, fetched: Mapping[str, Fetched], staging: Path, local: bool, log: Log) -> dict[tuple[str, str | None], Path]:
    """Where each (file, member) can be read as a plain or gzipped file."""
    paths: dict[tuple[str, str | None], Path] = {}
    if local:
        for s in corpus.sources:
            paths[(s.filename, None)] = Path(s.filename)
        return paths
    wanted = members_by_source(corpus)
    for source in corpus.sources:
        got = fetched[source.filename]
        if source.kind in ("tar", "zip"):
            members = wanted.get(source.filename, set())
            if members:
                log(f"reading {len(members)} member(s) of {source.filename}")
                dest = staging / source.filename
                for member, path in stage_members(got.path, source.kind, members, dest).items():
                    paths[(source.filename, member)] = path
        else:
            paths[(source.filename, None)] = got.path
    return paths


def _label(member: Member, local: bool) -> str:
    return member.source if local else member.describe()


def _write_eval(corpus: Corpus, split: str, parts: tuple[Part, ...], paths: Mapping, result: Path, log: Log) -> dict:
    """Dev and test sets: read as published (SGML unescaped), never normalised or filtered."""
    local = corpus.family == "custom"
    texts: dict[str, list[str]] = {corpus.src: [], corpus.tgt: []}
    records = []
    for part in parts:
        lines: dict[str, list[str]] = {}
        labels = {}
        for lang in (corpus.src, corpus.tgt):
            member = part.member(lang)
            labels[lang] = _label(member, local)
            path = paths[(member.source, member.path)]
            lines[lang] = read_sgml(path, labels[lang]) if member.fmt == "sgml" else read_text_lines(path, labels[lang])
        n_src, n_tgt = len(lines[corpus.src]), len(lines[corpus.tgt])
        if n_src != n_tgt:
            unit = "segment" if part.member(corpus.src).fmt == "sgml" else "line"
            raise MtkitError(f"{labels[corpus.src]} has {n_src} {unit}{'s' * (n_src != 1)} but {labels[corpus.tgt]} "
                             f"has {n_tgt}: the two sides of a parallel text must have the same number of lines.")
        if n_src == 0:
            raise MtkitError(f"{labels[corpus.src]} and {labels[corpus.tgt]} are empty.")
        for lang in texts:
            texts[lang].extend(lines[lang])
        records.append({"name": part.name, corpus.src: labels[corpus.src], corpus.tgt: labels[corpus.tgt], "lines": n_src})
    for lang, lines_ in texts.items():
        (result / f"{split}.{lang}").write_text("".join(line + "\n" for line in lines_), encoding="utf-8")
    log(f"{split}: {len(texts[corpus.src])} lines")
    return {"lines": len(texts[corpus.src]), "parts": records}


def _write_train(corpus: Corpus, parts: tuple[Part, ...], paths: Mapping, result: Path, tmp: Path,
                 opts: PrepareOptions, clean: CleanConfig, log: Log, timings: dict[str, float]) -> dict:
    local = corpus.family == "custom"
    src, tgt = corpus.src, corpus.tgt
    total = CleanStats()
    records = []
    # Count everything first: a mismatch in the last part should not wait for the first to be cleaned.
    t0 = time.perf_counter()
    sizes = []
    for part in parts:
        ms, mt = part.member(src), part.member(tgt)
        sizes.append(check_parallel(paths[(ms.source, ms.path)], paths[(mt.source, mt.path)],
                                    _label(ms, local), _label(mt, local)))
    timings["count_s"] = round(time.perf_counter() - t0, 3)
    t0 = time.perf_counter()
    dedup = clean.dedup
    out_dir = tmp / "undeduped" if dedup else result
    out_dir.mkdir(exist_ok=True)
    # The worker pool is forked before any progress bar exists: no thread is alive at fork time.
    with Cleaner(src, tgt, clean, workers=opts.workers) as cleaner, \
            open(out_dir / f"train.{src}", "wb") as fs, open(out_dir / f"train.{tgt}", "wb") as ft:
        bar = _bar(opts.progress, sum(sizes), "cleaning train")
        try:
            for part, n in zip(parts, sizes):
                ms, mt = part.member(src), part.member(tgt)
                log(f"cleaning {part.name} ({n} pairs)")
                stats = cleaner.run(paths[(ms.source, ms.path)], paths[(mt.source, mt.path)], fs, ft,
                                    src_label=_label(ms, local), tgt_label=_label(mt, local),
                                    progress=bar.update if bar is not None else None)
                total.add(stats)
                records.append({"name": part.name, src: _label(ms, local), tgt: _label(mt, local), **stats.record()})
        finally:
            if bar is not None:
                bar.close()
        hashes = cleaner.hashes
    timings["clean_s"] = round(time.perf_counter() - t0, 3)
    if dedup:
        t0 = time.perf_counter()
        dropped = dedup_files(out_dir / f"train.{src}", out_dir / f"train.{tgt}",
                              result / f"train.{src}", result / f"train.{tgt}", hashes)
        total.dropped["duplicate"] += dropped
        total.kept -= dropped
        timings["dedup_s"] = round(time.perf_counter() - t0, 3)
    if total.kept == 0:
        raise MtkitError(f"no training pair of {corpus.name} is left after cleaning "
                         f"(dropped: {', '.join(f'{k} {v}' for k, v in total.dropped.items() if v)}).")
    if total.dropped["invalid_utf8"]:
        log(f"warning: {total.dropped['invalid_utf8']} training pair(s) with invalid UTF-8 were skipped "
            f"(first at {total.invalid_utf8_at[0]}; prepare.json lists more)")
    log(f"train: {total.kept} of {total.pairs_in} pairs kept")
    return {**total.record(), "parts": records}


def _bar(enabled: bool, total: int, desc: str):
    if not enabled:
        return None
    import sys

    from tqdm import tqdm

    tqdm.monitor_interval = 0  # no monitor thread: the cleaning workers may be forked later
    return tqdm(total=total, unit=" pairs", unit_scale=True, desc=desc, file=sys.stderr, leave=False, dynamic_ncols=True)


def _publish(result: Path, out: Path, record: dict) -> None:
    """Swap the finished directory in as out/raw (two renames), then write prepare.json.

    At every moment out/raw is the old complete set, or nothing, or the new complete set;
    prepare.json is removed first and written last, so it never describes other files.
    The old raw/ goes into the temporary directory, which the caller deletes.
    """
    raw = out / "raw"
    (out / "prepare.json").unlink(missing_ok=True)
    if raw.exists():
        os.replace(raw, result.with_name("raw.old"))
    os.replace(result, raw)
    write_atomic(out / "prepare.json", json.dumps(record, indent=1, ensure_ascii=False) + "\n")
