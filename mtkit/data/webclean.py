"""`mtkit clean`: rules for the noise of web-crawled parallel text, streamed, counted, resumable.

Each rule is off unless asked for, and drops a pair; the first rule that applies is the one counted,
in this order (cheap before dear):

- `invalid_utf8`, `empty` (always): a side that is not UTF-8, or that is blank.
- `control` (--control): a side holding a control character (Unicode Cc, tab included), a private-use or
  unassigned code point, or U+FFFD, the mark of text decoded with the wrong encoding.
- `markup` (--markup): an HTML/XML tag (`<p>`, `</div>`, `<br/>`) or character entity (`&amp;`, `&#160;`).
- `copy` (--copies): the target is the source, up to case, spaces, punctuation, symbols and digits.
- `too_long_chars`, `char_ratio` (--max-chars, --max-char-ratio): lengths in characters (code points),
  a unit that works for every script.
- `duplicate` (--dedup): the same pair, byte for byte, kept before; `near_duplicate` (--near-dedup): the
  same pair up to case, spaces, punctuation, symbols and digits (the normal form `copy` compares).
- `langid` (--langid): either side not identified as its language (langid.py's model through py3langid,
  the extra `mtkit[langid]`; chosen by bench/langid_short.py: the most accurate of four libraries on short
  sentences).
- `dual_xent` (--dual-xent FORWARD BACKWARD --dual-xent-max X): the pair's dual conditional cross-entropy
  under two translation models, one each way (mtkit.decode.dual_xent), is above X: what rules cannot see,
  a misaligned pair of two well-formed sentences. The scorer is passed in (this layer has no models).
  --dual-xent-drop SHARE sets X to the score SHARE of the kept pairs lie above (the paper's "keep the
  best-scored share"), estimated first on an even sample of the input (`estimate_threshold`).

Memory stays bounded: text streams through in chunks; the seen pairs are 64-bit hashes (8 bytes a kept
pair a rule) in sorted numpy runs merged like a binary counter (`HashSet`), 80 MB a rule for 10 million pairs.
A run that stops (Ctrl-C, a crash) resumes where its last checkpoint was: the outputs are written as
PREFIX.LANG.part with a state file beside them, updated every `checkpoint_s` seconds after the text it
counts is on disk; a rerun with the same inputs and settings cuts the .part files back to the state and
goes on. The finished files appear under their names only at the end, with PREFIX.clean.json.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import time
import typing
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import regex

from mtkit.atomic import write_atomic
from mtkit.errors import MtkitError
from mtkit.files import count_parallel, open_binary

RULES = (
    "invalid_utf8",
    "empty",
    "control",
    "markup",
    "copy",
    "too_long_chars",
    "char_ratio",
    "duplicate",
    "near_duplicate",
    "langid",
    "dual_xent",
)
CONTROL = regex.compile(r"[\p{Cc}\p{Co}\p{Cn}\uFFFD]")
MARKUP = regex.compile(
    r"<\s*/?\s*[A-Za-z][A-Za-z0-9:-]*(?:\s[^<>]*)?/?\s*>|&(?:[A-Za-z][A-Za-z0-9]{1,7}|#[0-9]{1,7}|#[xX][0-9A-Fa-f]{1,6});"
)
# Scores of (sources, targets), one a pair; a pair scoring above WebCleanConfig.dual_xent_max is dropped.
Scorer = Callable[[list[str], list[str]], list[float]]
NOT_LETTERS = regex.compile(r"[\p{P}\p{S}\p{Z}\p{N}\s]+")
STATE_FORMAT = 1
DUAL_XENT_SAMPLE = 20_000


@dataclass(frozen=True)
class WebCleanConfig:
    control: bool = False
    markup: bool = False
    copies: bool = False
    max_chars: int = 0  # 0: no limit
    max_char_ratio: float = 0.0  # 0: no limit
    dedup: bool = False
    near_dedup: bool = False
    langid: bool = False
    dual_xent_max: float = 0.0  # 0: off
    dual_xent_drop: float = 0.0  # 0: off; else dual_xent_max is estimated from a sample (see the docstring)

    def active(self) -> tuple[str, ...]:
        on = {"control": self.control, "markup": self.markup, "copy": self.copies, "too_long_chars": self.max_chars}
        on.update(char_ratio=self.max_char_ratio, duplicate=self.dedup, near_duplicate=self.near_dedup)
        on.update(langid=self.langid, dual_xent=self.dual_xent_max or self.dual_xent_drop)
        return tuple(rule for rule in RULES if bool(on.get(rule, True)))


@dataclass
class WebCleanStats:
    pairs_in: int = 0
    kept: int = 0
    dropped: dict[str, int] = field(default_factory=lambda: dict.fromkeys(RULES, 0))


def letters(text: str) -> str:
    """The normal form of `copy` and `near_duplicate`: case-folded, without spaces, punctuation, symbols, digits."""
    return NOT_LETTERS.sub("", text.casefold())


def _hash(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")


class HashSet:
    """The 64-bit hashes seen so far, in sorted runs whose sizes halve from the first: a lookup is a binary
    search per run (log2(n) runs at most), an insert merges runs like a binary counter's carries, and memory
    is 8 bytes a hash. Two different pairs with one hash (probability about n^2 / 2^65) would count as one."""

    def __init__(self, hashes: np.ndarray | None = None):
        self.runs: list[np.ndarray] = [np.unique(hashes)] if hashes is not None and len(hashes) else []

    def __len__(self) -> int:
        return sum(len(run) for run in self.runs)

    def first_seen(self, hashes: np.ndarray) -> np.ndarray:
        """True where a hash was never seen before (nor earlier in `hashes`); those are added."""
        new = np.zeros(len(hashes), dtype=bool)
        new[np.unique(hashes, return_index=True)[1]] = True
        for run in self.runs:
            at = np.minimum(np.searchsorted(run, hashes), len(run) - 1)
            new &= run[at] != hashes
        run = np.sort(hashes[new])
        while self.runs and len(self.runs[-1]) <= len(run):
            run = np.sort(np.concatenate((self.runs.pop(), run)), kind="stable")
        if len(run):
            self.runs.append(run)
        return new


def identifier() -> Callable[[str], str]:
    """The language of a line as an ISO 639-1 code, by py3langid (one sentence when it is not installed)."""
    try:
        import py3langid
    except ImportError:
        raise MtkitError("--langid needs py3langid: pip install 'mtkit[langid]'.") from None
    return lambda line: str(py3langid.classify(line)[0])


def _base(lang: str) -> str:
    return lang.lower().replace("_", "-").split("-")[0]


class WebCleaner:
    """Applies a WebCleanConfig to chunks of pairs; holds the seen hashes and the counts."""

    def __init__(
        self,
        src_lang: str,
        tgt_lang: str,
        config: WebCleanConfig,
        hashes: tuple[np.ndarray, np.ndarray],
        scorer: Scorer | None = None,
    ):
        if (config.dual_xent_max or config.dual_xent_drop) and scorer is None:
            raise MtkitError("--dual-xent-max and --dual-xent-drop need the two models: --dual-xent FORWARD BACKWARD.")
        self.langs, self.config, self.scorer = (_base(src_lang), _base(tgt_lang)), config, scorer
        self.exact, self.near = HashSet(hashes[0]), HashSet(hashes[1])
        self.stats = WebCleanStats()
        self.guess = identifier() if config.langid else None

    def _rule(self, s: str, t: str) -> str | None:
        """The first per-pair rule that drops (s, t), or None."""
        cfg = self.config
        if not s.strip() or not t.strip():
            return "empty"
        if cfg.control and (CONTROL.search(s) or CONTROL.search(t)):
            return "control"
        if cfg.markup and (MARKUP.search(s) or MARKUP.search(t)):
            return "markup"
        if cfg.copies and letters(s) == letters(t):
            return "copy"
        if cfg.max_chars and (len(s) > cfg.max_chars or len(t) > cfg.max_chars):
            return "too_long_chars"
        ratio = cfg.max_char_ratio
        if ratio and (len(s) > ratio * len(t) or len(t) > ratio * len(s)):
            return "char_ratio"
        return None

    def chunk(self, src: list[bytes], tgt: list[bytes]) -> tuple[list[bytes], list[bytes], list[np.ndarray]]:
        """The kept lines of one chunk (as read, newline included) and the hashes it added to each set."""
        drop = self.stats.dropped
        self.stats.pairs_in += len(src)
        keep: list[tuple[bytes, bytes, str, str]] = []
        for bs, bt in zip(src, tgt):
            try:
                s, t = bs.decode("utf-8").rstrip("\r\n"), bt.decode("utf-8").rstrip("\r\n")
            except UnicodeDecodeError:
                drop["invalid_utf8"] += 1
                continue
            rule = self._rule(s, t)
            if rule is None:
                keep.append((bs, bt, s, t))
            else:
                drop[rule] += 1
        added: list[np.ndarray] = [np.zeros(0, np.uint64), np.zeros(0, np.uint64)]
        for i, (on, rule, key) in enumerate(
            (
                (self.config.dedup, "duplicate", lambda s, t: f"{s}\t{t}"),
                (self.config.near_dedup, "near_duplicate", lambda s, t: f"{letters(s)}\t{letters(t)}"),
            )
        ):
            if not on or not keep:
                continue
            hashes = np.fromiter((_hash(key(s, t)) for _, _, s, t in keep), dtype=np.uint64, count=len(keep))
            new = (self.exact if i == 0 else self.near).first_seen(hashes)
            added[i] = hashes[new]
            drop[rule] += int(len(keep) - new.sum())
            keep = [pair for pair, n in zip(keep, new) if n]
        if self.guess is not None:
            guess, (ls, lt) = self.guess, self.langs
            right = [guess(s) == ls and guess(t) == lt for _, _, s, t in keep]
            drop["langid"] += right.count(False)
            keep = [pair for pair, ok in zip(keep, right) if ok]
        if self.scorer is not None and self.config.dual_xent_max:
            scores = self.scorer([s for _, _, s, _ in keep], [t for _, _, _, t in keep])
            good = [score <= self.config.dual_xent_max for score in scores]
            drop["dual_xent"] += good.count(False)
            keep = [pair for pair, ok in zip(keep, good) if ok]
        self.stats.kept += len(keep)
        ends = [
            (bs if bs.endswith(b"\n") else bs + b"\n", bt if bt.endswith(b"\n") else bt + b"\n")
            for bs, bt, _, _ in keep
        ]
        return [a for a, _ in ends], [b for _, b in ends], added


def clean_files(
    src: Path,
    tgt: Path,
    src_lang: str,
    tgt_lang: str,
    prefix: Path,
    config: WebCleanConfig,
    *,
    chunk_pairs: int = 10_000,
    checkpoint_s: float = 30.0,
    progress: Callable[[int, int], None] | None = None,
    scorer: Scorer | None = None,
    scorer_about: str = "",
) -> dict[str, Any]:
    """Clean SRC/TGT into PREFIX.SRC_LANG and PREFIX.TGT_LANG; returns PREFIX.clean.json's content.

    `progress(done, total)` is called after each chunk (pairs read so far, of all); `scorer_about` names the
    scorer's models (a resumed run must use the same)."""
    outs = [Path(f"{prefix}.{lang}") for lang in (src_lang, tgt_lang)]
    if {p.resolve() for p in outs} & {src.resolve(), tgt.resolve()}:
        raise MtkitError(f"--out {prefix} would overwrite an input; choose another prefix.")
    total = count_parallel(src, tgt, str(src), str(tgt))
    parts = [Path(f"{p}.part") for p in outs]
    logs = [Path(f"{prefix}.{name}-hashes.part") for name in ("exact", "near")]
    state_path = Path(f"{prefix}.clean-state.json")
    settings = {
        "format": STATE_FORMAT,
        "inputs": {str(p.resolve()): [p.stat().st_size, p.stat().st_mtime_ns] for p in (src, tgt)},
        "langs": [src_lang, tgt_lang],
        "config": asdict(config),
        "scorer": scorer_about,
    }
    state = _resume_state(state_path, settings, parts, logs)
    done = state.get("pairs_done", 0)
    if config.dual_xent_drop and scorer is not None:
        if "dual_xent_max" in state:  # a resumed run keeps the threshold it began with
            threshold = float(state["dual_xent_max"])
        else:
            threshold, scorer = estimate_threshold(src, tgt, src_lang, tgt_lang, config, scorer, total)
        config = replace(config, dual_xent_max=threshold)
        settings["dual_xent_max"] = config.dual_xent_max
    hashes = tuple(_read_hashes(log, n) for log, n in zip(logs, state.get("hashes", [0, 0])))
    cleaner = WebCleaner(src_lang, tgt_lang, config, hashes, scorer)  # type: ignore[arg-type]
    if state:
        cleaner.stats = WebCleanStats(**state["stats"])
    prefix.parent.mkdir(parents=True, exist_ok=True)
    files = [open(p, "ab") for p in (*parts, *logs)]
    last = time.monotonic()
    try:
        with open_binary(src) as fs, open_binary(tgt) as ft:
            for _ in itertools.islice(zip(fs, ft), done):
                pass
            while chunk := list(itertools.islice(zip(fs, ft), chunk_pairs)):
                a, b, added = cleaner.chunk([s for s, _ in chunk], [t for _, t in chunk])
                files[0].writelines(a)
                files[1].writelines(b)
                files[2].write(added[0].tobytes())
                files[3].write(added[1].tobytes())
                done += len(chunk)
                if progress is not None:
                    progress(done, total)
                if time.monotonic() - last >= checkpoint_s:
                    _checkpoint(state_path, settings, files, done, cleaner)
                    last = time.monotonic()
        _checkpoint(state_path, settings, files, done, cleaner)
    finally:
        for f in files:
            f.close()
    record = {
        "inputs": [str(src), str(tgt)],
        "outputs": [str(p) for p in outs],
        "langs": [src_lang, tgt_lang],
        "rules": list(config.active()),
        "settings": asdict(config) | ({"dual_xent_models": scorer_about} if scorer_about else {}),
        "pairs_in": cleaner.stats.pairs_in,
        "kept": cleaner.stats.kept,
        "dropped": {rule: cleaner.stats.dropped[rule] for rule in config.active()},
    }
    for part, out in zip(parts, outs):
        os.replace(part, out)
    write_atomic(Path(f"{prefix}.clean.json"), json.dumps(record, indent=1, ensure_ascii=False) + "\n")
    for path in (*logs, state_path):
        path.unlink(missing_ok=True)
    return record


