"""The decoder's key/value cache for incremental decoding: explicit data that goes into a decode step and comes back.

Not in the paper (section 3.2.3 only says that decoder positions attend to earlier ones): the layout and the
in-place moves that make a beam search's per-step reorder cheap. Shapes: N rows (beams of n sentences),
H heads, d_k = d_model / H, C positions of room, S source length, L decoder layers.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass(frozen=True)
class LayerCache:
    """One decoder layer's keys and values.

    self_k, self_v: (C, N, H, d_k), time first, with room for C positions of which the cache's
    `length` are filled; time first keeps the filled part of a row set one block, so a step
    writes one slice (no torch.cat per step). During a search they are views of the cache's
    `history` (see DecoderCache).
    cross_k, cross_v: (n, H, S, d_k), one per sentence, shared by its N / n rows (beams).
    """

    self_k: Tensor
    self_v: Tensor
    cross_k: Tensor
    cross_v: Tensor


def append_history(buffer: Tensor, new: Tensor, t0: int) -> Tensor:
    """Write keys or values (N, H, T, d_k) at positions t0.. of a time-first buffer (C, N, H, d_k).

    A buffer without room grows to twice its size (amortised O(1) per step); an empty one at
    t0 = 0 (teacher forcing) becomes a view of `new`, so training copies nothing.
    """
    T = new.size(2)
    new = new.permute(2, 0, 1, 3)  # (T, N, H, d_k)
    if t0 + T <= buffer.size(0):
        buffer[t0 : t0 + T] = new
        return buffer
    if t0 == 0:
        return new
    grown = buffer.new_empty(max(2 * buffer.size(0), t0 + T), *buffer.shape[1:])
    grown[:t0] = buffer[:t0]
    grown[t0 : t0 + T] = new
    return grown


def moved(index: Tensor) -> Tensor | None:
    """The positions i where index[i] != i (what an in-place reorder must copy); None when there are none."""
    changed = index.ne(torch.arange(index.numel(), device=index.device)).nonzero().squeeze(1)
    return changed if changed.numel() else None


def _take(buffer: Tensor, index: Tensor, changed: Tensor | None) -> Tensor:
    """buffer's entries `index` along dim 0.

    In place where it can be: the first index.numel() entries are kept and only the `changed`
    ones copied (a sentence that keeps its place costs nothing). All sources are read before
    any is written, so sources and destinations may overlap. A buffer with too few entries, or
    one autograd tracks, gets a new tensor instead.
    """
    n = index.numel()
    if (buffer.requires_grad and torch.is_grad_enabled()) or n > buffer.size(0):
        return buffer.index_select(0, index)
    kept = buffer[:n]
    if changed is not None:
        kept.index_copy_(0, changed, buffer[index[changed]])
    return kept


@dataclass(frozen=True)
class DecoderCache:
    """Everything incremental decoding carries between steps, returned anew by each step.

    A cache is used once: `decode_step` and `reorder` write into its buffers, so only the
    cache they return is valid afterwards.

    history: (2L, C, R, H, d_k), every layer's self-attention keys and values (self_k, self_v of
    layer i are history[2i, :, :N] and history[2i + 1, :, :N]) with room for C positions and R >= N
    rows; None until the cache is made with room (`init_cache(capacity=...)`) or first reordered, and
    always None under autograd. One buffer lets a reorder move the rows of all layers in two operations
    (`move_rows`).
    """

    layers: tuple[LayerCache, ...]
    src_mask: Tensor | None  # (n, 1, 1, S) bool, True = real token; None = no padding
    length: int  # target positions decoded so far
    history: Tensor | None = None

    @property
    def beams(self) -> int:
        """Rows per sentence: the rows of a sentence are adjacent and share its cross-attention keys/values."""
        first = self.layers[0]
        return first.self_k.size(1) // first.cross_k.size(0)

    def reorder(self, rows: Tensor, sentences: Tensor | None = None) -> DecoderCache:
        """Select (and repeat) rows, e.g. to follow the surviving beams; the one way a cache is reordered.

        Without `sentences`, rows may come from any sentence and each new row gets its own copy
        of its sentence's cross-attention keys/values. With `sentences` (the kept sentences, in
        their new order), rows are that many equal groups, each group within its sentence (the
        surviving beams of the sentences still searching): cross-attention keys/values stay one
        per sentence. Rows and sentences that keep their place are not copied, so a search that
        keeps beams in their slots and fills the places of finished sentences from the end
        (mtkit/decode/beam.py) copies little per step.
        """
        cross = torch.div(rows, self.beams, rounding_mode="floor") if sentences is None else sentences
        changed = moved(cross)
        cross_kv = [(_take(c.cross_k, cross, changed), _take(c.cross_v, cross, changed)) for c in self.layers]
        mask = None if self.src_mask is None else self.src_mask[cross]
        if torch.is_grad_enabled():  # autograd: new tensors of their own (two views of one buffer confuse it)
            layers = [
                LayerCache(
                    c.self_k[: self.length].index_select(1, rows), c.self_v[: self.length].index_select(1, rows), *kv
                )
                for c, kv in zip(self.layers, cross_kv)
            ]
            return DecoderCache(tuple(layers), mask, self.length)
        history = self.history
        if history is not None and rows.numel() <= history.size(2):
            changed = moved(rows)
            if changed is not None and self.length:
                move_rows(history, rows, changed, self.length)
        else:
            history = self.gather_history(rows)
        return DecoderCache(layer_views(history, rows.numel(), cross_kv), mask, self.length, history)

    def gather_history(self, rows: Tensor) -> Tensor:
        """A new history holding `rows` of every layer's filled positions, with the same room."""
        first = self.layers[0].self_k
        capacity = max(first.size(0), self.length)
        history = first.new_empty(2 * len(self.layers), capacity, rows.numel(), *first.shape[2:])
        for i, c in enumerate(self.layers):
            for j, buffer in enumerate((c.self_k, c.self_v)):
                torch.index_select(buffer[: self.length], 1, rows, out=history[2 * i + j, : self.length])
        return history

    def with_room(self, positions: int) -> DecoderCache:
        """This cache with room for at least `positions` target positions (twice its room when that is more)."""
        history = self.history
        if history is None or positions <= history.size(1):
            return self
        rows = self.layers[0].self_k.size(1)
        grown = history.new_empty(history.size(0), max(2 * history.size(1), positions), rows, *history.shape[3:])
        grown[:, : self.length] = history[:, : self.length, :rows]
        cross_kv = [(c.cross_k, c.cross_v) for c in self.layers]
        return DecoderCache(layer_views(grown, rows, cross_kv), self.src_mask, self.length, grown)

    @staticmethod
    def start(cross_kv: list[tuple[Tensor, Tensor]], src_mask: Tensor | None, capacity: int) -> DecoderCache:
        """An empty cache over each layer's cross-attention keys/values (B, H, S, d_k), with room for `capacity`
        target positions (it grows beyond them when needed; 0 suits teacher forcing)."""
        B, H, _, d_k = cross_kv[0][0].shape
        if capacity == 0 or torch.is_grad_enabled():
            # Teacher forcing: keys/values become views of their projections. Autograd: buffers of their own.
            empty = (capacity, B, H, d_k)
            layers = [LayerCache(k.new_empty(empty), k.new_empty(empty), k, v) for k, v in cross_kv]
            return DecoderCache(tuple(layers), src_mask, 0)
        history = cross_kv[0][0].new_empty(2 * len(cross_kv), capacity, B, H, d_k)  # (2L, C, B, H, d_k)
        return DecoderCache(layer_views(history, B, cross_kv), src_mask, 0, history)


