"""ECAPA-TDNN speaker encoder of the IndexTTS v1.5 BigVGAN (its ``speaker_encoder.*`` keys).

Facts: shared/reference/fixtures_indextts15_infer/FIXTURES.md ("ECAPA-TDNN speaker encoder"). Inference
only (eval-mode BatchNorm, no lengths): a reference log-mel (B, T, 100) -> speaker embedding (B, 1, S).

Every conv is a 1-D conv with bias and "same" padding of dilation*(k-1)/2 on both sides in reflect mode;
a TDNN block is conv -> ReLU -> BatchNorm. The sub-module names reproduce upstream's state-dict keys
(``blocks.0.conv.conv.weight``, ``blocks.1.res2net_block.blocks.0.norm.norm.running_mean``, ...).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

STATS_EPS = 1e-12


@dataclass(frozen=True)
class EcapaSpec:
    """Widths of the encoder; the defaults are upstream's (the real v1.5 vocoder)."""

    channels: tuple[int, ...] = (512, 512, 512, 512, 1536)
    kernel_sizes: tuple[int, ...] = (5, 3, 3, 3, 1)
    dilations: tuple[int, ...] = (1, 2, 3, 4, 1)
    attention_channels: int = 128
    res2net_scale: int = 8
    se_channels: int = 128
    global_context: bool = True

    @property
    def min_frames(self) -> int:
        """Fewest input frames: reflect padding needs more frames than it pads on one side (dilation*(k-1)/2)."""
        return max(d * (k - 1) // 2 for k, d in zip(self.kernel_sizes, self.dilations)) + 1

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any] | None) -> EcapaSpec:
        """Build from a config mapping (unknown keys refused; ``groups`` must be all 1)."""
        if not values:
            return cls()
        values = dict(values)
        groups = values.pop("groups", None)
        if groups is not None and any(int(g) != 1 for g in groups):
            raise ValueError(f"speaker encoder groups other than 1 are not supported, got {groups}")
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown speaker encoder key(s): {', '.join(unknown)}")
        for key in ("channels", "kernel_sizes", "dilations"):
            if key in values:
                values[key] = tuple(int(v) for v in values[key])
        spec = cls(**values)
        if not len(spec.channels) == len(spec.kernel_sizes) == len(spec.dilations) >= 3:
            raise ValueError("speaker encoder channels, kernel_sizes and dilations need one entry per block (>= 3)")
        if any(c % spec.res2net_scale for c in spec.channels[1:-1]):
            raise ValueError(f"speaker encoder channels must be divisible by res2net_scale {spec.res2net_scale}")
        return spec


