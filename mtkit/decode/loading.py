"""What the paths of `-m` name, opened as a Translator on the engine they call for: one registered loader a source.

This is the only code that looks at a path to decide what it is. Each `Loader` says whether it claims a
path, which engine runs what it opens (whose `check` and `adapt` the CLI asks before anything is read), what
--device and --precision that engine runs, and how to open the files. Registered, in the order asked:

- ctranslate2: a directory of `mtkit export --format ctranslate2` (model.bin beside config.json), on
  CTranslate2 (mtkit/decode/ct2.py); torch is not imported.
- marian: a Hugging Face Marian directory (config.json naming a model_type), read by mtkit.checkpoint, on
  mtkit's engine (mtkit/decode/torch_engine.py).
- mtkit: mtkit files, checkpoints or averaged models (several make an ensemble), on mtkit's engine.

A new source (a hub name, a model with its own tokenizer) is one more `register(Loader(...))`.
"""

from __future__ import annotations

import logging
import os
import typing
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from mtkit.config import DecodeConfig, SamplingConfig
from mtkit.decode.translator import Translator
from mtkit.errors import MtkitError

if TYPE_CHECKING:
    from mtkit.model.transformer import Transformer

logger = logging.getLogger(__name__)

Paths = str | os.PathLike[str] | Sequence[str | os.PathLike[str]]
Opener = Callable[[list[Path], str, str, int, int], Translator]  # (paths, device, precision, workers, threads)


class EngineKind(Protocol):
    """An engine's class, as asked before its files are read: `Engine.check` and `Engine.adapt` are static."""

    @staticmethod
    def check(config: DecodeConfig, sampling: SamplingConfig | None = None) -> None: ...

    @staticmethod
    def adapt(config: DecodeConfig, given: Collection[str]) -> DecodeConfig: ...


@dataclass(frozen=True)
class Loader:
    """One source of models: how to recognise it, what runs it, and how to open it.

    `engine()`: the class of the engine that runs what it opens (imported when asked: CTranslate2's without
    torch), whose `check` and `adapt` the CLI asks before anything is read; `check_runtime(device,
    precision)` refuses what that engine cannot run, also before; `open(paths, device, precision, workers,
    threads)` reads the files. Loaders that share an `open` can make one ensemble.
    """

    name: str
    claims: Callable[[Path], bool]
    engine: Callable[[], EngineKind]
    check_runtime: Callable[[str, str], None]
    open: Opener


LOADERS: list[Loader] = []


def register(loader: Loader, first: bool = False) -> Loader:
    """Add a source of models: asked after those registered before it (before them all with `first`)."""
    LOADERS.insert(0, loader) if first else LOADERS.append(loader)
    return loader


def as_paths(path: Paths) -> list[Path]:
    return [Path(path)] if isinstance(path, (str, os.PathLike)) else [Path(p) for p in path]


def find(path: Paths) -> Loader:
    """The loader of the files `path` names (all of them, for an ensemble), or one sentence saying why none."""
    paths = as_paths(path)
    if not paths:
        raise MtkitError("no model given; name one with -m.")
    found: list[Loader] = []
    for p in paths:
        loader = next((loader for loader in LOADERS if loader.claims(p)), None)
        if loader is None:
            if p.is_dir():
                raise MtkitError(
                    f"{p} is a directory but neither a CTranslate2 model (model.bin) nor a Hugging Face "
                    "Marian model (config.json with a model_type); give a model file or an exported directory."
                )
            raise MtkitError(f"model file {p} does not exist.")
        found.append(loader)
    if len({loader.open for loader in found}) > 1:
        names = " and ".join(sorted({loader.name for loader in found}))
        raise MtkitError(f"{names} models are not an ensemble (one engine runs all its models); give one kind.")
    return found[0]


def open_model(
    path: Paths, device: str = "auto", precision: str = "fp32", workers: int = 1, threads: int = 0
) -> Translator:
    """A Translator for `path` (several paths: an ensemble of mtkit files), on the engine the files call for.

    `threads`: CPU threads (0: PyTorch's count): torch.set_num_threads for mtkit's engine, CTranslate2's
    intra_threads for it. `workers`: batches searched at once (see `Translator`)."""
    if threads < 0:
        raise MtkitError("threads must be 0 (PyTorch's count) or more.")
    return find(path).open(as_paths(path), device, precision, workers, threads)


