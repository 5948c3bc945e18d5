"""Dual conditional cross-entropy of a pair, for `mtkit clean --dual-xent` (Junczys-Dowmunt 2018, "Dual
Conditional Cross-Entropy Filtering of Noisy Parallel Corpora", WMT).

Two models trained on clean data, one for each direction, read the pair by forced decoding: H_f is the
forward model's cross-entropy of the target given the source, H_b the backward model's of the source given
the target, each in nats per token (the end-of-sentence token included). The pair's score is

    |H_f - H_b| + (H_f + H_b) / 2

low when both models find the pair likely and agree on it: a misaligned pair of two well-formed sentences in the
right languages, which no rule sees, is unlikely to both. `mtkit clean --dual-xent-max X` drops pairs scoring
above X (the paper keeps the best-scored share instead; a threshold keeps the cleaning a stream).
"""

from __future__ import annotations

import typing
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import torch

from mtkit import checkpoint
from mtkit.config import BOS, EOS, PAD
from mtkit.errors import MtkitError
from mtkit.marian.vocab import load_tokenizer

if typing.TYPE_CHECKING:
    from mtkit.model.transformer import Transformer

BATCH_PAIRS = 64


class ForcedDecoder:
    """One mtkit model and its vocabulary, giving the cross-entropy of targets given sources."""

    def __init__(self, path: Path, device: str = "cpu"):
        ckpt = checkpoint.load(path)
        if not ckpt.get("vocab"):
            raise MtkitError(f"{path} holds no SentencePiece vocabulary, so it cannot read text.")
        checkpoint.check_finite(ckpt, path)
        self.model = typing.cast("Transformer", checkpoint.build_from(ckpt)).to(torch.device(device)).float().eval()
        self.vocab = load_tokenizer(ckpt["vocab"])
        self.device = torch.device(device)
        self.limit = self.model.cfg.max_positions - 1

    @torch.no_grad()
    def cross_entropy(self, sources: Sequence[str], targets: Sequence[str]) -> np.ndarray:
        """Nats per target token (EOS included) of each target given its source, forced-decoded."""
        src_ids = [ids[: self.limit] + [EOS] for ids in self.vocab.encode_batch(sources)]
        tgt_ids = [ids[: self.limit] for ids in self.vocab.encode_target_batch(targets)]
        out = np.zeros(len(src_ids))
        order = sorted(range(len(src_ids)), key=lambda i: len(src_ids[i]) + len(tgt_ids[i]))
        for start in range(0, len(order), BATCH_PAIRS):
            rows = order[start : start + BATCH_PAIRS]
            src = _padded([src_ids[i] for i in rows], self.device)
            tgt_in = _padded([[BOS, *tgt_ids[i]] for i in rows], self.device)
            tgt_out = _padded([[*tgt_ids[i], EOS] for i in rows], self.device)
            logprobs = torch.log_softmax(self.model(src, tgt_in).float(), dim=-1)
            nll = -logprobs.gather(-1, tgt_out.unsqueeze(-1)).squeeze(-1)
            real = tgt_out.ne(PAD)
            per_token = (nll * real).sum(1) / real.sum(1)
            out[rows] = per_token.cpu().numpy()
        return out


def _padded(rows: list[list[int]], device: torch.device) -> torch.Tensor:
    width = max(len(r) for r in rows)
    return torch.tensor([r + [PAD] * (width - len(r)) for r in rows], dtype=torch.long, device=device)


def dual_scores(forward: ForcedDecoder, backward: ForcedDecoder, src: Sequence[str], tgt: Sequence[str]) -> np.ndarray:
    h_f = forward.cross_entropy(src, tgt)
    h_b = backward.cross_entropy(tgt, src)
    return np.abs(h_f - h_b) + 0.5 * (h_f + h_b)


def dual_xent_filter(
    forward: Path, backward: Path, device: str = "cpu"
) -> Callable[[list[str], list[str]], list[float]]:
    """The scorer `mtkit.data.webclean` calls on each chunk's surviving pairs."""
    f, b = ForcedDecoder(forward, device), ForcedDecoder(backward, device)
    return lambda src, tgt: dual_scores(f, b, src, tgt).tolist() if src else []