def estimate_threshold(
    src: Path, tgt: Path, src_lang: str, tgt_lang: str, config: WebCleanConfig, scorer: Scorer, total: int
) -> tuple[float, Scorer]:
    """The score above which `config.dual_xent_drop` of a sample's pairs lie, and a scorer that reuses the
    sample's scores. The sample is every k-th pair the other rules keep (not the first ones: corpora come sorted),
    k such that it holds up to DUAL_XENT_SAMPLE pairs (the estimate is the same on every run). The duplicate rules see
    the whole input (a sample holds a repeated pair without the pair it repeats), so this reads it all once with
    every rule but the dear ones, language identification (run on the sample only) and the score itself."""
    every, none = max(1, -(-total // DUAL_XENT_SAMPLE)), np.zeros(0, np.uint64)
    off = replace(config, langid=False, dual_xent_max=0.0, dual_xent_drop=0.0)
    rules = WebCleaner(src_lang, tgt_lang, off, (none, none))
    sample: tuple[list[bytes], list[bytes]] = ([], [])
    with open_binary(src) as fs, open_binary(tgt) as ft:
        while chunk := list(itertools.islice(zip(fs, ft), 10_000)):
            kept_src, kept_tgt, _ = rules.chunk([s for s, _ in chunk], [t for _, t in chunk])
            start = -(rules.stats.kept - len(kept_src)) % every  # every k-th kept pair, counted over the input
            sample[0].extend(kept_src[start::every])
            sample[1].extend(kept_tgt[start::every])
    if config.langid:
        only_langid = WebCleanConfig(langid=True)
        kept_src, kept_tgt, _ = WebCleaner(src_lang, tgt_lang, only_langid, (none, none)).chunk(*sample)
        sample = (kept_src, kept_tgt)
    kept_src, kept_tgt = sample
    texts = [[line.decode("utf-8").rstrip("\r\n") for line in side] for side in (kept_src, kept_tgt)]
    if not texts[0]:  # the rules drop the whole sample: nothing to estimate from; 0 keeps what is left
        return 0.0, scorer
    scores = scorer(texts[0], texts[1])
    threshold = float(np.quantile(scores, 1.0 - config.dual_xent_drop))
    known: dict[tuple[str, str], float] = dict(zip(zip(texts[0], texts[1]), scores))

    def reusing(sources: list[str], targets: list[str]) -> list[float]:
        pairs = list(zip(sources, targets))
        out = [known.pop(pair, None) for pair in pairs]  # popped: the cache only shrinks
        todo = [i for i, score in enumerate(out) if score is None]
        if todo:
            for i, score in zip(todo, scorer([sources[i] for i in todo], [targets[i] for i in todo])):
                out[i] = score
        return typing.cast("list[float]", out)

    return threshold, reusing


def _checkpoint(path: Path, settings: dict[str, Any], files: list, done: int, cleaner: WebCleaner) -> None:
    """The state after `done` pairs, written once the text and hashes it counts are on disk."""
    for f in files:
        f.flush()
        os.fsync(f.fileno())
    state = {
        **settings,
        "pairs_done": done,
        "bytes": [f.tell() for f in files[:2]],
        "hashes": [f.tell() // 8 for f in files[2:]],
        "stats": asdict(cleaner.stats),
    }
    write_atomic(path, json.dumps(state) + "\n")


def _resume_state(path: Path, settings: dict[str, Any], parts: list[Path], logs: list[Path]) -> dict[str, Any]:
    """The state of an interrupted run with these settings, its files cut back to it; {} to start afresh."""
    state: dict[str, Any] = {}
    if path.is_file():
        try:
            state = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            state = {}
    if state and all(state.get(k) == json.loads(json.dumps(v)) for k, v in settings.items()):
        sizes = [*state["bytes"], *(8 * n for n in state["hashes"])]
        if all(p.is_file() and p.stat().st_size >= n for p, n in zip((*parts, *logs), sizes)):
            for p, n in zip((*parts, *logs), sizes):
                os.truncate(p, n)
            return state
    for p in (*parts, *logs):
        p.unlink(missing_ok=True)
    return {}


def _read_hashes(path: Path, n: int) -> np.ndarray:
    if not n:
        return np.zeros(0, np.uint64)
    return np.fromfile(path, dtype=np.uint64, count=n)
