"""`mtkit clean`: rules for the noise of web-crawled parallel text, streamed, counted, resumable.

Each rule is off unless asked for, and drops a pair; the first rule that applies is the one counted,
in this order (cheap before dear; the rules are mtkit/data/rules.py's and dedup.py's, run by runner.py):

- `invalid_utf8`, `empty` (always): a side that is not UTF-8, or that is blank.
- `control` (--control): a side holding a control character (Unicode Cc, tab included), a private-use or
  unassigned code point, or U+FFFD, the mark of text decoded with the wrong encoding.
- `markup` (--markup): an HTML/XML tag (`<p>`, `</div>`, `<br/>`) or character entity (`&amp;`, `&#160;`).
- `copy` (--copies): the target is the source, up to case, spaces, punctuation, symbols and digits.
- `too_long_chars`, `char_ratio` (--max-chars, --max-char-ratio): lengths in characters (code points),
  a unit that works for every script.
- `duplicate` (--dedup): the same pair, byte for byte, kept before; `near_duplicate` (--near-dedup): the
  same pair up to case, spaces, punctuation, symbols and digits (the normal form `copy` compares).
- `langid` (--langid): either side not identified as its language (`mtkit.langid`).
- `dual_xent` (--dual-xent FORWARD BACKWARD --dual-xent-max X): the pair's dual conditional cross-entropy
  under two translation models, one each way, is above X: what rules cannot see, a misaligned pair of two
  well-formed sentences. The scorer is passed in (this layer has no models). --dual-xent-drop SHARE sets X to
  the score SHARE of the kept pairs lie above (the paper's "keep the best-scored share"), estimated first on an
  even sample of the input (`estimate_threshold`).

The lines kept are written as they were read. A run that stops (Ctrl-C, a crash) resumes where its last
checkpoint was: the outputs are written as PREFIX.LANG.part with a state file beside them, updated every
`checkpoint_s` seconds after the text it counts is on disk; a rerun with the same inputs, rules, settings and
scoring models (by their sha256) cuts the .part files back to the state and goes on, any other starts over.
The finished files appear under their names only at the end, with PREFIX.clean.json; an output that is a
named pipe or a device is written into, never replaced (mtkit/atomic.py).
"""

from __future__ import annotations

import hashlib
import json
import logging
import typing
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from mtkit.data.dedup import Duplicate, NearDuplicate
from mtkit.data.prepare import lang_of
from mtkit.data.resume import Outputs, resume_state
from mtkit.data.rules import (
    ORDER,
    CharRatio,
    Control,
    Copy,
    DualXent,
    Empty,
    LangId,
    Markup,
    Rule,
    Scorer,
    TooLongChars,
)
from mtkit.data.runner import Runner, Stats, Text
from mtkit.errors import MtkitError
from mtkit.files import count_parallel
from mtkit.provenance import sha256_file

logger = logging.getLogger(__name__)

RULES = tuple(rule for rule in ORDER if rule not in ("too_long", "ratio"))
STATE_FORMAT = 2  # 2: the scoring models by their sha256 (1 named their paths)
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

    def rules(self, src_lang: str, tgt_lang: str, scorer: Scorer | None = None) -> list[Rule]:
        """The rules this configuration applies, in order (invalid_utf8 is the runner's own)."""
        if (self.dual_xent_max or self.dual_xent_drop) and scorer is None:
            raise MtkitError("--dual-xent-max and --dual-xent-drop need the two models: --dual-xent FORWARD BACKWARD.")
        made: list[Rule] = [Empty()]
        made += [rule() for on, rule in ((self.control, Control), (self.markup, Markup), (self.copies, Copy)) if on]
        made += [TooLongChars(self.max_chars)] if self.max_chars else []
        made += [CharRatio(self.max_char_ratio)] if self.max_char_ratio else []
        made += [rule() for on, rule in ((self.dedup, Duplicate), (self.near_dedup, NearDuplicate)) if on]
        made += [LangId(src_lang, tgt_lang)] if self.langid else []
        if self.dual_xent_max and scorer is not None:
            made.append(DualXent(scorer, self.dual_xent_max))
        return made


