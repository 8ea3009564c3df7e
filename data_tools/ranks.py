"""Preparation under torchrun: which share of the work this process takes, and the few waits between processes.

``python -m torch.distributed.run --standalone --nproc-per-node N -m data_tools.prepare_v2 ...`` starts N
processes that each load the models on their own device (``LOCAL_RANK``'s GPU, or the CPU) and compute every
N-th batch of the shared batch plan. The processes exchange only small Python objects (a barrier, the counts and
skipped items of each), so the group always uses Gloo, also on GPUs: that needs no per-device NCCL setup, and
Gloo's monitored barrier names a rank that never arrives. Every wait is bounded by ``COLLECTIVE_TIMEOUT_S``.

(``trainer.distributed``, the trainer's larger side of torchrun, reads its place from here too: one reading of torchrun's variables.)
"""

from __future__ import annotations

import contextlib
import datetime
import os
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")

# The longest a process waits for the others: they meet only when they start and when their shares are done, and
# the shares differ by at most one batch (minutes on a CPU at most); a process that died ends the wait sooner.
COLLECTIVE_TIMEOUT_S = 1800.0


@dataclass(frozen=True)
class Ranks:
    """This process's place among the preparation's processes (one process: rank 0 of 1)."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def share(self, work: list[T]) -> list[T]:
        """This process's deterministic share: every ``world_size``-th element, from the ``rank``-th."""
        return work[self.rank::self.world_size]


ONE_PROCESS = Ranks()


def ranks_from_env() -> Ranks:
    """Where torchrun put this process (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``); rank 0 of 1 without torchrun."""
    try:
        world_size = int(os.environ.get("WORLD_SIZE", "1"))
        rank, local_rank = int(os.environ.get("RANK", "0")), int(os.environ.get("LOCAL_RANK", "0"))
    except ValueError:
        return ONE_PROCESS
    if world_size <= 1 or not 0 <= rank < world_size:
        return ONE_PROCESS
    return Ranks(rank=rank, world_size=world_size, local_rank=local_rank)


def own_device(name: str) -> str:
    """The device option for this process: under torchrun, ``auto`` and ``cuda`` (no index) mean this process's
    own GPU, ``cuda:<LOCAL_RANK>`` (when there is a GPU); anything else, and one process, is ``name`` as given."""
    ranks = ranks_from_env()
    if not ranks.enabled or name not in ("auto", "cuda"):
        return name
    import torch

    if not torch.cuda.is_available():
        return name
    return f"cuda:{ranks.local_rank}"


def join(timeout_s: float = COLLECTIVE_TIMEOUT_S) -> Ranks:
    """This process's ranks, with the process group made when torchrun started several (idempotent)."""
    ranks = ranks_from_env()
    if ranks.enabled:
        import torch.distributed as dist

        if not dist.is_initialized():
            dist.init_process_group(backend="gloo", timeout=datetime.timedelta(seconds=timeout_s))
    return ranks


def barrier(ranks: Ranks) -> None:
    """Wait until every process arrives (a missing one is named when the wait times out)."""
    if ranks.enabled:
        import torch.distributed as dist

        dist.monitored_barrier(wait_all_ranks=True)


def gather(ranks: Ranks, value: Any) -> list[Any]:
    """Every process's ``value`` (picklable plain data), in rank order, on every process."""
    if not ranks.enabled:
        return [value]
    import torch.distributed as dist

    gathered: list[Any] = [None] * ranks.world_size
    dist.all_gather_object(gathered, value)
    return gathered


def leave(ranks: Ranks, together: bool = True) -> None:
    """Leave the group; with ``together`` (every process ended the same way) after a last barrier, so that no
    process tears Gloo down while another still uses it."""
    if not ranks.enabled:
        return
    import torch.distributed as dist

    if not dist.is_initialized():
        return
    if together:
        with contextlib.suppress(RuntimeError, dist.DistError):
            barrier(ranks)
    dist.destroy_process_group()
