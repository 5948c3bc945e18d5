"""Text in, translations out: encode, sort by length, pack by tokens, beam search, decode, input order kept.

Input is read in chunks, so the first translations of a huge (or endless) stream come out
before the end of it is read; within a chunk, sentences of similar length share a batch (batches.py).
Each batch is one job, a call of `search_batch` (or `score_pairs`) with the translator as first argument:
run here, or with `workers` > 1 (CPU only) that many at a time, each in a forked process of one thread (pool.py).
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import os
import sys
import typing
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from mtkit.config import DEFAULT_BATCH_TOKENS, DEFAULT_CHUNK_LINES, EOS, DecodeConfig, SamplingConfig
from mtkit.data.vocab import Vocab
from mtkit.decode.batches import balanced_batches, chunks, in_order
from mtkit.decode.encode import prefix_ids, source_ids, target_ids
from mtkit.decode.pairs import PairScore
from mtkit.decode.pool import WorkerPool
from mtkit.errors import MtkitError

# torch and mtkit's own search are imported where mtkit's engine runs, not here: the text pipeline also runs
# CTranslate2 (mtkit/decode/ct2.py), which needs no torch (and its import costs ~200 MiB of memory).
if TYPE_CHECKING:
    import torch

    from mtkit.decode.ensemble import Ensemble
    from mtkit.model.transformer import Transformer

logger = logging.getLogger(__name__)

Source = str | tuple[str, str]  # a source line, or (source line, target prefix)
R = TypeVar("R")


@dataclass(frozen=True)
class Translation:
    """The output for one input line (numbered from 1): its hypotheses, best first, with scores."""

    line: int
    hypotheses: list[tuple[str, float]]  # an empty input line gives [("", 0.0)]

    @property
    def text(self) -> str:
        return self.hypotheses[0][0]

    @property
    def score(self) -> float:
        return self.hypotheses[0][1]


class Engine(Protocol):
    """Another engine's search behind the text pipeline: batches of source ids (no EOS) in, per sentence its
    hypotheses (ids without BOS/EOS, score) best first out, by mtkit's settings; and forced scoring."""

    def search(
        self, ids: list[list[int]], prefixes: list[list[int]], config: DecodeConfig, sampling: SamplingConfig | None
    ) -> list[list[tuple[list[int], float]]]: ...

    def score(self, src: list[list[int]], tgt: list[list[int]]) -> list[tuple[float, int]]: ...


