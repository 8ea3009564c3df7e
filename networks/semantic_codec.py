"""IndexTTS2's semantic codec: MaskGCT's RepCodec, the part that turns w2v-BERT features into 50 Hz codes.

Layout (real sizes from the ``semantic_codec`` config section: hidden 1024, Vocos width 384, intermediate
2048, 12 ConvNeXt layers, one factorised quantiser with an 8192 x 8 codebook):

- ``encoder``: ``0`` a Vocos backbone (conv k7 hidden -> dim, LayerNorm, ConvNeXt blocks, final LayerNorm),
  ``1`` Linear(dim -> hidden). ``decoder`` has the same shape; IndexTTS2 never runs it, but the weights file
  holds it, so it is built to load the file strictly.
- ``quantizer.quantizers.0``: ``in_project`` (old-style weight-normed 1x1 conv hidden -> 8, keys
  ``weight_g``/``weight_v``), ``codebook`` (Embedding 8192 x 8), ``out_project`` (weight-normed 8 -> hidden).

``quantize(features)`` (B, T, hidden) -> (codes (B, T), de-quantised S (B, T, hidden)); ``vq2emb(codes)``
-> (B, hidden, T). The real weights are a flat safetensors state dict (``model.safetensors``); the fixtures
wrap the same keys as ``{"model": ...}``: ``load_semantic_codec`` accepts both and loads strictly.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from networks.loading import load_strict

VOCOS_LAYER_NORM_EPS = 1e-6


@dataclass(frozen=True)
class SemanticCodecConfig:
    """The ``semantic_codec`` section of IndexTTS2's config.yaml (defaults = the real v2.0 values)."""

    codebook_size: int = 8192
    hidden_size: int = 1024
    codebook_dim: int = 8
    vocos_dim: int = 384
    vocos_intermediate_dim: int = 2048
    vocos_num_layers: int = 12
    num_quantizers: int = 1
    downsample_scale: int = 1

    @classmethod
    def from_section(cls, section: Mapping[str, Any]) -> SemanticCodecConfig:
        """Build from the config section; unknown keys are refused, quantiser/downsample variants too."""
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(section) - known)
        if unknown:
            raise ValueError(f"semantic_codec config: unknown key(s) {', '.join(unknown)}")
        config = cls(**{key: section[key] for key in section})
        config.check_supported()
        return config

    def check_supported(self) -> None:
        """Refuse the variants this codec class does not implement (a subclass names its own)."""
        if self.num_quantizers != 1 or self.downsample_scale not in (1, None):
            raise ValueError(
                "semantic_codec config: only num_quantizers 1 and downsample_scale 1 (IndexTTS2's codec) "
                f"are supported, got {self.num_quantizers} and {self.downsample_scale}"
            )


class ConvNeXtBlock(nn.Module):
    """Depthwise conv k7 -> LayerNorm -> Linear up -> exact GELU -> Linear down -> per-channel gamma, residual."""

    def __init__(self, dim: int, intermediate_dim: int) -> None:
        super().__init__()
        self.dwconv = nn.Conv1d(dim, dim, kernel_size=7, padding=3, groups=dim)
        self.norm = nn.LayerNorm(dim, eps=VOCOS_LAYER_NORM_EPS)
        self.pwconv1 = nn.Linear(dim, intermediate_dim)
        self.pwconv2 = nn.Linear(intermediate_dim, dim)
        self.gamma = nn.Parameter(torch.ones(dim))

    def forward(self, x: Tensor) -> Tensor:  # (B, C, T)
        h = self.dwconv(x).transpose(1, 2)
        h = self.pwconv2(F.gelu(self.pwconv1(self.norm(h))))
        return x + (self.gamma * h).transpose(1, 2)


class VocosBackbone(nn.Module):
    """(B, C_in, T) -> (B, T, dim): embedding conv k7, LayerNorm, ConvNeXt stack, final LayerNorm."""

    def __init__(self, input_channels: int, dim: int, intermediate_dim: int, num_layers: int) -> None:
        super().__init__()
        self.embed = nn.Conv1d(input_channels, dim, kernel_size=7, padding=3)
        self.norm = nn.LayerNorm(dim, eps=VOCOS_LAYER_NORM_EPS)
        self.convnext = nn.ModuleList(ConvNeXtBlock(dim, intermediate_dim) for _ in range(num_layers))
        self.final_layer_norm = nn.LayerNorm(dim, eps=VOCOS_LAYER_NORM_EPS)

    def forward(self, x: Tensor) -> Tensor:
        x = self.norm(self.embed(x).transpose(1, 2)).transpose(1, 2)
        for block in self.convnext:
            x = block(x)
        return self.final_layer_norm(x.transpose(1, 2))


