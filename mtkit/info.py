"""`mtkit info`: what a model file, a checkpoint or a run directory is, as a dict and as text.

A file: its kind, architecture and parameter count, vocabulary, step and epoch, training
time, best validation figure, provenance (RUN/run.json's record) and, for an average, the
checkpoints it is the mean of. A run: the same from its newest checkpoint, plus config.json,
the best validation figures in metrics.jsonl, and every checkpoint there with its step and size.
Files are opened memory-mapped: the weights of a large checkpoint are never read.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from mtkit import checkpoint
from mtkit.errors import MtkitError
from mtkit.provenance import distilled_from, read_run_json


def parameters(state: dict[str, Any]) -> int:
    """Parameters of a state_dict, each shared tensor counted once (tied embeddings, paper 3.4)."""
    seen: set[tuple] = set()
    total = 0
    for tensor in state.values():
        key = (tensor.untyped_storage().data_ptr(), tensor.storage_offset(), tuple(tensor.shape))
        if key not in seen:
            seen.add(key)
            total += tensor.numel()
    return total


def _vocabulary(vocab: bytes | None) -> dict[str, Any] | None:
    if not vocab:
        return None
    from mtkit.data.marian_vocab import load_tokenizer

    try:
        pieces: int | None = len(load_tokenizer(vocab))
    except Exception:  # sentencepiece's own errors have no common type; the size is then unknown
        pieces = None
    return {"pieces": pieces, "sha256": hashlib.sha256(vocab).hexdigest(), "bytes": len(vocab)}


def best_score(ckpt: dict[str, Any]) -> dict[str, float] | None:
    best = (ckpt.get("progress") or {}).get("best")
    if not isinstance(best, (int, float)) or best in (float("inf"), float("-inf")):
        return None
    if (ckpt.get("train_config") or {}).get("valid_bleu"):
        return {"bleu": -float(best)}  # the trainer keeps -BLEU so that lower is better for both
    return {"nll": float(best)}


def describe_file(path: Path) -> dict[str, Any]:
    """A model or checkpoint file; a damaged or foreign one is one sentence."""
    ckpt = checkpoint.load(path, mmap=True)
    checkpoint.require_model(ckpt, path)
    try:
        config = checkpoint.config_of(ckpt)
        state = ckpt["model"]
        params = parameters(state)
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise MtkitError(f"{path} is an mtkit file, but a damaged one ({type(exc).__name__}: {exc}).") from None
    data, progress = ckpt.get("data") or {}, ckpt.get("progress") or {}
    return {
        "path": str(path),
        "bytes": sum(p.stat().st_size for p in path.iterdir()) if path.is_dir() else path.stat().st_size,
        "kind": ckpt.get("kind"),
        "format_version": ckpt["version"],
        "architecture": architecture(config),
        "model_config": ckpt["model_config"],
        "parameters": params,
        "vocabulary": _vocabulary(ckpt.get("vocab")),
        "step": int(ckpt.get("step", 0)),
        "epoch": data["epoch"] + 1 if "epoch" in data else None,
        "training_hours": round(progress["elapsed"] / 3600, 4) if "elapsed" in progress else None,
        "best_valid": best_score(ckpt),
        "train_config": ckpt.get("train_config"),
        "provenance": ckpt.get("provenance"),
        "averaged_from": ckpt.get("averaged_from"),
        "taken_from": ckpt.get("taken_from"),
        "student": distilled_from(ckpt.get("provenance")),
        "shortlist": _shortlist(ckpt.get("shortlist")),
    }


def _shortlist(record: Any) -> dict[str, Any] | None:
    """What a model file's shortlist is (mtkit/shortlist.py), without its tables."""
    if not isinstance(record, dict):
        return None
    return {k: record.get(k) for k in ("k", "frequent_count", "learned_from")}


