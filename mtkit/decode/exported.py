"""Greedy search of one sentence and the encoder, compiled ahead of time: torch.export, then AOTInductor, a package
each.

Not in the paper: an engineering choice of how `--compile` runs decoding. torch.compile wraps its compiled graph in
TorchDynamo's guards and AOTAutograd's runtime wrappers, which run in Python at every call: for one row of the
distilled student (one decoder layer, 256 wide) they cost about as much as the compiled graph saved, and the
compiled step measured level with eager. Exported and compiled ahead of time, a piece is one call into a C++
runner (the model's weights its constants) with nothing in Python between its kernels (docs/benchmarks.md, "A
static cache and a compiled step").

Two packages a model: `greedy-run`, `static_run` (mtkit/model/static.py: greedy search's steps of one sentence,
each the decoder step over the static cache, the output layer over the rows it is given, the log-softmax and the
argmax, in a loop that runs inside the package until the sentence ends or its window of positions does), with the
cache's capacity, the window, the source length and the output rows as dynamic dimensions, so one package serves
every window of every sentence; and `encoder`, an unpadded sentence's source to each decoder layer's
cross-attention keys and values, its length dynamic. They are kept on disk under mtkit's cache directory
(`$MTKIT_CACHE`, see mtkit/data/fetch.py), named by a hash of what they were built from (the model's weights and
shapes, the code they were traced from, torch's version, the CPU), so a later process loads them instead of
compiling again; each is written whole or not at all. A package is a shared library compiled on this machine from
this model: it is loaded only from that directory, as trusted as the measurements kept beside it
(mtkit/runtime/kept.py).
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import tempfile
import time
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from mtkit.config import BOS, PAD
from mtkit.data.fetch import default_cache_dir
from mtkit.device import cpu_flags, cpu_name
from mtkit.model.linear import Rows
from mtkit.model.static import StaticCache, static_run
from mtkit.model.transformer import Transformer

logger = logging.getLogger(__name__)

FOLDER = "compiled"  # under mtkit's cache directory


class _Run(nn.Module):
    """`static_run` for one row and an unpadded source, with the window's length carried by a tensor's shape
    (`span`: any (span,) tensor) so that torch.export sees it as a dimension, not a constant."""

    def __init__(self, model: Transformer):
        super().__init__()
        self.model = model

    def forward(
        self,
        tokens: Tensor,
        position: Tensor,
        history: Tensor,
        span: Tensor,
        weight: Tensor,
        bias: Tensor,
        ids: Tensor,
        logp: Tensor,
        stop: Tensor,
        *cross: Tensor,
    ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        cache = StaticCache(history, [(cross[i], cross[i + 1]) for i in range(0, len(cross), 2)], None, span.size(0))
        return static_run(self.model, tokens, position, cache, Rows(weight, bias), ids, logp, stop)


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
    """What a package depends on: the model's weights and shapes, the code it was traced from (this module, the
    model's and the kernels'), torch's version and the CPU."""
    digest = hashlib.sha256()
    digest.update(f"{torch.__version__}|{cpu_name()}|{' '.join(sorted(cpu_flags()))}|{model.cfg}".encode())
    here = Path(__file__).resolve()
    for source in sorted(
        [here, *here.parents[1].joinpath("model").glob("*.py"), *here.parents[1].joinpath("kernels").glob("*.py")]
    ):
        digest.update(source.read_bytes())
    for name, tensor in sorted({**dict(model.named_parameters()), **dict(model.named_buffers())}.items()):
        digest.update(name.encode())
        digest.update(tensor.detach().contiguous().view(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()[:32]


@dataclass
class Packages:
    """A model's packages as loaded: their name's hash (`fingerprint`), and the runner of each kind loaded so far."""

    fingerprint: str
    runners: dict[str, Any] = field(default_factory=dict)


class NotTaken(Exception):
    """A call the package does not take; its caller runs it eagerly."""


class ExportedStates:
    """A `RunFn` (mtkit/model/static.py) and an `EncodeFn` (mtkit/decode/step.py), each model's through its
    AOTInductor packages, built or loaded on their first call. Calls they cannot take (more than one row, a padded
    source, a dimension under 2, which export specialises) raise NotTaken; the caller runs those eagerly."""

    def __init__(self, folder: Path | None = None):
        self.folder = folder
        # Per model (kept as long as it lives, never by an id a later model may reuse): its packages.
        self.packages: weakref.WeakKeyDictionary[Transformer, Packages] = weakref.WeakKeyDictionary()
        self.blanks: dict[int, Tensor] = {}  # n -> zeros (n,): a window's length as a shape, a bias of nothing

    def run(
        self,
        model: Transformer,
        tokens: Tensor,
        position: Tensor,
        cache: StaticCache,
        rows: Rows,
        ids: Tensor,
        logp: Tensor,
        stop: Tensor,
    ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        history, span, weight = cache.history, cache.span, rows.weight
        if tokens.size(0) != 1 or history.size(2) != 1 or cache.src_mask is not None:
            raise NotTaken("the exported search takes one row of an unpadded source")
        if min(span, history.size(1), cache.cross[0][0].size(2)) < 2 or weight.size(0) < max(PAD, BOS) + 1:
            raise NotTaken("the exported search takes dimensions of 2 and more, and rows past PAD's and BOS's")
        if weight.dtype != torch.float32:
            raise NotTaken("the exported search takes fp32")
        bias = self.blank(weight.size(0)) if rows.bias is None else rows.bias  # x W^T + 0 is x W^T, bit for bit
        args = [tokens, position, history, self.blank(span), weight, bias, ids, logp, stop]
        args += [t for pair in cache.cross for t in pair]
        out, reached, total, written = self.runner("greedy-run", model, tuple(args))(args)
        return out, reached, total, written

    def encode(self, model: Transformer, src: Tensor) -> tuple[Tensor | None, list[tuple[Tensor, Tensor]]]:
        if src.size(0) != 1 or src.size(1) < 2 or bool(src.eq(PAD).any()):
            raise NotTaken("the exported encoder takes one unpadded source of 2 tokens and more")
        flat = self.runner("encoder", model, (src,))([src])
        return None, [(flat[i], flat[i + 1]) for i in range(0, len(flat), 2)]

    def blank(self, n: int) -> Tensor:
        """Zeros (n,), made once for each n (read only, by the packages)."""
        zeros = self.blanks.get(n)
        if zeros is None:
            zeros = self.blanks[n] = torch.zeros(n)
        return zeros

    def runner(self, kind: str, model: Transformer, example: tuple[Tensor, ...]) -> Any:
        """The model's runner of `kind`: its package from the cache directory, built there first if missing."""
        packages = self.packages.get(model)
        if packages is None:  # the model's hash, once for both of its packages
            packages = self.packages[model] = Packages(fingerprint(model))
        runner = packages.runners.get(kind)
        if runner is not None:
            return runner
        folder = self.folder or default_cache_dir() / FOLDER
        path = folder / f"{kind}-{packages.fingerprint}.pt2"
        if not path.is_file():
            start = time.perf_counter()
            build(kind, model, example, path)
            took = time.perf_counter() - start
            logger.info("compiled the %s ahead of time in %.1f s, kept in %s", kind.replace("-", " "), took, path)
        package = torch._inductor.aoti_load_package(str(path))
        # Its loader's `run` takes and gives flat lists of tensors. The package's own __call__ parses its call
        # spec (JSON) and flattens and unflattens with pytree in Python at every call: for the distilled student's
        # one-step package that came before `greedy-run`, about an eighth of a call's time (an ad-hoc timing on an
        # Intel Xeon, one thread); a call now runs several steps, so less of it, but no call needs that work.
        loader = getattr(package, "loader", None)
        runner = packages.runners[kind] = loader.run if loader is not None else lambda flat: package(*flat)
        return runner


def build(kind: str, model: Transformer, example: tuple[Tensor, ...], path: Path) -> None:
    """Export greedy search of one sentence (`_Run`: dynamic capacity, window, source length and output rows) or the
    encoder (`_Encoder`: dynamic source length) of `model`, compile it with AOTInductor into a package at `path`,
    written whole or not at all."""
    from torch._inductor import config as inductor

    positions = model.cfg.max_positions
    source = torch.export.Dim("source", min=2, max=positions)
    module: nn.Module
    if kind == "encoder":
        module, shapes = _Encoder(model), ({1: source},)
    else:
        capacity = torch.export.Dim("capacity", min=2, max=positions + 1)
        span = torch.export.Dim("span", min=2, max=positions + 1)
        # The output rows hold the columns PAD and BOS that `best_column` masks: more than max(PAD, BOS) of them.
        rows = torch.export.Dim("rows", min=max(PAD, BOS) + 1, max=model.cfg.target_vocab_size)
        cross = tuple({2: source} for _ in example[9:])  # *cross: one entry, as export groups a function's varargs
        module = _Run(model)
        shapes = (None, None, {1: capacity}, {0: span}, {0: rows}, {0: rows}, {0: rows}, None, None, cross)
    # Copies: an input that is one of the model's own tensors (the tied output layer's weight is the embedding
    # table) would be traced as that parameter, and the package would read the rows it is given as the table.
    example = tuple(t.clone() for t in example)
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
