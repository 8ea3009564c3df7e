"""The module a run under torchrun trains: DDP around the model, or the model sharded by FSDP2 (``--sharding``)."""

from __future__ import annotations

from typing import Any

import torch


def wrap_for_processes(run: Any) -> torch.nn.Module:
    """DDP around ``run.model`` (``--sharding ddp``), or the model sharded in place by FSDP2 (``--sharding fsdp``,
    ``trainer.fsdp``). Call after the weights are loaded and the frozen rows are set, before the optimizer is made."""
    if run.opts.sharding == "fsdp":
        from trainer.fsdp import shard_run

        return shard_run(run)
    device = run.device
    # A generation that trains on precomputed conditioning leaves its conditioning encoders without a gradient.
    return torch.nn.parallel.DistributedDataParallel(
        run.model, device_ids=[device.index] if device.type == "cuda" else None,
        find_unused_parameters=run.plan.generation.model.ddp_unused_parameters)