class SameConv1d(nn.Module):
    """Conv1d with reflect "same" padding (dilation*(k-1)/2 each side); key ``conv.weight``."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, dilation: int = 1) -> None:
        super().__init__()
        self.pad = dilation * (kernel_size - 1) // 2
        self.conv = nn.Conv1d(in_channels, out_channels, kernel_size, dilation=dilation)

    def forward(self, x: Tensor) -> Tensor:
        if self.pad:
            x = F.pad(x, (self.pad, self.pad), mode="reflect")
        return self.conv(x)


class BatchNorm(nn.Module):
    """BatchNorm1d under the key ``norm.*`` (upstream's wrapper)."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.norm = nn.BatchNorm1d(channels, eps=1e-5)

    def forward(self, x: Tensor) -> Tensor:
        return self.norm(x)


class TDNNBlock(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, dilation: int) -> None:
        super().__init__()
        self.conv = SameConv1d(in_channels, out_channels, kernel_size, dilation)
        self.norm = BatchNorm(out_channels)

    def forward(self, x: Tensor) -> Tensor:
        return self.norm(torch.relu(self.conv(x)))


class Res2NetBlock(nn.Module):
    """Split into ``scale`` groups: group 0 passes, group 1 -> TDNN, group i -> TDNN(x_i + previous output)."""

    def __init__(self, channels: int, kernel_size: int, dilation: int, scale: int) -> None:
        super().__init__()
        self.scale = scale
        width = channels // scale
        self.blocks = nn.ModuleList(TDNNBlock(width, width, kernel_size, dilation) for _ in range(scale - 1))

    def forward(self, x: Tensor) -> Tensor:
        outputs: list[Tensor] = []
        previous: Tensor | None = None
        for index, part in enumerate(torch.chunk(x, self.scale, dim=1)):
            if index == 0:
                current = part
            elif index == 1:
                current = self.blocks[0](part)
            else:
                assert previous is not None
                current = self.blocks[index - 1](part + previous)
            outputs.append(current)
            previous = current
        return torch.cat(outputs, dim=1)


class SEBlock(nn.Module):
    """Squeeze-excitation: time mean -> 1x1 conv -> ReLU -> 1x1 conv -> sigmoid, multiplied in."""

    def __init__(self, channels: int, se_channels: int) -> None:
        super().__init__()
        self.conv1 = SameConv1d(channels, se_channels, 1)
        self.conv2 = SameConv1d(se_channels, channels, 1)

    def forward(self, x: Tensor) -> Tensor:
        s = x.mean(dim=2, keepdim=True)
        return x * torch.sigmoid(self.conv2(torch.relu(self.conv1(s))))


class SERes2NetBlock(nn.Module):
    def __init__(self, channels: int, kernel_size: int, dilation: int, scale: int, se_channels: int) -> None:
        super().__init__()
        self.tdnn1 = TDNNBlock(channels, channels, 1, 1)
        self.res2net_block = Res2NetBlock(channels, kernel_size, dilation, scale)
        self.tdnn2 = TDNNBlock(channels, channels, 1, 1)
        self.se_block = SEBlock(channels, se_channels)

    def forward(self, x: Tensor) -> Tensor:
        return x + self.se_block(self.tdnn2(self.res2net_block(self.tdnn1(x))))


def _weighted_stats(x: Tensor, weights: Tensor) -> tuple[Tensor, Tensor]:
    """Weighted mean and population std over time (variance clamped at 1e-12 before the sqrt)."""
    mean = (weights * x).sum(dim=2)
    var = (weights * (x - mean.unsqueeze(2)).pow(2)).sum(dim=2)
    return mean, torch.sqrt(var.clamp(min=STATS_EPS))


class AttentiveStatisticsPooling(nn.Module):
    def __init__(self, channels: int, attention_channels: int, global_context: bool) -> None:
        super().__init__()
        self.global_context = global_context
        self.tdnn = TDNNBlock(channels * 3 if global_context else channels, attention_channels, 1, 1)
        self.conv = SameConv1d(attention_channels, channels, 1)

    def forward(self, x: Tensor) -> Tensor:
        frames = x.size(2)
        if self.global_context:
            uniform = torch.full((1, 1, frames), 1.0 / frames, dtype=x.dtype, device=x.device)
            mean, std = _weighted_stats(x, uniform)
            context = torch.cat(
                (x, mean.unsqueeze(2).expand(-1, -1, frames), std.unsqueeze(2).expand(-1, -1, frames)), dim=1
            )
        else:
            context = x
        attention = torch.softmax(self.conv(torch.tanh(self.tdnn(context))), dim=2)
        mean, std = _weighted_stats(x, attention)
        return torch.cat((mean, std), dim=1).unsqueeze(2)


class EcapaTDNN(nn.Module):
    """(B, T, n_mels) log-mel -> (B, 1, embedding_dim)."""

    def __init__(self, n_mels: int, embedding_dim: int, spec: EcapaSpec | None = None) -> None:
        super().__init__()
        spec = spec or EcapaSpec()
        self.min_frames = spec.min_frames
        ch, ks, dl = spec.channels, spec.kernel_sizes, spec.dilations
        blocks: list[nn.Module] = [TDNNBlock(n_mels, ch[0], ks[0], dl[0])]
        for i in range(1, len(ch) - 1):
            if ch[i] != ch[i - 1]:
                raise ValueError("SE-Res2Net blocks with a width change (shortcut conv) are not supported")
            blocks.append(SERes2NetBlock(ch[i], ks[i], dl[i], spec.res2net_scale, spec.se_channels))
        self.blocks = nn.ModuleList(blocks)
        self.mfa = TDNNBlock(sum(ch[1:-1]), ch[-1], ks[-1], dl[-1])
        self.asp = AttentiveStatisticsPooling(ch[-1], spec.attention_channels, spec.global_context)
        self.asp_bn = BatchNorm(ch[-1] * 2)
        self.fc = SameConv1d(ch[-1] * 2, embedding_dim, 1)

    def forward(self, mel: Tensor) -> Tensor:
        x = mel.transpose(1, 2)
        outputs: list[Tensor] = []
        for block in self.blocks:
            x = block(x)
            outputs.append(x)
        x = self.mfa(torch.cat(outputs[1:], dim=1))
        x = self.fc(self.asp_bn(self.asp(x)))
        return x.transpose(1, 2)


def spec_values(spec: EcapaSpec) -> dict[str, Any]:
    """The spec as plain YAML-friendly values (lists, ints, bools)."""
    return {
        "channels": list(spec.channels),
        "kernel_sizes": list(spec.kernel_sizes),
        "dilations": list(spec.dilations),
        "attention_channels": spec.attention_channels,
        "res2net_scale": spec.res2net_scale,
        "se_channels": spec.se_channels,
        "global_context": spec.global_context,
    }
