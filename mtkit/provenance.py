"""RUN/run.json: where a run, and every checkpoint and model file it writes, came from.

A record holds the command line, the versions of mtkit, torch, sentencepiece, sacrebleu and
Python, the git commit of mtkit's checkout when it runs from one, the device, threads,
precision and world size, and the sha256 chain of the data: the downloaded archives
(prepare.json) -> the raw text bpe read (bpe.json) -> spm.model and the binarized arrays the
run trains on (hashed here, at the start). A resumed run writes a new record and keeps the
earlier sessions' under `earlier`. The trainer stores the record in every checkpoint;
`mtkit average` carries it on with `averaged_from`.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import logging
import os
import platform
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

from mtkit import __version__
from mtkit.atomic import write_atomic
from mtkit.files import SPM_MODEL

logger = logging.getLogger(__name__)

FORMAT, VERSION = "mtkit-run", 1
RUN_JSON = "run.json"
SPLITS_TRAINED_ON = ("train", "valid")


def versions() -> dict[str, str | None]:
    import numpy
    import sacrebleu
    import sentencepiece
    import torch

    return {
        "mtkit": __version__,
        "torch": str(torch.__version__),
        "cuda": torch.version.cuda,  # str: TorchVersion
        # is a class that a weights_only load refuses
        "sentencepiece": sentencepiece.__version__,
        "sacrebleu": sacrebleu.__version__,
        "numpy": numpy.__version__,
        "python": platform.python_version(),
    }


def git_commit(root: Path | None = None) -> dict[str, Any] | None:
    """The commit of mtkit's own checkout, and whether it has uncommitted changes; None outside a checkout."""
    root = root or Path(__file__).resolve().parents[1]
    if not (root / ".git").exists():  # a directory, or a file in a git worktree
        return None

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(root), *args], capture_output=True, text=True, timeout=20, check=True
        ).stdout.strip()

    try:
        commit = git("rev-parse", "HEAD")
        dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
    except (OSError, subprocess.SubprocessError):  # no git installed, or not a repository after all
        return None
    return {"commit": commit, "dirty": dirty}


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def sha256_file(path: Path) -> str:
    """sha256 of a file in 1 MiB blocks; not files.fingerprint, whose line count costs more time here, and a run
    may start on gigabytes of arrays."""
    sha = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            sha.update(block)
    return sha.hexdigest()


