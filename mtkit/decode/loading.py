"""What `-m` names, opened as a Translator on the engine it calls for: found once, checked once, decided once.

`prepare(names, ...)` is the one way from a model's name to a Translator, for `mtkit translate`, `mtkit serve`,
`mtkit distill`, the recipes and the Python API (`mtkit.load_translator`): find, check, open, defaults.

- find (`find`): mtkit/sources/ says what each name is (a model or checkpoint file, a run directory, a Hugging
  Face Marian or OPUS-MT directory, a CTranslate2 export, a Hub name); the answer is a `Model`, the sources and
  the `Runner` of the engine that runs them.
- check (`plan`): the caller's decoding settings against the engine (`check`) and the --device and --precision
  it cannot run (`check_runtime`), said before anything is read and without measuring anything. The result is a
  `Plan`, which `mtkit serve` opens in the background while it answers /health.
- open (`Plan.open`): the weights read, the runtime decided once (precision "auto" resolved and logged once:
  mtkit.runtime) and handed to the engine.
- defaults: the Translator decodes by DecodeConfig's defaults, then the engine's, then the model's own (its
  file's `decode_defaults`, mtkit/sources/defaults.py), then the caller's changes (`Translator.defaults`).

Two runners, peers: "mtkit" (mtkit's search over PyTorch models, mtkit/decode/torch_engine.py: mtkit files,
run directories, Marian directories; several make an ensemble) and "ctranslate2" (mtkit/decode/ct2.py; torch
is not imported).
"""

from __future__ import annotations

import logging
import os
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, Protocol

from mtkit import sources
from mtkit.config import DecodeConfig, SamplingConfig
from mtkit.config_decode import COMPILE
from mtkit.decode.translator import Translator
from mtkit.errors import MtkitError
from mtkit.sources.defaults import layered

if TYPE_CHECKING:
    from mtkit.model.transformer import Transformer

logger = logging.getLogger(__name__)

Paths = str | os.PathLike[str] | Sequence[str | os.PathLike[str]]


class EngineKind(Protocol):
    """An engine's class, as asked before its files are read: `Engine.check` and `Engine.defaults` are static."""

    @staticmethod
    def check(config: DecodeConfig, sampling: SamplingConfig | None = None) -> None: ...

    @staticmethod
    def defaults() -> dict[str, Any]: ...


class Runner(Protocol):
    """One engine, as a class of three static methods: its class (imported when asked: CTranslate2's without
    torch), the --device/--precision check made before anything is read, and how it opens the sources it runs."""

    name: str

    @staticmethod
    def engine() -> EngineKind: ...

    @staticmethod
    def check_runtime(device: str, precision: str) -> str:
        """The device the engine will run on ("auto" resolved: "cpu", "cuda:0"), or one sentence."""
        ...

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

    def check_runtime(self, device: str, precision: str) -> str:
        return self.runner.check_runtime(device, precision)

    def decode_defaults(self) -> dict[str, Any]:
        """The model's own decoding defaults, read without its weights: its file's; an ensemble's, those its
        members agree on (all carry a shortlist: the ensemble searches their union)."""
        each = [source.decode_defaults() for source in self.sources]
        return {k: v for k, v in each[0].items() if all(k in other and other[k] == v for other in each[1:])}


@dataclass(frozen=True)
class Plan:
    """A model found and the caller's settings checked, nothing read yet: `open` reads it (`mtkit serve` opens it
    in the background, answering /health meanwhile). `given`: the caller's changes to the decoding defaults."""

    model: Model
    device: str = "auto"
    precision: str = "fp32"
    workers: int = 1
    threads: int = 0
    given: Mapping[str, Any] = field(default_factory=dict)
    runs_on: str = ""  # the device, "auto" resolved (what a distillation's resume compares)
    compile: str = "off"  # mtkit's engine: its decoder step compiled (mtkit/decode/compiled.py): off, on or auto

    @property
    def runtime(self) -> dict[str, Any]:
        """How it runs, beside what it decodes: what changes its outputs besides the model and the settings."""
        return {"device": self.runs_on or self.device, "precision": self.precision, "workers": self.workers,
                "threads": self.threads}  # fmt: skip

    @cached_property
    def model_defaults(self) -> dict[str, Any]:
        return self.model.decode_defaults()

    @property
    def defaults(self) -> DecodeConfig:
        """What the Translator will decode with when not told (`Translator.defaults`), known before it is opened."""
        return layered(self.model.engine().defaults(), self.model_defaults, self.given)

    def open(self) -> Translator:
        """The Translator: the weights read, the runtime decided (once) and applied, the defaults laid. `threads`:
        CPU threads (0: PyTorch's count): torch.set_num_threads for mtkit's engine, CTranslate2's intra_threads
        for it. `workers`: batches searched at once (see `Translator`)."""
        defaults = self.defaults  # a damaged entry is said before the weights are read
        translator = self.model.runner.open(self.model.sources, self.device, self.precision, self.workers, self.threads)
        translator.model_defaults, translator.given = dict(self.model_defaults), dict(self.given)
        if self.compile != "off":  # mtkit's engine (`plan` refuses --compile for another)
            from mtkit.decode.torch_engine import TorchEngine

            assert isinstance(translator.engine, TorchEngine)
            translator.engine.compile(self.compile, self.workers)
        own = {**self.model.engine().defaults(), **self.model_defaults}
        if own:
            said = ", ".join(f"{k} {getattr(defaults, k)}" for k in own)
            logger.info(
                "%s decodes with %s unless told otherwise (its engine's and its own defaults)", self.model.name, said
            )
        return translator


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


