"""Data-parallel S2Mel steps under torchrun: every rank one share of the same global batch, gradients summed.

Every rank holds the same model, the same run generator and the same clip order, so every rank collates the same
global batch and draws the same prompt lengths, time steps and noise. Rank r keeps items r, r + world, ... and
backpropagates the sum of their losses divided by the global batch size; summing the gradients over the ranks
(one all-reduce per parameter) gives exactly the gradient of the global batch's mean loss, so every rank takes
the same clipped AdamW step and the replicas stay equal. WaveNet's dropout draws from torch's global RNG, which
is seeded per (seed, step, rank) before each step, so a resumed run draws what the uninterrupted one drew.
Rank 0 alone writes checkpoints, metrics and samples.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields, replace

import torch
import torch.distributed as dist
from torch import Tensor

from trainer.s2mel.batches import S2MelBatch
from trainer.s2mel.forward import FlowDraws


def rank_items(batch_size: int, rank: int, world: int) -> list[int]:
    return list(range(rank, batch_size, world))


def select_items(batch: S2MelBatch, draws: FlowDraws, items: Sequence[int]) -> tuple[S2MelBatch, FlowDraws]:
    """The batch's rows ``items`` and their draws, the mel frames cut to the longest of them (as a batch of
    only these clips is padded: the regulated condition is built to that length)."""
    index = torch.tensor(list(items), dtype=torch.long, device=batch.x1.device)
    chosen = {f.name: (value.index_select(0, index) if isinstance(value := getattr(batch, f.name), Tensor) else value)
              for f in fields(batch)}
    frames = int(chosen["x_lens"].max())
    chosen["x1"] = chosen["x1"][..., :frames]
    z = draws.z.index_select(0, index.to(draws.z.device))[..., :frames]
    return replace(batch, **chosen), FlowDraws(t=draws.t.index_select(0, index.to(draws.t.device)), z=z,
                                               class_draw=draws.class_draw)


def seed_step(seed: int, step: int, rank: int) -> None:
    """Seed torch's global RNG (dropout) for this rank's next step, independent of what ran before."""
    torch.manual_seed((int(seed) * 1_000_003 + int(step) * 1_009 + int(rank)) % (2**63 - 1))


def sum_gradients(parameters: Sequence[torch.nn.Parameter]) -> None:
    """Sum every trained parameter's gradient over the ranks (a rank with no items contributes zeros)."""
    for parameter in parameters:
        if parameter.grad is None:
            parameter.grad = torch.zeros_like(parameter)
        dist.all_reduce(parameter.grad)


def summed(value: Tensor) -> float:
    total = value.detach().clone()
    dist.all_reduce(total)
    return float(total)
