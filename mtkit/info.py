"""`mtkit info`: what a model file, a checkpoint or a run directory is, as a dict and as text.

A file: its kind, architecture and parameter count, vocabulary, step and epoch, training
time, best validation figure, provenance (RUN/run.json's record) and, for an average, the
checkpoints it is the mean of. A run: the same from its newest checkpoint, plus config.json,
the best validation figures in metrics.jsonl, and every checkpoint there with its step and size.
Files are opened memory-mapped: the weights of a large checkpoint are never read.
"""

from __future__ import annotations

import os
from typing import Any

from mtkit.files import SPM_MODEL


def describe(path: str | os.PathLike, revision: str | None = None) -> dict[str, Any]:
    """What `path` is (a model or checkpoint file, a run directory, an OPUS-MT or Marian directory, a CTranslate2
    export, a Hugging Face Hub name), as a dict: the source that claims it describes itself (mtkit/sources/)."""
    from mtkit import sources

    return sources.find(path, revision).describe()


# ---- as text ----------------------------------------------------------------------------------------------


def _size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1000  # type: ignore[assignment]
    return str(n)


def _minutes(minutes: float) -> str:
    return f"{minutes * 60:.1f} s" if minutes < 1 else f"{minutes:.1f} min"


def _row(name: str, value: Any) -> str:
    return f"  {name:<17}{value}"


def _provenance_rows(record: dict[str, Any] | None, source: str | None = None) -> list[str]:
    if not record and source:  # a directory mtkit reads, not a file it wrote
        return [_row("provenance", f"none recorded: a {source} carries no run record (its README.md may say more)")]
    if not record:
        return [_row("provenance", "none recorded (a file from before run.json, or not made by `mtkit train`)")]
    v, git = record.get("versions") or {}, record.get("git")
    earlier = len(record.get("earlier") or [])
    rows = [
        _row("command", record.get("command")),
        _row(
            "started",
            f"{record.get('created')} at step {record.get('start_step')}"
            f"{f', after {earlier} earlier session(s)' if earlier else ''}",
        ),
        _row("versions", ", ".join(f"{k} {val}" for k, val in v.items() if val)),
        _row(
            "git",
            f"{git['commit']}{' (with uncommitted changes)' if git.get('dirty') else ''}"
            if git
            else "not run from a git checkout",
        ),
        _row(
            "device",
            f"{record.get('device')}, {record.get('threads')} thread(s), {record.get('precision')}, "
            f"world size {record.get('world_size')}",
        ),
    ]
    data = record.get("data") or {}
    archives = (data.get("archives") or {}).get("sources") or []
    rows.append(_row("data", data.get("dir")))
    for source in archives:
        rows.append(_row("  archive", f"{source.get('file')} sha256 {source.get('sha256')}"))
    for rel, sha in ((data.get("bpe") or {}).get("raw_text_sha256") or {}).items():
        rows.append(_row("  raw text", f"{rel} sha256 {sha}"))
    for rel, info in (data.get("files") or {}).items():
        rows.append(_row("  " + ("model" if rel == SPM_MODEL else "array"), f"{rel} sha256 {info.get('sha256')}"))
    return rows


def _file_rows(info: dict[str, Any]) -> list[str]:
    vocab = info.get("vocabulary")
    best = info.get("best_valid") or {}
    rows = [
        _row("architecture", info["architecture"]),
        _row("parameters", f"{info['parameters']:,}"),
        _row(
            "vocabulary",
            f"{vocab['pieces']} SentencePiece pieces, sha256 {vocab['sha256']}" if vocab else "none stored",
        ),
        _row("step / epoch", f"{info['step']:,} / {info['epoch'] if info['epoch'] is not None else '-'}"),
    ]
    if info.get("training_hours") is not None:
        rows.append(_row("training time", _minutes(info["training_hours"] * 60)))
    if best:
        rows.append(_row("best valid", ", ".join(f"{k} {v:.3f}" for k, v in best.items())))
    sources = [("taken from", info["taken_from"])] if isinstance(info.get("taken_from"), dict) else []
    sources += [("averaged from", source) for source in info.get("averaged_from") or []]
    for label, source in sources:
        if isinstance(source, dict):
            rows.append(_row(label, f"{source['file']} (step {source['step']}, sha256 {source['sha256']})"))
        else:  # averages from before sha256s were recorded: paths only
            rows.append(_row(label, str(source)))
    return rows + _student_rows(info)


