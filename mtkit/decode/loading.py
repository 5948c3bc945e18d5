"""`mtkit translate -m` and `mtkit serve -m`: what the paths given name, opened as a Translator.

mtkit files (checkpoints, averaged models; a Hugging Face Marian directory, through mtkit.checkpoint)
run on mtkit's own search (`Translator.load`); a CTranslate2 directory (`mtkit export --format
ctranslate2`) runs on CTranslate2 behind the same text pipeline (mtkit/decode/ct2.py). The choice is made
here, above both, so that the text pipeline does not import the engine that extends it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from mtkit.decode import ct2
from mtkit.decode.translator import Translator


def load_translator(
    path: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    device: str = "auto",
    precision: str = "fp32",
    workers: int = 1,
    threads: int = 0,
) -> Translator:
    """A Translator for `path` (several paths: an ensemble of mtkit files), on the engine the files call for.

    `threads`: a CTranslate2 model's CPU threads (0: the count PyTorch would use); mtkit's own engine runs with
    PyTorch's setting (torch.set_num_threads), which this module leaves alone so as not to import torch."""
    paths = [path] if isinstance(path, (str, os.PathLike)) else list(path)
    if any(ct2.is_ct2_dir(p) for p in paths):
        return ct2.load(paths, device, precision, workers, threads)
    return Translator.load(paths, device=device, precision=precision, workers=workers)