@dataclass(frozen=True)
class CleanJob:
    """One `mtkit clean` run: its files, languages (None: from the files' suffixes), rules and scoring models
    (FORWARD, BACKWARD), checked when made."""

    src: Path
    tgt: Path
    out: Path
    rules: WebCleanConfig = WebCleanConfig()
    src_lang: str | None = None
    tgt_lang: str | None = None
    dual_xent: tuple[Path, Path] | None = None
    device: str = "cpu"
    workers: int | None = None
    chunk_pairs: int = 10_000
    checkpoint_s: float = 30.0  # seconds between two states of an interrupted run

    def __post_init__(self) -> None:
        if (self.src_lang is None) != (self.tgt_lang is None):
            raise MtkitError("give both --src-lang and --tgt-lang, or neither.")
        if self.langs[0] == self.langs[1]:
            raise MtkitError(
                f"source and target language are both '{self.langs[0]}'; give two different language codes."
            )
        for path in (self.src, self.tgt):
            if not path.is_file():
                raise MtkitError(f"{path} does not exist.")
        rules = self.rules
        if rules.dual_xent_max and rules.dual_xent_drop:
            raise MtkitError("give --dual-xent-max or --dual-xent-drop, not both.")
        if self.dual_xent and not (rules.dual_xent_max or rules.dual_xent_drop):
            raise MtkitError(
                "--dual-xent needs a threshold: --dual-xent-max X (nats a token) or --dual-xent-drop SHARE (e.g. 0.05)."
            )
        for path in self.dual_xent or ():  # a file, or a directory (a run's, an OPUS-MT model's)
            if not Path(path).exists():
                raise MtkitError(f"model file {path} does not exist.")

    @property
    def langs(self) -> tuple[str, str]:
        if self.src_lang and self.tgt_lang:
            return self.src_lang, self.tgt_lang
        return lang_of(str(self.src)), lang_of(str(self.tgt))


# Opens the dual cross-entropy scorer of two models (FORWARD, BACKWARD) on a device: mtkit.decode's, passed in.
OpenScorer = Callable[[Path, Path, str], Scorer]


def clean(
    job: CleanJob, open_scorer: OpenScorer | None = None, progress: Callable[[int, int], None] | None = None
) -> dict[str, Any]:
    """`mtkit clean`: JOB's files cleaned into JOB.out's; returns PREFIX.clean.json's content. The resume is keyed
    on the scoring models' sha256 and device, not their names: models retrained in place are other models."""
    scorer, about, key = None, "", None
    if job.dual_xent is not None:
        if open_scorer is None:
            raise ValueError("a job with --dual-xent models needs open_scorer")
        forward, backward = job.dual_xent
        scorer = open_scorer(forward, backward, job.device)
        about, key = f"{forward} {backward}", {"models": fingerprint(job.dual_xent), "device": job.device}
    return clean_files(
        job.src,
        job.tgt,
        *job.langs,
        job.out,
        job.rules,
        chunk_pairs=job.chunk_pairs,
        checkpoint_s=job.checkpoint_s,
        progress=progress,
        scorer=scorer,
        scorer_about=about,
        scorer_key=key,
        workers=job.workers,
    )


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
    scorer_key: Any = None,
    workers: int | None = None,
) -> dict[str, Any]:
    """Clean SRC/TGT into PREFIX.SRC_LANG and PREFIX.TGT_LANG; returns PREFIX.clean.json's content.

    `progress(done, total)` is called after each chunk (pairs read so far, of all); `scorer_about` names the
    scorer's models (for the record), `scorer_key` is what its scores depend on (the models' sha256 and their
    device; `scorer_about` when not given): a run resumes only an interrupted one with an equal key."""
    outs = Outputs.of(prefix, (src_lang, tgt_lang))
    if {p.resolve() for p in outs.finals} & {src.resolve(), tgt.resolve()}:
        raise MtkitError(f"--out {prefix} would overwrite an input; choose another prefix.")
    total = count_parallel(src, tgt, str(src), str(tgt))
    settings = {
        "format": STATE_FORMAT,
        "inputs": {str(p.resolve()): [p.stat().st_size, p.stat().st_mtime_ns] for p in (src, tgt)},
        "langs": [src_lang, tgt_lang],
        "config": asdict(config),
        "scorer": scorer_about if scorer_key is None else scorer_key,
    }
    state = resume_state(outs, settings)
    done = state.get("pairs_done", 0)
    if config.dual_xent_drop and scorer is not None:
        if "dual_xent_max" in state:  # a resumed run keeps the threshold it began with
            threshold = float(state["dual_xent_max"])
        else:
            threshold, scorer = estimate_threshold(src, tgt, src_lang, tgt_lang, config, scorer, total, workers=workers)
        config = replace(config, dual_xent_max=threshold)
        settings["dual_xent_max"] = config.dual_xent_max
    rules = config.rules(src_lang, tgt_lang, scorer)
    logs = {rule.name: rule for rule in rules if isinstance(rule, Duplicate)}
    for name, hashes in outs.hashes(state).items():
        if name in logs:
            logs[name].restore(hashes)
    stats = Stats(**state["stats"]) if state else Stats.of(RULES)
    with Runner(rules, Text(src_lang, tgt_lang), workers=workers, chunk_pairs=chunk_pairs, counted=RULES) as runner:
        with outs.writing(settings, state, checkpoint_s) as writer:
            for batch in runner.run(src, tgt, skip=done):
                stats.add(batch.stats)
                done += batch.stats.pairs_in
                added = {name: rule.added for name, rule in logs.items()}
                writer.write(batch.encoded(0), batch.encoded(1), added, done, asdict(stats))
                if progress is not None:
                    progress(done, total)
                writer.due()
    record = {
        "inputs": [str(src), str(tgt)],
        "outputs": [str(p) for p in outs.finals],
        "langs": [src_lang, tgt_lang],
        "rules": list(config.active()),
        "settings": asdict(config) | ({"dual_xent_models": scorer_about} if scorer_about else {}),
        "pairs_in": stats.pairs_in,
        "kept": stats.kept,
        "dropped": {rule: stats.dropped[rule] for rule in config.active()},
    }
    outs.publish(Path(f"{prefix}.clean.json"), json.dumps(record, indent=1, ensure_ascii=False) + "\n")
    return record