def move_rows(history: Tensor, rows: Tensor, changed: Tensor, length: int) -> None:
    """history[:, :length, i] = history[:, :length, rows[i]] for the `changed` rows i, in place.

    As one gather and one scatter of whole (H * d_k) rows of the buffer seen as a matrix, for all layers
    at once, instead of indexing each layer's (length, N, H, d_k) keys and values, which reads them element
    by element, which measured about half as fast (docs/benchmarks.md, "Figures behind the code's choices": this
    module).
    Sources are read before any row is written.
    """
    blocks, capacity, room = history.shape[:3]
    matrix = history.view(blocks * capacity * room, -1)  # (2L * C * R, H * d_k)
    block, position = (torch.arange(n, device=rows.device) for n in (blocks, length))
    starts = ((block[:, None] * capacity + position) * room).view(-1, 1)  # (2L * length, 1): each position's row 0
    matrix.index_copy_(0, (starts + changed).view(-1), matrix.index_select(0, (starts + rows[changed]).view(-1)))


def layer_views(history: Tensor, rows: int, cross_kv: list[tuple[Tensor, Tensor]]) -> tuple[LayerCache, ...]:
    """Each layer's cache: its self-attention keys/values as views of `rows` rows of `history`."""
    return tuple(
        LayerCache(history[2 * i, :, :rows], history[2 * i + 1, :, :rows], k, v) for i, (k, v) in enumerate(cross_kv)
    )
