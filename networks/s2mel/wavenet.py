"""The DiT's WaveNet post-net (VITS-style WN with a global condition), IndexTTS2's ``estimator.wavenet``.

Per layer: a weight-normed dilated conv (reflect-padded to keep the length) to 2H channels, plus that layer's
slice of the projected condition; a = tanh(first half) * sigmoid(second half); a 1x1 conv splits into a
residual (added to x, then masked) and a skip part that accumulates into the output. The last layer's 1x1
conv has only H outputs, all of them skip. In train mode ``dropout`` (config ``wavenet.p_dropout``) acts on the
gated activations of every layer, as in training upstream; in eval mode it is the identity.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from networks.s2mel.weight_norm import WeightNormConv1d


class _ConvHolder(nn.Module):
    """One level of nesting that exists only for the checkpoint's ``conv.conv.*`` key layout."""

    def __init__(self, conv: WeightNormConv1d) -> None:
        super().__init__()
        self.conv = conv


class ReflectPaddedConv1d(nn.Module):
    """Weight-normed stride-1 conv that keeps the length: reflect padding, the extra sample on the left."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, *, dilation: int = 1) -> None:
        super().__init__()
        total = (kernel_size - 1) * dilation
        self.pad_right = total // 2
        self.pad_left = total - self.pad_right
        self.conv = _ConvHolder(WeightNormConv1d(in_channels, out_channels, kernel_size, dilation=dilation))

    def forward(self, x: Tensor) -> Tensor:
        if self.pad_left or self.pad_right:
            if x.shape[-1] <= max(self.pad_left, self.pad_right):
                raise ValueError(
                    f"WaveNet input of {x.shape[-1]} frame(s) is too short for reflect padding of "
                    f"{max(self.pad_left, self.pad_right)}"
                )
            x = F.pad(x, (self.pad_left, self.pad_right), mode="reflect")
        return self.conv.conv(x)


class WaveNet(nn.Module):
    """WN(x (B, H, T), mask (B, 1, T), g (B, C, 1)) -> (B, H, T)."""

    def __init__(
        self,
        hidden: int,
        kernel_size: int,
        dilation_rate: int,
        num_layers: int,
        cond_channels: int,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        self.hidden = hidden
        self.drop = nn.Dropout(dropout)
        self.num_layers = num_layers
        self.in_layers = nn.ModuleList(
            ReflectPaddedConv1d(hidden, 2 * hidden, kernel_size, dilation=dilation_rate**i)
            for i in range(num_layers)
        )
        self.res_skip_layers = nn.ModuleList(
            ReflectPaddedConv1d(hidden, 2 * hidden if i < num_layers - 1 else hidden, 1)
            for i in range(num_layers)
        )
        self.cond_layer = ReflectPaddedConv1d(cond_channels, 2 * hidden * num_layers, 1)

    def forward(self, x: Tensor, mask: Tensor, g: Tensor) -> Tensor:
        h = self.hidden
        output = torch.zeros_like(x)
        g = self.cond_layer(g)
        for i, (in_layer, res_skip_layer) in enumerate(zip(self.in_layers, self.res_skip_layers)):
            pre = in_layer(x) + g[:, 2 * h * i : 2 * h * (i + 1)]
            acts = self.drop(torch.tanh(pre[:, :h]) * torch.sigmoid(pre[:, h:]))
            res_skip = res_skip_layer(acts)
            if i < self.num_layers - 1:
                x = (x + res_skip[:, :h]) * mask
                output = output + res_skip[:, h:]
            else:
                output = output + res_skip
        return output * mask