def estimate_threshold(
    src: Path,
    tgt: Path,
    src_lang: str,
    tgt_lang: str,
    config: WebCleanConfig,
    scorer: Scorer,
    total: int,
    *,
    workers: int | None = None,
) -> tuple[float, Scorer]:
    """The score above which `config.dual_xent_drop` of a sample's pairs lie, and a scorer that reuses the
    sample's scores. The sample is every k-th pair the other rules keep (not the first ones: corpora come sorted),
    k such that it holds up to DUAL_XENT_SAMPLE pairs (the estimate is the same on every run). The duplicate rules see
    the whole input (a sample holds a repeated pair without the pair it repeats), so this reads it all once with
    every rule but the dear ones, language identification (run on the sample only) and the score itself."""
    every = max(1, -(-total // DUAL_XENT_SAMPLE))
    cheap = replace(config, langid=False, dual_xent_max=0.0, dual_xent_drop=0.0)
    sample: tuple[list[str], list[str]] = ([], [])
    kept = 0
    with Runner(cheap.rules(src_lang, tgt_lang), Text(src_lang, tgt_lang), workers=workers) as runner:
        for batch in runner.run(src, tgt):
            start = -kept % every  # every k-th kept pair, counted over the input
            sample[0].extend(batch.texts[0][start::every])
            sample[1].extend(batch.texts[1][start::every])
            kept += batch.stats.kept
    if config.langid:
        langid = LangId(src_lang, tgt_lang)
        right = langid.keep(langid.score(*sample))
        sample = ([s for s, ok in zip(sample[0], right) if ok], [t for t, ok in zip(sample[1], right) if ok])
    if not sample[0]:  # the rules drop the whole sample: nothing to estimate from; 0 keeps what is left
        return 0.0, scorer
    scores = scorer(sample[0], sample[1])
    threshold = float(np.quantile(scores, 1.0 - config.dual_xent_drop))
    known: dict[tuple[str, str], float] = dict(zip(zip(*sample), scores))

    def reusing(sources: list[str], targets: list[str]) -> list[float]:
        pairs = list(zip(sources, targets))
        out = [known.pop(pair, None) for pair in pairs]  # popped: the cache only shrinks
        todo = [i for i, score in enumerate(out) if score is None]
        if todo:
            for i, score in zip(todo, scorer([sources[i] for i in todo], [targets[i] for i in todo])):
                out[i] = score
        return typing.cast("list[float]", out)

    return threshold, reusing


def fingerprint(models: Sequence[Path]) -> list[str]:
    """Each model's sha256 (a directory's: of its files' relative paths and sha256s), what its scores depend on."""
    out = []
    for path in models:
        if path.is_dir():
            lines = "".join(
                f"{p.relative_to(path).as_posix()}\t{sha256_file(p)}\n" for p in sorted(path.rglob("*")) if p.is_file()
            )
            out.append(hashlib.sha256(lines.encode("utf-8")).hexdigest())
        else:
            out.append(sha256_file(path))
    return out
