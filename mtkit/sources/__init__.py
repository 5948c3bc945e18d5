"""What a model name is, asked once: `find(name, revision)` returns the source that claims it.

A name is a path or a Hugging Face Hub name (`owner/name`, with `--revision`): a Hub name is fetched into (or
read from) the Hub cache once, here (mtkit/hub.py), and its snapshot is then a path like any other. A path is
claimed by the first of `KINDS` that recognises it, each a class of the same few methods (CTranslate2's
`register_loader` shape):

- `claims(path)`: whether the path is one of its kind;
- `engine`: which engine runs it ("mtkit": mtkit's search over PyTorch, mtkit/decode/torch_engine.py;
  "ctranslate2": mtkit/decode/ct2.py);
- `checkpoint()`: the dict `mtkit.checkpoint.load` gives (config, weights, vocabulary bytes), for what mtkit's
  engine runs, `mtkit export` converts and `train --init` starts from;
- `tokenizer()`: the text-to-ids of the model (data/tokenizer.py);
- `decode_defaults()`: the decoding settings the model carries as its own (mtkit/sources/defaults.py), read
  without its weights;
- `describe()`: what `mtkit info` prints, as a dict.

`defaults` (mtkit/sources/defaults.py) reads a model's decoding defaults from what its files record, and lays
the layers of defaults over each other for every caller.

Every command that takes a model (`translate`, `serve`, `info`, `export`, `train --init`, `bpe --from`) and the
Python API (`mtkit.load_translator`) ask `find`; nothing else looks at a path to decide what it is.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Protocol

from mtkit.data.tokenizer import Tokenizer
from mtkit.errors import MtkitError
from mtkit.files import CT2_MODEL, EXPORT_RECORD, TOKENIZER_FILES, VMAP, read_model_file
from mtkit.sources import defaults
from mtkit.sources.mtkit_files import ModelFile, RunDirectory, describe_file


class Source(Protocol):
    """A model on disk, of one kind (the module docstring)."""

    kind: str
    engine: str
    path: Path

    def checkpoint(self) -> dict[str, Any]: ...

    def decode_defaults(self) -> dict[str, Any]: ...

    def describe(self) -> dict[str, Any]: ...


class MarianDirectory:
    """A Hugging Face Marian directory: a public OPUS-MT model (Marian's own vocabulary) or one `mtkit export
    --format huggingface` wrote; read by mtkit/marian/ (converted to mtkit's weights and ids, exactly)."""

    kind = "Hugging Face Marian directory"
    engine = "mtkit"

    def __init__(self, path: Path):
        self.path = path

    @staticmethod
    def claims(path: Path) -> bool:
        if not path.is_dir():
            return False
        from mtkit.marian.weights import is_hf_dir  # torch comes with it; a CTranslate2 directory never gets here

        return is_hf_dir(path)

    def checkpoint(self) -> dict[str, Any]:
        from mtkit.checkpoint import FORMAT, VERSION
        from mtkit.marian.opus import load_hf_dir

        return {"format": FORMAT, "version": VERSION, **load_hf_dir(self.path)}

    def decode_defaults(self) -> dict[str, Any]:
        """What `mtkit export --format huggingface` recorded beside it (a student's beam 1); an OPUS-MT model's are
        mtkit's own (its generation_config.json is not read)."""
        try:
            record = json.loads(read_model_file(self.path / EXPORT_RECORD))
        except (OSError, ValueError, MtkitError):
            return {}
        return defaults.of(record, shortlist=False, where=self.path) if isinstance(record, dict) else {}

    def describe(self) -> dict[str, Any]:
        return {**describe_file(self.path, self.checkpoint()), "source": self.kind}


class CT2Export:
    """A directory of `mtkit export --format ctranslate2` (model.bin beside config.json), run by CTranslate2: its
    record, its tokenizer and its vocabulary map, read here for the engine (mtkit/decode/ct2.py) and `mtkit info`."""

    kind = "CTranslate2 export"
    engine = "ctranslate2"

    def __init__(self, path: Path):
        self.path = path

    @staticmethod
    def claims(path: Path) -> bool:
        return path.is_dir() and (path / CT2_MODEL).is_file() and (path / "config.json").is_file()

    @property
    def vmap(self) -> Path | None:
        """CTranslate2's vocabulary map, a model's shortlist (mtkit/data/shortlist.py), where the export has one."""
        path = self.path / VMAP
        return path if path.is_file() else None

    def tokenizer(self) -> Tokenizer:
        """The tokenizer the export carries (`Tokenizer.filename`: an OPUS-MT model's bundle first, then mtkit's
        SentencePiece model, which was also the bundle's name before it had its own), or one sentence."""
        from mtkit.data.tokenizer import load_tokenizer

        name = next((n for n in reversed(TOKENIZER_FILES) if (self.path / n).is_file()), None)
        if name is None:
            raise MtkitError(
                f"{self.path} has no {TOKENIZER_FILES[0]}, the SentencePiece model that turns text into its tokens; "
                "export it with mtkit export --format ctranslate2, which writes one."
            )
        return load_tokenizer(read_model_file(self.path / name))

    def record(self) -> dict[str, Any]:
        """mtkit-export.json: the step, quantization, source and model config it was exported with ({}: none)."""
        try:
            record = json.loads(read_model_file(self.path / EXPORT_RECORD))
        except (OSError, ValueError, MtkitError):
            return {}
        return record if isinstance(record, dict) else {}

    def checkpoint(self) -> dict[str, Any]:
        raise MtkitError(
            f"{self.path} is a CTranslate2 export, whose weights only CTranslate2 reads; give the mtkit model it "
            "was exported from."
        )

    def check(self) -> None:
        """Its files as `mtkit export` wrote them (the sha256 of each, in its record), or one sentence: CTranslate2
        reads model.bin without a checksum, so a damaged one would translate into garbage. An export from before
        the sha256 were recorded is not checked."""
        from mtkit.provenance import sha256_file

        recorded = self.record().get("sha256")
        if recorded is None:
            return
        if not isinstance(recorded, dict) or not all(isinstance(v, str) for v in recorded.values()):
            raise MtkitError(f"{self.path / EXPORT_RECORD} is damaged (its sha256 entry); export the model again.")
        for name, digest in recorded.items():
            if name == VMAP:  # its identity is asked only where the shortlist is (mtkit/decode/ct2.py: vmap_refusal)
                continue
            path = self.path / name
            if Path(name).name != name or name.startswith("."):  # the record is read from disk: names only
                raise MtkitError(f"{self.path / EXPORT_RECORD} names {name!r}, not a file of the export.")
            if not path.is_file():
                raise MtkitError(f"{path} is missing from the export; export the model again.")
            if sha256_file(path) != digest:
                raise MtkitError(
                    f"{path} is not the file `mtkit export` wrote (its sha256 differs: damaged or replaced); "
                    "export the model again."
                )

    def decode_defaults(self) -> dict[str, Any]:
        """The export record's; an older export's from its provenance and its vocabulary map."""
        return defaults.of(self.record(), shortlist=self.vmap is not None, where=self.path)

    def describe(self) -> dict[str, Any]:
        from mtkit.config import ModelConfig, config_from_dict
        from mtkit.facts import architecture

        record = self.record()
        model_config = record.get("model_config")
        try:
            arch = architecture(config_from_dict(ModelConfig, model_config)) if isinstance(model_config, dict) else None
        except (MtkitError, TypeError, ValueError):
            arch = None
        from mtkit.provenance import distilled_from

        files = [p for p in self.path.iterdir() if p.is_file()]
        vmap = self.vmap
        return {
            "path": str(self.path),
            "export": "ctranslate2",
            "bytes": sum(p.stat().st_size for p in files),
            "model_bytes": (self.path / CT2_MODEL).stat().st_size,
            "vmap_entries": sum(1 for _ in vmap.open(encoding="utf-8")) - 1 if vmap is not None else None,
            "student": distilled_from(record.get("provenance")),
            "decode_defaults": self.decode_defaults(),
            "quantization": record.get("quantization"),
            "step": record.get("step"),
            "exported_from": record.get("source"),
            "mtkit": record.get("mtkit"),
            "architecture": arch,
            "model_config": model_config,
            "provenance": record.get("provenance"),
            "files": sorted(p.name for p in files),
        }


# Asked in this order: the exported and Hugging Face directories before a run directory, files last.
KINDS: tuple[type[CT2Export] | type[MarianDirectory] | type[RunDirectory] | type[ModelFile], ...] = (
    CT2Export,
    MarianDirectory,
    RunDirectory,
    ModelFile,
)


def find(name: str | os.PathLike[str], revision: str | None = None) -> Source:
    """The source `name` is: a path, or a Hub name's cached snapshot (downloaded first where need be), claimed by
    the first of KINDS; anything else is one sentence."""
    from mtkit import hub

    path = Path(hub.resolve(str(name), revision))
    for kind in KINDS:
        if kind.claims(path):
            source: Source = kind(path)
            return source
    if path.is_dir():
        raise MtkitError(
            f"{path} is a directory but neither a run directory, a CTranslate2 export (model.bin) nor a Hugging "
            "Face Marian model (config.json with a model_type); give a model file or one of those directories."
        )
    raise MtkitError(f"model file {path} does not exist.")


def tokenizer_of(source: Source) -> Tokenizer:
    """The tokenizer `source` was trained with (`mtkit bpe --from`), or one sentence when it has none."""
    from mtkit.data.tokenizer import load_tokenizer

    vocab = source.checkpoint().get("vocab")
    if not vocab:
        raise MtkitError(f"{source.path} holds no vocabulary to encode data with.")
    return load_tokenizer(bytes(vocab))


__all__ = ["KINDS", "CT2Export", "MarianDirectory", "ModelFile", "RunDirectory", "Source", "find", "tokenizer_of"]
