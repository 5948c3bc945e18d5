"""`mtkit export`: a trained model in another engine's format, one module per format.

- ctranslate2.py: a CTranslate2 model directory (the `ct2` extra).
- huggingface.py: a Hugging Face Transformers `MarianMTModel` directory with its tokenizer,
  generation settings and model card (the `hf` extra); card.py writes the card.
- target.py: the output directory, checked before any work and filled without losing a user's file.

A format module offers FILES (the names it may write), `check(config)` (options it refuses),
`import_extra()` and `write(ckpt, tmp, config)`, which writes the files into a temporary directory and may return
entries for the export record.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from types import ModuleType

from mtkit import __version__, checkpoint, sources
from mtkit.config import ExportConfig
from mtkit.errors import MtkitError
from mtkit.export import ctranslate2
from mtkit.export.target import RECORD, check_target, write_export
from mtkit.marian import export as huggingface
from mtkit.provenance import sha256_file

logger = logging.getLogger(__name__)

FORMATS: dict[str, ModuleType] = {"ctranslate2": ctranslate2, "huggingface": huggingface}


def export(
    model_path: str | os.PathLike,
    out_dir: str | os.PathLike,
    config: ExportConfig = ExportConfig(),
    revision: str | None = None,
) -> Path:
    """Write `model_path` (what mtkit/sources/ names: an mtkit model or checkpoint, a run directory, a Marian
    directory, a Hub name at `revision`) to `out_dir` in `config.format`; returns the directory.

    Everything that can be refused (the options, the target directory, the missing extra, the model
    file) is refused before the model is converted.
    """
    out = Path(out_dir)
    fmt = FORMATS[config.format]
    fmt.check(config)
    check_target(out, fmt.FILES)
    fmt.import_extra()
    source = sources.find(model_path, revision)
    ckpt = source.checkpoint()  # memory-mapped: a checkpoint's optimizer state is never read
    if not ckpt.get("vocab"):
        raise MtkitError(f"{model_path} holds no SentencePiece vocabulary; an exported model needs one.")
    record = {
        "format": config.format,
        "quantization": config.quantization,
        "source": str(model_path),
        "step": int(ckpt.get("step", 0)),
        "model_config": ckpt.get("model_config"),  # max_positions for `mtkit translate -m DIR` (mtkit/decode/ct2.py)
        "parameters": checkpoint.parameter_count(ckpt),  # what /info says of the export, without torch
        "mtkit": __version__,
        "provenance": ckpt.get("provenance"),  # read back by `mtkit info DIR` (mtkit/sources/)
        sources.defaults.KEY: sources.defaults.of(ckpt, where=model_path),  # what `mtkit translate -m DIR` decodes with
    }

    def fill(tmp: Path) -> None:
        record.update(fmt.write(ckpt, source.path, tmp, config) or {})  # a format's own entries: the vmap's identity
        # each file's sha256, checked before the export is run (`CT2Export.check`): CTranslate2 reads model.bin
        # without a checksum, and a damaged one (a zeroed block, a NaN scale) translates into garbage, exit 0
        record["sha256"] = {p.name: sha256_file(p) for p in sorted(tmp.iterdir()) if p.is_file()}

    write_export(out, fill, record)
    logger.info("wrote %s (%s, %s)", out, config.format, config.quantization)
    return out


__all__ = ["FORMATS", "RECORD", "ExportConfig", "export"]
