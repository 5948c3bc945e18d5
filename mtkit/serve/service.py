"""The served model: loaded in the background, described for /info, and fed through one Batcher.

Every API (mtkit/serve/app.py mounts them: mtkit's own, OpenNMT-py's, LibreTranslate's, ...) is an adapter over
`Service`, which knows none of them: ready or not, translate these lines with these settings into this target language
(with this glossary enforced, each translation rated when asked), align, the model's languages and which of them a
text is in (mtkit/serve/languages.py), describe the model, healthy or not, drain for shutdown. Models are loaded with
the Translator's public API, so decoding internals can change beneath the server.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import logging
import math
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mtkit.config import DecodeConfig
from mtkit.decode import loading
from mtkit.decode.confidence import DEFAULT, Confidence
from mtkit.decode.encode import target_language, with_target_lang
from mtkit.decode.glossary import Glossary
from mtkit.decode.translator import Translation, Translator
from mtkit.errors import MtkitError
from mtkit.serve import decoder
from mtkit.serve.batcher import Batcher, Closed, Decode, QueueFull
from mtkit.serve.files import Files
from mtkit.serve.glossaries import Glossaries
from mtkit.serve.guard import Access
from mtkit.serve.languages import Detector, Directions, detected_among, directions
from mtkit.serve.payload import OPTION_MAX, Busy, Limits, RequestError

logger = logging.getLogger(__name__)

RETRY_AFTER_S = 1
# /health says "failing" (503) once this many batches in a row failed, the last within FAILING_FOR_S: a probe
# then restarts the server or takes it out of rotation, and after FAILING_FOR_S without a failure it says
# "ready" again, so that a server taken out of rotation (and so sent nothing) can come back.
FAILING_AFTER = 3
FAILING_FOR_S = 60.0
NO_GLOSSARY = (
    "this server runs its model on CTranslate2, which cannot enforce a glossary: send the request without one, or "
    "serve the mtkit model file it was exported from (mtkit serve -m MODEL.pt)."
)


@dataclass(frozen=True)
class ServeSettings:
    """What `mtkit serve` was asked for, beside the host and port."""

    models: tuple[str, ...]  # what -m named
    model: loading.Plan | None = None  # what it was found to be and checked, by the CLI before the server starts
    #                                    (else here): `changes` laid over the model's own decoding defaults
    decode: DecodeConfig = DecodeConfig()
    decode_given: frozenset[str] = frozenset()  # the decode fields the command line set: the model's own
    #                                             defaults (a student's greedy search, its shortlist) fill the rest
    target_lang: str = ""  # a multilingual model's default output language; a request may name its own
    limits: Limits = Limits()
    max_tokens: int = 4096
    batch_wait_ms: float = 5.0
    queue_size: int = 64
    device: str = "auto"
    precision: str = "fp32"
    threads: int = 0  # CPU threads: PyTorch's, or CTranslate2's intra_threads (0: PyTorch's count)
    compile: str = "off"  # mtkit's engine: one-sentence searches through a compiled decoder step (--compile)
    access: Access = Access()
    drain_timeout_s: float = 20.0  # after SIGTERM, below the 30 s Kubernetes and SLURM give before SIGKILL
    request_timeout_s: float = 60.0  # from a request's arrival to its answer (nginx's proxy_read_timeout); 0: none
    max_connections: int = 512  # nginx's worker_connections (mtkit/serve/connections.py)
    read_timeout_s: float = 60.0  # a request's head and body arrive within it (nginx's client_header_timeout)
    languages: tuple[tuple[str, str], ...] = ()  # --languages: the model's pairs, as the APIs list them
    reverse_model: str | None = None  # --reverse-model: its score of the source is a feature of the confidence
    calibrator: str | None = None  # --calibrator: the confidence's (else the one beside the model, else the default)
    decoder_process: bool = False  # --decoder-process: the model searched in a process of its own (serve/decoder.py)

    def __post_init__(self) -> None:
        """Times are finite: `inf` would stop the decoder thread at the first request (a batch window that never
        closes) or overflow the shutdown's timer, and NaN compares false with every bound."""
        for value, flag, unit in (
            (self.batch_wait_ms, "--batch-wait-ms", "milliseconds"),
            (self.drain_timeout_s, "--drain-timeout", "seconds"),
            (self.request_timeout_s, "--request-timeout", "seconds"),
            (self.read_timeout_s, "--read-timeout", "seconds"),
        ):
            if not math.isfinite(value) or value < 0:
                raise MtkitError(f"{flag} must be a finite number of {unit}, at least 0; got {value}.")

    @property
    def name(self) -> str:
        return "+".join(Path(m).name for m in self.models)

    @property
    def changes(self) -> dict[str, Any]:
        """The decoding settings asked for: the fields given, and any other `decode` holds that is not DecodeConfig's
        own default; laid over the model's defaults (`loading.plan`)."""
        paper = dataclasses.asdict(DecodeConfig())
        return {k: v for k, v in dataclasses.asdict(self.decode).items() if k in self.decode_given or v != paper[k]}

    def plan(self, revision: str | None = None) -> loading.Plan:
        """The model -m named, found and its settings checked (nothing read yet): `Plan.open` reads it."""
        found = loading.plan(
            self.models,
            revision,
            device=self.device,
            precision=self.precision,
            threads=self.threads,
            compile=self.compile,
            **self.changes,
        )
        check_models(found.model)
        return found


