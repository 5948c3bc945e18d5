"""Safe, streaming reads from archives, and the dev and test sets (plain text or SGML).

The WMT archives are gigabytes: only the members a corpus needs are read, in one
sequential pass over the (gzip) stream, and copied out to a staging directory (pairing
two sides line by line needs both open at once, which a compressed tar stream cannot
give). Every member seen on the way is checked: a name that is absolute, climbs out with
`..`, or a link or device entry, makes the whole archive refused, with two independent
checks: our own, and Python's `tarfile.data_filter` where it exists (3.11.4+, 3.10.12+).
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import tarfile
import zipfile
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from mtkit.atomic import atomic_file
from mtkit.errors import MtkitError
from mtkit.files import CHUNK, READ_ERRORS, read_all

logger = logging.getLogger(__name__)


def unsafe_member(name: str) -> str | None:
    """Why a member name would land outside the extraction directory, or None if it would not."""
    if not name or "\x00" in name:
        return "an empty or NUL-containing name"
    norm = name.replace("\\", "/")
    if norm.startswith("/") or re.match(r"^[A-Za-z]:", norm):
        return "an absolute path"
    if ".." in PurePosixPath(norm).parts:
        return "a '..' component"
    return None


def _refuse(archive: Path, name: str, why: str) -> MtkitError:
    return MtkitError(
        f"{archive.name} holds a member '{name}' that would land outside the extraction directory "
        f"({why}); refusing to read from this archive."
    )


def _check_tar_member(archive: Path, member: tarfile.TarInfo, dest: Path) -> None:
    why = unsafe_member(member.name)
    if why is None and (member.issym() or member.islnk()):
        target = member.linkname
        base = PurePosixPath(member.name).parent if member.issym() else PurePosixPath(".")
        if unsafe_member(target) or ".." in (base / target).parts:
            why = f"a link to '{target}'"
    if why is None and (member.ischr() or member.isblk() or member.isfifo()):
        why = "a device or pipe entry"
    if why is None and hasattr(tarfile, "data_filter"):  # the standard library's own judgement, too
        try:
            tarfile.data_filter(member, str(dest))
        except tarfile.FilterError as exc:
            why = str(exc)
    if why is not None:
        raise _refuse(archive, member.name, why)


def _inside(dest: Path, name: str) -> Path:
    out = (dest / name).resolve()
    if os.path.commonpath([str(out), str(dest.resolve())]) != str(dest.resolve()):
        raise MtkitError(f"member '{name}' would land outside {dest}; refusing it.")
    return out


def _copy_out(stream: BinaryIO, out: Path) -> None:
    with atomic_file(out) as f:
        shutil.copyfileobj(stream, f, CHUNK)


def _norm(name: str) -> str:
    while name.startswith("./"):
        name = name[2:]
    return name


def stage_members(archive: Path, kind: str, wanted: set[str], dest: Path) -> dict[str, Path]:
    """Copy the `wanted` members of a tar or zip archive under `dest`, in one pass; {member: path}.

    Stops reading as soon as all are found. A wanted member that is missing is an error
    naming it and the archive.
    """
    dest.mkdir(parents=True, exist_ok=True)
    found: dict[str, Path] = {}
    try:
        if kind == "tar":
            with tarfile.open(archive, mode="r|*") as tf:
                for member in tf:
                    _check_tar_member(archive, member, dest)
                    name = _norm(member.name)
                    if name in wanted and name not in found:
                        if not member.isfile():
                            raise MtkitError(f"{name} in {archive.name} is not a regular file.")
                        stream = tf.extractfile(member)
                        assert stream is not None
                        found[name] = out = _inside(dest, name)
                        _copy_out(stream, out)
                        if len(found) == len(wanted):
                            break
        elif kind == "zip":
            with zipfile.ZipFile(archive) as zf:
                infos = zf.infolist()
                for info in infos:
                    why = unsafe_member(info.filename)
                    if why:
                        raise _refuse(archive, info.filename, why)
                for info in infos:
                    name = _norm(info.filename)
                    if name in wanted and name not in found and not info.is_dir():
                        found[name] = out = _inside(dest, name)
                        with zf.open(info) as stream:
                            _copy_out(stream, out)
        else:
            raise ValueError(kind)
    except (tarfile.TarError, zipfile.BadZipFile, *READ_ERRORS) as exc:
        raise MtkitError(
            f"{archive} is not a readable {kind} archive ({exc}); delete it and run again to fetch it afresh."
        ) from None
    missing = sorted(wanted - set(found))
    if missing:
        raise MtkitError(f"{archive.name} has no member {', '.join(missing)}.")
    return found


def decode_strict(data: bytes, label: str) -> str:
    """UTF-8 text, or an error naming the file and the line of the first bad byte."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - data.rfind(b"\n", 0, exc.start)
        raise MtkitError(
            f"{label}: line {line} is not valid UTF-8 ({exc.reason} at byte {column} of the line)."
        ) from None


_SEG = re.compile(r"<seg\b[^>]*>(.*?)</seg\s*>", re.S | re.I)
_ENTITY = re.compile(r"&(amp|lt|gt|quot|apos|#[0-9]+|#[xX][0-9a-fA-F]+);")
_NAMED = {"amp": "&", "lt": "<", "gt": ">", "quot": '"', "apos": "'"}


def _unescape(match: re.Match) -> str:
    name = match.group(1)
    if name[0] == "#":
        code = int(name[2:], 16) if name[1] in "xX" else int(name[1:])
        try:
            return chr(code)
        except (ValueError, OverflowError):
            return match.group(0)
    return _NAMED[name]


def unescape_xml(text: str) -> str:
    """The five XML entities and numeric references, nothing else (html.unescape would also
    turn '&para' or '&copy' written as plain text into symbols)."""
    return _ENTITY.sub(_unescape, text) if "&" in text else text


def read_sgml(path: Path, label: str) -> list[str]:
    """The segments of a WMT SGML file, in order, unescaped and stripped."""
    text = decode_strict(read_all(path, label), label)
    segs = [" ".join(unescape_xml(m.group(1)).split()) for m in _SEG.finditer(text)]
    if not segs:
        raise MtkitError(f"{label} holds no <seg> element; is it an SGML test set?")
    return segs


# Characters that some line readers take as a line end (Python's universal newlines: CR; str.splitlines:
# all of these). Inside a dev or test line they would shift every later pair for such a reader.
_LINE_BREAKS = str.maketrans(dict.fromkeys("\r\v\f\x1c\x1d\x1e\x85\u2028\u2029", " "))


def read_text_lines(path: Path, label: str) -> list[str]:
    """All lines of a small text file (dev and test sets), strictly UTF-8, split at '\\n' only.

    A CRLF line end is removed; a CR or other line-break character inside a line becomes a
    space (with a warning), so that every later reader sees exactly these lines.
    """
    text = decode_strict(read_all(path, label), label)
    if text.startswith("\ufeff"):
        text = text[1:]
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    lines = [line[:-1] if line.endswith("\r") else line for line in lines]
    safe = [line.translate(_LINE_BREAKS) for line in lines]
    changed = [i + 1 for i, (a, b) in enumerate(zip(lines, safe)) if a != b]
    if changed:
        logger.warning(
            "%s: %d line(s) hold a carriage return or another line break inside (first: line %d); each became a space",
            label,
            len(changed),
            changed[0],
        )
    return safe
