"""`mtkit distill DATA --out NEW -m TEACHER`: sequence-level knowledge distillation (Kim & Rush 2016) as one step.

The teacher (whatever `mtkit.decode.loading.plan` finds: a model file, an ensemble, an OPUS-MT or CTranslate2
directory, with its decoding defaults and the caller's settings over them) translates DATA/raw/train.SRC with its
beam (the `nbest` best of each line, if asked) into NEW, a data directory `mtkit train NEW` takes as it is:

    NEW/raw/train.{src,tgt}        the sources and the teacher's translations (+ DATA's pairs with --mix-references)
    NEW/raw/{valid,test}.*         DATA's own, untouched: the student is validated on real references
    NEW/spm.model, NEW/bin/...     DATA's vocabulary, copied, and every split binarized with it (`mtkit bpe --from`)
    NEW/prepare.json               what bpe reads, with `distilled`: the teacher's sha256 and the decoding settings
    NEW/distill.json               the state and the provenance of the distillation

Decoding a large corpus takes hours, so it resumes: the source is cut into chunks of `chunk_lines` lines, each
translated in full and written atomically to NEW/chunks/; a rerun with the same teacher and settings skips the
chunks there are (the output is byte-identical to an uninterrupted run's: a chunk is decoded the same way
whenever it is), and a rerun with another teacher or other settings is refused unless `restart`.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import hashlib
import itertools
import json
import logging
import shutil
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mtkit import __version__
from mtkit.atomic import atomic_file, write_atomic
from mtkit.config import DEFAULT_BATCH_TOKENS, DecodeConfig
from mtkit.data.bpe import BpeOptions
from mtkit.data.bpe import build as binarize_with
from mtkit.data.corpora import SPLITS
from mtkit.data.dataset import DataDir, open_data, recorded_languages
from mtkit.errors import MtkitError
from mtkit.files import count_lines, data_dir_locked, progress_bar
from mtkit.provenance import sha256_file
from mtkit.textio import one_line

if TYPE_CHECKING:
    from mtkit.decode.loading import Plan

logger = logging.getLogger(__name__)

FORMAT = 1
RECORD = "distill.json"
CHUNKS = "chunks"


@dataclass
class DistillOptions:
    """How to distill, beside the teacher and how it runs (its `loading.Plan`: device, precision, workers,
    threads, decoding settings)."""

    batch_tokens: int = DEFAULT_BATCH_TOKENS
    chunk_lines: int = 10_000  # lines decoded and written at a time: what a rerun resumes from
    mix_references: bool = False  # append DATA's own pairs after the teacher's
    restart: bool = False  # discard an earlier distillation in --out (another teacher, other settings)
    progress: bool = False


def fingerprint_teacher(paths: Sequence[Path]) -> list[dict[str, str]]:
    """Each teacher file's sha256; a directory's is the sha256 of its files' relative paths and sha256s."""
    out = []
    for path in paths:
        if path.is_dir():
            lines = "".join(
                f"{p.relative_to(path).as_posix()}\t{sha256_file(p)}\n" for p in sorted(path.rglob("*")) if p.is_file()
            )
            digest = hashlib.sha256(lines.encode("utf-8")).hexdigest()
        else:
            digest = sha256_file(path)
        out.append({"path": str(path), "sha256": digest})
    return out


def _vocabulary(data: Path) -> DataDir:
    """DATA opened for the vocabulary the student keeps (whichever tokenizer `mtkit bpe` encoded it with: its own
    SentencePiece model, or a model's with --from), or one sentence."""
    opened = open_data(data)  # no bpe.json: "run `mtkit bpe DATA` first"
    try:
        opened.tokenizer()
    except MtkitError:
        raise MtkitError(
            f"{data} has no vocabulary for the student to keep; run `mtkit bpe {data}` first "
            f"(or `mtkit bpe {data} --from TEACHER` to take the teacher's)."
        ) from None
    return opened