load_translator = open_model  # `mtkit.load_translator`: the Python API's name since 0.2 (docs/reference/api.md)


# ----------------------------------------------------------------------------- the registered sources


def is_ct2_dir(path: Path) -> bool:
    """A CTranslate2 model directory: model.bin beside config.json (a Hugging Face directory has no model.bin)."""
    return path.is_dir() and (path / "model.bin").is_file() and (path / "config.json").is_file()


def is_marian_dir(path: Path) -> bool:
    if not path.is_dir():
        return False
    from mtkit.marian import is_hf_dir  # torch comes with it; a CTranslate2 directory never gets here

    return is_hf_dir(path)


def open_ct2(paths: list[Path], device: str, precision: str, workers: int, threads: int) -> Translator:
    from mtkit.decode import ct2

    if len(paths) != 1:
        raise MtkitError("CTranslate2 runs one model, not an ensemble; give one -m with a CTranslate2 directory.")
    return ct2.open_directory(paths[0], device, precision, workers, threads)


def ct2_engine() -> EngineKind:
    from mtkit.decode.ct2 import CT2Engine

    return CT2Engine


def ct2_check_runtime(device: str, precision: str) -> None:
    from mtkit.decode.ct2 import check_runtime

    check_runtime(device, precision)


def torch_engine() -> EngineKind:
    from mtkit.decode.torch_engine import TorchEngine

    return TorchEngine


def torch_check_runtime(device: str, precision: str) -> None:
    from mtkit.device import pick_device
    from mtkit.runtime import resolve_dtype

    resolve_dtype(precision, pick_device(device))


def open_torch(paths: list[Path], device: str, precision: str, workers: int, threads: int) -> Translator:
    """mtkit files (or Hugging Face Marian directories, which mtkit.checkpoint reads as one), on mtkit's engine.

    The models loaded are the translator's own, so mtkit.runtime's decisions are applied to them here:
    `precision` (auto and int8 included), the fp32 CPU products' backend and packed weights."""
    import torch

    from mtkit import checkpoint, runtime
    from mtkit.data.marian_vocab import load_tokenizer
    from mtkit.decode.torch_engine import TorchEngine
    from mtkit.device import pick_device
    from mtkit.provenance import data_languages

    if threads:
        torch.set_num_threads(threads)
    models: list[Transformer] = []
    vocabs: list[bytes] = []
    about: dict[str, Any] = {}
    for p in paths:
        ckpt = checkpoint.load(p)
        if not ckpt.get("vocab"):
            raise MtkitError(f"{p} holds no SentencePiece vocabulary, so its output cannot be turned into text.")
        checkpoint.check_finite(ckpt, p)
        models.append(typing.cast("Transformer", checkpoint.build_from(ckpt)))
        vocabs.append(ckpt["vocab"])
        about = about or {
            "path": str(p),
            "kind": ckpt.get("kind"),
            "step": ckpt.get("step"),
            "languages": data_languages(ckpt.get("provenance")),
        }
        del ckpt  # optimizer state can be twice the model's size
    for p, v in zip(paths[1:], vocabs[1:]):
        if v != vocabs[0]:
            raise MtkitError(
                f"{paths[0]} and {p} have different vocabularies (their embedded spm.model "
                "differ); an ensemble needs models trained with one vocabulary."
            )
    target = pick_device(device)
    decided = runtime.decide_decoding(precision, target, models[0].cfg.d_model)
    models = [runtime.apply(m.to(device=target, dtype=decided.dtype).eval(), decided) for m in models]
    return Translator(TorchEngine(models, target, about), load_tokenizer(vocabs[0]), workers)


register(Loader("ctranslate2", is_ct2_dir, ct2_engine, ct2_check_runtime, open_ct2))
register(Loader("marian", is_marian_dir, torch_engine, torch_check_runtime, open_torch))
register(Loader("mtkit", Path.is_file, torch_engine, torch_check_runtime, open_torch))