def check_models(model: loading.Model) -> None:
    """Said before the server starts: (for now) one model, not an ensemble."""
    if len(model.sources) != 1:
        raise MtkitError(f"mtkit serve takes one model for now; got {len(model.sources)} (-m given more than once).")


def load_translator(settings: ServeSettings) -> Translator:
    """The Translator of the model the settings name (found and checked once: by the CLI, or here), on their
    runtime, decoding by the model's defaults under the command line's settings."""
    return (settings.model or settings.plan()).open()


class Service:
    """A model being loaded or loaded, its Batcher, and the one sentence said when loading failed."""

    def __init__(self, settings: ServeSettings) -> None:
        self.settings = settings
        self.info: dict[str, Any] = {}
        self.error: str | None = None
        self.batcher: Batcher | None = None
        self.translator: Translator | None = None
        self.defaults = settings.decode  # a request's defaults: with the model's own once it is loaded (`_load`)
        self.vocab: Any = None  # the loaded translator's tokenizer: a request's target language is checked on it
        self.rater: Confidence | None = None  # what rates translations asked with confidence: found at load
        self.directions = Directions(())  # the model's languages, known once it is loaded
        self.detector = Detector([])  # which of its source languages a text is in
        self.glossaries = Glossaries()  # the glossaries clients made, each its key's
        self.files = Files()  # the files being translated, and their translations kept for download
        self.searcher: decoder.Searcher | None = None  # where the model searches, once it is loaded
        self._loader: threading.Thread | None = None
        self._drain_deadline: float | None = None
        self._drain_timer: threading.Timer | None = None
        # Requests answered without being decoded: their client left first, or --request-timeout passed.
        self.dropped: collections.Counter[str] = collections.Counter()

    @property
    def ready(self) -> bool:
        return self.batcher is not None

    def start_loading(self, on_failure: Callable[[], None]) -> None:
        """Load in a thread, so the server answers /health ("loading") while the weights are read; that thread
        then decodes: one thread runs the model, the fastest way on a CPU (mtkit/serve/batcher.py)."""

        def load() -> None:
            try:
                self._load()
            except Exception as exc:  # noqa: BLE001 - said once, then the server stops
                self.error = str(exc) if isinstance(exc, MtkitError) else f"loading the model failed: {exc!r}"
                on_failure()
                return
            if self.batcher is not None and not self.batcher.started:  # (a test's batcher may have its own thread)
                self.batcher.work()

        self._loader = threading.Thread(target=load, name="mtkit-serve-decoder", daemon=True)
        self._loader.start()

    def _load(self) -> None:
        s = self.settings
        translator = self.translator = load_translator(s)
        translator.check_target_lang(s.target_lang)  # --target-lang the model has no token for: refused at start
        self.vocab = translator.vocab
        self.defaults = translator.defaults  # the model's own under the command line's, as `mtkit translate` has them
        rater = self.rater = Confidence.open(translator, s.reverse_model, s.calibrator, s.device, s.precision)
        if s.decoder_process:  # forked here, from the thread that goes on to run the Batcher and outlives the process
            decoder.check(translator, s.threads)
        model = decoder.Model(translator, rater, s.max_tokens)
        self.searcher = decoder.DecoderProcess(model) if s.decoder_process else decoder.Searcher(model)
        self.info = {
            "model": s.name,
            "models": [translator.describe()],
            "device": str(translator.device),
            "precision": s.precision,
            "decode": dataclasses.asdict(self.defaults),
            "target_lang": s.target_lang,
            "limits": dataclasses.asdict(s.limits),
            "max_tokens": s.max_tokens,
            "batch_wait_ms": s.batch_wait_ms,
            "queue_size": s.queue_size,
            "option_max": OPTION_MAX,
            "api_key": s.access.keys.required,
            "allowed_origins": list(s.access.origins),
            "confidence": {"calibrated": rater.calibrator is not DEFAULT, "reverse_model": s.reverse_model},
            "glossaries": translator.engine.enforces_terms,
            "decoder_process": s.decoder_process,
        }

        self.set_directions(
            directions(s.languages, self.info["models"][0].get("languages"), translator.vocab.language_tokens)
        )
        self.info["languages"] = [f"{a}-{b}" for a, b in self.directions.pairs]

        def count_tokens(lines: Sequence[str]) -> int:
            return sum(len(ids) + 1 for ids in translator.vocab.encode_batch(lines))  # + EOS, as decoded

        self.batcher = Batcher(
            self.decoder(self.searcher),
            count_tokens,
            max_tokens=s.max_tokens,
            wait_s=s.batch_wait_ms / 1000,
            queue_size=s.queue_size,
            start=False,  # this thread decodes once loaded (start_loading)
        )
        logger.info(
            "model %s loaded (%d parameters) on %s; ready.",
            s.name,
            self.info["models"][0]["parameters"],
            translator.device,
        )

    def set_directions(self, dirs: Directions) -> None:
        """The model's languages, and detection among them (`detected_among`), checked now: a code py3langid does
        not know is one sentence at start, not a 500 at the first request."""
        self.directions = dirs
        self.detector = Detector(detected_among(dirs))
        self.detector.check()

    def decoder(self, searcher: decoder.Searcher) -> Decode:
        """What the Batcher calls on each batch: a search in its own thread, or handed to the decoder process (tests
        wrap it, by monkeypatching, to hold or fail batches)."""
        return searcher.decode

    def health(self) -> tuple[int, dict[str, Any]]:
        """The status code and body of /health: loading (503), ready (200), or failing (503)."""
        if self.batcher is None:
            return 503, {"status": "loading", "model": self.settings.name}
        b = self.batcher
        failing = b.failed_in_a_row >= FAILING_AFTER and time.monotonic() - b.last_failure < FAILING_FOR_S
        body: dict[str, Any] = {
            "status": "failing" if failing else "ready",
            "model": self.settings.name,
            "queued": b.queued,
            "decoded": dict(b.done),
            "failed_in_a_row": b.failed_in_a_row,
            "dropped": {"client_gone": self.dropped["client_gone"], "timed_out": self.dropped["timed_out"]},
        }
        if failing:
            body["last_error"] = b.last_error[:300]
        return (503 if failing else 200), body

    async def translate(
        self,
        lines: list[str],
        config: DecodeConfig,
        client_gone: Callable[[], Awaitable[object]] | None = None,
        target_lang: str | None = None,
        *,
        glossary: Glossary | None = None,
        confidence: bool = False,
    ) -> list[Translation]:
        """The translations of `lines`, decoded in whatever batch the worker puts them in; into `target_lang`
        (None: the server's --target-lang), whose token each line gets here, so a batch may mix directions; with
        `glossary`'s terms enforced (a batch shares one glossary); each with its `confidence` when asked.

        `client_gone()` ends when the client disconnects: a request still queued then is taken out
        of the queue, never decoded. Past --request-timeout a queued request gets 503 and one
        being decoded 504; either way its batch no longer waits for it (a batch being decoded
        cannot be stopped, its answer for this request is dropped).
        """
        if self.batcher is None:
            raise RequestError(503, "the model is still loading; retry shortly.", retry_after=RETRY_AFTER_S)
        try:
            if self.translator is not None:
                self.translator.check(config)  # a setting the engine cannot run (CTranslate2's)
                if glossary and not self.translator.engine.enforces_terms:
                    raise MtkitError(NO_GLOSSARY)
            if self.vocab is not None:  # the direction, checked as the translator checks it (`check_target_lang`)
                lang = target_language(self.vocab, self.settings.target_lang if target_lang is None else target_lang)
                lines = with_target_lang(self.vocab, lines, lang)  # a token the model lacks: the request's mistake
        except MtkitError as exc:
            raise RequestError(422, str(exc)) from None
        try:
            future = self.batcher.submit(lines, config, glossary, confidence)
        except QueueFull:
            raise Busy(
                f"the server is busy ({self.batcher.queue_size} requests queued); retry after {RETRY_AFTER_S} s.",
                RETRY_AFTER_S,
            ) from None
        except Closed:
            raise RequestError(503, "the server is shutting down; retry.", retry_after=RETRY_AFTER_S) from None
        answer = asyncio.wrap_future(future)
        await self._wait(answer, future, client_gone)
        try:
            return await answer
        except Closed:
            raise RequestError(
                503,
                f"the server stopped before decoding this request ({self.settings.drain_timeout_s:g} s drain "
                "time after SIGTERM ran out); retry elsewhere.",
                retry_after=RETRY_AFTER_S,
            ) from None
        except Exception as exc:  # noqa: BLE001 - the batch failed; the server goes on
            reason = " ".join(f"{type(exc).__name__}: {exc}".split())
            raise RequestError(500, f"decoding this request's batch failed ({reason}).") from None

    async def _wait(
        self, answer: asyncio.Future, future: Any, client_gone: Callable[[], Awaitable[object]] | None
    ) -> None:
        """Wait for `answer`; when the client goes or the deadline passes first, cancel the job and raise."""
        gone = asyncio.ensure_future(client_gone()) if client_gone is not None else None
        timeout = self.settings.request_timeout_s or None
        try:
            done, _ = await asyncio.wait(
                [answer, *([gone] if gone is not None else [])], timeout=timeout, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            if gone is not None:
                gone.cancel()
        if answer in done:
            return
        queued = future.cancel()  # True when not yet in a batch: it never will be
        answer.cancel()
        if gone is not None and gone in done:
            self.dropped["client_gone"] += 1
            logger.info("clients left before their answer: their requests were dropped%s.", "" if queued else " (late)")
            raise RequestError(499, "the client went away.")
        self.dropped["timed_out"] += 1
        limit = f"--request-timeout {self.settings.request_timeout_s:g} s"
        if queued:
            logger.warning("requests still queued after %s were answered 503.", limit)
            raise Busy(f"the server is busy: this request was not decoded within {limit}; retry.", RETRY_AFTER_S)
        logger.warning("requests still decoding after %s were answered 504.", limit)
        raise RequestError(504, f"decoding this request took longer than {limit}.")

    async def detect(self, texts: list[str]) -> list[list[dict[str, Any]]]:
        """Each text's languages among the model's (`detected_among`), most likely first ([{"confidence",
        "language"}], none under 0.05%, three at most, as LibreTranslate lists them); off
        the event loop: py3langid's model takes a second to read the first time, and ranking takes a while."""
        if self.batcher is None:
            raise RequestError(503, "the model is still loading; retry shortly.", retry_after=RETRY_AFTER_S)
        detector = self.detector

        def likely(text: str) -> list[dict[str, Any]]:
            ranked = detector.detect(text)
            return [r for r in ranked if r["confidence"] > 0][:3] or ranked[:1]

        return await asyncio.to_thread(lambda: [likely(text) for text in texts])

    async def align(self, pairs: list[tuple[list[str], list[str]]], target_lang: str) -> list[list[int | None]] | None:
        """Each translation word's source word (markup's projection): one teacher-forced pass, in the decoder
        thread (the thread that runs the model: mtkit/serve/batcher.py)."""
        if self.searcher is None or self.batcher is None:
            return None
        searcher = self.searcher
        try:
            future = self.batcher.call(lambda: searcher.align(pairs, target_lang))
        except Closed:
            raise RequestError(503, "the server is shutting down; retry.", retry_after=RETRY_AFTER_S) from None
        return await asyncio.wrap_future(future)

    def begin_drain(self) -> None:
        """Shutdown starts (SIGTERM): requests have `drain_timeout_s` to be answered, then are failed with 503."""
        if self._drain_deadline is not None:
            return
        timeout = self.settings.drain_timeout_s
        self._drain_deadline = time.monotonic() + timeout
        self._drain_timer = threading.Timer(timeout, self._drain_expired)
        self._drain_timer.daemon = True
        self._drain_timer.start()

    def _drain_expired(self) -> None:
        if self.batcher is not None and (failed := self.batcher.abandon()):
            logger.warning(
                "drain time (%g s) is up: %d request(s) not decoded were answered 503.",
                self.settings.drain_timeout_s,
                failed,
            )

    def close(self) -> None:
        """Finish the queued requests within the drain time, then stop the decoder thread (or leave it behind)."""
        self.begin_drain()
        assert self._drain_deadline is not None
        if self.batcher is not None:
            if not self.batcher.close(max(0.0, self._drain_deadline - time.monotonic())):
                self._drain_expired()
        if self._drain_timer is not None:
            self._drain_timer.cancel()
        if self.searcher is not None:
            self.searcher.close()
