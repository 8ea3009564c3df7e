"""How a text or code segment becomes GPT inputs and targets, and how its loss is counted.

Each segment is wrapped as ``[start, ids..., stop-padding, stop]``, its targets shifted by one, and its
positions restart at row 0 of its own learned table. ``loss_mode`` "indextts" averages over every position
(upstream); "masked" only over real tokens plus each item's first stop.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

LossMode = Literal["indextts", "masked"]
LOSS_MODES = ("indextts", "masked")


@dataclass
class WrappedSegment:
    padded: Tensor  # (B, W): positions >= length replaced by stop
    inputs: Tensor  # (B, W+2): start, padded, stop
    targets: Tensor  # (B, W+2): padded, stop, stop
    counted: Tensor  # (B, W+2) bool: target positions j < length + 1


def pad_and_wrap(ids: Tensor, lengths: Tensor, start: int, stop: int) -> WrappedSegment:
    """Upstream's padding rewrite and start/stop wrapping, without touching `ids`."""
    width = ids.size(1)
    positions = torch.arange(width, device=ids.device).unsqueeze(0)
    lengths = lengths.to(ids.device).unsqueeze(1)
    padded = torch.where(positions < lengths, ids, torch.full_like(ids, stop))
    batch = ids.size(0)
    starts = torch.full((batch, 1), start, dtype=ids.dtype, device=ids.device)
    stops = torch.full((batch, 1), stop, dtype=ids.dtype, device=ids.device)
    inputs = torch.cat((starts, padded, stops), dim=1)
    targets = torch.cat((padded, stops, stops), dim=1)
    counted = torch.arange(width + 2, device=ids.device).unsqueeze(0) < lengths + 1
    return WrappedSegment(padded=padded, inputs=inputs, targets=targets, counted=counted)


class LearnedPositionEmbeddings(nn.Module):
    """Rows 0..S-1 of a learned table (key `emb.weight`); every segment restarts at 0."""

    def __init__(self, rows: int, dim: int) -> None:
        super().__init__()
        self.emb = nn.Embedding(rows, dim)
        nn.init.normal_(self.emb.weight, std=0.02)

    def forward(self, length: int) -> Tensor:
        return self.emb.weight[:length]


def check_lengths(name: str, lengths: Tensor, batch: int, width: int, host: Sequence[int] | None = None) -> list[int]:
    """The lengths as ints, checked; ``host`` (the same values as a list, from the loader) avoids reading the
    tensor back from the device, a host sync that would stall a GPU every micro-batch."""
    if lengths.dim() != 1 or lengths.size(0) != batch:
        raise ValueError(f"{name} must have shape ({batch},), got {tuple(lengths.shape)}")
    values = [int(v) for v in (host if host is not None else lengths.tolist())]
    if len(values) != batch:
        raise ValueError(f"{name}: {len(values)} host lengths for a batch of {batch}")
    bad = [v for v in values if v < 0 or v > width]
    if bad:
        raise ValueError(f"{name} must lie in 0..{width} (the padded width), got {bad}")
    return values


def segment_cross_entropy(logits: Tensor, targets: Tensor, counted: Tensor, loss_mode: LossMode) -> Tensor:
    """logits (B, L, V) float32. indextts: mean over every position; masked: sum/count over counted."""
    per_token = F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1), reduction="none")
    if loss_mode == "indextts":
        return per_token.mean()
    weights = counted.reshape(-1).to(per_token.dtype)
    return (per_token * weights).sum() / weights.sum().clamp(min=1.0)
