"""Word alignment from the model's own attention: which source word each word of a translation came from.

An optional output beside the search, never part of it: beam search runs as it always does, and
only the callers that put markup back (mtkit/decode/markup.py) ask for this afterwards. For each
(source, translation) pair one teacher-forced pass reads the decoder's last-layer cross-attention
over the source while it predicts each target token, averaged over the heads: the same weights the
search saw when it chose that hypothesis (same model, same tokens). A target word's row is the mean
of its tokens' rows, a source word's weight the sum of its tokens'; the word is linked to the
source word of most weight (the end-of-sentence and language-token columns never win).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor

from mtkit.config import BOS, EOS, PAD
from mtkit.data.tokenizer import Tokenizer
from mtkit.decode.encode import with_target_lang
from mtkit.decode.scoring import padded
from mtkit.model.transformer import Transformer, split_heads

Links = list[int | None]


@torch.inference_mode()
def cross_attention(model: Transformer, sources: list[list[int]], targets: list[list[int]]) -> list[Tensor]:
    """Per pair, (len(target), len(source) + 1) weights: row m while predicting target token m, EOS last column."""
    device = next(model.parameters()).device
    src = padded([[*s, EOS] for s in sources], device)
    tgt_in = padded([[BOS, *y] for y in targets], device)
    layer = model.decoder[-1]
    attn = layer.cross_attn  # type: ignore[union-attr]
    captured: list[Tensor] = []
    # The query projection's output is the one piece of the last cross-attention not kept in the cache.
    hook = attn.q_proj.register_forward_hook(lambda module, args, out: captured.append(out))
    try:
        encoded = model.encode(src)
        model.decode(tgt_in, encoded)
    finally:
        hook.remove()
    q = split_heads(captured[-1].float(), attn.heads)  # (B, H, T, d_k)
    k, _ = attn.project_kv(encoded.memory)
    scores = q @ k.float().transpose(-1, -2) / math.sqrt(q.size(-1))  # (B, H, T, S)
    scores = scores.masked_fill(src.eq(PAD)[:, None, None, :], float("-inf"))
    weights = scores.softmax(-1).mean(1)  # (B, T, S)
    return [weights[b, : len(y), : len(s) + 1].cpu() for b, (s, y) in enumerate(zip(sources, targets))]


def word_links(
    model: Transformer,
    vocab: Tokenizer,
    pairs: Sequence[tuple[Sequence[str], Sequence[str]]],
    target_lang: str = "",
    limit: int = 1024,
) -> list[Links]:
    """For each (source words, target words): the source word each target word is linked to.

    Words are encoded one at a time (a SentencePiece piece never crosses a space, so this is the
    sentence's own tokenization). A pair longer than `limit` tokens on either side gets no links
    (all None: the caller places its tags proportionally).
    """
    prefix = vocab.encode_batch(with_target_lang(vocab, [""], target_lang))[0] if target_lang else []
    todo, src, tgt, owners = [], [], [], []
    for k, (s_words, t_words) in enumerate(pairs):
        s_ids = vocab.encode_batch(list(s_words)) if s_words else []
        t_ids = vocab.encode_target_batch(list(t_words)) if t_words else []
        s_flat = prefix + [i for ids in s_ids for i in ids]
        t_flat = [i for ids in t_ids for i in ids]
        if not t_flat or len(s_flat) == len(prefix) or len(s_flat) >= limit or len(t_flat) >= limit:
            continue  # no tokens on a side (words SentencePiece makes nothing of): placed proportionally
        todo.append(k)
        src.append(s_flat)
        tgt.append(t_flat)
        owners.append(
            ([j for j, ids in enumerate(s_ids) for _ in ids], [j for j, ids in enumerate(t_ids) for _ in ids])
        )
    links: list[Links] = [[None] * len(t) for _, t in pairs]
    if not todo:
        return links
    for k, weights, (s_owner, t_owner) in zip(todo, cross_attention(model, src, tgt), owners):
        n_src, n_tgt = len(pairs[k][0]), len(pairs[k][1])
        by_word = torch.zeros(n_tgt, n_src)
        counts = torch.zeros(n_tgt, 1)
        columns = torch.tensor(s_owner)  # source token -> source word
        token_rows = weights[:, len(prefix) : len(prefix) + len(s_owner)]  # drop the language token and EOS
        per_word = torch.zeros(weights.size(0), n_src).index_add_(1, columns, token_rows)
        by_word.index_add_(0, torch.tensor(t_owner), per_word)
        counts.index_add_(0, torch.tensor(t_owner), torch.ones(len(t_owner), 1))
        links[k] = [int(i) for i in (by_word / counts.clamp(min=1)).argmax(1)]
    return links