def _languages(data: Path) -> tuple[str, str, dict[str, Any]]:
    """DATA's languages and prepare.json (what NEW's copies), refusing what cannot be distilled, in one sentence."""
    found = recorded_languages(data)
    if found is None:
        raise MtkitError(f"{data} has no prepare.json or bpe.json naming its languages; run `mtkit prepare` first.")
    name, record, src, tgt = found
    if record.get("pairs"):
        raise MtkitError(f"{data} holds several language pairs; distill one pair's data directory at a time.")
    for lang in (src, tgt):
        if not (data / "raw" / f"train.{lang}").is_file():
            raise MtkitError(f"{data / 'raw' / f'train.{lang}'} is missing; run `mtkit prepare` first.")
    return src, tgt, record if name == "prepare.json" else {}


def _differences(old: dict[str, Any], new: dict[str, Any]) -> str:
    if old.get("teacher") != new.get("teacher"):
        was = ", ".join(t["sha256"][:12] for t in old.get("teacher") or [])
        now = ", ".join(t["sha256"][:12] for t in new["teacher"])
        return f"another teacher (sha256 {was}, not {now})"
    keys = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
    key = keys[0] if keys else "settings"
    if isinstance(old.get(key), dict) and isinstance(new.get(key), dict):
        inner = sorted(k for k in set(old[key]) | set(new[key]) if old[key].get(k) != new[key].get(k))
        if inner:
            return f"other settings ({key}.{inner[0]} {old[key].get(inner[0])!r}, now {new[key].get(inner[0])!r})"
    return f"other settings ({key} {old.get(key)!r}, now {new.get(key)!r})"


def _claim(out: Path, settings: dict[str, Any], restart: bool) -> dict[str, Any]:
    """NEW's earlier record if it is this distillation's; refuse anything else in NEW, or discard it with restart."""
    path = out / RECORD
    previous: dict[str, Any] = {}
    if path.is_file():
        try:
            previous = json.loads(path.read_text(encoding="utf-8"))
        except ValueError:
            previous = {}
        if not isinstance(previous, dict) or previous.get("format") != FORMAT:
            raise MtkitError(f"{path} is not a record mtkit distill wrote; give a new --out.")
        if previous.get("settings") != settings and not restart:
            raise MtkitError(
                f"{out} holds a distillation by {_differences(previous.get('settings') or {}, settings)}; "
                "give a new --out, or add --restart to discard it."
            )
        if restart:  # whatever it holds, this one's or another's: made again from the start
            logger.info("--restart: discarding the distillation in %s", out)
            shutil.rmtree(out / CHUNKS, ignore_errors=True)
            previous = {}
    elif any(p.name != ".mtkit.lock" for p in out.iterdir()):
        raise MtkitError(f"{out} holds files that mtkit distill did not write; give a new or empty directory as --out.")
    return previous


