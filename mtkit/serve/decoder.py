"""The model searched in a process of its own (`mtkit serve --decoder-process`), so that nothing the HTTP side does
takes the search's time.

In one process, the event loop and the model's thread share Python's lock: a search takes it between each of its
small operations (about 130 a decoder step for the distilled student), and every request the loop handles meanwhile
holds it for a tenth of a millisecond or more (a refusal past a key's limit, a /health probe, a page's files), so a
flood of requests the model never sees still slows the searches of everyone else. A process of its own has a lock of
its own; given a core of its own (`taskset`, a container's CPU set), the server's HTTP work cannot reach it at all.

The process is forked from the server's model thread once the model is loaded (mtkit/decode/pool.py's WorkerPool,
the same one `mtkit translate --workers` uses: the weights are shared copy-on-write, never sent, and the process ends
with its parent), and runs one PyTorch thread. The Batcher's thread hands it each batch and waits: the lines, the
settings and the glossary go over a pipe, the translations come back. A process that dies (the out-of-memory killer)
fails its batch, and the next batch forks a new one. CTranslate2 needs none of this: it searches outside Python's lock.
"""

from __future__ import annotations

import functools
import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from mtkit.config import DecodeConfig
from mtkit.decode.confidence import Confidence
from mtkit.decode.glossary import Glossary
from mtkit.decode.pool import WorkerPool
from mtkit.decode.translator import Translation, Translator
from mtkit.errors import MtkitError

logger = logging.getLogger(__name__)

R = TypeVar("R")


@dataclass(frozen=True)
class Model:
    """What the decoder process inherits: the translator, what rates a translation, and a batch's tokens at most."""

    translator: Translator
    rater: Confidence | None
    max_tokens: int


def decode(
    model: Model, lines: list[str], config: DecodeConfig, glossary: Glossary | None, rate: bool
) -> list[Translation]:
    """A batch's translations, searched where `model` is (the decoder process, or the server's model thread)."""
    rater = model.rater if rate else None
    stream = model.translator.translate_stream(lines, config, model.max_tokens, confidence=rater, glossary=glossary)
    return list(stream)


def align(model: Model, pairs: list[tuple[list[str], list[str]]], target_lang: str) -> list[list[int | None]] | None:
    """Markup's projection of each translation word onto a source word (Translator.align)."""
    return model.translator.align(pairs, target_lang)


def check(translator: Translator, threads: int) -> None:
    """Whether this model can be searched in a forked process of one thread: mtkit's engine, on the CPU, on Linux;
    one sentence each otherwise. `--compile` goes along: its packages are compiled ahead of time and loaded by
    the process that first needs them (mtkit/decode/exported.py), so the decoder process loads its own after the
    fork (`auto`'s measurement at start-up leaves them on disk)."""
    if translator.engine.parallel != "processes":
        raise MtkitError("--decoder-process is for mtkit's own engine: CTranslate2 already searches outside "
                         "Python's lock, so serve it without --decoder-process.")  # fmt: skip
    if translator.device != "cpu":
        raise MtkitError(f"--decoder-process runs on the CPU only; on {translator.device} drop it.")
    if not sys.platform.startswith("linux"):
        raise MtkitError("--decoder-process needs Linux (a forked process that ends with the server); drop it.")
    if threads > 1:
        raise MtkitError("--decoder-process runs one PyTorch thread (a forked process cannot start more): drop "
                         "--threads, or serve without --decoder-process.")  # fmt: skip


class Searcher:
    """Where the Batcher's thread has `model` search: in that thread itself (`run`: the job, here)."""

    def __init__(self, model: Model) -> None:
        self.model = model

    def run(self, job: Callable[[Model], R]) -> R:
        return job(self.model)

    def decode(
        self, lines: list[str], config: DecodeConfig, glossary: Glossary | None, rate: bool
    ) -> list[Translation]:
        return self.run(functools.partial(decode, lines=lines, config=config, glossary=glossary, rate=rate))

    def align(self, pairs: list[tuple[list[str], list[str]]], target_lang: str) -> list[list[int | None]] | None:
        return self.run(functools.partial(align, pairs=pairs, target_lang=target_lang))

    def close(self) -> None:
        """Nothing to stop: the model is the server's."""


class DecoderProcess(Searcher):
    """One forked process that searches `model`'s batches, one at a time, for the thread that calls `run`."""

    def __init__(self, model: Model) -> None:
        super().__init__(model)  # the model is kept, so that a process that died can be forked again
        self._pool = self._start()

    def _start(self) -> WorkerPool[Model]:
        pool: WorkerPool[Model] = WorkerPool(self.model, 1)
        logger.info("the model searches in a process of its own (pid %s), with one thread.", self.pid_of(pool))
        return pool

    @staticmethod
    def pid_of(pool: WorkerPool[Model]) -> int | None:
        return next(iter(pool.pids), None)

    @property
    def pid(self) -> int | None:
        """The decoder process's id (None once closed)."""
        return self.pid_of(self._pool)

    def run(self, job: Callable[[Model], R]) -> R:
        """`job(model)` in the decoder process; a process that died before is forked again first."""
        if self._pool.closed:
            logger.warning("the decoder process had stopped; a new one is forked.")
            self._pool = self._start()
        try:
            for _, result in self._pool.run([job]):
                return result
        except MtkitError as e:  # the job's own error comes back as it was raised; a process gone closes the pool
            if not self._pool.closed:
                raise
            raise MtkitError("the decoder process stopped before its batch was done (out of memory?); the next "
                             "batch forks a new one.") from e  # fmt: skip
        raise AssertionError("a pool of one job yields one result")

    def close(self) -> None:
        """Stop the process (a batch it is searching is left unfinished)."""
        self._pool.close()
