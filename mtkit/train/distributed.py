"""Several processes through `torchrun` and torch.distributed: NCCL on CUDA, gloo on CPU.

torchrun starts the processes and sets RANK / WORLD_SIZE / LOCAL_RANK; mtkit only reads
them. Without them there is one process and no process group at all.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar, cast

import torch
import torch.distributed as dist

from mtkit.device import pick_device

logger = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass(frozen=True)
class World:
    """This process's place among the training processes, and its device."""

    rank: int
    size: int
    local_rank: int
    device: torch.device

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.size > 1


def init_world(device_name: str) -> World:
    """Join the process group that torchrun describes in the environment, if any."""
    size = int(os.environ.get("WORLD_SIZE", "1"))
    rank, local_rank = int(os.environ.get("RANK", "0")), int(os.environ.get("LOCAL_RANK", "0"))
    device = pick_device(device_name, local_rank)
    if size > 1 and not dist.is_initialized():
        backend = "nccl" if device.type == "cuda" else "gloo"
        dist.init_process_group(backend=backend, device_id=device if device.type == "cuda" else None)
        logger.debug("rank %d of %d joined the %s process group", rank, size, backend)
    return World(rank, size, local_rank, device)


def all_reduce_sum(values: torch.Tensor, world: World) -> torch.Tensor:
    """Sum a tensor over ranks (in place); one process: unchanged."""
    if world.distributed:
        dist.all_reduce(values, op=dist.ReduceOp.SUM)
    return values


def barrier(world: World) -> None:
    """Wait until every rank gets here: one tiny all-reduce, the same on gloo and NCCL."""
    if world.distributed:
        dist.all_reduce(torch.zeros(1, device=world.device), op=dist.ReduceOp.SUM)


def decided_by_main(decide: Callable[[], T], world: World) -> T:
    """`decide()` run on rank 0 alone and its result handed to every rank: for choices made by measuring
    (precision, kernels), which every rank must share and which ranks timing at once would skew."""
    if not world.distributed:
        return decide()
    box: list = [None]
    if world.is_main:
        try:
            box = [(True, decide())]
        except Exception as exc:  # every rank raises it: the others must not wait for an answer that never comes
            box = [(False, exc)]
    dist.broadcast_object_list(box, src=0, device=world.device if world.device.type == "cuda" else None)
    decided, answer = box[0]
    if not decided:
        raise answer
    return cast(T, answer)


def all_gather_objects(obj: object, world: World) -> list:
    """Every rank's `obj`, in rank order (for per-rank RNG states in checkpoints)."""
    if not world.distributed:
        return [obj]
    out: list = [None] * world.size
    dist.all_gather_object(out, obj)
    return out


def wrap(model: torch.nn.Module, world: World) -> torch.nn.Module:
    """DDP over the ranks. It averages gradients; the trainer scales the loss by the world size to undo that."""
    if not world.distributed:
        return model
    from torch.nn.parallel import DistributedDataParallel as DDP

    ids = [world.device.index] if world.device.type == "cuda" else None
    # No buffer changes during training (positions are constant), so no per-step broadcast.
    return DDP(model, device_ids=ids, broadcast_buffers=False, gradient_as_bucket_view=True)


def shutdown(world: World) -> None:
    if world.distributed and dist.is_initialized():
        dist.destroy_process_group()
