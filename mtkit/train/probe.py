"""--max-tokens auto: the most tokens a batch that fit on this GPU, found at start by trying them.

Not in the paper: an engineering choice. The paper's update is ~25,000 source and ~25,000 target tokens
(section 5.1); fairseq-style trainers reach it with a fixed batch (4,096 tokens) and gradient accumulation,
seven steps an update. A GPU that holds the whole update runs it as one step: one launch sequence, one
gradient reduction, and larger products. What fits depends on the model, the precision, the attention
kernel and the GPU, so it is measured, not computed: forward and backward of the longest batch shape the
run will see (its longest training pair, padded to its bucket), with the Adam moments' memory held aside
(the optimizer allocates them at its first step), at the largest size worth having, then halving on
torch.OutOfMemoryError until one fits, then bisection between that and the last failure (to ~3%). 90% of
the result (MARGIN: the allocator's fragmentation over a long run, CUDA graph pools, other batch shapes)
is the most a step may hold.

The rule for the update (docs/training.md): with a token target per update (TrainConfig.update_tokens,
the base and big presets' 25,000), the search stops at this rank's share of it, ceil(update_tokens /
ranks), and the share is split evenly over the fewest steps that fit: update_freq = ceil(share / fit),
max_tokens = ceil(share / update_freq); TrainConfig.for_world (run once, by settings.settle) then derives the
same update_freq. So an
update stays ~25k tokens a side, as one step where it fits. Without a target (an explicit --update-freq,
or the tiny and small presets) auto is the most that fit, up to CEILING tokens a step.

On a CPU (or MPS) nothing is probed: auto is the preset's max_tokens (`max_tokens_fallback`), and the
first log line says so. Under torchrun every rank probes its own GPU and all take the smallest result.
A resumed run keeps the value its checkpoint holds (mtkit/train/resume.py): another probe could answer
another number, and another max_tokens makes other batches.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from typing import Any, NamedTuple

import torch

from mtkit.config import TrainConfig
from mtkit.data.batching import bucket_length, bucket_lengths
from mtkit.data.dataset import ParallelSplit
from mtkit.errors import MtkitError
from mtkit.train import distributed as dist
from mtkit.train.loss import label_smoothed_sums
from mtkit.train.precision import Precision

logger = logging.getLogger(__name__)

MARGIN = 0.9  # of the largest batch that fitted: what a step may hold
CEILING = 65_536  # tokens a step at most, where no update target bounds the search
STEPS = 32  # bisection stops within 1/STEPS of the fit (or one row)
DEVICE_WORDS = {"cuda": "GPU", "cpu": "CPU"}
PROBED = ("cuda",)  # the device types whose memory is probed; elsewhere auto is the preset's max_tokens


class Resolved(NamedTuple):
    """The config with max_tokens an integer (and update_freq derived from it), and the first log line's fields."""

    cfg: TrainConfig
    fields: dict[str, Any]


def unprobed(cfg: TrainConfig) -> TrainConfig:
    """`cfg` with max_tokens auto taken as a CPU takes it: the preset's value."""
    if cfg.max_tokens == "auto":
        cfg = dataclasses.replace(cfg, max_tokens=cfg.max_tokens_fallback)
    return cfg


