"""torchrun support: one process per device, rank 0 writes every file.

Under ``torchrun`` (``WORLD_SIZE`` > 1) the process group is initialised (NCCL on CUDA, Gloo on CPU),
each rank trains on every ``world_size``-th batch of the shared epoch order, gradients are averaged by
DistributedDataParallel, and only rank 0 writes checkpoints, metrics and logs.
"""

from __future__ import annotations

import datetime
import os
from dataclasses import dataclass

import torch
import torch.distributed as dist

TIMEOUT = datetime.timedelta(minutes=30)


@dataclass(frozen=True)
class DistContext:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def init_distributed(device_option: str) -> DistContext:
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size <= 1:
        return DistContext()
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    use_cuda = device_option != "cpu" and torch.cuda.is_available()
    if use_cuda:
        torch.cuda.set_device(local_rank)
    dist.init_process_group(backend="nccl" if use_cuda else "gloo", timeout=TIMEOUT)
    return DistContext(rank=rank, world_size=world_size, local_rank=local_rank)


def shutdown(ctx: DistContext) -> None:
    if ctx.enabled and dist.is_initialized():
        dist.destroy_process_group()


def any_rank(ctx: DistContext, flag: bool, device: torch.device) -> bool:
    """True on every rank when ``flag`` is true on any rank (keeps the ranks in step on a stop)."""
    if not ctx.enabled:
        return flag
    value = torch.tensor([1.0 if flag else 0.0], device=device)
    dist.all_reduce(value, op=dist.ReduceOp.MAX)
    return bool(value.item() > 0)


def sum_over_ranks(ctx: DistContext, values: list[float], device: torch.device) -> list[float]:
    if not ctx.enabled:
        return values
    tensor = torch.tensor(values, dtype=torch.float64, device=device)
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    return [float(v) for v in tensor.tolist()]


def barrier(ctx: DistContext) -> None:
    if ctx.enabled:
        dist.barrier()
