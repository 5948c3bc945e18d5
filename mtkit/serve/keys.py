"""The API keys `mtkit serve` takes, each with its own limits, and what each key has used.

Two sources, both optional: the one key of `--api-key-file` (its first line) or
`$MTKIT_SERVE_API_KEY`, without limits (the operator's); and `--api-keys FILE`, one key a line
with its limits, re-read when the file changes (at most once a second), so keys are added,
limited or revoked without a restart:

    # KEY  [name=NAME]  [requests_per_minute=N]  [characters_per_day=N]
    9f1c...e2  name=weblate  requests_per_minute=120  characters_per_day=2000000
    77ab...01  name=alice

LibreTranslate's api_keys database (`req_limit` a minute, `char_limit`) is the anchor; here the
characters are counted per UTC day, as a quota. A request past a limit is refused before it is
decoded (429 with `Retry-After`: the seconds until the minute's oldest request leaves the window,
or until midnight UTC) and counts toward nothing; one key at its limit slows no other. Keys are
compared in constant time; a key never appears in a log line, a repr or an answer (its name does).
"""

from __future__ import annotations

import collections
import hmac
import logging
import math
import os
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path

from mtkit.errors import MtkitError
from mtkit.serve.payload import RequestError

logger = logging.getLogger(__name__)

RELOAD_EVERY_S = 1.0  # the key file is looked at (stat) at most this often
WINDOW_S = 60.0  # requests_per_minute counts the requests of the last minute (a moving window)
LIMIT_FIELDS = ("requests_per_minute", "characters_per_day")


@dataclass(frozen=True)
class Key:
    """One key: its name (shown; the key itself never is) and its limits (0: none)."""

    name: str
    secret: str = field(repr=False)
    requests_per_minute: int = 0
    characters_per_day: int = 0


class OverLimit(RequestError):
    """429 with Retry-After: a key's requests this minute, or its characters today (`quota`: the latter, DeepL's
    456)."""

    def __init__(self, message: str, retry_after: int, quota: bool) -> None:
        super().__init__(429, message, retry_after)
        self.quota = quota


def _secret_ok(secret: str, where: str) -> str:
    if not secret or not (secret.isascii() and secret.isprintable()) or any(c.isspace() for c in secret):
        raise MtkitError(f"{where}: a key is printable ASCII without spaces (it travels in a header).")
    return secret


def parse_keys(text: str, where: str) -> tuple[Key, ...]:
    """The keys of a key file's text, or one sentence naming the line that is wrong."""
    keys: list[Key] = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        secret, *options = line.split()
        _secret_ok(secret, f"{where} line {number}")
        values: dict[str, str] = {"name": f"key {len(keys) + 1}"}
        for option in options:
            name, sep, value = option.partition("=")
            if not sep or name not in ("name", *LIMIT_FIELDS):
                raise MtkitError(
                    f"{where} line {number}: {option!r} is not name=NAME, requests_per_minute=N or "
                    "characters_per_day=N."
                )
            if name in LIMIT_FIELDS and not (value.isascii() and value.isdigit()):
                raise MtkitError(f"{where} line {number}: {name} must be a whole number (0: no limit), not {value!r}.")
            values[name] = value
        keys.append(
            Key(
                values["name"],
                secret,
                int(values.get("requests_per_minute", 0)),
                int(values.get("characters_per_day", 0)),
            )
        )
    if len({k.secret for k in keys}) != len(keys):
        raise MtkitError(f"{where}: a key is listed twice.")
    return tuple(keys)