def share_of_update(cfg: TrainConfig, world_size: int) -> int:
    """The most tokens worth probing on one rank: its share of the update's target, else CEILING."""
    return -(-cfg.update_tokens // world_size) if cfg.update_tokens > 0 else CEILING


def per_step(fit: int, share: int) -> int:
    """max_tokens for a rank that fits `fit` tokens a step and has `share` tokens of each update to hold:
    the share split evenly over the fewest steps that hold it (the module docstring's rule)."""
    steps = -(-share // max(fit, 1))
    return -(-share // steps)


def largest_fit(fits: Callable[[int], bool], low: int, high: int, resolution: Callable[[int], int]) -> int | None:
    """The largest n in [low, high] with fits(n), to within resolution(n), assuming that fitting is monotone;
    None when not even `low` fits. `high` first (the common answer), then halving, then bisection."""
    good, bad = high, None
    while not fits(good):
        if good <= low:
            return None
        bad, good = good, max(good // 2, low)
    while bad is not None and bad - good > resolution(good):
        middle = (good + bad) // 2
        good, bad = (middle, bad) if fits(middle) else (good, middle)
    return good


def probe_length(split: ParallelSplit, length_buckets: str, max_positions: int) -> int:
    """The longest batch length the run will see: its longest pair (BOS/EOS included), padded to its bucket."""
    longest = min(int(max(split.src_sizes.max(initial=0), split.tgt_sizes.max(initial=0))) + 1, max_positions)
    if length_buckets == "none":
        return longest
    return int(bucket_length(longest, bucket_lengths(length_buckets, max_positions)))


def batch_fits(model: torch.nn.Module, precision: Precision, rows: int, length: int, device: torch.device) -> bool:
    """Whether forward and backward of `rows` x `length` tokens on each side fit in the device's memory.

    The run's RNG streams are untouched (forked) and the gradients are dropped, so the run is the one it
    would have been with this number given; the tokens are random ids above the special ones.
    """
    vocab = model.tgt_embed.table.num_embeddings  # type: ignore[union-attr]
    devices = [device] if device.type == "cuda" else []
    try:
        with torch.random.fork_rng(devices=devices):
            tokens = torch.randint(4, max(vocab, 5), (3, rows, length), device=device)
            with precision.autocast():
                logits = model(tokens[0], tokens[1])
            loss, _ = label_smoothed_sums(logits, tokens[2], 0.1)
            precision.backward(loss * 0.0)
            del tokens, logits, loss
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        fits = True
    except torch.OutOfMemoryError:
        fits = False  # the exception and its frames are gone once this block ends: their tensors are freed
    model.zero_grad(set_to_none=True)
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return fits


def resolve(
    cfg: TrainConfig,
    model: torch.nn.Module,
    precision: Precision,
    split: ParallelSplit,
    world: dist.World,
    max_positions: int,
    fits: Callable[[int, int], bool] | None = None,
) -> Resolved:
    """`cfg` with --max-tokens auto resolved for `world` (a GPU probes; see the module docstring); its update_freq
    is derived from it afterwards, once (`TrainConfig.for_world`, by settings.settle).

    `fits(rows, length)`: whether a batch of that shape fits; by default `batch_fits` on the model.
    """
    if cfg.max_tokens != "auto":
        return Resolved(cfg, {})
    if world.device.type not in PROBED:
        tokens = cfg.max_tokens_fallback
        why = f"auto: the preset's {tokens:,} on {world.device.type} (only a CUDA GPU is probed)"
        return Resolved(unprobed(cfg), {"max_tokens_why": why})
    length = probe_length(split, cfg.length_buckets, max_positions)
    share = share_of_update(cfg, world.size)
    held = hold_optimizer_memory(model) if fits is None else []
    try_fit = fits or (lambda rows, n: batch_fits(model, precision, rows, n, world.device))
    found = probe(lambda tokens: try_fit(max(tokens // length, 1), length), length, share)
    del held
    gpu = fits is None and world.device.type == "cuda"
    where = f"this {DEVICE_WORDS.get(world.device.type, world.device.type)}"
    if gpu:  # the trials went to the memory's limit: the run's own peak is what matters from here
        torch.cuda.reset_peak_memory_stats(world.device)
    answers = dist.all_gather_objects(found, world)  # every rank's GPU: the smallest answer holds everywhere
    fit = None if None in answers else min(answers)
    if fit is None:
        raise MtkitError(
            f"one batch of {length} tokens (the longest training pair) does not fit in this GPU's memory "
            "with the model and its optimizer; use a smaller model or --precision bf16."
        )
    tokens = per_step(int(fit * MARGIN), share) if cfg.update_tokens > 0 else int(fit * MARGIN)
    resolved = dataclasses.replace(cfg, max_tokens=max(tokens, length))
    why = (
        f"auto: {fit:,} tokens of the longest batch shape ({length} positions) fit forward and backward on "
        f"{torch.cuda.get_device_name(world.device) if gpu else where}; {MARGIN:.0%} of it"
        + (f", a share of an update of ~{cfg.update_tokens:,} tokens" if cfg.update_tokens else "")
    )
    logger.debug("--max-tokens %s", why)
    return Resolved(resolved, {"max_tokens_why": why})


def probe(fits: Callable[[int], bool], length: int, share: int) -> int | None:
    """The largest token count that fits (`largest_fit`), searched up to what the margin leaves of `share`."""
    high = max(int(share / MARGIN) + 1, length)
    return largest_fit(fits, length, high, lambda good: max(length, good // STEPS))


def hold_optimizer_memory(model: torch.nn.Module) -> list[torch.Tensor]:
    """Tensors the size of Adam's two moments: held during the probe, as the optimizer holds them after."""
    return [torch.empty_like(p) for p in model.parameters() if p.requires_grad for _ in range(2)]
