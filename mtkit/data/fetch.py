"""Resumable, checksummed downloads into a cache; an offline mirror directory instead of the network.

Only the standard library (urllib): a download goes to `NAME.part` in the cache, resumes
with an HTTP Range request after a dropped connection, a timeout or a 5xx answer (up to
`retries` times, waiting `backoff * 2**k` seconds), and becomes `NAME` only once its size
and sha256 (md5 where only that is published) are right. An unknown host or a refused
connection fails at once: that is no network, and retrying would only make the user wait.
A mismatch deletes the file and raises: a bad file is never used. A redirect that leaves https
is refused (`HttpsOnlyRedirects`). A file without a
published checksum has its sha256 recorded on first download; later runs check against
that record, and prepare.json says it was recorded, not verified.

Next to each cached file, `NAME.json` keeps its checksums with the size and mtime at the
time they were computed, so that later runs need not re-read gigabytes to trust it.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import re
import socket
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from mtkit.atomic import write_atomic
from mtkit.data.corpus_model import Source
from mtkit.errors import MtkitError
from mtkit.files import CHUNK, hash_file, progress_bar
from mtkit.locks import NO_FLOCK

VERIFIED = "verified against the registry"
RECORDED = "recorded on first download (no published checksum)"
CHECKED_RECORD = "matches the checksum recorded on first download (no published checksum)"


def default_cache_dir() -> Path:
    """`$MTKIT_CACHE`, else the user's cache directory (XDG on Linux, ~/Library/Caches on macOS)."""
    env = os.environ.get("MTKIT_CACHE")
    if env:
        return Path(env).expanduser()
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches" / "mtkit"
    if os.name == "nt" and os.environ.get("LOCALAPPDATA"):
        return Path(os.environ["LOCALAPPDATA"]) / "mtkit" / "Cache"
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "mtkit"


@dataclass
class Fetched:
    """A file ready to read, and what prepare.json says about it."""

    source: Source
    path: Path
    sha256: str
    md5: str
    size: int
    origin: str  # "downloaded", "cache" or "mirror"
    checksum: str  # VERIFIED, RECORDED or CHECKED_RECORD

    def record(self) -> dict:
        return {
            "file": self.source.filename,
            "url": self.source.url,
            "origin": self.origin,
            "path": str(self.path),
            "bytes": self.size,
            "sha256": self.sha256,
            "md5": self.md5,
            "checksum": self.checksum,
        }


class _Retry(Exception):
    """A transient failure: the connection dropped, timed out, or the server said 5xx."""


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive lock file, so two `prepare` runs do not write the same .part at once."""
    try:
        import fcntl
    except ImportError:  # Windows: no advisory locks here, and no harm beyond a wasted download
        yield
        return
    with open(path, "a+b") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX)
        except OSError as exc:
            if exc.errno not in NO_FLOCK:
                raise
            yield  # a cache on a filesystem without locks: a second run may only download the file twice
            return
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


class HttpsOnlyRedirects(urllib.request.HTTPRedirectHandler):
    """Follows a redirect only where it keeps https: https -> http (or ftp) is refused in one sentence.

    urllib follows any redirect between http, https and ftp, so a download asked for over https
    could silently continue in the clear, where anyone on the path may change the bytes (and for
    an archive with no pinned sha256, nothing would notice). curl and pip refuse the same downgrade.
    """

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # type: ignore[no-untyped-def]
        old = urllib.parse.urlsplit(req.full_url).scheme.lower()
        new = urllib.parse.urlsplit(newurl).scheme.lower()  # urllib has already resolved it against the old
        if old == "https" and new != "https":
            fp.close()
            raise MtkitError(
                f"{req.full_url} redirects to {newurl}, which leaves https; mtkit does not download over "
                f"a connection that is no longer encrypted: fetch the file by hand and pass its directory "
                f"as --mirror DIR."
            )
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def build_opener(*handlers: urllib.request.BaseHandler) -> urllib.request.OpenerDirector:
    """urllib's default opener with `HttpsOnlyRedirects` in place of its redirect handler."""
    return urllib.request.build_opener(*handlers, HttpsOnlyRedirects())


