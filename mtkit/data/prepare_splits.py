"""Writing a prepared corpus's splits: archive members staged, dev/test sets as published, train cleaned."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mtkit.data.clean import RULE_OPTIONS, RULES, CleanConfig, record, summary
from mtkit.data.corpora import Corpus, Member, Part, members_by_source
from mtkit.data.extract import read_sgml, read_text_lines, stage_members
from mtkit.data.fetch import Fetched
from mtkit.data.runner import Runner, Stats
from mtkit.errors import MtkitError
from mtkit.files import check_parallel, count_parallel, progress_bar

logger = logging.getLogger(__name__)

Paths = Mapping[tuple[str, str | None], Path]  # (file, archive member or None) -> a readable file


def is_local(corpus: Corpus) -> bool:
    return corpus.family == "custom"


def stage(corpus: Corpus, fetched: Mapping[str, Fetched], staging: Path) -> dict[tuple[str, str | None], Path]:
    """Where each (file, member) can be read as a plain or gzipped file."""
    if is_local(corpus):
        return {(s.filename, None): Path(s.filename) for s in corpus.sources}
    paths: dict[tuple[str, str | None], Path] = {}
    wanted = members_by_source(corpus)
    for source in corpus.sources:
        got = fetched[source.filename]
        if source.kind not in ("tar", "zip"):
            paths[(source.filename, None)] = got.path
        elif members := wanted.get(source.filename, set()):
            logger.info("reading %d member(s) of %s", len(members), source.filename)
            for member, path in stage_members(got.path, source.kind, members, staging / source.filename).items():
                paths[(source.filename, member)] = path
    return paths


def _label(corpus: Corpus, member: Member) -> str:
    return member.source if is_local(corpus) else member.describe()


@dataclass(frozen=True)
class SplitWriter:
    """Where and how one `prepare` run writes its splits: the staged inputs, the result directory, the cleaning
    settings and its workers; `timings` collects the train split's phases."""

    corpus: Corpus
    paths: Paths
    result: Path
    clean: CleanConfig
    workers: int | None = None
    progress: bool = False
    timings: dict[str, float] = field(default_factory=dict)

    def write(self, split: str, parts: tuple[Part, ...]) -> dict[str, Any]:
        """One split's files under `result`, and its record for prepare.json."""
        if split == "train":
            return _write_train(self, parts)
        return _write_eval(self.corpus, split, parts, self.paths, self.result)


def _write_eval(corpus: Corpus, split: str, parts: tuple[Part, ...], paths: Paths, result: Path) -> dict[str, Any]:
    """Dev and test sets: read as published (SGML unescaped), never normalised or filtered, one line a segment."""
    texts: dict[str, list[str]] = {corpus.src: [], corpus.tgt: []}
    records = []
    for part in parts:
        lines, labels = {}, {}
        for lang in texts:
            member = part.member(lang)
            labels[lang] = label = _label(corpus, member)
            path = paths[(member.source, member.path)]
            lines[lang] = read_sgml(path, label) if member.fmt == "sgml" else read_text_lines(path, label)
        unit = "segment" if part.member(corpus.src).fmt == "sgml" else "line"
        n = check_parallel(
            len(lines[corpus.src]), len(lines[corpus.tgt]), labels[corpus.src], labels[corpus.tgt], unit=unit
        )
        for lang in texts:
            texts[lang].extend(lines[lang])
        records.append({"name": part.name, corpus.src: labels[corpus.src], corpus.tgt: labels[corpus.tgt], "lines": n})
    for lang, lines_ in texts.items():
        (result / f"{split}.{lang}").write_text("".join(line + "\n" for line in lines_), encoding="utf-8", newline="\n")
    logger.info("%s: %d lines", split, len(texts[corpus.src]))
    return {"lines": len(texts[corpus.src]), "parts": records}


def _write_train(writer: SplitWriter, parts: tuple[Part, ...]) -> dict[str, Any]:
    """The train split: every part cleaned (and deduplicated across parts, if asked) into one pair of files."""
    corpus, paths, result, clean, timings = writer.corpus, writer.paths, writer.result, writer.clean, writer.timings
    src, tgt = corpus.src, corpus.tgt
    sides = [
        (
            paths[(part.member(src).source, part.member(src).path)],
            paths[(part.member(tgt).source, part.member(tgt).path)],
            _label(corpus, part.member(src)),
            _label(corpus, part.member(tgt)),
        )
        for part in parts
    ]
    # Count everything first: a mismatch in the last part should not wait for the first to be cleaned.
    t0 = time.perf_counter()
    sizes = [count_parallel(*side) for side in sides]
    timings["count_s"] = round(time.perf_counter() - t0, 3)
    t0 = time.perf_counter()
    total, records = Stats.of(RULES), []
    # The worker pool is forked before any progress bar exists: no thread is alive at fork time.
    with (
        Runner(clean.rules(), clean.text(src, tgt), workers=writer.workers, counted=RULES) as runner,
        open(result / f"train.{src}", "wb") as fs,
        open(result / f"train.{tgt}", "wb") as ft,
        progress_bar(writer.progress, sum(sizes), "cleaning train", "pairs") as bar,
    ):
        for part, n, (src_path, tgt_path, src_label, tgt_label) in zip(parts, sizes, sides):
            logger.info("cleaning %s (%d pairs)", part.name, n)
            stats = Stats.of(RULES)
            for batch in runner.run(src_path, tgt_path, (src_label, tgt_label)):
                fs.write(batch.encoded(0))
                ft.write(batch.encoded(1))
                stats.add(batch.stats)
                bar.update(batch.stats.pairs_in)
            total.add(stats)
            records.append({"name": part.name, src: src_label, tgt: tgt_label, **record(stats)})
    timings["clean_s"] = round(time.perf_counter() - t0, 3)
    _report_train(corpus, total, clean)
    return {**record(total), "parts": records}


def _report_train(corpus: Corpus, total: Stats, clean: CleanConfig) -> None:
    if total.kept == 0:
        worst = max(clean.active(), key=lambda rule: total.dropped.get(rule, 0))
        raise MtkitError(
            f"no training pair of {corpus.name} is left after cleaning: the {worst} filter dropped "
            f"{total.dropped[worst]} of {total.pairs_in} pairs (what turns it off: {RULE_OPTIONS[worst]}; "
            f"dropped: {summary(total.dropped, clean)})."
        )
    if total.dropped["invalid_utf8"]:
        logger.warning(
            "%d training pair(s) with invalid UTF-8 were skipped (first at %s; prepare.json lists more)",
            total.dropped["invalid_utf8"],
            total.invalid_utf8_at[0],
        )
    logger.info("train: %d of %d pairs kept", total.kept, total.pairs_in)