def distill(data: Path, teacher: Plan, out: Path, opts: DistillOptions = DistillOptions()) -> dict[str, Any]:
    """Translate DATA's training sources with `teacher` (found and checked, `loading.plan`: it decodes by its
    `defaults`) into the data directory `out`; returns distill.json."""
    data, out = Path(data), Path(out)
    if not data.is_dir():
        raise MtkitError(f"data directory {data} does not exist.")
    if out.exists() and out.resolve() == data.resolve():
        raise MtkitError("--out must be a new directory, not the data directory itself.")
    if out.exists() and not out.is_dir():
        raise MtkitError(f"--out {out} is a file; give a directory.")
    if opts.chunk_lines < 1:
        raise MtkitError("--chunk-lines must be at least 1.")
    vocabulary = _vocabulary(data)
    src, tgt, prepared = _languages(data)
    source = data / "raw" / f"train.{src}"
    config = teacher.defaults  # the teacher's own defaults under the caller's settings (mtkit/sources/defaults.py)
    lines = count_lines(source)
    settings = {
        "teacher": fingerprint_teacher([s.path for s in teacher.model.sources]),
        "decode": dataclasses.asdict(config),
        "source": {"file": f"raw/train.{src}", "sha256": sha256_file(source), "lines": lines},
        "vocabulary_sha256": hashlib.sha256(vocabulary.vocab_bytes()).hexdigest(),
        "chunk_lines": opts.chunk_lines,
        "mix_references": opts.mix_references,
        # how the teacher runs, "auto" device resolved: a resume in another precision, on another device, with
        # other workers, threads or batches would mix two outputs (precision "auto" is compared as asked)
        "runtime": {**teacher.runtime, "batch_tokens": opts.batch_tokens},
    }
    with data_dir_locked(out, "mtkit distill"):
        previous = _claim(out, settings, opts.restart)
        made: dict[str, int] = (previous.get("files") or {}) if previous.get("state") == "done" else {}
        if made and _intact(out, made):
            logger.info("%s already holds this distillation; nothing to do (--restart redoes it)", out)
            return {**previous, "reused": True}
        if made and _intact(out, {rel: n for rel, n in made.items() if rel.startswith("raw/")}):
            logger.info("%s holds this distillation's pairs but not all its encoded files: encoding them again", out)
            record = {k: v for k, v in previous.items() if k != "files"} | {"state": "binarizing"}
        else:
            _write_record(out, {"format": FORMAT, "state": "translating", "settings": settings})
            timing = _translate(teacher, source, out / CHUNKS, lines, config, opts)
            counts = _assemble(data, out, src, tgt, lines, opts)
            record = {
                "format": FORMAT,
                "state": "binarizing",
                "settings": settings,
                "data": str(data.resolve()),
                "mtkit_version": __version__,
                "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                **counts,
                "timings": timing,
            }
        _write_prepare(out, prepared, src, tgt, record)
        _write_record(out, record)
    tokenizer = vocabulary.tokenizer()  # DATA's, whichever kind: NEW keeps its ids
    where = str(vocabulary.spm_path)
    binarize_with(out, BpeOptions(tokenizer=tokenizer, tokenizer_from=where, progress=opts.progress))
    record = {**record, "state": "done", "files": _listing(out)}
    with data_dir_locked(out, "mtkit distill"):
        _write_record(out, record)
        shutil.rmtree(out / CHUNKS, ignore_errors=True)  # the pairs are in raw/ now
    return {**record, "reused": False}


def _listing(out: Path) -> dict[str, int]:
    """Every file of the new data directory (its pairs, prepare.json, the tokenizer, bpe.json, bin/) by its size:
    what a rerun checks before it says there is nothing to do."""
    listed = {}
    for path in sorted(out.rglob("*")):
        rel = path.relative_to(out).as_posix()
        if path.is_file() and rel != RECORD and not rel.startswith((f"{CHUNKS}/", ".")) and "/." not in rel:
            listed[rel] = path.stat().st_size
    return listed


def _intact(out: Path, files: dict[str, int]) -> bool:
    return bool(files) and all((out / rel).is_file() and (out / rel).stat().st_size == n for rel, n in files.items())


def _write_record(out: Path, record: dict[str, Any]) -> None:
    write_atomic(out / RECORD, json.dumps(record, indent=1, ensure_ascii=False) + "\n")


def chunk_path(chunks: Path, k: int) -> Path:
    return chunks / f"{k:06d}.tsv"


def _read_source(path: Path) -> Iterator[str]:
    with open(path, encoding="utf-8", errors="replace", newline="\n") as f:
        for line in f:
            yield line.rstrip("\n").rstrip("\r")


