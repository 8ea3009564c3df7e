"""IndexTTS2's length regulator (``InterpolateRegulator`` on continuous input): semantic frames at 50 Hz ->
condition frames at the mel rate.

x (B, T, W) -> ``content_in_proj`` (W -> C) -> nearest-neighbour stretch to the target length (source frame
floor(i * T / T_out)) -> blocks of [Conv1d k3, GroupNorm(1 group), Mish] -> 1x1 Conv1d -> (B, T_out, C),
frames past each row's length zeroed. ``embedding`` and ``mask_token`` are in the checkpoint but unused here.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn


class InterpolateRegulator(nn.Module):
    def __init__(self, in_channels: int, channels: int, num_blocks: int, codebook_size: int) -> None:
        super().__init__()
        self.in_channels = in_channels
        layers: list[nn.Module] = []
        for _ in range(num_blocks):
            layers += [nn.Conv1d(channels, channels, 3, padding=1), nn.GroupNorm(1, channels), nn.Mish()]
        layers.append(nn.Conv1d(channels, channels, 1))
        self.model = nn.Sequential(*layers)
        self.embedding = nn.Embedding(codebook_size, channels)
        self.mask_token = nn.Parameter(torch.zeros(1, channels))
        self.content_in_proj = nn.Linear(in_channels, channels)

    def stretch(self, projected: Tensor, length: int) -> Tensor:
        """(B, T, C) -> (B, C, length) by nearest-neighbour interpolation over time."""
        return F.interpolate(projected.transpose(1, 2).contiguous(), size=length, mode="nearest")

    def forward(self, x: Tensor, lengths: Tensor) -> Tensor:
        """x (B, T, W), lengths (B,) target frames -> (B, max(lengths), C)."""
        if x.dim() != 3 or x.shape[-1] != self.in_channels:
            raise ValueError(
                f"length regulator expects (batch, frames, {self.in_channels}), got {tuple(x.shape)}"
            )
        total = int(lengths.max())
        out = self.model(self.stretch(self.content_in_proj(x), total)).transpose(1, 2)
        keep = torch.arange(total, device=x.device)[None, :] < lengths.to(x.device)[:, None]
        return out * keep.unsqueeze(-1)
