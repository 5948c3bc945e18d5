"""What `-m` names, opened as a Translator on the engine it calls for: found once, checked once, decided once.

`find(names, revision)` asks mtkit/sources/ what each name is (a model or checkpoint file, a run directory, a
Hugging Face Marian or OPUS-MT directory, a CTranslate2 export, a Hub name) and returns a `Model`: the sources
and the `Runner` of the engine that runs them. The CLI and the server ask the Model, never the path: its
engine's `check` and `adapt` (decoding settings), `check_runtime` (a --device or --precision the engine cannot
run, said before anything is read and without measuring anything), and `open`, which reads the weights,
decides the runtime once (precision "auto" resolved and logged once: mtkit.runtime) and hands it to the engine.

Two runners, peers: "mtkit" (mtkit's search over PyTorch models, mtkit/decode/torch_engine.py: mtkit files,
run directories, Marian directories; several make an ensemble) and "ctranslate2" (mtkit/decode/ct2.py; torch
is not imported).
"""

from __future__ import annotations

import logging
import os
import typing
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from mtkit import sources
from mtkit.config import DecodeConfig, SamplingConfig
from mtkit.decode.translator import Translator
from mtkit.errors import MtkitError

if TYPE_CHECKING:
    from mtkit.model.transformer import Transformer

logger = logging.getLogger(__name__)

Paths = str | os.PathLike[str] | Sequence[str | os.PathLike[str]]


class EngineKind(Protocol):
    """An engine's class, as asked before its files are read: `Engine.check` and `Engine.adapt` are static."""

    @staticmethod
    def check(config: DecodeConfig, sampling: SamplingConfig | None = None) -> None: ...

    @staticmethod
    def adapt(config: DecodeConfig, given: Collection[str]) -> DecodeConfig: ...


class Runner(Protocol):
    """One engine, as a class of three static methods: its class (imported when asked: CTranslate2's without
    torch), the --device/--precision check made before anything is read, and how it opens the sources it runs."""

    name: str

    @staticmethod
    def engine() -> EngineKind: ...

    @staticmethod
    def check_runtime(device: str, precision: str) -> None: ...

    @staticmethod
    def open(
        found: tuple[sources.Source, ...], device: str, precision: str, workers: int, threads: int
    ) -> Translator: ...


@dataclass(frozen=True)
class Model:
    """What `-m` names, found once: the sources (several: an ensemble) and the runner of their engine."""

    sources: tuple[sources.Source, ...]
    runner: type[Runner]

    @property
    def name(self) -> str:
        return "+".join(s.path.name for s in self.sources)

    def engine(self) -> EngineKind:
        return self.runner.engine()

    def check_runtime(self, device: str, precision: str) -> None:
        self.runner.check_runtime(device, precision)

    def open(self, device: str = "auto", precision: str = "fp32", workers: int = 1, threads: int = 0) -> Translator:
        """The Translator: the weights read, the runtime decided (once) and applied. `threads`: CPU threads (0:
        PyTorch's count): torch.set_num_threads for mtkit's engine, CTranslate2's intra_threads for it.
        `workers`: batches searched at once (see `Translator`)."""
        if threads < 0:
            raise MtkitError("threads must be 0 (PyTorch's count) or more.")
        return self.runner.open(self.sources, device, precision, workers, threads)


def as_names(path: Paths) -> list[str | os.PathLike[str]]:
    return [path] if isinstance(path, (str, os.PathLike)) else list(path)


def find(path: Paths, revision: str | None = None) -> Model:
    """The Model `path` names (all of them, for an ensemble), or one sentence saying why it is none."""
    names = as_names(path)
    if not names:
        raise MtkitError("no model given; name one with -m.")
    found = tuple(sources.find(name, revision) for name in names)
    engines = {s.engine for s in found}
    if len(engines) > 1:
        kinds = " and ".join(sorted({s.kind for s in found}))
        raise MtkitError(f"{kinds} models are not an ensemble (one engine runs all its models); give one kind.")
    if len(found) > 1 and found[0].engine == "ctranslate2":
        raise MtkitError("CTranslate2 runs one model, not an ensemble; give one -m with a CTranslate2 directory.")
    return Model(found, RUNNERS[found[0].engine])