class WeightNormConv1d(nn.Module):
    """A 1x1 Conv1d stored as old-style weight norm (``weight_g`` [out, 1, 1], ``weight_v``, ``bias``).

    The effective weight is computed the way torch's weight_norm hook does (g * v / ||v|| per output
    channel, through the same kernel), so the numbers equal upstream's.
    """

    def __init__(self, in_channels: int, out_channels: int) -> None:
        super().__init__()
        # Registered in the order torch's weight_norm leaves in a state dict (bias, weight_g, weight_v).
        self.bias = nn.Parameter(torch.zeros(out_channels))
        self.weight_g = nn.Parameter(torch.ones(out_channels, 1, 1))
        self.weight_v = nn.Parameter(torch.empty(out_channels, in_channels, 1))
        nn.init.kaiming_uniform_(self.weight_v, a=5**0.5)

    def weight(self) -> Tensor:
        return torch._weight_norm(self.weight_v, self.weight_g, 0)

    def forward(self, x: Tensor) -> Tensor:  # (B, C_in, T)
        return F.conv1d(x, self.weight(), self.bias)


@dataclass
class CodeSearch:
    """Nearest-code search results for (B, T) frames: codes, runner-up codes and the score margin."""

    codes: Tensor
    second: Tensor
    margin: Tensor


class FactorizedVectorQuantizer(nn.Module):
    """Project to ``codebook_dim``, pick the cosine-nearest code, project the raw code row back."""

    def __init__(self, hidden_size: int, codebook_size: int, codebook_dim: int) -> None:
        super().__init__()
        self.in_project = WeightNormConv1d(hidden_size, codebook_dim)
        self.out_project = WeightNormConv1d(codebook_dim, hidden_size)
        self.codebook = nn.Embedding(codebook_size, codebook_dim)

    def scores(self, z_e: Tensor) -> Tensor:
        """(B*T, codebook) scores -(|e|^2 - 2 e.c + |c|^2) of L2-normalised latents e and codes c.

        Kept in this expanded form (not as the cosine alone) because ties and tiny margins between the
        8192 codes then resolve exactly as upstream's.
        """
        latents = F.normalize(z_e.transpose(1, 2).reshape(-1, z_e.shape[1]))
        codebook = F.normalize(self.codebook.weight)
        distance = (
            latents.pow(2).sum(1, keepdim=True)
            - 2 * latents @ codebook.t()
            + codebook.pow(2).sum(1, keepdim=True).t()
        )
        return -distance

    def search(self, z_e: Tensor) -> CodeSearch:
        """Best and second-best code per frame of z_e (B, codebook_dim, T), with their score margin."""
        scores = self.scores(z_e)
        codes = scores.max(1)[1]
        top2 = scores.topk(2, dim=1)
        shape = (z_e.shape[0], z_e.shape[2])
        return CodeSearch(
            codes=codes.reshape(shape),
            second=top2.indices[:, 1].reshape(shape),
            margin=(top2.values[:, 0] - top2.values[:, 1]).reshape(shape),
        )

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """x (B, hidden, T) -> (codes (B, T), de-quantised (B, hidden, T))."""
        z_e = self.in_project(x)
        codes = self.scores(z_e).max(1)[1].reshape(z_e.shape[0], z_e.shape[2])
        z_q = self.codebook(codes).transpose(1, 2)
        # Straight-through form (z_e + (z_q - z_e)), as upstream computes it: not bit-equal to z_q.
        z_q = z_e + (z_q - z_e)
        return codes, self.out_project(z_q)

    def vq2emb(self, codes: Tensor) -> Tensor:
        """codes (B, T) -> out_project(codebook rows) (B, hidden, T)."""
        return self.out_project(self.codebook(codes).transpose(1, 2))


