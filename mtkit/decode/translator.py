"""Text in, translations out: encode, sort by length, pack by tokens, beam search, decode, input order kept.

Input is read in chunks, so the first translations of a huge (or endless) stream come out
before the end of it is read; within a chunk, sentences of similar length share a batch.
With `workers` > 1 (CPU only), a chunk's batches are searched that many at a time, each in a
process of its own with one thread, as Marian's `--cpu-threads` and CTranslate2's `inter_threads` do.
"""

from __future__ import annotations

import concurrent.futures
import ctypes
import itertools
import logging
import math
import multiprocessing
import os
import signal
import sys
import typing
import weakref
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any, TypeVar

import torch

from mtkit import checkpoint, runtime
from mtkit.config import DEFAULT_BATCH_TOKENS, DEFAULT_CHUNK_LINES, EOS, PAD, DecodeConfig, SamplingConfig
from mtkit.data.vocab import Vocab
from mtkit.decode.beam import beam_search, max_output_lengths
from mtkit.decode.ensemble import Ensemble
from mtkit.decode.prefix import prefix_tensor
from mtkit.decode.sampling import sample
from mtkit.decode.scoring import PairScore, score_batch
from mtkit.device import pick_device
from mtkit.errors import MtkitError
from mtkit.model.transformer import Transformer

logger = logging.getLogger(__name__)

Source = str | tuple[str, str]  # a source line, or (source line, target prefix)
T = TypeVar("T")
Job = tuple[str, tuple[Any, ...]]  # a Translator method's name and its arguments: one batch's work

PR_SET_PDEATHSIG = 1  # prctl(2): the signal a process gets when its parent ends (<linux/prctl.h>)

# In a worker process: the translator it was forked from (`Translator._start_workers`).
_FORKED: Translator | None = None


def _start_worker(parent: int) -> None:
    """A worker's first act: one PyTorch thread (see `Translator._start_workers`), and an end with its parent.

    A worker blocks on its job queue, whose write end it inherited too, so a parent that is killed
    (SIGTERM, SIGKILL) would leave it waiting forever: the kernel sends it SIGTERM when the parent ends
    (Linux's PR_SET_PDEATHSIG), and one whose parent already ended before that took hold leaves at once.
    """
    torch.set_num_threads(1)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM) != 0 or os.getppid() != parent:
        os._exit(1)


def _work(name: str, args: tuple[Any, ...]) -> Any:
    """A job, run in a worker process by the translator it inherited."""
    assert _FORKED is not None, "a worker runs only jobs of the translator it was forked from"
    return getattr(_FORKED, name)(*args)


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


def in_order(batches: Iterable[dict[int, T]]) -> Iterator[T]:
    """Results that arrive batch by batch ({index: result}), yielded in index order as soon as each is ready."""
    ready: dict[int, T] = {}
    next_out = 0
    for done in batches:
        ready.update(done)
        while next_out in ready:
            yield ready.pop(next_out)
            next_out += 1


def pack_batches(lengths: Sequence[int], batch_tokens: int) -> list[list[int]]:
    """Indices, longest first, in batches whose size x longest length stays within `batch_tokens`.

    Longest first: a batch that does not fit in memory fails at once, not at the end. A
    sentence longer than `batch_tokens` on its own still gets a batch of one.
    """
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    batches: list[list[int]] = []
    for i in order:
        if batches and (len(batches[-1]) + 1) * lengths[batches[-1][0]] <= batch_tokens:
            batches[-1].append(i)
        else:
            batches.append([i])
    return batches


def balanced_batches(lengths: Sequence[int], batch_tokens: int, workers: int) -> list[list[int]]:
    """`pack_batches` with a multiple of `workers` batches (where the sentences allow), all about equally full.

    Batches of one budget cost about the same, so with 5 batches for 2 workers the fifth would run alone and
    leave a worker idle. The budget is the smallest that still packs the sentences into the next multiple
    of `workers` batches (a larger one would leave the last batch nearly empty).
    """
    batches = pack_batches(lengths, batch_tokens)
    target = math.ceil(len(batches) / workers) * workers
    if workers == 1 or len(batches) == target:
        return batches
    low, high = 1, batch_tokens  # pack_batches(high) fits in `target` batches; find the least budget that does
    while low < high:
        middle = (low + high) // 2
        if len(pack_batches(lengths, middle)) <= target:
            high = middle
        else:
            low = middle + 1
    return pack_batches(lengths, high)