class Translator:
    """A model (or an ensemble of models sharing one vocabulary) and its SentencePiece vocabulary, ready for raw text.

    >>> translator = Translator.load("runs/small/averaged.pt")  # or a list of files: an ensemble
    >>> translator.translate(["A man is riding a bike."])
    >>> translator.translate(["A man is riding a bike."], sampling=SamplingConfig(topk=10, seed=3))
    >>> translator.score([("A man is riding a bike.", "Ein Mann fährt Fahrrad.")])[0].logprob
    """

    # What searches the batches: None, mtkit's own beam search and sampling over `self.models`; or another
    # engine that takes the same batches of ids (CTranslate2: mtkit/decode/ct2.py, which `load` picks).
    engine: Engine | None = None

    def __init__(
        self,
        model: Transformer | Sequence[Transformer],
        vocab: Vocab,
        device: torch.device | str = "cpu",
        workers: int = 1,
    ):
        """The models are used as they are, never changed: on `device`, in eval mode (dropout off), with whatever
        kernels were applied to them (`Translator.load` applies mtkit.runtime's decisions to the models it loads;
        a training model keeps training's).

        `workers`: batches searched at once (CPU only, Linux), each in a process of its own that runs one thread,
        forked from this one as it is made, before a caller's threads exist (a fork copies only the thread that
        makes it, and a lock another thread held would stay held); the weights are shared, not copied. One
        search leaves one of two cores idle while Python works out each step; two searches keep both busy.
        Threads would not: a search holds Python's lock between its many small operations, and two threads
        wait for each other. `close()` stops the workers.
        """
        import torch

        from mtkit.model.transformer import Transformer

        models = [model] if isinstance(model, Transformer) else list(model)
        if any(m.training for m in models):
            raise MtkitError("a Translator decodes with dropout off: put its models in eval mode (model.eval()).")
        for cfg in (m.cfg for m in models):
            if len(vocab) > min(cfg.vocab_size, cfg.target_vocab_size):
                raise MtkitError(
                    f"the SentencePiece vocabulary has {len(vocab)} pieces, more than the model's "
                    f"{min(cfg.vocab_size, cfg.target_vocab_size)} embeddings."
                )
        if len({m.cfg.target_vocab_size for m in models}) > 1:
            raise MtkitError("the models have output layers of different sizes; an ensemble needs one vocabulary.")
        self.device = torch.device(device)
        if workers < 1:
            raise MtkitError("workers must be at least 1.")
        if workers > 1 and self.device.type != "cpu":
            raise MtkitError(f"several workers search at once on the CPU only; on {self.device} use one worker.")
        if workers > 1 and not sys.platform.startswith("linux"):
            raise MtkitError("several workers need Linux (forked processes that end with their parent); use one.")
        self.workers = workers
        self._pool: WorkerPool[Translator] | None = None
        self.models = models
        self.model = self.models[0]
        self.vocab = vocab
        if workers > 1:
            self._start_workers()

    @classmethod
    def load(
        cls,
        path: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
        device: str = "auto",
        precision: str = "fp32",
        workers: int = 1,
    ) -> Translator:
        """From mtkit files of kind "model" (e.g. averaged) or "checkpoint"; several files make an ensemble.

        The models loaded are this translator's own, so mtkit.runtime's decisions are applied to them here:
        `precision` (auto and int8 included), the fp32 CPU products' backend and packed weights.
        `workers`: see `Translator`. A CTranslate2 directory (`mtkit export`) opens with
        mtkit.decode.loading.load_translator, which picks the engine."""
        from mtkit import checkpoint, runtime
        from mtkit.device import pick_device

        paths = [path] if isinstance(path, (str, os.PathLike)) else list(path)
        models: list[Transformer] = []
        vocabs: list[bytes] = []
        for p in paths:
            ckpt = checkpoint.load(p)
            if not ckpt.get("vocab"):
                raise MtkitError(f"{p} holds no SentencePiece vocabulary, so its output cannot be turned into text.")
            checkpoint.check_finite(ckpt, p)
            models.append(typing.cast("Transformer", checkpoint.build_from(ckpt)))
            vocabs.append(ckpt["vocab"])
            del ckpt  # optimizer state can be twice the model's size
        for p, v in zip(paths[1:], vocabs[1:]):
            if v != vocabs[0]:
                raise MtkitError(
                    f"{paths[0]} and {p} have different vocabularies (their embedded spm.model "
                    "differ); an ensemble needs models trained with one vocabulary."
                )
        target = pick_device(device)
        plan = runtime.decide_decoding(precision, target, models[0].cfg.d_model)
        models = [runtime.apply(m.to(device=target, dtype=plan.dtype).eval(), plan) for m in models]
        return cls(models, Vocab.from_bytes(vocabs[0]), target, workers=workers)

    @property
    def decoder(self) -> Transformer | Ensemble:
        """What the searches run: the model, or the ensemble of all the models."""
        from mtkit.decode.ensemble import Ensemble

        return self.model if len(self.models) == 1 else Ensemble(self.models)

    @property
    def max_source_tokens(self) -> int:
        # the EOS appended to the source needs a position too
        return min(m.cfg.max_positions for m in self.models) - 1

    def _run(self, jobs: Sequence[Callable[[Translator], R]]) -> Iterator[tuple[int, R]]:
        """(index, result) of each job: in order, here, with one worker; else as each is done, `workers` at a time."""
        if self.workers == 1 or len(jobs) < 2:
            return ((k, job(self)) for k, job in enumerate(jobs))
        pool = self._pool if self._pool is not None and not self._pool.closed else self._start_workers()
        return pool.run(jobs)

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

    def translate(
        self,
        lines: Sequence[Source],
        config: DecodeConfig = DecodeConfig(),
        *,
        batch_tokens: int = DEFAULT_BATCH_TOKENS,
        sampling: SamplingConfig | None = None,
        **changes: Any,
    ) -> list[str]:
        """Translations of `lines`, one for each, in order: by `config` (the paper's settings by default) with
        `changes` to its fields, e.g. `translate(lines, beam=1)` (DecodeConfig checks their names and values).

        A line may be (source, target prefix): its translation then begins with the prefix.
        With `sampling`, each translation is a sample (its first, for `sampling.samples` > 1).
        """
        config = dataclasses.replace(config, **changes)
        return [t.text for t in self.translate_stream(lines, config, batch_tokens, sampling=sampling)]

    def translate_stream(
        self,
        lines: Iterable[Source],
        config: DecodeConfig = DecodeConfig(),
        batch_tokens: int = DEFAULT_BATCH_TOKENS,
        chunk_lines: int = DEFAULT_CHUNK_LINES,
        sampling: SamplingConfig | None = None,
    ) -> Iterator[Translation]:
        """Translations in input order, yielded as soon as every earlier line's is ready.

        Beam search by `config`, or with `sampling` `sampling.samples` samples of each line (in
        sample order, scored log P(Y|X)). A line given as (source, prefix) has its output begin with the prefix.
        """
        if batch_tokens < 1 or chunk_lines < 1:
            raise MtkitError("batch_tokens and chunk_lines must be positive.")
        for first, chunk in chunks(lines, chunk_lines):
            yield from self._translate_chunk(first, chunk, config, batch_tokens, sampling)

    def score(self, pairs: Iterable[tuple[str, str]], batch_tokens: int = DEFAULT_BATCH_TOKENS) -> list[PairScore]:
        """log P(target + EOS | source) of each (source, target) pair, in order (mtkit/decode/scoring.py)."""
        return list(self.score_stream(pairs, batch_tokens))

    def score_stream(
        self,
        pairs: Iterable[tuple[str, str]],
        batch_tokens: int = DEFAULT_BATCH_TOKENS,
        chunk_lines: int = DEFAULT_CHUNK_LINES,
        config: DecodeConfig = DecodeConfig(),
    ) -> Iterator[PairScore]:
        """Scores in input order, yielded as soon as every earlier pair's is ready; of `config`, only its
        target_lang counts (a multilingual model's direction): nothing is searched."""
        if batch_tokens < 1 or chunk_lines < 1:
            raise MtkitError("batch_tokens and chunk_lines must be positive.")
        for first, chunk in chunks(pairs, chunk_lines):
            yield from self._score_chunk(first, chunk, batch_tokens, config.target_lang)

    def _translate_chunk(
        self, first: int, items: list[Source], config: DecodeConfig, batch_tokens: int, sampling: SamplingConfig | None
    ) -> Iterator[Translation]:
        limit = self.max_source_tokens
        texts = [s if isinstance(s, str) else s[0] for s in items]
        ids = source_ids(self.vocab, texts, first, limit, config.target_lang)
        prefixes = prefix_ids(
            self.vocab, ["" if isinstance(s, str) else s[1] for s in items], ids, first, config, limit
        )
        empty = {i: Translation(first + i, [("", 0.0)]) for i, s in enumerate(ids) if not s and not prefixes[i]}
        todo = [i for i in range(len(ids)) if i not in empty]

        packed = [
            [todo[j] for j in batch]
            for batch in balanced_batches([len(ids[i]) + 1 for i in todo], batch_tokens, self.workers)
        ]
        batches = [([ids[i] for i in b], [prefixes[i] for i in b]) for b in packed]
        jobs = [partial(search_batch, ids=src, prefixes=pre, config=config, sampling=sampling) for src, pre in batches]
        found = (
            {i: Translation(first + i, hypotheses) for i, hypotheses in zip(packed[k], result)}
            for k, result in self._run(jobs)
        )
        yield from in_order(itertools.chain([empty], found))

    def _score_chunk(
        self, first: int, pairs: list[tuple[str, str]], batch_tokens: int, target_lang: str = ""
    ) -> Iterator[PairScore]:
        src = source_ids(self.vocab, [s for s, _ in pairs], first, self.max_source_tokens, target_lang)
        tgt = target_ids(self.vocab, [t for _, t in pairs], first, self.max_source_tokens)
        packed = balanced_batches([max(len(s), len(t)) + 1 for s, t in zip(src, tgt)], batch_tokens, self.workers)
        jobs = [partial(score_pairs, src=[src[i] for i in b], tgt=[tgt[i] for i in b]) for b in packed]
        found = (
            {i: PairScore(first + i, logprob, n) for i, (logprob, n) in zip(packed[k], result)}
            for k, result in self._run(jobs)
        )
        yield from in_order(found)