def _hashed(path: Path, rel: str, known: dict[str, Any]) -> dict[str, Any]:
    """Size and sha256 of a file; an earlier session's hash is reused while size and mtime are the same."""
    st = path.stat()
    old = known.get(rel) or {}
    if old.get("bytes") == st.st_size and old.get("mtime_ns") == st.st_mtime_ns and old.get("sha256"):
        return old
    return {"bytes": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": sha256_file(path)}


def _archives(prepare: dict[str, Any] | None) -> dict[str, Any] | None:
    if prepare is None:
        return None
    keys = ("file", "url", "origin", "bytes", "sha256", "md5")
    sources = [{k: s[k] for k in keys if k in s} for s in prepare.get("sources", []) if isinstance(s, dict)]
    return {"corpus": prepare.get("corpus"), "created": prepare.get("created"), "sources": sources}


def _bpe(bpe: dict[str, Any] | None) -> dict[str, Any] | None:
    if bpe is None:
        return None
    raw = {
        f"raw/{split}.{lang}": sha
        for split, entry in (bpe.get("splits") or {}).items()
        if isinstance(entry, dict)
        for lang, sha in (entry.get("inputs") or {}).items()
    }
    model = bpe["model"] if isinstance(bpe.get("model"), dict) else {}
    return {
        "created": bpe.get("created"),
        "vocab_size": bpe.get("vocab_size"),
        "raw_text_sha256": raw,
        "spm_model_sha256": model.get("sha256"),
    }


def data_chain(data_dir: Path, src: str, tgt: str, earlier: dict[str, Any] | None = None) -> dict[str, Any]:
    """Archives -> raw text -> spm.model and arrays: what prepare.json and bpe.json say, and the files as they are."""
    known = (earlier or {}).get("files", {})
    files = {}
    for rel in [
        SPM_MODEL,
        *(f"bin/{split}.{lang}.{ext}" for split in SPLITS_TRAINED_ON for lang in (src, tgt) for ext in ("bin", "idx")),
    ]:
        if (data_dir / rel).is_file():
            files[rel] = _hashed(data_dir / rel, rel, known)
    bpe = _bpe(_read_json(data_dir / "bpe.json"))
    prepared = _read_json(data_dir / "prepare.json")
    recorded = (bpe or {}).get("spm_model_sha256")
    if recorded and SPM_MODEL in files and recorded != files[SPM_MODEL]["sha256"]:
        logger.warning("%s/spm.model is not the one bpe.json records: the data directory was changed by hand", data_dir)
    return {
        "dir": str(data_dir.resolve()),
        "archives": _archives(prepared),
        "bpe": bpe,
        "files": files,
        **({"distilled": distilled} if (distilled := _distilled(prepared)) else {}),
    }


def _distilled(prepare: dict[str, Any] | None) -> dict[str, Any] | None:
    """A distilled data directory's teacher and decoding settings (mtkit/distill.py): what makes a run a student."""
    settings = ((prepare or {}).get("distilled") or {}).get("settings")
    if not isinstance(settings, dict):
        return None
    return {"teacher": settings.get("teacher"), "decode": settings.get("decode")}


def distilled_from(record: Any) -> dict[str, Any] | None:
    """The teacher a model's provenance record (a checkpoint's `provenance`) says it was distilled from, if any."""
    data = record.get("data") if isinstance(record, dict) else None
    found = data.get("distilled") if isinstance(data, dict) else None
    return found if isinstance(found, dict) else None


def device_name(device: Any) -> str:
    import torch

    if getattr(device, "type", str(device)) == "cuda":
        return f"{device} ({torch.cuda.get_device_name(device)})"
    return f"{device} ({platform.processor() or platform.machine()}, {os.cpu_count()} cores)"


def command_line(argv: list[str] | None = None) -> str:
    """How the user started the run: `mtkit ...` when through the command line, else Python's argv."""
    argv = list(sys.argv if argv is None else argv)
    if argv and (Path(argv[0]).name == "mtkit" or Path(argv[0]).parts[-2:] == ("mtkit", "__main__.py")):
        argv[0] = "mtkit"
    return shlex.join(argv)


def read_run_json(run_dir: Path) -> dict[str, Any] | None:
    record = _read_json(run_dir / RUN_JSON)
    return record if record and record.get("format") == FORMAT else None


def start_run(
    run_dir: Path,
    data_dir: Path,
    src: str,
    tgt: str,
    *,
    device: Any,
    threads: int,
    precision: str,
    world_size: int,
    start_step: int,
    started_from: dict[str, Any] | None = None,
    decisions: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Build this session's record, write RUN/run.json (keeping earlier sessions) and return it.

    `started_from`: the model a fine-tuning run started from (`mtkit train --init`: name, path, sha256).
    `decisions`: what the run decided at its start and why (precision, the fp32 products' backend: measured now
    or read from this machine's kept measurement, mtkit/runtime/kept.py)."""
    previous = read_run_json(run_dir)
    earlier = [] if previous is None else [*previous.pop("earlier", []), previous]
    record = {
        "format": FORMAT,
        "version": VERSION,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "command": command_line(),
        "cwd": os.getcwd(),
        "versions": versions(),
        "git": git_commit(),
        "platform": platform.platform(),
        "device": device_name(device),
        "threads": threads,
        "precision": precision,
        "world_size": world_size,
        "start_step": start_step,
        "data": data_chain(data_dir, src, tgt, earlier[-1].get("data") if earlier else None),
        "earlier": earlier,
    }
    if started_from is not None:
        record["init"] = started_from
    if decisions is not None:
        record["decisions"] = decisions
    write_atomic(run_dir / RUN_JSON, json.dumps(record, indent=1, ensure_ascii=False) + "\n")
    return record


def data_languages(record: dict[str, Any] | None) -> tuple[str, str] | None:
    """(source, target) from a run's record: its arrays are bin/train.SRC.bin then bin/train.TGT.bin."""
    files = ((record or {}).get("data") or {}).get("files") or {}
    found = [m.group(1) for rel in files if (m := re.fullmatch(r"bin/train\.([\w-]+)\.bin", rel))]
    return (found[0], found[1]) if len(found) == 2 else None