class Translator:
    """A model (or an ensemble of models sharing one vocabulary) and its SentencePiece vocabulary, ready for raw text.

    >>> translator = Translator.load("runs/small/averaged.pt")  # or a list of files: an ensemble
    >>> translator.translate(["A man is riding a bike."])
    >>> translator.translate(["A man is riding a bike."], sampling=SamplingConfig(topk=10, seed=3))
    >>> translator.score([("A man is riding a bike.", "Ein Mann fährt Fahrrad.")])[0].logprob
    """

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
        self._pool: concurrent.futures.ProcessPoolExecutor | None = None
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
        `workers`: see `Translator`."""
        paths = [path] if isinstance(path, (str, os.PathLike)) else list(path)
        models: list[Transformer] = []
        vocabs: list[bytes] = []
        for p in paths:
            ckpt = checkpoint.load(p)
            if not ckpt.get("vocab"):
                raise MtkitError(f"{p} holds no SentencePiece vocabulary, so its output cannot be turned into text.")
            checkpoint.check_finite(ckpt, p)
            models.append(typing.cast(Transformer, checkpoint.build_from(ckpt)))
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
        return self.model if len(self.models) == 1 else Ensemble(self.models)

    @property
    def max_source_tokens(self) -> int:
        # the EOS appended to the source needs a position too
        return min(m.cfg.max_positions for m in self.models) - 1

    def _run(self, jobs: Sequence[Job]) -> Iterator[tuple[int, Any]]:
        """(index, result) of each job: in order, here, with one worker; else as each is done, `workers` at a time.

        A consumer that stops early (an error, a closed stream) cancels the jobs not yet started.
        """
        if self.workers == 1 or len(jobs) < 2:
            yield from ((k, getattr(self, name)(*args)) for k, (name, args) in enumerate(jobs))
            return
        pool = self._pool or self._start_workers()
        futures = {pool.submit(_work, name, args): k for k, (name, args) in enumerate(jobs)}
        try:
            for future in concurrent.futures.as_completed(futures):
                yield futures[future], future.result()
        except BrokenProcessPool as e:
            self.close()
            raise MtkitError(
                "a decoding worker stopped before its batch was done (out of memory?); "
                "try fewer --workers or a smaller --batch-tokens."
            ) from e
        finally:
            for future in futures:
                future.cancel()

    def _start_workers(self) -> concurrent.futures.ProcessPoolExecutor:
        """Fork the worker processes now, each with one PyTorch thread and a copy-on-write view of this translator.

        One thread each, because GNU OpenMP cannot start threads in a process forked from one that ran
        OpenMP threads of its own (it hangs); one thread runs no OpenMP at all.
        """
        global _FORKED
        _FORKED = self
        try:
            pool = concurrent.futures.ProcessPoolExecutor(
                self.workers,
                mp_context=multiprocessing.get_context("fork"),
                initializer=_start_worker,
                initargs=(os.getpid(),),
            )
            pool.submit(int).result()  # every worker is forked at the first job, while _FORKED is this translator
        finally:
            _FORKED = None
        self._pool = pool
        weakref.finalize(self, pool.shutdown, wait=False, cancel_futures=True)
        return pool

    def close(self) -> None:
        """Stop the worker processes at once, if any were started, their batches unfinished (a later search
        starts them again)."""
        pool, self._pool = self._pool, None
        if pool is None:
            return
        # Python before 3.14 has no public way to stop a job that has started: end the processes themselves,
        # then let the pool's own thread see them gone and reap them (a second waiter could miss their end).
        for process in list((getattr(pool, "_processes", None) or {}).values()):
            process.terminate()
        pool.shutdown(wait=True, cancel_futures=True)

    def translate(
        self,
        lines: Sequence[Source],
        beam: int = 4,
        alpha: float = 0.6,
        *,
        lenpen: str = "gnmt",
        max_len_a: float = 1.0,
        max_len_b: int = 50,
        batch_tokens: int = DEFAULT_BATCH_TOKENS,
        sampling: SamplingConfig | None = None,
    ) -> list[str]:
        """Translations of `lines`, one for each, in order (the paper's decoding settings by default).

        A line may be (source, target prefix): its translation then begins with the prefix.
        With `sampling`, each translation is a sample (its first, for `sampling.samples` > 1).
        """
        config = DecodeConfig(beam=beam, alpha=alpha, lenpen=lenpen, max_len_a=max_len_a, max_len_b=max_len_b)
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
        lines = iter(lines)
        first = 1
        while chunk := list(itertools.islice(lines, chunk_lines)):
            yield from self._translate_chunk(first, chunk, config, batch_tokens, sampling)
            first += len(chunk)

    def score(self, pairs: Iterable[tuple[str, str]], batch_tokens: int = DEFAULT_BATCH_TOKENS) -> list[PairScore]:
        """log P(target + EOS | source) of each (source, target) pair, in order (mtkit/decode/scoring.py)."""
        return list(self.score_stream(pairs, batch_tokens))

    def score_stream(
        self,
        pairs: Iterable[tuple[str, str]],
        batch_tokens: int = DEFAULT_BATCH_TOKENS,
        chunk_lines: int = DEFAULT_CHUNK_LINES,
    ) -> Iterator[PairScore]:
        """Scores in input order, yielded as soon as every earlier pair's is ready."""
        if batch_tokens < 1 or chunk_lines < 1:
            raise MtkitError("batch_tokens and chunk_lines must be positive.")
        pairs = iter(pairs)
        first = 1
        while chunk := list(itertools.islice(pairs, chunk_lines)):
            yield from self._score_chunk(first, chunk, batch_tokens)
            first += len(chunk)

    def _source_ids(self, first: int, lines: list[str]) -> list[list[int]]:
        ids = self.vocab.encode_batch(lines)
        for i, sentence in enumerate(ids):
            if len(sentence) > self.max_source_tokens:
                logger.warning(
                    "line %d has %d subword tokens, more than the model's %d; only the first %d are translated.",
                    first + i,
                    len(sentence),
                    self.max_source_tokens,
                    self.max_source_tokens,
                )
                ids[i] = sentence[: self.max_source_tokens]
        return ids

    def _prefix_ids(
        self, first: int, prefixes: list[str], ids: list[list[int]], config: DecodeConfig
    ) -> list[list[int]]:
        """The prefixes' ids; one that cannot fit in its sentence's output is an error, said for its line."""
        if not any(prefixes):
            return [[] for _ in prefixes]
        out = self.vocab.encode_batch(prefixes)
        limits = max_output_lengths(torch.tensor([len(s) for s in ids]), config, self.max_source_tokens + 1).tolist()
        for i, (prefix, limit) in enumerate(zip(out, limits)):
            if len(prefix) > limit:
                raise MtkitError(
                    f"line {first + i}: the target prefix has {len(prefix)} subword tokens, more than "
                    f"the {limit} this sentence's output may have (max_len_a x source tokens + "
                    "max_len_b, within the model's positions)."
                )
        return out

    def _translate_chunk(
        self, first: int, items: list[Source], config: DecodeConfig, batch_tokens: int, sampling: SamplingConfig | None
    ) -> Iterator[Translation]:
        ids = self._source_ids(first, [s if isinstance(s, str) else s[0] for s in items])
        prefixes = self._prefix_ids(first, ["" if isinstance(s, str) else s[1] for s in items], ids, config)
        empty = {i: Translation(first + i, [("", 0.0)]) for i, s in enumerate(ids) if not s and not prefixes[i]}
        todo = [i for i in range(len(ids)) if i not in empty]

        packed = [
            [todo[j] for j in batch]
            for batch in balanced_batches([len(ids[i]) + 1 for i in todo], batch_tokens, self.workers)
        ]
        jobs = [("_search", ([ids[i] for i in b], [prefixes[i] for i in b], config, sampling)) for b in packed]
        found = (
            {i: Translation(first + i, hypotheses) for i, hypotheses in zip(packed[k], result)}
            for k, result in self._run(jobs)
        )
        yield from in_order(itertools.chain([empty], found))

    def _search(
        self, ids: list[list[int]], prefixes: list[list[int]], config: DecodeConfig, sampling: SamplingConfig | None
    ) -> list[list[tuple[str, float]]]:
        src = torch.full((len(ids), max(map(len, ids)) + 1), PAD, dtype=torch.long)  # (B, S)
        for row, sentence in enumerate(ids):
            src[row, : len(sentence) + 1] = torch.tensor([*sentence, EOS])
        src, prefix = src.to(self.device), prefix_tensor(prefixes, self.device)
        if sampling is None:
            result = beam_search(self.decoder, src, config, prefix=prefix)
        else:
            result = sample(self.decoder, src, config, sampling, prefix)
        return [[(self.vocab.decode(h.tokens), h.score) for h in hypotheses] for hypotheses in result.hypotheses]

    def _score_chunk(self, first: int, pairs: list[tuple[str, str]], batch_tokens: int) -> Iterator[PairScore]:
        src = self._source_ids(first, [s for s, _ in pairs])
        tgt = self.vocab.encode_batch([t for _, t in pairs])
        for i, target in enumerate(tgt):
            if len(target) > self.max_source_tokens:  # BOS + target must fit the positions
                raise MtkitError(
                    f"line {first + i}: the target has {len(target)} subword tokens, more than the "
                    f"model's {self.max_source_tokens} positions allow."
                )

        packed = balanced_batches([max(len(s), len(t)) + 1 for s, t in zip(src, tgt)], batch_tokens, self.workers)
        jobs = [("_score_batch", ([src[i] for i in b], [tgt[i] for i in b])) for b in packed]
        found = (
            {i: PairScore(first + i, logprob, n) for i, (logprob, n) in zip(packed[k], result)}
            for k, result in self._run(jobs)
        )
        yield from in_order(found)

    def _score_batch(self, src: list[list[int]], tgt: list[list[int]]) -> list[tuple[float, int]]:
        return score_batch(self.decoder, src, tgt)
