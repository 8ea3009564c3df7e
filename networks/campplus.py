"""CAM++ speaker encoder (3D-Speaker), the speaker-style front-end of IndexTTS2 and IndexTTS-2.5.

IndexTTS2 turns the 16 kHz prompt into ``style`` (the S2Mel style vector); IndexTTS-2.5 reuses the same vector
as the GPT's speaker embedding. Upstream always builds ``CAMPPlus(feat_dim=80, embedding_size=192)`` and loads
``funasr/campplus`` ``campplus_cn_common.bin`` (a plain state dict); the parameter names below reproduce that
layout key for key. Inference only: every BatchNorm uses its running statistics (call ``.eval()``).

Shape walk (real sizes, T fbank frames):
  fbank (B, T, 80) -> FCM head, a small 2-D ResNet over (frequency, time) that divides frequency by 8:
  (B, 1, 80, T) -> (B, 32, 10, T) -> (B, 320, T) -> TDNN (kernel 5, stride 2) (B, 128, T/2)
  -> 3 CAM-dense blocks (12, 24, 16 layers, growth 32) each followed by a halving transit layer -> (B, 512, T/2)
  -> BN-ReLU -> mean and unbiased std over time (B, 1024) -> 1x1 projection + affine-free BN -> (B, 192).

The FCM width (32), its block counts, the dense block sizes, kernels (3) and dilations (1, 2, 2) and the 80
input bins are fixed by the architecture; ``embedding_size``, ``growth_rate``, ``bn_size`` and ``init_channels``
are the constructor's (the reference fixtures shrink them).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from networks.frontends.kaldi_fbank import speaker_fbank
from networks.loading import load_strict

FEAT_DIM = 80
FCM_CHANNELS = 32
FCM_BLOCKS_PER_STAGE = 2
DENSE_BLOCKS = ((12, 3, 1), (24, 3, 2), (16, 3, 2))  # (layers, kernel, dilation) per CAM-dense block
CAM_SEGMENT_FRAMES = 100
CAM_REDUCTION = 2

REAL_SIZES = {"feat_dim": 80, "embedding_size": 192, "growth_rate": 32, "bn_size": 4, "init_channels": 128}


def _bn_relu(channels: int) -> nn.Sequential:
    """BatchNorm then ReLU, under the names the checkpoint uses (``<prefix>.batchnorm.*``)."""
    return nn.Sequential(OrderedDict(batchnorm=nn.BatchNorm1d(channels), relu=nn.ReLU()))


class ResidualBlock2d(nn.Module):
    """Basic 2-D residual block; ``stride`` applies to the frequency axis only (time is never subsampled)."""

    def __init__(self, in_channels: int, channels: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, channels, 3, stride=(stride, 1), padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        if stride != 1 or in_channels != channels:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_channels, channels, 1, stride=(stride, 1), bias=False), nn.BatchNorm2d(channels)
            )
        else:
            self.shortcut = nn.Sequential()

    def forward(self, x: Tensor) -> Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class FCMHead(nn.Module):
    """Front-end convolution module: (B, feat_dim, T) -> (B, 32 * feat_dim / 8, T)."""

    def __init__(self, feat_dim: int = FEAT_DIM, channels: int = FCM_CHANNELS) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, channels, 3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.layer1 = self._stage(channels)
        self.layer2 = self._stage(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, stride=(2, 1), padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        self.out_channels = channels * (feat_dim // 8)

    @staticmethod
    def _stage(channels: int) -> nn.Sequential:
        strides = [2] + [1] * (FCM_BLOCKS_PER_STAGE - 1)
        return nn.Sequential(*(ResidualBlock2d(channels, channels, stride) for stride in strides))

    def forward(self, x: Tensor) -> Tensor:
        out = F.relu(self.bn1(self.conv1(x.unsqueeze(1))))
        out = self.layer2(self.layer1(out))
        out = F.relu(self.bn2(self.conv2(out)))
        batch, channels, freq, frames = out.shape
        return out.reshape(batch, channels * freq, frames)


class TDNNLayer(nn.Module):
    """Conv1d (no bias, 'same' padding for its dilation) then BN-ReLU."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1) -> None:
        super().__init__()
        padding = (kernel_size - 1) // 2
        self.linear = nn.Conv1d(
            in_channels, out_channels, kernel_size, stride=stride, padding=padding, bias=False
        )
        self.nonlinear = _bn_relu(out_channels)

    def forward(self, x: Tensor) -> Tensor:
        return self.nonlinear(self.linear(x))


