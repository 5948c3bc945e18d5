"""The decoder step over a static cache compiled ahead of time: torch.export, then AOTInductor, one package a model.

Not in the paper: an engineering choice of how `--compile` runs a step. torch.compile wraps its compiled graph in
TorchDynamo's guards and AOTAutograd's runtime wrappers, which run in Python at every call: for one row of the
distilled student (one decoder layer, 256 wide) they cost more than the graph's own kernels besides its products,
and the compiled step measured about level with eager. Exported and compiled ahead of time, the step is one call
into a C++ runner (the model's weights its constants) with nothing in Python between the kernels: it measured about
half eager's time a step (docs/benchmarks.md, "A static cache and a compiled step").

One package serves every step of every sentence of a model: the cache's capacity, the window a step attends over
and the source length are dynamic dimensions; the rows are one (greedy search of one sentence, the only steps
`--compile` runs compiled). The package is kept on disk under mtkit's cache directory (`$MTKIT_CACHE`, see
mtkit/data/fetch.py), named by a hash of what it was built from (the decoder's weights and shapes, torch's version,
the CPU), so a second process loads it in a fraction of a second instead of compiling again; it is written whole
or not at all (mtkit/atomic.py). The package is a shared library compiled on this machine from this model: it is
loaded only from that directory, as trusted as the measurements kept beside it (mtkit/runtime/kept.py).
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from mtkit.config import PAD
from mtkit.data.fetch import default_cache_dir
from mtkit.device import cpu_flags, cpu_name
from mtkit.model.static import static_states
from mtkit.model.transformer import Transformer

logger = logging.getLogger(__name__)

FOLDER = "compiled"  # under mtkit's cache directory


class _Step(nn.Module):
    """`static_states` for one row and an unpadded source, with the window's length carried by a tensor's shape
    (`span`: any (span,) tensor) so that torch.export sees it as a dimension, not a constant."""

    def __init__(self, model: Transformer):
        super().__init__()
        self.model = model

    def forward(self, tokens: Tensor, position: Tensor, history: Tensor, span: Tensor, *cross: Tensor) -> Tensor:
        pairs = [(cross[i], cross[i + 1]) for i in range(0, len(cross), 2)]
        return static_states(self.model, tokens, position, history, pairs, None, span.size(0))


class _Encoder(nn.Module):
    """An unpadded source (1, S) -> each decoder layer's cross-attention keys and values, flat: `Transformer.encode`
    without a mask, then `Transformer.cross_kv`."""

    def __init__(self, model: Transformer):
        super().__init__()
        self.model = model

    def forward(self, src: Tensor) -> list[Tensor]:
        model = self.model
        x = model.src_embed(src)
        for layer in model.encoder:
            x = layer(x, None)
        return [t for pair in model.cross_kv(model.encoder_norm(x)) for t in pair]


def fingerprint(model: Transformer) -> str:
    """What a package depends on: the model's weights and shapes, torch's version and the CPU."""
    digest = hashlib.sha256()
    digest.update(f"{torch.__version__}|{cpu_name()}|{' '.join(sorted(cpu_flags()))}|{model.cfg}".encode())
    for name, tensor in sorted({**dict(model.named_parameters()), **dict(model.named_buffers())}.items()):
        digest.update(name.encode())
        digest.update(tensor.detach().contiguous().view(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()[:32]


class NotTaken(Exception):
    """A call the package does not take; its caller runs it eagerly."""


class ExportedStates:
    """A `StatesFn` (mtkit/model/static.py) and an `EncodeFn` (mtkit/decode/step.py), each model's through its
    AOTInductor packages, built or loaded on their first call. Calls they cannot take (more than one row, a padded
    source, a dimension under 2, which export specialises) raise NotTaken; the caller runs those eagerly."""

    def __init__(self, folder: Path | None = None):
        self.folder = folder
        self.runners: dict[tuple[str, int], Any] = {}  # (kind, id(model)) -> its package's runner
        self.fingerprints: dict[int, str] = {}  # id(model) -> fingerprint(model)
        self.spans: dict[int, Tensor] = {}  # span -> an empty tensor of that length, handed to the runner

    def __call__(
        self,
        model: Transformer,
        tokens: Tensor,
        position: Tensor,
        history: Tensor,
        cross: list[tuple[Tensor, Tensor]],
        src_mask: Tensor | None,
        span: int,
    ) -> Tensor:
        if tokens.size(0) != 1 or history.size(2) != 1 or src_mask is not None:
            raise NotTaken("the exported step takes one row of an unpadded source")
        if min(span, history.size(1), cross[0][0].size(2)) < 2:
            raise NotTaken("the exported step takes dimensions of 2 and more")
        marker = self.spans.get(span)
        if marker is None:
            marker = self.spans[span] = torch.empty(span)
        args = (tokens, position, history, marker, *[t for pair in cross for t in pair])
        out: Tensor = self.runner("decoder-step", model, args)(*args)
        return out

    def encode(self, model: Transformer, src: Tensor) -> tuple[Tensor | None, list[tuple[Tensor, Tensor]]]:
        if src.size(0) != 1 or src.size(1) < 2 or bool(src.eq(PAD).any()):
            raise NotTaken("the exported encoder takes one unpadded source of 2 tokens and more")
        flat = self.runner("encoder", model, (src,))(src)
        return None, [(flat[i], flat[i + 1]) for i in range(0, len(flat), 2)]

    def runner(self, kind: str, model: Transformer, example: tuple[Tensor, ...]) -> Any:
        """The model's runner of `kind`: its package from the cache directory, built there first if missing."""
        runner = self.runners.get((kind, id(model)))
        if runner is not None:
            return runner
        if id(model) not in self.fingerprints:
            self.fingerprints[id(model)] = fingerprint(model)
        folder = self.folder or default_cache_dir() / FOLDER
        path = folder / f"{kind}-{self.fingerprints[id(model)]}.pt2"
        if not path.is_file():
            start = time.perf_counter()
            build(kind, model, example, path)
            took = time.perf_counter() - start
            logger.info("compiled the %s ahead of time in %.1f s, kept in %s", kind.replace("-", " "), took, path)
        runner = self.runners[(kind, id(model))] = torch._inductor.aoti_load_package(str(path))
        return runner


def build(kind: str, model: Transformer, example: tuple[Tensor, ...], path: Path) -> None:
    """Export the decoder step (`_Step`: dynamic capacity, window and source length) or the encoder (`_Encoder`:
    dynamic source length) of `model`, compile it with AOTInductor into a package at `path`, written whole or not
    at all."""
    from torch._inductor import config as inductor

    positions = model.cfg.max_positions
    source = torch.export.Dim("source", min=2, max=positions)
    module: nn.Module
    if kind == "encoder":
        module, shapes = _Encoder(model), ({1: source},)
    else:
        capacity = torch.export.Dim("capacity", min=2, max=positions + 1)
        span = torch.export.Dim("span", min=2, max=positions + 1)
        cross = tuple({2: source} for _ in example[4:])  # *cross: one entry, as export groups a function's varargs
        module, shapes = _Step(model), (None, None, {1: capacity}, {0: span}, cross)
    with torch.no_grad():
        program = torch.export.export(module, example, dynamic_shapes=shapes, strict=False)
    path.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{kind}.", dir=path.parent))
    try:
        # Products of one row read the plain weights through MKL: oneDNN's packed layout measured slower there
        # (mtkit/runtime/packing.py), and inductor would pack every frozen weight.
        with inductor.patch({"cpp.weight_prepack": False}):
            built = torch._inductor.aoti_compile_and_package(program, package_path=str(scratch / path.name))
        os.replace(built, path)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