def describe_export(path: Path) -> dict[str, Any]:
    """A CTranslate2 directory of `mtkit export`: the model file's size (the whole model, as CTranslate2 runs
    it), its quantization, and what the export record says of the model it came from."""
    try:
        record = json.loads((path / "mtkit-export.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise MtkitError(f"{path}/mtkit-export.json is not a readable export record; export the model again.") from None
    config = record.get("model_config") if isinstance(record, dict) else None
    vmap = path / "vmap.txt"
    return {
        "path": str(path),
        "kind": "ctranslate2",
        "bytes": sum(p.stat().st_size for p in path.iterdir() if p.is_file()),
        "model_bytes": (path / "model.bin").stat().st_size,
        "quantization": record.get("quantization"),
        "architecture": architecture(checkpoint.config_of(record)) if isinstance(config, dict) else None,
        "step": record.get("step"),
        "vmap_entries": sum(1 for _ in vmap.open(encoding="utf-8")) - 1 if vmap.is_file() else None,
        "student": distilled_from(record.get("provenance")),
        "provenance": record.get("provenance"),
    }


def architecture(config: Any) -> str:
    """One line in the paper's symbols: layers, d_model / d_ff / h, norm placement, sharing, dropout."""
    norm = "pre-norm" if config.pre_norm else "post-norm"
    extras = "".join(
        [f", {config.activation}" if config.activation != "relu" else "", ", logits bias" if config.output_bias else ""]
    )
    vocab = str(config.vocab_size) if config.tgt_vocab_size is None else f"{config.vocab_size}/{config.tgt_vocab_size}"
    return (
        f"{config.encoder_layers}+{config.decoder_layers} layers, d_model {config.d_model}, d_ff {config.d_ff}, "
        f"h {config.heads} (d_k {config.d_k}), {norm}{extras}, embeddings shared: {config.share_embeddings}, "
        f"dropout {config.dropout}, vocabulary {vocab}"
    )


# ---- a run directory ----------------------------------------------------------------------------------------


def _step_of(path: Path, numbered: dict[int, Path]) -> int | None:
    """checkpoint_<step>.pt by its name; last/best by the numbered file they are a link to, else by loading."""
    match = checkpoint.CHECKPOINT_NAME.fullmatch(path.name)
    if match:
        return int(match.group(1))
    for step, other in numbered.items():
        if os.path.samefile(path, other):
            return step
    try:
        return int(checkpoint.load(path, mmap=True).get("step", 0))
    except MtkitError:
        return None


def _checkpoints(run: Path) -> list[dict[str, Any]]:
    files = sorted(p for p in run.glob("*.pt") if p.is_file())
    numbered = {int(m.group(1)): p for p in files if (m := checkpoint.CHECKPOINT_NAME.fullmatch(p.name))}
    rows = [{"file": p.name, "step": _step_of(p, numbered), "bytes": p.stat().st_size} for p in files]
    return sorted(rows, key=lambda r: (r["step"] is None, r["step"] or 0, r["file"]))


def run_metrics(run: Path) -> dict[str, Any] | None:
    """The best validation figures, the last step and the training time that metrics.jsonl records."""
    from mtkit.plot import minutes_axis

    path = run / "metrics.jsonl"
    if not path.is_file():
        return None
    records = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue  # a line cut short by a kill; info describes what is there
        if isinstance(record, dict) and "event" in record and "time" in record:
            records.append(record)
    if not records:
        return None
    valid = [r for r in records if r["event"] == "valid"]
    out: dict[str, Any] = {
        "records": len(records),
        "last_step": max((r.get("step", 0) for r in records), default=0),
        "training_minutes": round(minutes_axis(records)[-1], 2),
        "sessions": sum(r["event"] == "start" for r in records),
    }
    for key, pick in (("loss", min), ("ppl", min), ("bleu", max)):
        scored = [r for r in valid if isinstance(r.get(key), (int, float))]
        if scored:
            best = pick(scored, key=lambda r: r[key])
            out[f"best_valid_{key}"] = {"value": best[key], "step": best.get("step")}
    done = [r for r in records if r["event"] == "done"]
    if done:
        out["stopped"] = done[-1].get("stopped")
    return out


def describe_run(run: Path) -> dict[str, Any]:
    config = run / "config.json"
    checkpoints = _checkpoints(run)
    if not config.is_file() and not (run / "metrics.jsonl").is_file() and not checkpoints:
        raise MtkitError(f"{run} is not an mtkit run directory (no config.json, metrics.jsonl or checkpoints).")
    try:
        saved = json.loads(config.read_text(encoding="utf-8")) if config.is_file() else None
    except ValueError:
        raise MtkitError(f"{config} is not valid JSON; is {run} an mtkit run directory?") from None
    newest, unreadable = _newest_readable(run, checkpoints)
    return {
        "run": str(run),
        "config": saved,
        "metrics": run_metrics(run),
        "checkpoints": checkpoints,
        "newest": newest,
        "unreadable": unreadable,
        "provenance": read_run_json(run),
    }


def _newest_readable(run: Path, checkpoints: list[dict[str, Any]]) -> tuple[dict[str, Any] | None, list[dict]]:
    """The newest checkpoint that loads, as resume picks it: checkpoint_last.pt, then checkpoint_<step>.pt
    newest first. The damaged ones before it are listed with the reason, never fatal to the listing."""
    numbered = [r["file"] for r in reversed(checkpoints) if checkpoint.CHECKPOINT_NAME.fullmatch(r["file"])]
    unreadable = []
    for name in dict.fromkeys(["checkpoint_last.pt", *numbered]):
        if not (run / name).is_file():
            continue
        try:
            return describe_file(run / name), unreadable
        except MtkitError as exc:
            unreadable.append({"file": name, "why": str(exc)})
    if not numbered and not unreadable and checkpoints:  # only other .pt files (an averaged.pt)
        newest = run / checkpoints[-1]["file"]
        try:
            return describe_file(newest), unreadable
        except MtkitError as exc:
            unreadable.append({"file": newest.name, "why": str(exc)})
    return None, unreadable


def describe(path: str | os.PathLike) -> dict[str, Any]:
    path = Path(path)
    if not path.exists():
        raise MtkitError(f"{path} does not exist; give a model or checkpoint file, or a run directory.")
    from mtkit.marian import is_hf_dir

    if path.is_dir() and (path / "model.bin").is_file() and (path / "mtkit-export.json").is_file():
        return describe_export(path)
    return describe_run(path) if path.is_dir() and not is_hf_dir(path) else describe_file(path)


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


def _provenance_rows(record: dict[str, Any] | None) -> list[str]:
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
        rows.append(_row("  " + ("model" if rel == "spm.model" else "array"), f"{rel} sha256 {info.get('sha256')}"))
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
    """A student's teacher (it decodes greedily by default) and a model's shortlist."""
    rows = []
    student, shortlist = info.get("student"), info.get("shortlist")
    if isinstance(student, dict):
        teachers = ", ".join(f"{t.get('path')} (sha256 {t.get('sha256')})" for t in student.get("teacher") or [])
        beam = (student.get("decode") or {}).get("beam")
        rows.append(_row("student of", f"{teachers}, its beam {beam}; decodes greedily unless --beam is given"))
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
    if info.get("kind") == "ctranslate2":
        head = (
            f"{info['path']}: CTranslate2 export ({info['quantization']}), model.bin {_size(info['model_bytes'])}, "
            f"{_size(info['bytes'])} with its vocabularies"
        )
        rows = [_row("architecture", info["architecture"]), _row("step", info["step"])]
        entries = info.get("vmap_entries")
        rows.append(_row("vocabulary map", f"vmap.txt, {entries} source pieces" if entries is not None else "none"))
        rows += _student_rows(info)
        return "\n".join([head, *rows, *_provenance_rows(info.get("provenance"))]) + "\n"
    if "run" not in info:
        head = f"{info['path']}: mtkit {info['kind']} (format {info['format_version']}), {_size(info['bytes'])}"
        return "\n".join([head, *_file_rows(info), *_provenance_rows(info.get("provenance"))]) + "\n"
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