class KeyFile:
    """`--api-keys FILE`: read at start (a mistake is one sentence then), re-read when it changes; a later mistake
    keeps the keys read before, with one warning."""

    def __init__(self, path: str) -> None:
        self.path = Path(path)
        self._checked = time.monotonic()
        self._stamp, self.keys = self._read()

    def _read(self) -> tuple[tuple[int, int, int], tuple[Key, ...]]:
        try:
            info = self.path.stat()
            text = self.path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reason = getattr(exc, "strerror", None) or exc
            raise MtkitError(f"cannot read the API keys file {self.path}: {reason}.") from None
        if info.st_mode & 0o077 and os.name == "posix":
            logger.warning(
                "the API keys file %s can be read by other users (mode %04o); make it private with chmod 600 %s.",
                self.path,
                stat.S_IMODE(info.st_mode),
                self.path,
            )
        keys = parse_keys(text, f"the API keys file {self.path}")
        return (info.st_mtime_ns, info.st_size, info.st_ino), keys

    def current(self) -> tuple[Key, ...]:
        """The keys now: the file re-read if it changed since it was last read."""
        now = time.monotonic()
        if now - self._checked < RELOAD_EVERY_S:
            return self.keys
        self._checked = now
        try:
            info = self.path.stat()
            if (info.st_mtime_ns, info.st_size, info.st_ino) != self._stamp:
                self._stamp, self.keys = self._read()
                logger.info("the API keys file %s changed: %d key(s) now.", self.path, len(self.keys))
        except MtkitError as exc:
            logger.warning("%s The keys read before stay in use.", exc)
        except OSError as exc:
            logger.warning("cannot look at the API keys file %s (%s); keeping its keys.", self.path, exc.strerror)
        return self.keys


class Usage:
    """What each key (by name) has used: its requests in the last minute, its characters today (UTC)."""

    def __init__(self) -> None:
        self._requests: dict[str, collections.deque[float]] = collections.defaultdict(collections.deque)
        self._chars: dict[str, tuple[int, int]] = {}  # name -> (UTC day number, characters that day)

    def check(self, key: Key, now: float | None = None) -> None:
        """Refuse (OverLimit) a request of `key` when its requests this minute are all used, counting nothing: the
        server asks this from a header alone, before a body is read (guard.py)."""
        if key.requests_per_minute:
            self._window(key, time.monotonic() if now is None else now)

    def admit(self, key: Key, now: float | None = None) -> None:
        """Count one request of `key`, or refuse it (OverLimit) past its requests a minute; refused ones count not."""
        if key.requests_per_minute:
            now = time.monotonic() if now is None else now
            self._window(key, now).append(now)

    def _window(self, key: Key, now: float) -> collections.deque[float]:
        """The times of `key`'s requests in the minute before `now`, or OverLimit when they are its limit."""
        window = self._requests[key.name]
        while window and window[0] <= now - WINDOW_S:
            window.popleft()
        if len(window) >= key.requests_per_minute:
            wait = max(1, math.ceil(window[0] + WINDOW_S - now))
            raise OverLimit(
                f"this key's limit of {key.requests_per_minute} requests a minute is reached; retry in {wait} s.",
                wait,
                quota=False,
            )
        return window

    def charge(self, key: Key, chars: int, now: float | None = None) -> None:
        """Count `chars` characters of `key` today, or refuse them all (OverLimit) past its characters a day."""
        now = time.time() if now is None else now
        day = int(now // 86400)
        used = self.used_today(key, now)
        if key.characters_per_day and used + chars > key.characters_per_day:
            wait = max(1, math.ceil((day + 1) * 86400 - now))
            raise OverLimit(
                f"this key's limit of {key.characters_per_day} characters a day would be passed ({used} used today, "
                f"{chars} asked); it resets at midnight UTC, in {wait} s.",
                wait,
                quota=True,
            )
        self._chars[key.name] = (day, used + chars)

    def used_today(self, key: Key, now: float | None = None) -> int:
        now = time.time() if now is None else now
        day, used = self._chars.get(key.name, (-1, 0))
        return used if day == int(now // 86400) else 0


class Keys:
    """Every key the server takes (the single key, and the key file's), and their usage; `required`: whether any
    key is configured, i.e. whether a request must carry one."""

    def __init__(self, single: str | None = None, file: KeyFile | None = None) -> None:
        self.single = Key("api-key-file", single) if single is not None else None
        self.file = file
        self.usage = Usage()

    @property
    def required(self) -> bool:
        return self.single is not None or self.file is not None

    def find(self, given: str | bytes) -> Key | None:
        """The key `given` is, compared in constant time with each; None when it is none of them."""
        raw = given if isinstance(given, bytes) else given.encode("utf-8", "replace")
        found = None
        for key in (*([self.single] if self.single else []), *(self.file.current() if self.file else ())):
            if hmac.compare_digest(raw, key.secret.encode("utf-8")) and found is None:
                found = key
        return found
