"""Text in, translations out: encode, sort by length, pack by tokens, beam search, decode, input order kept.

Input is read in chunks, so the first translations of a huge (or endless) stream come out
before the end of it is read; within a chunk, sentences of similar length share a batch (batches.py).
Each batch is one job, a call of `search_batch` (or `score_pairs`; mtkit/decode/jobs.py) with the translator first:
run here, or with `workers` > 1 that many at a time: for mtkit's engine (CPU only) each in a forked process of one
thread (pool.py), for CTranslate2 each from a thread of this process. Which engine searches is the loader's choice
(mtkit/decode/loading.py), made once; the pipeline never asks.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol, TypeVar

from mtkit.config import DEFAULT_BATCH_TOKENS, DEFAULT_CHUNK_LINES, DecodeConfig, SamplingConfig
from mtkit.data.tokenizer import Tokenizer
from mtkit.decode.batches import balanced_batches, chunks, in_order
from mtkit.decode.encode import prefix_ids, source_ids, target_ids, target_language
from mtkit.decode.engine import Engine
from mtkit.decode.glossary import Glossary, Terms, checked, joining_ids, term_ids
from mtkit.decode.jobs import Searched, score_pairs, search_batch
from mtkit.decode.pairs import PairScore
from mtkit.decode.pool import WorkerPool
from mtkit.decode.sentences import Losses, Pieces, joiner, source_language
from mtkit.errors import MtkitError
from mtkit.sources.defaults import layered

# No torch here: the engine (mtkit/decode/engine.py) imports what it runs on; CTranslate2 needs no torch (and
# its import costs hundreds of MiB of memory).

logger = logging.getLogger(__name__)

Source = str | tuple[str, str]  # a source line, or (source line, target prefix)
R = TypeVar("R")


@dataclass(frozen=True)
class Translation:
    """The output for one input line (numbered from 1): its hypotheses, best first, with scores; with a
    `confidence` asked for, the estimated probability that the best is acceptable (mtkit/decode/confidence.py)."""

    line: int
    hypotheses: list[tuple[str, float]]  # an empty input line gives [("", 0.0)]
    confidence: float | None = None

    @property
    def text(self) -> str:
        return self.hypotheses[0][0]

    @property
    def score(self) -> float:
        return self.hypotheses[0][1]


class Rater(Protocol):
    """What gives translations their `confidence` (mtkit/decode/confidence.py's `Confidence`): a chunk at a time."""

    def annotate(
        self, translator: Translator, items: Sequence[Source], found: Iterable[Translation], config: DecodeConfig
    ) -> list[Translation]: ...


class Translator:
    """The text pipeline around an engine (mtkit/decode/engine.py): raw text in, translations out.

    Examples:
        >>> translator = mtkit.load_translator("runs/small/averaged.pt")  # or a list of files: an ensemble
        >>> translator.translate(["A man is riding a bike."])
        >>> translator.translate(["A man is riding a bike."], sampling=SamplingConfig(topk=10, seed=3))
        >>> translator.score([("A man is riding a bike.", "Ein Mann fährt Fahrrad.")])[0].logprob

    `mtkit.load_translator` (mtkit/decode/loading.py's `prepare`) opens files on the engine they call for, with
    the model's own decoding defaults; models in hand (a training run's): `Translator(TorchEngine(model.eval(),
    device), vocab)`.

    What it decodes with when not told (`defaults`): DecodeConfig's defaults (the paper's), then the engine's
    (CTranslate2's length penalty), then the model's (`model_defaults`: a student's beam 1, its shortlist), then
    `given` (what `prepare` was asked for: a command line's flags); `translate(lines, beam=5)` lays its own
    changes over them (mtkit/sources/defaults.py).
    """

    def __init__(
        self,
        engine: Engine,
        vocab: Tokenizer,
        workers: int = 1,
        model_defaults: Mapping[str, Any] | None = None,
        given: Mapping[str, Any] | None = None,
    ):
        """`workers`: batches searched at once. With mtkit's engine (CPU only, Linux) each in a process of its
        own that runs one thread, forked from this one as it is made, before a caller's threads exist (a fork
        copies only the thread that makes it, and a lock another thread held would stay held); the weights are
        shared, not copied. One search leaves one of two cores idle while Python works out each step; two
        searches keep both busy. Threads would not: a search holds Python's lock between its many small
        operations, and two threads wait for each other. An engine that lets go of that lock while it searches
        (CTranslate2) runs them as threads of this process. `close()` stops the workers.
        """
        if len(vocab) > engine.vocab_size:
            raise MtkitError(
                f"the SentencePiece vocabulary has {len(vocab)} pieces, more than the model's "
                f"{engine.vocab_size} embeddings."
            )
        if workers < 1:
            raise MtkitError("workers must be at least 1.")
        forked = engine.parallel == "processes"
        if workers > 1 and forked and engine.device != "cpu":
            raise MtkitError(f"several workers search at once on the CPU only; on {engine.device} use one worker.")
        if workers > 1 and forked and not sys.platform.startswith("linux"):
            raise MtkitError("several workers need Linux (forked processes that end with their parent); use one.")
        self.engine = engine
        self.vocab = vocab
        self.workers = workers
        self.model_defaults = dict(model_defaults or {})
        self.given = dict(given or {})
        self.settings()  # checked now: a damaged default is said before any line is read
        self._pool: WorkerPool[Translator] | None = None
        if workers > 1 and forked:
            self._start_workers()

    @property
    def device(self) -> str:
        return self.engine.device

    @property
    def max_source_tokens(self) -> int:
        return self.engine.max_source_tokens

    def check(self, config: DecodeConfig, sampling: SamplingConfig | None = None) -> None:
        """Refuse, in one sentence, a setting the engine cannot run (before any work)."""
        self.engine.check(config, sampling)

    def check_target_lang(self, target_lang: str) -> str:
        """The language code of `target_lang` (">>fr<<" and "fr" are "fr"; "": none), refused in one sentence when
        it is no language code or this model has no token for it (a bilingual model has none)."""
        return target_language(self.vocab, target_lang)

    @property
    def defaults(self) -> DecodeConfig:
        """What it decodes with when not told: DecodeConfig's, the engine's, the model's, then `given`."""
        return self.settings()

    def settings(self, **changes: Any) -> DecodeConfig:
        """What decodes with `changes` (DecodeConfig fields) laid over this translator's defaults: the one place
        the layers meet (`defaults.layered`; a model's beam stays wide enough for the nbest asked for)."""
        return layered(self.engine.defaults(), self.model_defaults, {**self.given, **changes})

    def describe(self) -> dict[str, Any]:
        """What /info says about the model."""
        return {**self.engine.describe(), "vocab_size": len(self.vocab), "decode_defaults": dict(self.model_defaults)}

    def _run(self, jobs: Sequence[Callable[[Translator], R]]) -> Iterator[tuple[int, R]]:
        """(index, result) of each job: in order, here, with one worker; else as each is done, `workers` at a time."""
        if self.workers == 1 or len(jobs) < 2:
            return ((k, job(self)) for k, job in enumerate(jobs))
        if self.engine.parallel == "threads":
            return self._threaded(jobs)
        pool = self._pool if self._pool is not None and not self._pool.closed else self._start_workers()
        return pool.run(jobs)

    def _threaded(self, jobs: Sequence[Callable[[Translator], R]]) -> Iterator[tuple[int, R]]:
        """`workers` jobs at once, each from a thread of this process, as each is done."""
        with ThreadPoolExecutor(self.workers, thread_name_prefix="mtkit-decode") as pool:
            futures = {pool.submit(job, self): k for k, job in enumerate(jobs)}
            for future in as_completed(futures):
                yield futures[future], future.result()

    def _start_workers(self) -> WorkerPool[Translator]:
        """Fork the worker processes now, each with a copy-on-write view of this translator (mtkit/decode/pool.py)."""
        self._pool = WorkerPool(self, self.workers)
        return self._pool

    def close(self) -> None:
        """Stop the worker processes at once, if any were started, their batches unfinished (a later search
        starts them again)."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()
        self.engine.close()

    def translate(
        self,
        lines: Sequence[Source],
        config: DecodeConfig | None = None,
        *,
        batch_tokens: int = DEFAULT_BATCH_TOKENS,
        sampling: SamplingConfig | None = None,
        target_lang: str = "",
        glossary: Glossary | None = None,
        **changes: Any,
    ) -> list[str]:
        """Translations of `lines`, one for each, in order: by `changes` laid over the defaults, e.g.
        `translate(lines, beam=1)` (`settings`; DecodeConfig checks their names and values); a whole `config`
        given is used as it is, with `changes` to its fields.

        A line may be (source, target prefix): its translation then begins with the prefix.
        With `sampling`, each translation is a sample (its first, for `sampling.samples` > 1).
        `target_lang`: a multilingual model's output language (`check_target_lang`): each line gets the token
        >>LANG<< in front, unless it starts with such a token. `glossary`: terms enforced (mtkit/decode/glossary.py).
        """
        config = self.settings(**changes) if config is None else dataclasses.replace(config, **changes)
        stream = self.translate_stream(lines, config, batch_tokens, sampling=sampling, target_lang=target_lang,
                                       glossary=glossary)  # fmt: skip
        return [t.text for t in stream]

    def translate_stream(
        self,
        lines: Iterable[Source],
        config: DecodeConfig | None = None,
        batch_tokens: int = DEFAULT_BATCH_TOKENS,
        chunk_lines: int = DEFAULT_CHUNK_LINES,
        sampling: SamplingConfig | None = None,
        target_lang: str = "",
        confidence: Rater | None = None,
        glossary: Glossary | None = None,
    ) -> Iterator[Translation]:
        """Translations in input order, yielded as soon as every earlier line's is ready.

        Beam search by `config` (None: `defaults`), or with `sampling` `sampling.samples` samples of each line (in
        sample order, scored log P(Y|X)). A line given as (source, prefix) has its output begin with the prefix.
        `target_lang`: see `translate`; checked before any line is read. `confidence`: a `Confidence` (made by
        `mtkit.Confidence.load(translator)`): each translation gets its `confidence`, a chunk at a time.
        `glossary`: see `translate`; refused before any line is read where it cannot be enforced.
        """
        if batch_tokens < 1 or chunk_lines < 1:
            raise MtkitError("batch_tokens and chunk_lines must be positive.")
        config = self.defaults if config is None else config
        self.engine.check(config, sampling)
        target_lang = self.check_target_lang(target_lang)
        if confidence is not None and sampling is not None:
            raise MtkitError("a confidence rates the best of a beam search; ask for it without sampling.")
        glossary = checked(glossary, self.engine, sampling)
        losses = Losses()
        for first, chunk in chunks(lines, chunk_lines):
            if config.split:
                yield from self._split_chunk(
                    first, chunk, config, batch_tokens, sampling, target_lang, losses, confidence, glossary
                )
            else:
                found = self._translate_chunk(
                    first, chunk, config, batch_tokens, sampling, target_lang, glossary=glossary
                )
                yield from found if confidence is None else confidence.annotate(self, chunk, found, config)
        losses.say()

    def score(
        self,
        pairs: Iterable[tuple[str, str]],
        batch_tokens: int = DEFAULT_BATCH_TOKENS,
        target_lang: str = "",
        cut: bool = False,
    ) -> list[PairScore]:
        """log P(target + EOS | source) of each (source, target) pair, in order (mtkit/decode/scoring.py);
        `target_lang`: the direction of a multilingual model's pairs (see `translate`); `cut`: a target longer
        than the model's positions is cut to them, with a warning, as a source is, instead of refused."""
        return list(self.score_stream(pairs, batch_tokens, target_lang=target_lang, cut=cut))

    def score_stream(
        self,
        pairs: Iterable[tuple[str, str]],
        batch_tokens: int = DEFAULT_BATCH_TOKENS,
        chunk_lines: int = DEFAULT_CHUNK_LINES,
        target_lang: str = "",
        cut: bool = False,
    ) -> Iterator[PairScore]:
        """Scores in input order, yielded as soon as every earlier pair's is ready: nothing is searched."""
        if batch_tokens < 1 or chunk_lines < 1:
            raise MtkitError("batch_tokens and chunk_lines must be positive.")
        target_lang = self.check_target_lang(target_lang)
        for first, chunk in chunks(pairs, chunk_lines):
            yield from self._score_chunk(first, chunk, batch_tokens, target_lang, cut)

    def align(
        self, pairs: Sequence[tuple[Sequence[str], Sequence[str]]], target_lang: str = ""
    ) -> list[list[int | None]] | None:
        """For each (source words, translation words), the source word each translation word came from (None:
        none found), from the model's cross-attention (mtkit/decode/alignment.py); None when the engine cannot
        say (CTranslate2). Apart from the search: only callers that need it (markup) pay for it."""
        return self.engine.align(self.vocab, pairs, target_lang)

    def _split_chunk(
        self,
        first: int,
        items: list[Source],
        config: DecodeConfig,
        batch_tokens: int,
        sampling: SamplingConfig | None,
        target_lang: str,
        losses: Losses,
        confidence: Rater | None = None,
        glossary: Glossary | None = None,
    ) -> Iterator[Translation]:
        """The chunk's lines split into sentences (mtkit/decode/sentences.py), translated in one batch, joined; with
        a `confidence`, each sentence rated and each line given the mean of its sentences' (the share of them
        expected to be acceptable)."""
        languages = self.engine.languages or ("", "")
        pieces = Pieces.of(items, source_language(languages))
        numbers = [first + i for i in pieces.owner]
        lengths: dict[int, tuple[int, int]] = {}
        found = list(
            self._translate_chunk(
                first, pieces.segments, config, batch_tokens, sampling, target_lang, numbers, glossary, lengths
            )
        )
        pieces.losses([t.text for t in found], lengths, config, self.max_source_tokens, first, losses)
        glue = joiner(target_lang or languages[1])
        if confidence is None:
            yield from pieces.join(found, first, glue, Translation)
            return
        rated = confidence.annotate(self, pieces.segments, found, config)
        means = pieces.means([t.confidence for t in rated])
        yield from (
            dataclasses.replace(t, confidence=means[t.line - first])
            for t in pieces.join(rated, first, glue, Translation)
        )

    def _translate_chunk(
        self,
        first: int,
        items: list[Source],
        config: DecodeConfig,
        batch_tokens: int,
        sampling: SamplingConfig | None,
        target_lang: str,
        numbers: list[int] | None = None,
        glossary: Glossary | None = None,
        lengths: dict[int, tuple[int, int]] | None = None,
    ) -> Iterator[Translation]:
        """The chunk's items translated, in order; `lengths`, when given, gets each item's (source tokens as the
        model read them, its best output's tokens) by index, as its batch comes back."""
        limit = self.max_source_tokens
        texts = [s if isinstance(s, str) else s[0] for s in items]
        ids = source_ids(self.vocab, texts, numbers or first, limit, target_lang)
        prefixes = prefix_ids(
            self.vocab, ["" if isinstance(s, str) else s[1] for s in items], ids, numbers or first, config, limit
        )
        empty = {i: Translation(first + i, [("", 0.0)]) for i, s in enumerate(ids) if not s and not prefixes[i]}
        todo = [i for i in range(len(ids)) if i not in empty]

        packed = [
            [todo[j] for j in batch]
            for batch in balanced_batches([len(ids[i]) + 1 for i in todo], batch_tokens, self.workers)
        ]
        terms = None if glossary is None else Terms(term_ids(self.vocab, glossary, texts), joining_ids(self.vocab))
        batches = [([ids[i] for i in b], [prefixes[i] for i in b], terms and terms.of(b)) for b in packed]
        jobs = [
            partial(search_batch, ids=s, prefixes=p, config=config, sampling=sampling, terms=t) for s, p, t in batches
        ]
        if lengths is not None:
            lengths.update((i, (0, 0)) for i in empty)

        def translations(k: int, result: Searched) -> dict[int, Translation]:
            hypotheses, outputs = result
            if lengths is not None:
                lengths.update((i, (len(ids[i]), n)) for i, n in zip(packed[k], outputs))
            return {i: Translation(first + i, h) for i, h in zip(packed[k], hypotheses)}

        found = (translations(k, result) for k, result in self._run(jobs))
        yield from in_order(itertools.chain([empty], found))

    def _score_chunk(
        self, first: int, pairs: list[tuple[str, str]], batch_tokens: int, target_lang: str = "", cut: bool = False
    ) -> Iterator[PairScore]:
        src = source_ids(self.vocab, [s for s, _ in pairs], first, self.max_source_tokens, target_lang)
        tgt = target_ids(self.vocab, [t for _, t in pairs], first, self.max_source_tokens, cut)
        packed = balanced_batches([max(len(s), len(t)) + 1 for s, t in zip(src, tgt)], batch_tokens, self.workers)
        jobs = [partial(score_pairs, src=[src[i] for i in b], tgt=[tgt[i] for i in b]) for b in packed]
        found = (
            {i: PairScore(first + i, logprob, n) for i, (logprob, n) in zip(packed[k], result)}
            for k, result in self._run(jobs)
        )
        yield from in_order(found)
