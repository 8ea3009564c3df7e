"""torchrun support: one process per device, rank 0 writes every file.

Under ``torchrun`` (``WORLD_SIZE`` > 1) the process group is initialised (NCCL on CUDA, Gloo on CPU),
each rank trains on its slice of every global batch of the shared epoch order (``trainer.sampler``),
gradients are averaged by DistributedDataParallel (or, with ``--sharding fsdp``, parameters, gradients and
optimizer state are sharded by FSDP2: ``trainer.parallel``), and only rank 0 writes checkpoints, metrics and logs.

Every collective waits at most ``--collective-timeout`` seconds: a rank that died or hangs ends the job
with one line (``collective_failure`` recognises the backend's errors; ``trainer.train`` reports them)
instead of the other ranks waiting forever.
"""

from __future__ import annotations

import contextlib
import datetime
from typing import Any

import torch
import torch.distributed as dist

from data_tools.ranks import Ranks, ranks_from_env

DEFAULT_TIMEOUT_S = 600
# What the Gloo and NCCL backends say when a peer is gone or a collective timed out (they raise a plain
# RuntimeError, not always a torch.distributed.DistError).
_BACKEND_FAILURE_WORDS = ("gloo", "nccl", "processgroup", "by peer", "timed out", "pair closure", "watchdog")


# This process's place under torchrun: the same reading of RANK, WORLD_SIZE and LOCAL_RANK as preparation's.
DistContext = Ranks


def init_distributed(device_option: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> DistContext:
    place = ranks_from_env()
    if not place.enabled:
        return place
    use_cuda = device_option != "cpu" and torch.cuda.is_available()
    if use_cuda:
        torch.cuda.set_device(place.local_rank)
    dist.init_process_group(backend="nccl" if use_cuda else "gloo",
                            timeout=datetime.timedelta(seconds=timeout_s))
    return place


def shutdown(ctx: DistContext, together: bool = True) -> None:
    """Leave the process group; with ``together`` (every rank ended the same way) after a last barrier.

    Rank 0 ends last (it writes the final checkpoint and the end event). A rank that tore its Gloo group down
    meanwhile could abort in the backend's teardown ("terminate called without an active exception", seen
    in 2-node runs), failing its node after a good run; waiting for each other first leaves the group whole
    until every rank is done. The barrier waits at most ``--collective-timeout``; a peer that is gone only
    ends the wait.
    """
    if not (ctx.enabled and dist.is_initialized()):
        return
    if together:
        with contextlib.suppress(RuntimeError, dist.DistError):
            if dist.get_backend() == dist.Backend.GLOO:
                dist.monitored_barrier()  # names a missing rank; waits at most the group's --collective-timeout
            else:
                dist.barrier()
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


_TENSOR_TAG = "__tensor__"


def _tensors_as_bytes(obj: Any) -> Any:
    """Tensors -> plain (dtype, shape, bytes) records: all_gather_object cannot carry tensors in every torch."""
    if isinstance(obj, torch.Tensor):
        flat = obj.detach().cpu().contiguous()
        return {_TENSOR_TAG: str(flat.dtype).removeprefix("torch."), "shape": list(flat.shape),
                "data": flat.reshape(-1).view(torch.uint8).numpy().tobytes()}
    if isinstance(obj, dict):
        return {key: _tensors_as_bytes(value) for key, value in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_tensors_as_bytes(value) for value in obj)
    return obj


def _bytes_as_tensors(obj: Any) -> Any:
    if isinstance(obj, dict) and _TENSOR_TAG in obj:
        raw = torch.frombuffer(bytearray(obj["data"]), dtype=torch.uint8) if obj["data"] else torch.empty(0, dtype=torch.uint8)
        return raw.view(getattr(torch, obj[_TENSOR_TAG])).reshape(obj["shape"]).clone()
    if isinstance(obj, dict):
        return {key: _bytes_as_tensors(value) for key, value in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_bytes_as_tensors(value) for value in obj)
    return obj


def gather_objects(ctx: DistContext, obj: Any) -> list[Any]:
    """Every rank's ``obj`` (plain data and CPU tensors), in rank order, on every rank (one collective;
    ``[obj]`` in a single process)."""
    if not ctx.enabled:
        return [obj]
    gathered: list[Any] = [None] * ctx.world_size
    dist.all_gather_object(gathered, _tensors_as_bytes(obj))
    return [_bytes_as_tensors(item) for item in gathered]


def sum_tensor(ctx: DistContext, tensor: torch.Tensor) -> torch.Tensor:
    """The sum of ``tensor`` over all ranks, in place on its device (no host sync; itself when single)."""
    if ctx.enabled:
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    return tensor


def collective_failure(exc: BaseException) -> bool:
    """Whether ``exc`` is a failed or timed-out collective (another rank died or stalled)."""
    if isinstance(exc, dist.DistError):
        return True
    message = str(exc).lower()
    return isinstance(exc, RuntimeError) and any(word in message for word in _BACKEND_FAILURE_WORDS)


def collective_failure_message(ctx: DistContext, exc: BaseException, timeout_s: float) -> str:
    """The one line for a collective failure: which rank saw it, and what most likely happened."""
    text = " ".join(str(exc).split())
    timed_out = "timed out" in text.lower() or "timeout" in text.lower()
    what = (f"a collective did not complete within --collective-timeout {timeout_s:g} s (another process stalled "
            "or died)" if timed_out else "another process died or closed its connection")
    return f"rank {ctx.rank} of {ctx.world_size}: {what}; the backend said: {text[:300]}"
