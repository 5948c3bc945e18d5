"""One update means the same with any split: accumulation, and two gloo processes under torchrun."""

from __future__ import annotations

import json
import textwrap

import numpy as np
import pytest
import torch

from mtkit import checkpoint
from mtkit.config import model_config
from mtkit.data.batching import epoch_batches, plan_batches
from mtkit.data.dataset import open_data
from mtkit.model import Transformer
from mtkit.runtime import Runtime
from mtkit.train.precision import Precision
from mtkit.train.trainer import accumulate
from tests.support.cli import run_cli
from tests.support.torchrun import torchrun


def grads_after(model: Transformer, split, group: list[np.ndarray], tokens: int) -> dict[str, torch.Tensor]:
    model.zero_grad(set_to_none=True)
    accumulate(model, split, group, 1.0 / tokens, Precision(Runtime(), torch.device("cpu")), 0.1, torch.device("cpu"))
    return {n: p.grad.clone() for n, p in model.named_parameters()}


def test_one_batch_a_plus_b_equals_update_freq_2_over_a_then_b(toy_data) -> None:
    data = open_data(toy_data)
    split = data.split("train")
    torch.manual_seed(0)
    model = Transformer(model_config("tiny", data.vocab_size))
    model.eval()  # dropout off: the two ways must see the same function
    plan = plan_batches(split.src_sizes, split.tgt_sizes, 400, seed=1)
    a, b = epoch_batches(plan, 0)[:2]
    tokens = int((split.tgt_sizes[a] + 1).sum() + (split.tgt_sizes[b] + 1).sum())
    together = grads_after(model, split, [np.concatenate([a, b])], tokens)
    accumulated = grads_after(model, split, [a, b], tokens)
    assert set(together) == set(accumulated)
    for name, grad in together.items():
        torch.testing.assert_close(accumulated[name], grad, rtol=0, atol=1e-5, msg=name)
    assert max(g.abs().max().item() for g in together.values()) > 1e-3  # a real gradient, not zeros


RANK_SCRIPT = textwrap.dedent("""
    import json, os, sys, torch
    from mtkit.cli import app
    from mtkit.train import trainer
    if os.environ["RANK"] == "1":  # what rank 1 would choose alone; rank 0's choice must win
        os.environ.update(MTKIT_CPU_MATMUL="default", MTKIT_AUTO_PRECISION="bf16")
    made = []  # the runtime each rank trains with
    class Recorded(trainer.Precision):
        def __init__(self, runtime, device):
            super().__init__(runtime, device)
            made.append(runtime)
    trainer.Precision = Recorded
    real = trainer.train
    def keep_weights(*args, **kwargs):
        result = real(*args, **kwargs)
        out, rank = sys.argv[sys.argv.index("--out") + 1], os.environ["RANK"]
        torch.save(result.model.state_dict(), os.path.join(out, f"rank{rank}.pt"))
        with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
            onednn = result.model.decoder[0].ffn.w_1.onednn  # the kernel the products ran through
            json.dump([made[0].precision, made[0].matmul, "onednn" if onednn else "default"], f)
        return result
    trainer.train = keep_weights
    app(sys.argv[1:])
""")

COMMON = (
    "--preset",
    "tiny",
    "--max-tokens",
    "400",
    "--dropout",
    "0",
    # 4 updates (2 epochs of 2) on a budget that never binds, cooled down by the wall clock from the start:
    # each update's rate depends on rank 0's clock, so ranks that read their own clocks would drift apart.
    "--max-steps",
    "1000000",
    "--max-epochs",
    "2",
    "--max-minutes",
    "600",
    "--lr-cooldown",
    "1",
    "--valid-every",
    "100",
    "--save-every-steps",
    "0",
    "--device",
    "cpu",
    "--threads",
    "1",
    "--seed",
    "2",
)


@pytest.mark.slow
def test_torchrun_two_gloo_ranks_match_one_process_with_twice_the_update_freq(toy_data, tmp_path) -> None:
    """2 ranks x update-freq 2 (DDP no_sync on the first batch) = 1 process x update-freq 4, computing as rank 0
    chose (fp32 through oneDNN) though rank 1's environment asks for bf16 and the default products.

    The toy data makes 8 batches of 400 tokens, so 4 updates cross an epoch boundary.
    """
    single, multi = tmp_path / "single", tmp_path / "multi"
    one = run_cli("train", toy_data, "--out", single, *COMMON, "--update-freq", "4")
    assert one.returncode == 0, one.stderr
    script = tmp_path / "rank_script.py"
    script.write_text(RANK_SCRIPT)
    two = torchrun(script, "train", toy_data, "--out", multi, *COMMON, "--update-freq", "2")
    assert two.returncode == 0, two.stderr[-3000:]
    assert "world_size 2" in two.stderr and "update_freq 2" in two.stderr

    reference = checkpoint.load(single / "checkpoint_last.pt")
    saved = checkpoint.load(multi / "checkpoint_last.pt")
    assert reference["step"] == saved["step"] == 4 and len(saved["rng"]) == 2
    assert reference["data"]["epoch"] == saved["data"]["epoch"] == 2
    choices = [json.loads((multi / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert choices == [["fp32", "onednn", "onednn"]] * 2, "every rank computes as rank 0 chose"
    rank0 = torch.load(multi / "rank0.pt", weights_only=True)
    rank1 = torch.load(multi / "rank1.pt", weights_only=True)
    for name, weight in reference["model"].items():
        assert torch.equal(rank0[name], rank1[name]), name  # DDP keeps the ranks identical
        assert torch.equal(saved["model"][name], rank0[name]), name
        keep = without_key_bias(name, weight.numel())
        torch.testing.assert_close(rank0[name][keep], weight[keep], rtol=0, atol=1e-5, msg=name)


def without_key_bias(name: str, size: int) -> slice | torch.Tensor:
    """Everything but the key projection's bias: softmax is shift-invariant, so its true gradient is 0.

    What backward computes for it is rounding noise, which differs with the summation order
    (one batch of 4 vs 2 + 2 all-reduced), and Adam scales any noise up to lr-sized steps.
    """
    mask = torch.ones(size, dtype=torch.bool)
    if name.endswith("qkv_proj.bias"):
        mask[size // 3 : 2 * size // 3] = False  # [q | k | v]
    elif name.endswith("kv_proj.bias"):
        mask[: size // 2] = False  # [k | v]
    return mask if mask.dim() and not mask.all() else slice(None)
