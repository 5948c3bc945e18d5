"""Which files in a user's directory mtkit may replace: the ones its own record says it wrote.

`prepare` and `bpe` write into a directory the user names, which may hold the user's own
files (a corpus, notes, a model from elsewhere). Each lists the files it wrote in its JSON
record (prepare.json, bpe.json); a later run replaces or removes only those, and a file it
would overwrite that is not listed is an error, never a silent loss.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from mtkit.errors import MtkitError


def listed(files: Any) -> set[str]:
    """The relative paths of a record's file list, keeping only ones that stay inside the directory."""
    names = files if isinstance(files, (dict, list)) else ()
    out = set()
    for rel in names:
        parts = PurePosixPath(rel).parts if isinstance(rel, str) else ()
        if parts and not PurePosixPath(rel).is_absolute() and ".." not in parts and "\\" not in rel:
            out.add(str(PurePosixPath(*parts)))
    return out


def inside(root: Path, names: Iterable[str]) -> set[str]:
    """The `names` whose file stays inside `root` once links are followed: every directory on its way resolved.

    A record's names refuse `..` and absolute paths (`listed`), but `sub/file` where `sub` is a
    symbolic link out of `root` (a cloned repository can carry both) would still reach outside; such a
    name is dropped, so nothing outside `root` is ever replaced or removed. The last component itself
    may be a link: replacing or removing it touches the link, not what it points to.
    """
    top = root.resolve()
    kept = set()
    for rel in names:
        parent = (root / rel).parent.resolve()
        if parent == top or top in parent.parents:
            kept.add(rel)
    return kept


def refuse_foreign(root: Path, outputs: Iterable[str], owned: set[str], command: str, record: str) -> None:
    """An error naming the first of `outputs` that exists in `root` without being in `owned`."""
    foreign = sorted(rel for rel in set(outputs) - owned if os.path.lexists(root / rel))
    if foreign:
        raise MtkitError(
            f"{root / foreign[0]} was not written by `{command}` ({root / record} does not list it) "
            f"and would be overwritten; move it away or choose another directory."
        )


def previous_record(path: Path) -> Mapping[str, Any]:
    """A JSON record written by an earlier run, or {} when there is none or it is unreadable."""
    import json

    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}
