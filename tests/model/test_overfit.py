"""The whole model learns: a tiny Transformer memorises a few sentence pairs in seconds."""

import torch

import mtkit
from mtkit.config import BOS, EOS, PAD
from mtkit.train.loss import label_smoothed_sums


def test_tiny_model_overfits_a_few_pairs():
    torch.manual_seed(0)
    pairs = [([5, 6, 7], [8, 9]), ([10, 11], [12, 13, 14]), ([15, 16, 17, 18], [19]), ([6, 10, 15], [20, 21, 22, 23])]
    S = max(len(s) for s, _ in pairs) + 1
    T = max(len(t) for _, t in pairs) + 1
    src = torch.tensor([s + [EOS] + [PAD] * (S - len(s) - 1) for s, _ in pairs])
    tgt_in = torch.tensor([[BOS] + t + [PAD] * (T - len(t) - 1) for _, t in pairs])
    tgt_out = torch.tensor([t + [EOS] + [PAD] * (T - len(t) - 1) for _, t in pairs])

    tokens = int(tgt_out.ne(PAD).sum())
    model = mtkit.build_model("tiny", 30, dropout=0.0)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3, betas=(0.9, 0.98), eps=1e-9)
    for _ in range(150):
        loss, _ = label_smoothed_sums(model(src, tgt_in), tgt_out, smoothing=0.0)
        optimizer.zero_grad()
        (loss / tokens).backward()
        optimizer.step()
    model.eval()
    with torch.no_grad():
        _, nll = label_smoothed_sums(model(src, tgt_in), tgt_out, smoothing=0.0)
    assert nll.item() / tokens < 0.05  # from ~ln(30) = 3.4 at the start