class Fetcher:
    """Gets each Source's file from the cache, a mirror directory, or its URL (in that order).

    With `mirror`, the network is never used: a file missing from both the cache and the
    mirror is an error naming the file and the URL to fetch it from. Several mirror directories
    are searched in order (Multi30k's English-German and French-Czech sides live apart).
    """

    def __init__(
        self,
        cache_dir: str | os.PathLike | None = None,
        mirror: str | os.PathLike | Sequence[str | os.PathLike] | None = None,
        *,
        progress: bool = False,
        retries: int = 5,
        backoff: float = 1.0,
        timeout: float = 60.0,
    ):
        self.cache_dir = Path(cache_dir) if cache_dir else default_cache_dir()
        given = [] if not mirror else [mirror] if isinstance(mirror, (str, os.PathLike)) else list(mirror)
        self.mirrors = tuple(Path(m) for m in given)
        for directory in (d for d in self.mirrors if not d.is_dir()):
            raise MtkitError(f"the mirror directory {directory} does not exist.")
        self.progress = progress
        self.retries = max(0, int(retries))
        self.backoff = backoff
        self.timeout = timeout
        self.opener = build_opener()  # tests add a handler here; every download goes through it

    # ------------------------------------------------------------------ paths and records
    def cached_path(self, source: Source) -> Path:
        return self.cache_dir / source.group / source.filename

    @staticmethod
    def _stamp_path(path: Path) -> Path:
        return path.with_name(path.name + ".json")

    def _read_stamp(self, stamp: Path) -> dict | None:
        try:
            return json.loads(stamp.read_text())
        except (OSError, ValueError):
            return None

    def _write_stamp(self, stamp: Path, data: dict) -> None:
        write_atomic(stamp, json.dumps(data, indent=1))

    def _known_hashes(self, path: Path, stamp: Path) -> tuple[str, str, dict | None]:
        """(sha256, md5) of `path`, from its stamp when size and mtime still match, else computed."""
        st = path.stat()
        rec = self._read_stamp(stamp)
        if rec and rec.get("size") == st.st_size and rec.get("mtime_ns") == st.st_mtime_ns and rec.get("sha256"):
            return rec["sha256"], rec.get("md5", ""), rec
        sha, md5 = hash_file(path)
        return sha, md5, rec

    @staticmethod
    def _mismatch(source: Source, sha: str, md5: str, size: int, recorded: str | None) -> str | None:
        """Why the content is wrong, or None when it is right."""
        if source.size is not None and size != source.size:
            return f"{size} bytes instead of {source.size}"
        if source.sha256 and sha != source.sha256.lower():
            return f"sha256 {sha} instead of {source.sha256}"
        if source.md5 and md5 != source.md5.lower():
            return f"md5 {md5} instead of {source.md5}"
        if not source.sha256 and not source.md5 and recorded and sha != recorded:
            return f"sha256 {sha} instead of {recorded}, recorded when it was first downloaded"
        return None

    @staticmethod
    def _status(source: Source, recorded: str | None) -> str:
        if source.sha256 or source.md5:
            return VERIFIED
        return CHECKED_RECORD if recorded else RECORDED

    # ------------------------------------------------------------------ public
    def missing_in_mirror(self, sources: Iterable[Source]) -> list[Source]:
        """Sources neither cached nor in the mirror directory (empty when there is no mirror)."""
        return [s for s in sources if self.mirrors and self._in_mirror(s) is None and not self.cached_path(s).is_file()]

    def _in_mirror(self, source: Source) -> Path | None:
        """The first mirror directory's copy of the file, or None."""
        return next((d / source.filename for d in self.mirrors if (d / source.filename).is_file()), None)

    def fetch(self, source: Source) -> Fetched:
        cached = self.cached_path(source)
        if cached.is_file():
            got = self._from_cache(source, cached)
            if got is not None:
                return got
        if self.mirrors:
            return self._from_mirror(source)
        return self._download(source)

    # ------------------------------------------------------------------ cache and mirror
    def _from_cache(self, source: Source, path: Path) -> Fetched | None:
        stamp = self._stamp_path(path)
        sha, md5, rec = self._known_hashes(path, stamp)
        recorded = rec.get("recorded_sha256") if rec else None
        size = path.stat().st_size
        if self._mismatch(source, sha, md5, size, recorded):
            # A cached file that no longer matches is damaged: drop it and fetch it afresh.
            path.unlink(missing_ok=True)
            stamp.unlink(missing_ok=True)
            return None
        self._stamp(path, source, sha, md5, recorded or sha)
        return Fetched(source, path, sha, md5, size, "cache", self._status(source, recorded))

    def _stamp(self, path: Path, source: Source, sha: str, md5: str, recorded: str) -> None:
        st = path.stat()
        self._write_stamp(
            self._stamp_path(path),
            {
                "url": source.url,
                "size": st.st_size,
                "mtime_ns": st.st_mtime_ns,
                "sha256": sha,
                "md5": md5,
                "recorded_sha256": recorded if not (source.sha256 or source.md5) else None,
            },
        )

    def _from_mirror(self, source: Source) -> Fetched:
        path = self._in_mirror(source)
        if path is None:
            where = " or ".join(map(str, self.mirrors))
            raise MtkitError(f"{source.filename} is not in the mirror directory {where}; download it from {source.url}")
        # The mirror belongs to the user: never delete or write there. Checksums are kept in the cache.
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        stamp = self.cache_dir / source.group / f"{source.filename}.mirror.json"
        stamp.parent.mkdir(parents=True, exist_ok=True)
        rec = self._read_stamp(stamp)
        st = path.stat()
        if (
            rec
            and rec.get("path") == str(path.resolve())
            and rec.get("size") == st.st_size
            and rec.get("mtime_ns") == st.st_mtime_ns
        ):
            sha, md5 = rec["sha256"], rec["md5"]
        else:
            sha, md5 = hash_file(path)
        recorded = rec.get("recorded_sha256") if rec else None
        why = self._mismatch(source, sha, md5, st.st_size, recorded)
        if why:
            raise MtkitError(f"{path} is not the expected file ({why}); replace it with a fresh copy of {source.url}.")
        self._write_stamp(
            stamp,
            {
                "path": str(path.resolve()),
                "size": st.st_size,
                "mtime_ns": st.st_mtime_ns,
                "sha256": sha,
                "md5": md5,
                "recorded_sha256": (recorded or sha) if not (source.sha256 or source.md5) else None,
            },
        )
        return Fetched(source, path, sha, md5, st.st_size, "mirror", self._status(source, recorded))

    # ------------------------------------------------------------------ network
    def _download(self, source: Source) -> Fetched:
        final = self.cached_path(source)
        final.parent.mkdir(parents=True, exist_ok=True)
        part = final.with_name(final.name + ".part")
        with _locked(final.with_name(final.name + ".lock")):
            if final.is_file():  # another run finished it while we waited for the lock
                got = self._from_cache(source, final)
                if got is not None:
                    return got
            attempt = 0
            while True:
                try:
                    self._download_once(source, part)
                    break
                except _Retry as exc:
                    if attempt >= self.retries:
                        raise MtkitError(
                            f"cannot download {source.filename} from {source.url} ({exc}); "
                            f"without network, fetch it elsewhere and pass its directory as --mirror DIR."
                        ) from None
                    time.sleep(self.backoff * 2**attempt)
                    attempt += 1
            sha, md5 = hash_file(part)
            size = part.stat().st_size
            why = self._mismatch(source, sha, md5, size, None)
            if why:
                part.unlink(missing_ok=True)
                raise MtkitError(
                    f"{source.filename} downloaded from {source.url} is not the expected file ({why}); "
                    f"it was deleted and nothing was used from it."
                )
            os.replace(part, final)
            self._stamp(final, source, sha, md5, sha)
            return Fetched(source, final, sha, md5, size, "downloaded", self._status(source, None))

    def _download_once(self, source: Source, part: Path) -> None:
        have = part.stat().st_size if part.is_file() else 0
        headers = {"User-Agent": "mtkit (+https://pypi.org/project/mtkit)", "Accept-Encoding": "identity"}
        if have:
            headers["Range"] = f"bytes={have}-"
        request = urllib.request.Request(source.url, headers=headers)
        try:
            response = self.opener.open(request, timeout=self.timeout)
        except urllib.error.HTTPError as exc:
            if exc.code == 416 and have:
                total = _total_from_content_range(exc.headers.get("Content-Range", ""))
                if total is not None and total == have:
                    return  # the .part is already complete
                part.unlink(missing_ok=True)
                raise _Retry("the partial download did not fit the file on the server; starting over") from None
            if exc.code >= 500 or exc.code in (408, 429):
                raise _Retry(f"HTTP {exc.code} {exc.reason}") from None
            raise MtkitError(
                f"cannot download {source.filename}: {source.url} answered HTTP {exc.code} {exc.reason}."
            ) from None
        except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
            reason = getattr(exc, "reason", exc)
            if isinstance(reason, (socket.gaierror, ConnectionRefusedError)):
                # No network (or no server there): waiting and retrying will not help.
                raise MtkitError(
                    f"cannot download {source.filename} from {source.url} ({reason}); without network, "
                    f"fetch it elsewhere and pass its directory as --mirror DIR."
                ) from None
            raise _Retry(str(reason) or type(exc).__name__) from None
        with response:
            if have and response.status == 206:
                start = _start_from_content_range(response.headers.get("Content-Range", ""))
                if start != have:
                    part.unlink(missing_ok=True)
                    raise _Retry(f"the server resumed at byte {start}, not {have}; starting over")
                total = _total_from_content_range(response.headers.get("Content-Range", ""))
                mode = "ab"
            else:  # 200: the whole file (a server that ignores Range starts over too)
                have = 0
                length = response.headers.get("Content-Length")
                total = int(length) if length and length.isdigit() else None
                mode = "wb"
            if total is None:
                total = source.size
            with progress_bar(self.progress, total, source.filename, "B", initial=have) as bar, open(part, mode) as out:
                while True:
                    try:
                        block = response.read(CHUNK)
                    except (OSError, http.client.HTTPException) as exc:
                        raise _Retry(f"connection lost after {have} bytes: {exc or type(exc).__name__}") from None
                    if not block:
                        break
                    try:
                        out.write(block)
                    except OSError as exc:  # a full disk: name the file, which the system does not
                        raise MtkitError(
                            f"cannot write {part} ({exc.strerror or exc}); free some space and run again: "
                            "the download resumes where it stopped."
                        ) from None
                    have += len(block)
                    bar.update(len(block))
        if total is not None and have < total:
            raise _Retry(f"connection closed after {have} of {total} bytes")


def _start_from_content_range(value: str) -> int | None:
    m = re.match(r"\s*bytes\s+(\d+)-\d+/", value)
    return int(m.group(1)) if m else None


def _total_from_content_range(value: str) -> int | None:
    m = re.search(r"/(\d+)\s*$", value)
    return int(m.group(1)) if m else None