def open_model(
    path: Paths,
    device: str = "auto",
    precision: str = "fp32",
    workers: int = 1,
    threads: int = 0,
    revision: str | None = None,
) -> Translator:
    """A Translator for `path` (a file, a run directory, a Marian or CTranslate2 directory, a Hugging Face Hub
    name at `revision`; several paths: an ensemble of mtkit models), on the engine the files call for."""
    return find(path, revision).open(device, precision, workers, threads)


load_translator = open_model  # `mtkit.load_translator`: the Python API's name since 0.2 (docs/reference/api.md)


# ----------------------------------------------------------------------------- the two runners


class CT2Runner:
    """CTranslate2 (mtkit/decode/ct2.py), for a CTranslate2 export: torch is never imported."""

    name = "ctranslate2"

    @staticmethod
    def engine() -> EngineKind:
        from mtkit.decode.ct2 import CT2Engine

        return CT2Engine

    @staticmethod
    def check_runtime(device: str, precision: str) -> None:
        from mtkit.decode.ct2 import check_runtime

        check_runtime(device, precision)

    @staticmethod
    def open(found: tuple[sources.Source, ...], device: str, precision: str, workers: int, threads: int) -> Translator:
        from mtkit.decode import ct2

        return ct2.open_directory(found[0].path, device, precision, workers, threads)


class TorchRunner:
    """mtkit's search over PyTorch models (mtkit/decode/torch_engine.py): mtkit files, run directories, Marian
    directories; several make an ensemble."""

    name = "mtkit"

    @staticmethod
    def engine() -> EngineKind:
        from mtkit.decode.torch_engine import TorchEngine

        return TorchEngine

    @staticmethod
    def check_runtime(device: str, precision: str) -> None:
        """The device exists and the precision runs there; "auto" is decided when the model is opened, not here."""
        from mtkit.device import pick_device
        from mtkit.runtime import check_decoding_precision

        check_decoding_precision(precision, pick_device(device))

    @staticmethod
    def open(found: tuple[sources.Source, ...], device: str, precision: str, workers: int, threads: int) -> Translator:
        """The models read, mtkit.runtime's decisions made here, once, and applied to them: `precision` (auto and
        int8 included), the fp32 CPU products' backend and packed weights."""
        return open_torch(found, device, precision, workers, threads)


def open_torch(
    found: tuple[sources.Source, ...], device: str, precision: str, workers: int, threads: int
) -> Translator:
    """mtkit models (files, run directories, Marian directories read as one) as one Translator on mtkit's engine."""
    import torch

    from mtkit import checkpoint, runtime
    from mtkit.decode.shortlist import Shortlist
    from mtkit.decode.torch_engine import TorchEngine
    from mtkit.device import pick_device
    from mtkit.marian.vocab import load_tokenizer
    from mtkit.provenance import data_languages, distilled_from

    if threads:
        torch.set_num_threads(threads)
    models: list[Transformer] = []
    vocabs: list[bytes] = []
    shortlists: list[Shortlist | None] = []
    about: dict[str, Any] = {}
    for source in found:
        ckpt = source.checkpoint()
        if not ckpt.get("vocab"):
            raise MtkitError(
                f"{source.path} holds no SentencePiece vocabulary, so its output cannot be turned into text."
            )
        checkpoint.check_finite(ckpt, source.path)
        models.append(typing.cast("Transformer", checkpoint.build_from(ckpt)))
        vocabs.append(ckpt["vocab"])
        student = distilled_from(ckpt.get("provenance")) is not None  # trained on `mtkit distill` data
        about = about or {
            "path": str(source.path),
            "kind": ckpt.get("kind"),
            "step": ckpt.get("step"),
            "student": student,
            "languages": data_languages(ckpt.get("provenance")),
        }
        shortlists.append(Shortlist.of(ckpt, source.path))
        del ckpt  # optimizer state can be twice the model's size
    for source, v in zip(found[1:], vocabs[1:]):
        if v != vocabs[0]:
            raise MtkitError(
                f"{found[0].path} and {source.path} have different vocabularies; an ensemble needs models trained "
                "with one vocabulary."
            )
    target = pick_device(device)
    decided = runtime.decide_decoding(precision, target, models[0].cfg.d_model)
    models = [runtime.apply(m.to(device=target, dtype=decided.dtype).eval(), decided) for m in models]
    engine = TorchEngine(models, target, about, Shortlist.union(shortlists))
    return Translator(engine, load_tokenizer(vocabs[0]), workers)


RUNNERS: dict[str, type[Runner]] = {"mtkit": TorchRunner, "ctranslate2": CT2Runner}