def _student_rows(info: dict[str, Any]) -> list[str]:
    """A student's teacher, a model's shortlist and the decoding settings it carries as its own."""
    rows = []
    student, shortlist, defaults = info.get("student"), info.get("shortlist"), info.get("decode_defaults")
    if isinstance(student, dict):
        teachers = ", ".join(f"{t.get('path')} (sha256 {t.get('sha256')})" for t in student.get("teacher") or [])
        beam = (student.get("decode") or {}).get("beam")
        rows.append(_row("student of", f"{teachers}, its beam {beam}"))
    if defaults:
        own = ", ".join(f"{k} {'on' if v is True else 'off' if v is False else v}" for k, v in defaults.items())
        rows.append(_row("decodes with", f"{own} unless told otherwise (its decode_defaults)"))
    if isinstance(shortlist, dict):
        learned = shortlist.get("learned_from") or {}
        rows.append(
            _row(
                "shortlist",
                f"{shortlist.get('k')} candidates a source piece + the {shortlist.get('frequent_count')} most "
                f"frequent pieces, from {learned.get('pairs')} pairs of {learned.get('data')} (--no-shortlist: off)",
            )
        )
    return rows


def render(info: dict[str, Any]) -> str:
    """The human-readable form of `describe`'s dict (`--json` prints the dict itself)."""
    if info.get("export") == "ctranslate2":
        return _export_text(info)
    if "run" not in info:
        source = info.get("source")
        what = f"{source}, read as an mtkit {info['kind']}" if source else f"mtkit {info['kind']}"
        head = f"{info['path']}: {what} (format {info['format_version']}), {_size(info['bytes'])}"
        return "\n".join([head, *_file_rows(info), *_provenance_rows(info.get("provenance"), source)]) + "\n"
    lines = [f"{info['run']}: mtkit run directory"]
    metrics = info.get("metrics") or {}
    if metrics:
        lines.append(
            _row(
                "trained",
                f"to step {metrics['last_step']:,} in {_minutes(metrics['training_minutes'])} "
                f"({metrics['sessions']} session(s)"
                f"{', stopped by ' + metrics['stopped'] if metrics.get('stopped') else ''})",
            )
        )
        for key in ("loss", "ppl", "bleu"):
            best = metrics.get(f"best_valid_{key}")
            if best:
                lines.append(_row(f"best valid {key}", f"{best['value']:.3f} at step {best['step']}"))
    lines.append(_row("checkpoints", "" if info["checkpoints"] else "none"))
    for row in info["checkpoints"]:
        lines.append(
            f"    {row['file']:<28} step {row['step'] if row['step'] is not None else '?':>8}  "
            f"{_size(row['bytes']):>10}"
        )
    for bad in info.get("unreadable") or []:
        lines.append(_row("unreadable", f"{bad['file']}: {bad['why']}"))
    newest = info.get("newest")
    if newest:
        lines.append(f"newest: {newest['path']}")
        lines += _file_rows(newest)
    lines += _provenance_rows(info.get("provenance") or (newest or {}).get("provenance"))
    return "\n".join(lines) + "\n"


def _export_text(info: dict[str, Any]) -> str:
    """A CTranslate2 export: what mtkit-export.json records of it."""
    step = info.get("step")
    lines = [
        f"{info['path']}: CTranslate2 export ({info.get('quantization') or 'quantization not recorded'}), model.bin "
        f"{_size(info['model_bytes'])}, {_size(info['bytes'])} with its vocabularies",
        _row("quantization", info.get("quantization") or "not recorded (no mtkit-export.json)"),
        _row("exported from", f"{info.get('exported_from')} (step {step:,})" if step is not None else "not recorded"),
        _row("architecture", info.get("architecture") or "not recorded"),
        _row("files", ", ".join(info["files"])),
    ]
    entries = info.get("vmap_entries")
    lines.append(_row("vocabulary map", f"vmap.txt, {entries} source pieces" if entries is not None else "none"))
    lines += _student_rows(info)
    if info.get("mtkit"):
        lines.append(_row("written by", f"mtkit {info['mtkit']}"))
    if info.get("provenance"):
        lines += _provenance_rows(info["provenance"])
    return "\n".join(lines) + "\n"