# The jobs: one batch's work each, run by `Translator._run` here or in a worker against the translator it inherited.


def search_batch(
    translator: Translator,
    *,
    ids: list[list[int]],
    prefixes: list[list[int]],
    config: DecodeConfig,
    sampling: SamplingConfig | None,
) -> list[list[tuple[str, float]]]:
    """Each sentence's hypotheses, best first, as (text, score): beam search, or sampling with `sampling`."""
    if translator.engine is not None:
        found = translator.engine.search(ids, prefixes, config, sampling)
        return [[(translator.vocab.decode(tokens), score) for tokens, score in hypotheses] for hypotheses in found]
    from mtkit.decode.beam import beam_search
    from mtkit.decode.prefix import prefix_tensor
    from mtkit.decode.sampling import sample
    from mtkit.decode.scoring import padded

    src = padded([[*sentence, EOS] for sentence in ids], translator.device)  # (B, S)
    prefix = prefix_tensor(prefixes, translator.device)
    if sampling is None:
        result = beam_search(translator.decoder, src, config, prefix=prefix)
    else:
        result = sample(translator.decoder, src, config, sampling, prefix)
    return [[(translator.vocab.decode(h.tokens), h.score) for h in hypotheses] for hypotheses in result.hypotheses]


def score_pairs(translator: Translator, *, src: list[list[int]], tgt: list[list[int]]) -> list[tuple[float, int]]:
    """(log P(target + EOS | source), target length + 1) of each pair of the batch."""
    if translator.engine is not None:
        return translator.engine.score(src, tgt)
    from mtkit.decode.scoring import score_batch

    return score_batch(translator.decoder, src, tgt)