class ResidualQuantizer(nn.Module):
    """Holder of the quantiser list (IndexTTS2's codec has exactly one), for the real key layout."""

    def __init__(self, hidden_size: int, codebook_size: int, codebook_dim: int, num_quantizers: int) -> None:
        super().__init__()
        self.quantizers = nn.ModuleList(
            FactorizedVectorQuantizer(hidden_size, codebook_size, codebook_dim) for _ in range(num_quantizers)
        )


class SemanticCodec(nn.Module):
    """RepCodec as IndexTTS2 uses it: ``quantize`` for codes and S, ``vq2emb`` for code embeddings."""

    def __init__(self, config: SemanticCodecConfig | None = None) -> None:
        super().__init__()
        self.config = config = config or SemanticCodecConfig()

        def backbone() -> nn.Sequential:
            return nn.Sequential(
                VocosBackbone(
                    config.hidden_size,
                    config.vocos_dim,
                    config.vocos_intermediate_dim,
                    config.vocos_num_layers,
                ),
                nn.Linear(config.vocos_dim, config.hidden_size),
            )

        self.encoder = backbone()
        self.decoder = backbone()
        self.quantizer = ResidualQuantizer(
            config.hidden_size, config.codebook_size, config.codebook_dim, config.num_quantizers
        )

    @property
    def vq(self) -> FactorizedVectorQuantizer:
        return self.quantizer.quantizers[0]

    def encode(self, features: Tensor) -> Tensor:
        """features (B, T, hidden) -> encoder output (B, T, hidden) (Vocos backbone + linear)."""
        self._check_features(features)
        return self.encoder(features.transpose(1, 2))

    def latents(self, features: Tensor) -> Tensor:
        """features (B, T, hidden) -> z_e (B, codebook_dim, T), the in_project output."""
        return self.vq.in_project(self.encode(features).transpose(1, 2))

    def quantize(self, features: Tensor) -> tuple[Tensor, Tensor]:
        """features (B, T, hidden) -> (codes int64 (B, T), S (B, T, hidden))."""
        codes, dequantised = self.vq(self.encode(features).transpose(1, 2))
        return codes, dequantised.transpose(1, 2)

    def search(self, features: Tensor) -> CodeSearch:
        """Codes with their runner-up and score margin (for checks of how close each decision was)."""
        return self.vq.search(self.latents(features))

    def vq2emb(self, codes: Tensor) -> Tensor:
        """codes (B, T) -> (B, hidden, T).

        Upstream's ``vq2emb(codes.unsqueeze(1))`` reads its first axis as the quantiser axis, so it is only
        right for batch 1; this one is per row for any batch (identical for batch 1).
        """
        if codes.dim() != 2:
            raise ValueError(f"vq2emb expects codes of shape (batch, frames), got {tuple(codes.shape)}")
        return self.vq.vq2emb(codes)

    def _check_features(self, features: Tensor) -> None:
        if features.dim() != 3 or features.shape[-1] != self.config.hidden_size:
            raise ValueError(
                f"semantic codec expects features (batch, frames, {self.config.hidden_size}), "
                f"got {tuple(features.shape)}"
            )


def codec_state_dict(payload: Mapping[str, Any]) -> Mapping[str, Any]:
    """The flat state dict of a codec file: the real flat layout, or the fixtures' ``{"model": ...}``."""
    if "model" in payload and isinstance(payload["model"], Mapping):
        return payload["model"]
    return payload


def read_state_dict_file(path: Path) -> Mapping[str, Any]:
    """A state dict from ``.safetensors`` or a torch file (weights only)."""
    if not path.is_file():
        raise FileNotFoundError(f"semantic codec weights not found: {path}")
    if path.suffix == ".safetensors":
        from safetensors.torch import load_file

        return load_file(str(path))
    return torch.load(path, map_location="cpu", weights_only=True)


def load_semantic_codec(
    path: str | Path, config: SemanticCodecConfig | Mapping[str, Any] | None = None
) -> SemanticCodec:
    """Build the codec from ``config`` (a ``semantic_codec`` section or dataclass) and load ``path`` strictly.

    Raises StateDictMismatchError naming the first missing / unexpected / mis-shaped key.
    """
    if config is None or isinstance(config, Mapping):
        config = SemanticCodecConfig.from_section(config or {})
    path = Path(path)
    codec = SemanticCodec(config)
    load_strict(codec, codec_state_dict(read_state_dict_file(path)), str(path))
    return codec.eval()
