"""Greedy search over a static cache, compiled: `--compile off | on | auto` for decoding with mtkit's engine.

Not in the paper: an engineering choice of how a decoding step runs. `static_states` (mtkit/model/static.py) has
the same shapes at every step of a sentence, so greedy search's steps of one sentence over it (`static_run`: at
each step the decoder, the output layer over the shortlist's rows, the log-softmax, the argmax, the sum of the
log-probabilities and the end checks, in a loop until the sentence or its window of positions ends) and the
encoder are each exported once per model with dynamic shapes and compiled ahead of time by AOTInductor into a C++
package kept on disk (mtkit/decode/exported.py: no Python between the kernels or between the steps; a second
process loads the packages instead of compiling). Only searches of one sentence take the static step
(`one_sentence`), and only their greedy steps over an unpadded source the compiled package: on more rows the
compiled step measured slower (docs/benchmarks.md).

- off: mtkit's eager step over its growing cache (the default).
- on: the compiled step over a static cache; a failure to export, compile or run falls back to the same step run
  eagerly, said in one sentence on the log.
- auto: compiled where it measured faster on this machine: one sentence's greedy search with this model, eager
  against compiled, in interleaved rounds, at start-up; the answer is kept per machine
  (mtkit/runtime/kept.py), so a later start reads it instead of timing (and compiles only if it said faster).
  Only fp32 on the CPU is measured; anything else stays eager (never measured there).
"""

from __future__ import annotations

import logging
import statistics
import time
from typing import Any

import torch
from torch import Tensor

from mtkit.config import EOS, DecodeConfig
from mtkit.config_decode import COMPILE
from mtkit.decode.beam import beam_search
from mtkit.decode.ensemble import Ensemble, StepFactory, make_step, static_steps
from mtkit.decode.exported import ExportedStates, NotTaken
from mtkit.decode.step import Step, encode
from mtkit.errors import MtkitError
from mtkit.model.transformer import Transformer
from mtkit.runtime.kept import remembered

logger = logging.getLogger(__name__)

MIN_SPEEDUP = 1.05  # how much faster the compiled step must decode a sentence for auto to choose it
ROUNDS = 5  # auto's interleaved rounds of one sentence's greedy search, each way
PROBE = list(range(5, 17))  # auto's sentence: 12 token ids (a Multi30k sentence's length)
PROBE_STEPS = 24  # its output's length limit


class Compiled:
    """Greedy search's steps of one sentence (`run`: `static_run`, its loop over the decoder step over the static
    cache, the output layer, its log-softmax and the argmax) and the source's encoding (`encode`) through their
    compiled packages (mtkit/decode/exported.py) where those take them: one sentence, unpadded, fp32. Everything
    else runs eagerly: a beam's or a batch's rows (slower compiled: timing one sentence's steps with 1 row and with 4,
    the lower measured 0.44x eager at start-up, where 1 row alone measured 1.19x), a step at the length limit or
    under a forced prefix (greedy search takes those from `log_probs`). Its first failure (to export, compile or
    run) logs one sentence and everything runs eagerly from then on (the package writes nothing the search keeps
    until it returns, so the steps it did not take are taken eagerly from where the search stands)."""

    def __init__(self) -> None:
        self.compiled: Any = ExportedStates()
        self.failed: str | None = None

    def run(self, model: Transformer, *args: Any) -> tuple[Tensor, Tensor, Tensor, Tensor] | None:
        """`static_run` through the compiled package where it takes the steps, else None: greedy search then takes
        them eagerly, one at a time."""
        out: tuple[Tensor, Tensor, Tensor, Tensor] | None = self.attempt(self.compiled.run, model, *args)
        return out

    def encode(self, model: Transformer, src: Tensor) -> tuple[Tensor | None, list[tuple[Tensor, Tensor]]]:
        """The source through the compiled encoder where it takes it (one unpadded sentence), else eagerly."""
        out = self.attempt(self.compiled.encode, model, src)
        return out if out is not None else encode(model, src)

    def attempt(self, compiled: Any, *args: Any) -> Any:
        """`compiled(*args)`, or None where it does not take them or compiling failed (its first failure logged)."""
        if self.failed is not None:
            return None
        try:
            return compiled(*args)
        except NotTaken:  # a call the package does not take: this one runs eagerly
            return None
        except Exception as exc:  # export and inductor raise many kinds (a missing compiler, a lowering it lacks)
            self.failed = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            logger.warning("the compiled decoder step failed (%s); decoding eagerly instead", self.failed[:200])
            return None