def segment_average(x: Tensor, segment: int = CAM_SEGMENT_FRAMES) -> Tensor:
    """Average over consecutive segments of ``segment`` frames (the last one may be shorter), spread back to
    every frame of its segment: (B, C, T) -> (B, C, T)."""
    pooled = F.avg_pool1d(x, kernel_size=segment, stride=segment, ceil_mode=True)
    return pooled.repeat_interleave(segment, dim=-1)[..., : x.shape[-1]]


class CAMLayer(nn.Module):
    """Context-aware masking: a local dilated conv gated by a sigmoid of utterance- and segment-level context."""

    def __init__(self, bn_channels: int, out_channels: int, kernel_size: int, dilation: int) -> None:
        super().__init__()
        padding = (kernel_size - 1) // 2 * dilation
        self.linear_local = nn.Conv1d(
            bn_channels, out_channels, kernel_size, padding=padding, dilation=dilation, bias=False
        )
        self.linear1 = nn.Conv1d(bn_channels, bn_channels // CAM_REDUCTION, 1)
        self.linear2 = nn.Conv1d(bn_channels // CAM_REDUCTION, out_channels, 1)

    def forward(self, x: Tensor) -> Tensor:
        local = self.linear_local(x)
        context = x.mean(dim=-1, keepdim=True) + segment_average(x)
        gate = torch.sigmoid(self.linear2(F.relu(self.linear1(context))))
        return local * gate


class CAMDenseLayer(nn.Module):
    """BN-ReLU, 1x1 bottleneck to ``bn_channels``, BN-ReLU, CAM layer producing ``growth`` new channels."""

    def __init__(
        self, in_channels: int, growth: int, bn_channels: int, kernel_size: int, dilation: int
    ) -> None:
        super().__init__()
        self.nonlinear1 = _bn_relu(in_channels)
        self.linear1 = nn.Conv1d(in_channels, bn_channels, 1, bias=False)
        self.nonlinear2 = _bn_relu(bn_channels)
        self.cam_layer = CAMLayer(bn_channels, growth, kernel_size, dilation)

    def forward(self, x: Tensor) -> Tensor:
        return self.cam_layer(self.nonlinear2(self.linear1(self.nonlinear1(x))))


class CAMDenseBlock(nn.Module):
    """Densely connected CAM layers (named ``tdnnd1``..``tdnnd<n>``); each appends its output to the input."""

    def __init__(
        self,
        num_layers: int,
        in_channels: int,
        growth: int,
        bn_channels: int,
        kernel_size: int,
        dilation: int,
    ) -> None:
        super().__init__()
        for index in range(num_layers):
            layer = CAMDenseLayer(in_channels + index * growth, growth, bn_channels, kernel_size, dilation)
            self.add_module(f"tdnnd{index + 1}", layer)
        self.out_channels = in_channels + num_layers * growth

    def forward(self, x: Tensor) -> Tensor:
        for layer in self.children():
            x = torch.cat([x, layer(x)], dim=1)
        return x


class TransitLayer(nn.Module):
    """BN-ReLU then a 1x1 conv without bias (halves the channels between dense blocks)."""

    def __init__(self, in_channels: int, out_channels: int) -> None:
        super().__init__()
        self.nonlinear = _bn_relu(in_channels)
        self.linear = nn.Conv1d(in_channels, out_channels, 1, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        return self.linear(self.nonlinear(x))


class StatsPool(nn.Module):
    """Mean and unbiased standard deviation over time: (B, C, T) -> (B, 2C)."""

    def forward(self, x: Tensor) -> Tensor:
        return torch.cat([x.mean(dim=-1), x.std(dim=-1, unbiased=True)], dim=-1)


class DenseEmbedding(nn.Module):
    """1x1 projection (no bias) of the pooled statistics, then BatchNorm without affine parameters."""

    def __init__(self, in_channels: int, out_channels: int) -> None:
        super().__init__()
        self.linear = nn.Conv1d(in_channels, out_channels, 1, bias=False)
        self.nonlinear = nn.Sequential(OrderedDict(batchnorm=nn.BatchNorm1d(out_channels, affine=False)))

    def forward(self, x: Tensor) -> Tensor:
        return self.nonlinear(self.linear(x.unsqueeze(-1)).squeeze(-1))


class CAMPPlus(nn.Module):
    """CAM++: fbank (B, T, feat_dim) -> speaker embedding (B, embedding_size)."""

    def __init__(
        self,
        feat_dim: int = FEAT_DIM,
        embedding_size: int = 192,
        growth_rate: int = 32,
        bn_size: int = 4,
        init_channels: int = 128,
    ) -> None:
        super().__init__()
        if feat_dim % 8:
            raise ValueError(
                f"CAMPPlus feat_dim must be a multiple of 8 (the head eighths it), got {feat_dim}"
            )
        self.feat_dim = feat_dim
        self.embedding_size = embedding_size
        self.head = FCMHead(feat_dim)
        layers: OrderedDict[str, nn.Module] = OrderedDict()
        layers["tdnn"] = TDNNLayer(self.head.out_channels, init_channels, 5, stride=2)
        channels = init_channels
        for index, (num_layers, kernel_size, dilation) in enumerate(DENSE_BLOCKS, start=1):
            block = CAMDenseBlock(
                num_layers, channels, growth_rate, bn_size * growth_rate, kernel_size, dilation
            )
            layers[f"block{index}"] = block
            layers[f"transit{index}"] = TransitLayer(block.out_channels, block.out_channels // 2)
            channels = block.out_channels // 2
        layers["out_nonlinear"] = _bn_relu(channels)
        layers["stats"] = StatsPool()
        layers["dense"] = DenseEmbedding(channels * 2, embedding_size)
        self.xvector = nn.Sequential(layers)

    def forward(self, features: Tensor) -> Tensor:
        """features (B, T, feat_dim), already mean-subtracted per bin -> (B, embedding_size)."""
        if features.dim() != 3 or features.shape[-1] != self.feat_dim:
            raise ValueError(
                f"CAMPPlus wants fbank (B, T, {self.feat_dim}), got shape {list(features.shape)}"
            )
        return self.xvector(self.head(features.transpose(1, 2)))

    @torch.no_grad()
    def style_of(self, audio_16k: Tensor) -> Tensor:
        """Speaker style (B, embedding_size) of 16 kHz audio (B, N) or (N,): Kaldi fbank minus its time mean,
        then CAM++ (no gradients: the encoder is frozen wherever IndexTTS uses it)."""
        features = speaker_fbank(audio_16k.detach().cpu()).to(next(self.parameters()))
        return self(features)


def load_campplus(
    state_dict: Mapping[str, Any] | str | Path, source: str | None = None, **sizes: int
) -> CAMPPlus:
    """Build CAMPPlus (real sizes unless overridden) and load a plain state dict strictly, in eval mode.

    ``state_dict`` may be the dict itself or the path of ``campplus_cn_common.bin`` (or a fixture like it).
    """
    if isinstance(state_dict, (str, Path)):
        path = Path(state_dict)
        source = source or str(path)
        if not path.is_file():
            raise FileNotFoundError(f"CAMPPlus weights not found: {path}")
        try:
            state_dict = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as error:  # a truncated or foreign file: say which, in one line
            first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            raise ValueError(f"{path} could not be read as a CAMPPlus state dict: {first_line}") from error
        if not isinstance(state_dict, Mapping):
            raise ValueError(f"{path} is not a plain state dict (got {type(state_dict).__name__})")
    model = CAMPPlus(**{**REAL_SIZES, **sizes})
    load_strict(model, state_dict, source or "CAMPPlus state dict")
    return model.eval()
