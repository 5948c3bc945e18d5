"""The directory `mtkit export -o DIR` writes: checked before any work, filled without losing a user's file.

DIR's `mtkit-export.json` lists the files export wrote there. A later export replaces and removes
only those: files the user added to an earlier export (notes, a .git of a Hugging Face repository)
are kept, and one that the new export would overwrite is refused, as `prepare` and `bpe` do with
theirs (mtkit/data/owned.py). A non-empty directory export never wrote is refused as a whole.

Everything is first written in a temporary directory inside DIR (so on DIR's own filesystem,
whatever DIR is: `.`, a mount point, a symlink to a directory), then moved in file by file with
rename. Before the first move the record lists the old files and the new ones, so that a crash at
any point leaves every file of the export listed as mtkit's, each whole; the final record is
written last. Every check that can fail is made before the model is converted, in one sentence.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from mtkit.atomic import write_atomic
from mtkit.data.owned import inside, listed, previous_record, refuse_foreign
from mtkit.errors import MtkitError
from mtkit.files import EXPORT_RECORD, work_dir

logger = logging.getLogger(__name__)

RECORD = EXPORT_RECORD  # the mark of a directory mtkit wrote, and the list of the files it wrote there
TEMP_PREFIX = ".mtkit-export-"  # work_dir appends <pid>-
COMMAND = "mtkit export"


def owned(out: Path) -> set[str]:
    """The files an earlier export into `out` wrote (its record's list, the record itself included).

    Only names that stay inside `out` once links are followed: a record listing `ext/file`, where
    `ext` is a link out of `out`, must not make the export remove or replace a file elsewhere.
    """
    record = previous_record(out / RECORD)
    names = inside(out, listed(record.get("files")))
    return names | {RECORD} if record else names


def _ours(name: str) -> bool:
    return name.startswith(TEMP_PREFIX)  # an export's temporary directory (swept when its process is gone)


def _nearest_existing(path: Path) -> Path:
    for parent in [path, *path.absolute().parents]:
        if os.path.lexists(parent):
            return parent
    return Path("/")


def check_target(out: Path, writes: Iterable[str]) -> None:
    """Refuse, before any work, an --output that cannot become the export: one sentence each.

    `writes`: the file names the format will write (a later check covers what it really wrote).
    """
    if out.is_symlink() and not out.exists():
        raise MtkitError(
            f"{out} is a symbolic link to {os.readlink(out)}, which does not exist; "
            "create that directory or choose another --output."
        )
    if out.exists() and not out.is_dir():
        raise MtkitError(f"{out} exists and is not a directory; choose another --output.")
    if out.is_dir():
        entries = [p.name for p in out.iterdir() if not _ours(p.name)]
        if entries and not (out / RECORD).is_file():
            raise MtkitError(
                f"{out} is a non-empty directory that `{COMMAND}` did not write (no {RECORD}); "
                "move it away or choose another --output."
            )
        refuse_foreign(out, [*writes, RECORD], owned(out), COMMAND, RECORD)
    base = _nearest_existing(out)
    if not base.is_dir():
        raise MtkitError(f"cannot create {out}: {base} is not a directory; choose another --output.")
    if not os.access(base, os.W_OK | os.X_OK):
        raise MtkitError(f"cannot write in {base} (permission denied); choose another --output.")


@contextmanager
def _made(out: Path) -> Iterator[None]:
    """Create `out` (and its parents) for the export; if the export then fails, remove what was created empty."""
    created = [p for p in [out, *out.absolute().parents] if not os.path.lexists(p)]
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise MtkitError(f"cannot create {out} ({exc.strerror or exc}); choose another --output.") from None
    try:
        yield
    except BaseException:
        for path in created:  # innermost first; a directory that is not empty stays
            try:
                path.rmdir()
            except OSError:
                break
        raise


def write_export(out: Path, fill: Callable[[Path], None], record: dict[str, Any]) -> None:
    """Call `fill(tmp)` to write the export's files in a temporary directory inside `out`, then move them in."""
    with _made(out):
        try:
            with work_dir(out, TEMP_PREFIX) as tmp:
                fill(tmp)
                _move_in(tmp, out, record)
        except OSError as exc:  # disk full, quota, permissions changed under us: nothing of the user's is lost
            where = exc.filename or out
            raise MtkitError(f"cannot write the export in {where} ({exc.strerror or exc}).") from None


def _move_in(tmp: Path, out: Path, record: dict[str, Any]) -> None:
    new = sorted(p.name for p in tmp.iterdir())
    if any((tmp / name).is_dir() for name in new):
        raise MtkitError(f"the export wrote a sub-directory, which `{COMMAND}` cannot list; this is a bug in mtkit.")
    before = owned(out)
    refuse_foreign(out, [*new, RECORD], before, COMMAND, RECORD)  # what the format really wrote, checked again
    record = {**record, "files": [*new, RECORD]}
    write_atomic(out / RECORD, _json({**record, "files": sorted(before | set(record["files"])), "complete": False}))
    for name in new:
        os.replace(tmp / name, out / name)
    for name in sorted(before - set(record["files"])):
        stale = out / name
        if stale.is_file() or stale.is_symlink():  # an earlier export's file this one does not write
            stale.unlink()
    write_atomic(out / RECORD, _json(record))


def _json(record: dict[str, Any]) -> str:
    return json.dumps(record, indent=2, ensure_ascii=False) + "\n"
