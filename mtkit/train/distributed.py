"""Several processes through `torchrun` and torch.distributed: NCCL on CUDA, gloo on CPU.

torchrun starts the processes and sets RANK / WORLD_SIZE / LOCAL_RANK; mtkit only reads
them. Without them there is one process and no process group at all.

A collective waits COLLECTIVE_TIMEOUT at most for the other ranks (torch's default for gloo,
said here rather than left to the backend: NCCL's own is 10 minutes), which covers rank 0's
--valid-bleu decoding while the others wait. A rank that dies (SIGKILL, the out-of-memory
killer) breaks the others' next collective at once; each rank records its host and pid in
torchrun's store as it joins, so that `lost_ranks` can name the dead one in the survivors'
sentence instead of gloo's traceback.
"""

from __future__ import annotations

import datetime
import logging
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar, cast

import torch
import torch.distributed as dist

from mtkit.device import pick_device

logger = logging.getLogger(__name__)
T = TypeVar("T")

COLLECTIVE_TIMEOUT = datetime.timedelta(minutes=30)
_STORE_KEY = "mtkit/rank/{rank}"
_store: list = []  # torchrun's store, kept past the process group's end: a failure is explained after it


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
        dist.init_process_group(
            backend=backend, device_id=device if device.type == "cuda" else None, timeout=COLLECTIVE_TIMEOUT
        )
        _record_process(rank)
        logger.debug(
            "rank %d of %d joined the %s process group (collective timeout %s)", rank, size, backend, COLLECTIVE_TIMEOUT
        )
    return World(rank, size, local_rank, device)


def _record_process(rank: int) -> None:
    """This rank's host and pid in torchrun's store, for `lost_ranks`; nothing when the store says no."""
    try:
        store = dist.distributed_c10d._get_default_store()
        store.set(_STORE_KEY.format(rank=rank), f"{socket.gethostname()} {os.getpid()}")
        _store[:] = [store]
    except Exception as exc:  # noqa: BLE001 - only the lost rank's name in a later error depends on it
        logger.debug("could not record rank %d in the store: %s", rank, exc)


def _ended(pid: int) -> bool:
    """Whether process `pid` of this machine is gone (or a zombie its launcher has not reaped yet)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        except OSError:
            return False
        return False
    return state in ("Z", "X")


def lost_ranks_here() -> list[int]:
    """The other ranks whose process on this machine has ended (those elsewhere cannot be seen from here)."""
    rank, size = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    host = socket.gethostname()
    lost: list[int] = []
    try:
        store = _store[0]
        store.set_timeout(datetime.timedelta(seconds=5))
        for other in range(size):
            if other == rank:
                continue
            where, pid = store.get(_STORE_KEY.format(rank=other)).decode().split()
            if where == host and _ended(int(pid)):
                lost.append(other)
    except Exception:  # noqa: BLE001 - no store (it went with the launcher): the sentence says less
        return lost
    return lost


def is_collective_failure(exc: BaseException) -> bool:
    """A collective that failed because a peer went away or timed out (gloo's and NCCL's errors)."""
    if isinstance(exc, getattr(dist, "DistError", ())):
        return True
    text = str(exc)
    return isinstance(exc, RuntimeError) and any(
        words in text
        for words in ("Connection closed by peer", "Connection reset by peer", "gloo", "NCCL", "Timed out")
    )


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
