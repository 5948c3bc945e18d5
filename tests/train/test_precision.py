"""Training's precision: the AMP helper follows the run's Runtime, and under torchrun every rank takes rank 0's.

The rule itself (auto, explicit choices, refusals) is tested in tests/runtime/test_precision_rule.py.
"""

import pytest
import torch

import mtkit
from mtkit import runtime
from mtkit.errors import MtkitError
from mtkit.model.linear import Linear
from mtkit.runtime import Runtime, matmul
from mtkit.train.distributed import World, decided_by_main
from mtkit.train.precision import Precision

CPU = torch.device("cpu")


def rank_of_two(rank: int, monkeypatch, rank0_box: list | None = None) -> World:
    """Rank `rank` of a two-process world whose broadcast is faked: rank 0 sends, another rank gets `rank0_box`."""

    def broadcast(box: list, src: int, device=None) -> None:
        assert src == 0 and device is None  # gloo on CPU: objects travel without a device
        if rank != 0:
            box[:] = rank0_box

    monkeypatch.setattr(torch.distributed, "broadcast_object_list", broadcast)
    return World(rank=rank, size=2, local_rank=rank, device=CPU)


def test_ranks_adopt_rank_0s_choice_and_only_rank_0_measures(monkeypatch):
    backend = "onednn" if matmul.onednn_works() else "default"
    answer = Runtime("bf16", "rank 0 measured 1.3x", backend, "rank 0 measured 1.9x", "none", (64, 16))
    rank0 = rank_of_two(0, monkeypatch)
    assert decided_by_main(lambda: answer, rank0) == answer
    rank1 = rank_of_two(1, monkeypatch, [(True, answer)])
    assert decided_by_main(lambda: pytest.fail("rank 1 measured"), rank1) == answer
    # Rank 0's answer is bf16 whatever this CPU has: the test is about adopting it, not about bf16 instructions.
    assert Precision(answer, CPU).name == "bf16"  # autocast as rank 0 chose (the reasons: the run's RunSettings)
    model = runtime.apply(mtkit.build_model("tiny", 40), answer)
    assert all(m.onednn == (backend == "onednn") for m in model.modules() if isinstance(m, Linear))  # products too


def test_a_choice_that_fails_on_rank_0_fails_on_every_rank_instead_of_leaving_them_waiting(monkeypatch):
    error = MtkitError("precision fp16 needs a CUDA device")

    def refuse() -> Runtime:
        raise error

    sent: list = []
    monkeypatch.setattr(torch.distributed, "broadcast_object_list", lambda box, src, device=None: sent.extend(box))
    with pytest.raises(MtkitError, match="fp16 needs a CUDA device"):
        decided_by_main(refuse, World(rank=0, size=2, local_rank=0, device=CPU))
    assert sent == [(False, error)]  # rank 0 told the others before raising
    with pytest.raises(MtkitError, match="fp16 needs a CUDA device"):
        decided_by_main(refuse, rank_of_two(1, monkeypatch, sent))