def plan(
    path: Paths,
    revision: str | None = None,
    *,
    device: str = "auto",
    precision: str = "fp32",
    workers: int = 1,
    threads: int = 0,
    sampling: SamplingConfig | None = None,
    compile: str = "off",
    **changes: Any,
) -> Plan:
    """Find and check: the Plan of opening `path` (see `prepare`), or one sentence saying why it cannot be, before
    anything is read: the names, the decoding `changes` (DecodeConfig fields) and `sampling` the engine cannot
    run, the device, precision and `compile`."""
    if threads < 0:
        raise MtkitError("threads must be 0 (PyTorch's count) or more.")
    if workers < 1:
        raise MtkitError("workers must be at least 1.")
    if compile not in COMPILE:
        raise MtkitError(f"--compile must be one of {', '.join(COMPILE)}, not {compile!r}.")
    if compile == "on" and workers > 1:
        raise MtkitError("--compile on runs with one worker (a compiled step is not carried into forked workers); "
                         "drop --workers or --compile.")  # fmt: skip
    model = find(path, revision)
    if compile != "off" and model.runner is not TorchRunner:
        raise MtkitError(f"--compile {compile} compiles mtkit's own decoder step; a {model.runner.name} model runs "
                         "its own code: drop --compile.")  # fmt: skip
    engine = model.engine()
    engine.check(layered(engine.defaults(), {}, changes), sampling)
    runs_on = model.check_runtime(device, precision)
    return Plan(model, device, precision, workers, threads, dict(changes), runs_on, compile)


def prepare(
    path: Paths,
    device: str = "auto",
    precision: str = "fp32",
    workers: int = 1,
    threads: int = 0,
    revision: str | None = None,
    *,
    sampling: SamplingConfig | None = None,
    compile: str = "off",
    **changes: Any,
) -> Translator:
    """A Translator for `path` (a file, a run directory, a Marian or CTranslate2 directory, a Hugging Face Hub
    name at `revision`; several paths: an ensemble of mtkit models), on the engine the files call for, decoding by
    the model's own defaults with `changes` (DecodeConfig fields, e.g. beam=5) laid over them: find, check, open,
    defaults. `sampling`: checked against the engine as the settings are. `compile`: off, on or auto, mtkit's
    decoder step compiled for searches of one sentence (mtkit/decode/compiled.py)."""
    found = plan(
        path,
        revision,
        device=device,
        precision=precision,
        workers=workers,
        threads=threads,
        sampling=sampling,
        compile=compile,
        **changes,
    )
    return found.open()


load_translator = prepare  # `mtkit.load_translator`: the Python API's name since 0.2 (docs/reference/api.md)


# ----------------------------------------------------------------------------- the two runners


class CT2Runner:
    """CTranslate2 (mtkit/decode/ct2.py), for a CTranslate2 export: torch is never imported."""

    name = "ctranslate2"

    @staticmethod
    def engine() -> EngineKind:
        from mtkit.decode.ct2 import CT2Engine

        return CT2Engine

    @staticmethod
    def check_runtime(device: str, precision: str) -> str:
        from mtkit.decode.ct2 import check_runtime

        return check_runtime(device, precision)

    @staticmethod
    def open(found: tuple[sources.Source, ...], device: str, precision: str, workers: int, threads: int) -> Translator:
        from mtkit.decode import ct2

        export = found[0]
        if not isinstance(export, sources.CT2Export):  # `find` gives this runner CTranslate2 exports only
            raise MtkitError(f"{export.path} is not a CTranslate2 export.")
        return ct2.open_export(export, device, precision, workers, threads)


class TorchRunner:
    """mtkit's search over PyTorch models (mtkit/decode/torch_engine.py): mtkit files, run directories, Marian
    directories; several make an ensemble."""

    name = "mtkit"

    @staticmethod
    def engine() -> EngineKind:
        from mtkit.decode.torch_engine import TorchEngine

        return TorchEngine

    @staticmethod
    def check_runtime(device: str, precision: str) -> str:
        """The device exists and the precision runs there; precision "auto" is decided when the model is opened."""
        from mtkit.device import pick_device
        from mtkit.runtime import check_decoding_precision

        target = pick_device(device)
        check_decoding_precision(precision, target)
        return str(target)

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
    from mtkit.data.tokenizer import load_tokenizer
    from mtkit.decode.shortlist import Shortlist
    from mtkit.decode.torch_engine import TorchEngine
    from mtkit.device import pick_device
    from mtkit.provenance import data_languages

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
        about = about or {
            "path": str(source.path),
            "kind": ckpt.get("kind"),
            "step": ckpt.get("step"),
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