def compiled_steps() -> tuple[StepFactory, Compiled]:
    """The steps a search makes over a static cache, compiled, and the compiled function (whose `failed` says)."""
    states = Compiled()
    return static_steps(states.encode, states.run), states


def one_sentence(steps: StepFactory) -> StepFactory:
    """`steps` for a search of one sentence (a lone request, an interactive line), `make_step` for a batch: compiled,
    one sentence measured faster, and beam-4 batches of 32 took 2.6x eager's time (docs/benchmarks.md)."""

    def make(model: Transformer | Ensemble, src: Tensor, rows_per_sentence: int, capacity: int) -> Step:
        return (steps if src.size(0) == 1 else make_step)(model, src, rows_per_sentence, capacity)

    return make


def choose_steps(choice: str, models: list[Transformer], device: torch.device) -> tuple[StepFactory | None, str]:
    """The step factory `--compile choice` gives the engine (None: mtkit's eager step), and why, for the log."""
    if choice not in COMPILE:
        raise MtkitError(f"--compile must be one of {', '.join(COMPILE)}, not {choice!r}.")
    if choice == "off":
        return None, "eager (--compile off)"
    compiled = "compiled decoder step for greedy searches of one sentence"
    if choice == "on":
        return one_sentence(compiled_steps()[0]), f"{compiled} (--compile on)"
    model = models[0]
    if device.type != "cpu" or next(model.parameters()).dtype != torch.float32 or is_int8(model):
        return None, "eager: --compile auto measures fp32 on the CPU only, and this is not"
    cfg = model.cfg
    shape = {
        "d_model": cfg.d_model,
        "d_ff": cfg.d_ff,
        "heads": cfg.heads,
        "decoder_layers": cfg.decoder_layers,
        "vocab": cfg.target_vocab_size,
        "pre_norm": cfg.pre_norm,
    }
    # The steps a measurement times are the ones the engine gets: the packages it loads are loaded once.
    factory, states = compiled_steps()
    kept = remembered(
        "decoding: eager / compiled greedy search time", shape, device, lambda: speedup(model, factory, states)
    )
    ratio = float(kept.value)
    if ratio >= MIN_SPEEDUP:
        return one_sentence(factory), f"{compiled}: {ratio:.2f}x eager ({kept.note()})"
    return None, f"eager: the compiled step measured {ratio:.2f}x eager, under {MIN_SPEEDUP}x ({kept.note()})"


def is_int8(model: Transformer) -> bool:
    return any(type(m).__name__.startswith("Int8") for m in model.modules())


def speedup(model: Transformer, factory: StepFactory, compiled: Compiled) -> float:
    """Eager time / compiled time (the steps `factory` makes, through `compiled`) of one sentence's (PROBE) greedy
    search, its output at most PROBE_STEPS tokens long: the median of ROUNDS interleaved pairs after one untimed run
    each (the compiled one compiles there); 0.0 where compiling failed. Both searches take the same steps: a
    compiled search's outputs are eager's."""
    src = torch.tensor([[*PROBE, EOS]])
    config = DecodeConfig(beam=1, max_len_a=0.0, max_len_b=PROBE_STEPS)

    @torch.inference_mode()
    def run(steps: StepFactory) -> float:
        start = time.perf_counter()
        beam_search(model, src, config, steps=steps)
        return time.perf_counter() - start

    run(make_step)
    run(factory)
    if compiled.failed is not None:
        return 0.0
    ratios = []
    for i in range(ROUNDS):
        if i % 2:
            compiled_s, eager_s = run(factory), run(make_step)
        else:
            eager_s, compiled_s = run(make_step), run(factory)
        ratios.append(eager_s / compiled_s)
    return round(statistics.median(ratios), 3)
