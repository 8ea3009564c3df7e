"""Old-style weight norm as stored in ``s2mel.pth``: ``weight = g * v / ||v||``, norm over all dims but 0.

The checkpoint keeps ``weight_g`` / ``weight_v`` (the ``torch.nn.utils.weight_norm`` hook's names), so the
modules hold exactly those parameters and fold them on every call.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def _fold(weight_v: Tensor, weight_g: Tensor) -> Tensor:
    dims = tuple(range(1, weight_v.dim()))
    return weight_v * (weight_g / weight_v.norm(dim=dims, keepdim=True))


def _fresh_v(shape: tuple[int, ...], fan_in: int) -> Tensor:
    v = torch.empty(shape)
    bound = 1.0 / math.sqrt(fan_in)
    return nn.init.uniform_(v, -bound, bound)


class WeightNormLinear(nn.Module):
    """Linear layer with weight-norm parameters ``weight_g`` (out, 1), ``weight_v`` (out, in), ``bias``."""

    def __init__(self, in_features: int, out_features: int) -> None:
        super().__init__()
        v = _fresh_v((out_features, in_features), in_features)
        self.bias = nn.Parameter(torch.zeros(out_features))
        self.weight_g = nn.Parameter(v.norm(dim=1, keepdim=True))
        self.weight_v = nn.Parameter(v)

    def forward(self, x: Tensor) -> Tensor:
        return F.linear(x, _fold(self.weight_v, self.weight_g), self.bias)


class WeightNormConv1d(nn.Module):
    """Conv1d without padding, weight-norm parameters ``weight_g`` (out, 1, 1), ``weight_v`` (out, in, k)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, *, dilation: int = 1) -> None:
        super().__init__()
        self.dilation = dilation
        v = _fresh_v((out_channels, in_channels, kernel_size), in_channels * kernel_size)
        self.bias = nn.Parameter(torch.zeros(out_channels))
        self.weight_g = nn.Parameter(v.norm(dim=(1, 2), keepdim=True))
        self.weight_v = nn.Parameter(v)

    def forward(self, x: Tensor) -> Tensor:
        return F.conv1d(x, _fold(self.weight_v, self.weight_g), self.bias, dilation=self.dilation)
