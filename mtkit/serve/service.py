"""The served model: loaded in the background, described for /info, and fed through one Batcher.

The HTTP layer (mtkit/serve/app.py) sees only `Service`: ready or not, translate these lines
with these settings, describe the model, healthy or not, drain for shutdown. Models are loaded
with the Translator's public API, so decoding internals can change beneath the server.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mtkit.config import DecodeConfig
from mtkit.decode import ct2, loading
from mtkit.decode.encode import with_target_lang
from mtkit.decode.translator import Translation, Translator
from mtkit.errors import MtkitError
from mtkit.serve.batcher import Batcher, Closed, Decode, QueueFull
from mtkit.serve.guard import Access
from mtkit.serve.payload import OPTION_MAX, Limits, RequestError

logger = logging.getLogger(__name__)

RETRY_AFTER_S = 1
# /health says "failing" (503) once this many batches in a row failed, the last within FAILING_FOR_S: a probe
# then restarts the server or takes it out of rotation, and after FAILING_FOR_S without a failure it says
# "ready" again, so that a server taken out of rotation (and so sent nothing) can come back.
FAILING_AFTER = 3
FAILING_FOR_S = 60.0


@dataclass(frozen=True)
class ServeSettings:
    """What `mtkit serve` was asked for, beside the host and port."""

    models: tuple[str, ...]
    decode: DecodeConfig = DecodeConfig()
    limits: Limits = Limits()
    max_tokens: int = 4096
    batch_wait_ms: float = 5.0
    queue_size: int = 64
    device: str = "auto"
    precision: str = "fp32"
    access: Access = Access()
    drain_timeout_s: float = 20.0  # after SIGTERM, below the 30 s Kubernetes and SLURM give before SIGKILL

    @property
    def name(self) -> str:
        return "+".join(Path(m).name for m in self.models)


def check_models(models: tuple[str, ...]) -> None:
    """Said before the server starts: each -m names what `translate -m` reads, and (for now) there is one."""
    for m in models:
        path = Path(m)
        if path.is_dir() and not ct2.is_ct2_dir(m):
            from mtkit.marian import is_hf_dir  # torch comes with it; a CTranslate2 server never gets here

            if not is_hf_dir(path):
                raise MtkitError(
                    f"{m} is a directory but neither a CTranslate2 model (model.bin) nor a Hugging Face "
                    "Marian model (config.json with a model_type); give a model file or an exported directory."
                )
        elif not path.exists():
            raise MtkitError(f"model file {m} does not exist.")
    if len(models) != 1:
        raise MtkitError(f"mtkit serve takes one model for now; got {len(models)} (-m given more than once).")


def load_translator(models: tuple[str, ...], device: str, precision: str) -> Translator:
    """One Translator for the `-m` files given; an ensemble of several is not served yet."""
    check_models(models)
    return loading.load_translator(models[0], device=device, precision=precision)


def model_info(path: str, translator: Translator) -> dict[str, Any]:
    """What the model file says about itself: kind, step, architecture, parameters, vocabulary."""
    from mtkit import checkpoint

    if (described := ct2.describe(translator)) is not None:
        return described

    ckpt = checkpoint.load(path, mmap=True)  # mapped: its tensors (and any optimizer state) are not read
    model = translator.model
    return {
        "path": str(path),
        "kind": ckpt.get("kind"),
        "step": ckpt.get("step"),
        "architecture": dataclasses.asdict(model.cfg),
        "parameters": sum(p.numel() for p in model.parameters()),
        "vocab_size": len(translator.vocab),
    }


class Service:
    """A model being loaded or loaded, its Batcher, and the one sentence said when loading failed."""

    def __init__(self, settings: ServeSettings) -> None:
        self.settings = settings
        self.info: dict[str, Any] = {}
        self.error: str | None = None
        self.batcher: Batcher | None = None
        self.vocab: Any = None  # the loaded translator's
        self._loader: threading.Thread | None = None
        self._drain_deadline: float | None = None
        self._drain_timer: threading.Timer | None = None

    @property
    def ready(self) -> bool:
        return self.batcher is not None

    def start_loading(self, on_failure: Callable[[], None]) -> None:
        """Load in a thread, so the server answers /health ("loading") while the weights are read."""

        def load() -> None:
            try:
                self._load()
            except Exception as exc:  # noqa: BLE001 - said once, then the server stops
                self.error = str(exc) if isinstance(exc, MtkitError) else f"loading the model failed: {exc!r}"
                on_failure()

        self._loader = threading.Thread(target=load, name="mtkit-serve-loader", daemon=True)
        self._loader.start()

    def _load(self) -> None:
        s = self.settings
        translator = load_translator(s.models, s.device, s.precision)
        self.info = {
            "model": s.name,
            "models": [model_info(m, translator) for m in s.models],
            "device": str(translator.device),
            "precision": s.precision,
            "decode": dataclasses.asdict(s.decode),
            "limits": dataclasses.asdict(s.limits),
            "max_tokens": s.max_tokens,
            "batch_wait_ms": s.batch_wait_ms,
            "queue_size": s.queue_size,
            "option_max": OPTION_MAX,
            "api_key": s.access.api_key is not None,
            "allowed_origins": list(s.access.origins),
        }

        self.vocab = translator.vocab  # for the check of a request's target language

        def count_tokens(lines: Sequence[str]) -> int:
            return sum(len(ids) + 1 for ids in translator.vocab.encode_batch(lines))  # + EOS, as decoded

        self.batcher = Batcher(
            self.decoder(translator),
            count_tokens,
            max_tokens=s.max_tokens,
            wait_s=s.batch_wait_ms / 1000,
            queue_size=s.queue_size,
        )
        logger.info(
            "model %s loaded (%d parameters) on %s; ready.",
            s.name,
            self.info["models"][0]["parameters"],
            translator.device,
        )

    def decoder(self, translator: Translator) -> Decode:
        """What the Batcher calls on each batch (tests wrap it, by monkeypatching, to hold or fail batches)."""
        max_tokens = self.settings.max_tokens

        def decode(lines: list[str], config: DecodeConfig) -> list[Translation]:
            return list(translator.translate_stream(lines, config, max_tokens))

        return decode

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
        }
        if failing:
            body["last_error"] = b.last_error[:300]
        return (503 if failing else 200), body

    async def translate(self, lines: list[str], config: DecodeConfig) -> list[Translation]:
        """The translations of `lines`, decoded in whatever batch the worker puts them in."""
        if self.batcher is None:
            raise RequestError(503, "the model is still loading; retry shortly.", retry_after=RETRY_AFTER_S)
        if ct2.is_ct2_dir(self.settings.models[0]):
            try:
                ct2.check(config)  # a setting CTranslate2 cannot run (mtkit/decode/ct2.py)
            except MtkitError as exc:
                raise RequestError(422, str(exc)) from None
        try:  # a target language the model has no token for is the request's mistake, not a failed batch
            with_target_lang(self.vocab, [], config.target_lang)
        except MtkitError as exc:
            raise RequestError(422, str(exc)) from None
        try:
            future = self.batcher.submit(lines, config)
        except QueueFull:
            raise RequestError(
                503,
                f"the server is busy ({self.batcher.queue_size} requests queued); retry after {RETRY_AFTER_S} s.",
                retry_after=RETRY_AFTER_S,
            ) from None
        except Closed:
            raise RequestError(503, "the server is shutting down; retry.", retry_after=RETRY_AFTER_S) from None
        try:
            return await asyncio.wrap_future(future)
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