def _translate(
    teacher: Plan, source: Path, chunks: Path, lines: int, config: DecodeConfig, opts: DistillOptions
) -> dict[str, float]:
    """Every chunk not yet in `chunks` translated and written atomically; progress and an ETA as each ends."""
    chunks.mkdir(exist_ok=True)
    total = -(-lines // opts.chunk_lines)
    todo = [k for k in range(total) if not chunk_path(chunks, k).is_file()]
    done_lines = sum(min(opts.chunk_lines, lines - k * opts.chunk_lines) for k in range(total) if k not in set(todo))
    if not todo:
        return {"translate_s": 0.0}
    if done_lines:
        logger.info("resuming: %d of %d chunks were translated before", total - len(todo), total)
    translator = teacher.open()
    start, decoded = time.perf_counter(), 0
    wanted = set(todo)
    try:
        with progress_bar(opts.progress, lines, "distilling", "lines", initial=done_lines) as bar:
            reader = _read_source(source)
            for k in range(total):
                batch = list(itertools.islice(reader, opts.chunk_lines))
                if k not in wanted:
                    continue
                with atomic_file(chunk_path(chunks, k)) as f:
                    for tr in translator.translate_stream(batch, config, opts.batch_tokens, len(batch) or 1):
                        for text, score in tr.hypotheses:
                            f.write(f"{tr.line - 1}\t{score:.4f}\t{one_line(text)}\n".encode())
                decoded += len(batch)
                bar.update(len(batch))
                elapsed = time.perf_counter() - start
                left = lines - done_lines - decoded
                logger.info(
                    "chunk %d/%d: %d of %d lines, %.1f lines/s, ETA %s",
                    k + 1,
                    total,
                    done_lines + decoded,
                    lines,
                    decoded / elapsed if elapsed else 0.0,
                    _duration(left * elapsed / decoded) if decoded else "?",
                )
    finally:
        translator.close()
    return {"translate_s": round(time.perf_counter() - start, 3), "lines_per_s": round(decoded / max(elapsed, 1e-9), 2)}


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{seconds // 60}m{seconds % 60:02d}s"


def _assemble(data: Path, out: Path, src: str, tgt: str, lines: int, opts: DistillOptions) -> dict[str, Any]:
    """NEW/raw: the sources beside the teacher's translations (empty ones left out), DATA's pairs after them
    with --mix-references, and DATA's other splits as they are."""
    raw = out / "raw"
    raw.mkdir(exist_ok=True)
    total = -(-lines // opts.chunk_lines)
    pairs = empty = 0
    with atomic_file(raw / f"train.{src}") as fs, atomic_file(raw / f"train.{tgt}") as ft:
        reader = _read_source(data / "raw" / f"train.{src}")
        for k in range(total):
            batch = list(itertools.islice(reader, opts.chunk_lines))
            with open(chunk_path(out / CHUNKS, k), encoding="utf-8", newline="\n") as chunk:
                for row in chunk:
                    index, _score, text = row.rstrip("\n").split("\t", 2)
                    if not text.strip():
                        empty += 1
                        continue
                    fs.write((batch[int(index)] + "\n").encode())
                    ft.write((text + "\n").encode())
                    pairs += 1
        references = 0
        if opts.mix_references:
            for side, f in ((src, fs), (tgt, ft)):
                with open(data / "raw" / f"train.{side}", "rb") as original:
                    shutil.copyfileobj(original, f)
            references = lines
    for split in SPLITS:
        for lang in (src, tgt):
            if split != "train" and (data / "raw" / f"{split}.{lang}").is_file():
                with atomic_file(raw / f"{split}.{lang}") as f, open(data / "raw" / f"{split}.{lang}", "rb") as g:
                    shutil.copyfileobj(g, f)
    logger.info(
        "%s: %d distilled pairs (%d empty translations left out)%s",
        raw,
        pairs,
        empty,
        f" + {references} original pairs" if references else "",
    )
    return {"pairs": {"distilled": pairs, "empty_left_out": empty, "references": references}}


def _write_prepare(out: Path, prepared: dict[str, Any], src: str, tgt: str, record: dict[str, Any]) -> None:
    """NEW/prepare.json: what `mtkit bpe` and a run's provenance read, with the distillation's own facts."""
    keep: dict[str, Any] = {k: prepared[k] for k in ("corpus", "description", "sources", "cleaning") if k in prepared}
    distilled = {k: record[k] for k in ("settings", "data", "pairs", "created")}
    body: dict[str, Any] = {
        "format": 1,
        **keep,
        "src_lang": src,
        "tgt_lang": tgt,
        "distilled": distilled,
        "files": {f"raw/{p.name}": {"bytes": p.stat().st_size} for p in sorted((out / "raw").iterdir())},
    }
    write_atomic(out / "prepare.json", json.dumps(body, indent=1, ensure_ascii=False) + "\n")
