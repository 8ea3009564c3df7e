"""IndexTTS's DVAE (the ``vqvae`` section): mel -> discrete codes the GPT learns to predict.

Built from the config's ``vqvae`` mapping with the same module layout as the upstream checkpoint, so
a real ``dvae.pth`` (``{"model": state_dict}``) loads strictly. Only what turns mels into codes (and
codes back into mels) is implemented; the training-only parts exist as buffers so keys match.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

# vqvae keys that only matter for training the DVAE itself (losses, logging): accepted, not used.
_TRAINING_ONLY_KEYS = {"smooth_l1_loss", "straight_through", "record_codes", "lr_quantizer_args"}
_SUPPORTED_DEFAULTS: dict[str, Any] = {
    "positional_dims": 1,
    "use_transposed_convs": False,
    "encoder_norm": False,
    "activation": "relu",
    "normalization": None,
    "stride": 2,
}


class DVAEError(ValueError):
    """A DVAE checkpoint or config that cannot be used (one-line message naming the file)."""


class ResBlock(nn.Module):
    """conv3 -> ReLU -> conv3 -> ReLU -> conv1, added to the input (no activation after the add)."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv1d(channels, channels, 3, padding=1),
            nn.ReLU(),
            nn.Conv1d(channels, channels, 3, padding=1),
            nn.ReLU(),
            nn.Conv1d(channels, channels, 1),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.net(x)


class UpsampledConv(nn.Module):
    """Nearest-neighbour x2 upsampling followed by a stride-1 convolution."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int) -> None:
        super().__init__()
        self.conv = nn.Conv1d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(F.interpolate(x, scale_factor=2, mode="nearest"))


class Codebook(nn.Module):
    """``embed`` is (dim, codes); ``cluster_size`` / ``embed_avg`` are EMA training statistics."""

    def __init__(self, dim: int, num_codes: int) -> None:
        super().__init__()
        embed = torch.randn(dim, num_codes)
        self.register_buffer("embed", embed)
        self.register_buffer("cluster_size", torch.zeros(num_codes))
        self.register_buffer("embed_avg", embed.clone())

    def nearest(self, vectors: torch.Tensor) -> torch.Tensor:
        """(..., dim) -> int64 (...) index of the code with the smallest squared L2 distance."""
        flat = vectors.reshape(-1, vectors.shape[-1])
        dist = (
            flat.pow(2).sum(1, keepdim=True)
            - 2 * flat @ self.embed
            + self.embed.pow(2).sum(0, keepdim=True)
        )
        return (-dist).argmax(dim=1).reshape(vectors.shape[:-1])

    def lookup(self, codes: torch.Tensor) -> torch.Tensor:
        """int codes (...) -> (..., dim) code vectors."""
        return F.embedding(codes, self.embed.transpose(0, 1))


class DiscretizationStats(nn.Module):
    """Training bookkeeping buffers stored in every checkpoint (never used for inference)."""

    def __init__(self, num_tokens: int, steps: int) -> None:
        super().__init__()
        self.register_buffer("accumulator_index", torch.zeros(1, dtype=torch.long))
        self.register_buffer("accumulator_filled", torch.zeros(1, dtype=torch.long))
        self.register_buffer("accumulator", torch.zeros(steps, num_tokens))


class DiscreteVAE(nn.Module):
    def __init__(
        self,
        channels: int = 100,
        num_tokens: int = 8192,
        hidden_dim: int = 512,
        num_resnet_blocks: int = 3,
        codebook_dim: int = 512,
        num_layers: int = 2,
        kernel_size: int = 3,
        discretization_loss_averaging_steps: int = 100,
    ) -> None:
        super().__init__()
        self.channels = channels
        self.num_tokens = num_tokens
        self.downsample_factor = 2**num_layers
        padding = kernel_size // 2
        # Registered first so the state_dict key order is upstream's.
        self.discrete_loss = DiscretizationStats(num_tokens, discretization_loss_averaging_steps)
        widths = [hidden_dim * 2**i for i in range(num_layers)]

        encoder: list[nn.Module] = []
        in_ch = channels
        for width in widths:
            encoder.append(nn.Sequential(nn.Conv1d(in_ch, width, kernel_size, stride=2, padding=padding), nn.ReLU()))
            in_ch = width
        encoder.extend(ResBlock(widths[-1]) for _ in range(num_resnet_blocks))
        encoder.append(nn.Conv1d(widths[-1], codebook_dim, 1))
        self.encoder = nn.Sequential(*encoder)

        decoder: list[nn.Module] = []
        up_widths = list(reversed(widths))
        first = up_widths[0] if num_resnet_blocks > 0 else codebook_dim
        if num_resnet_blocks > 0:
            decoder.append(nn.Conv1d(codebook_dim, first, 1))
        decoder.extend(ResBlock(first) for _ in range(num_resnet_blocks))
        in_ch = first
        for width in up_widths:
            decoder.append(nn.Sequential(UpsampledConv(in_ch, width, kernel_size), nn.ReLU()))
            in_ch = width
        decoder.append(nn.Conv1d(in_ch, channels, 1))
        self.decoder = nn.Sequential(*decoder)

        self.codebook = Codebook(codebook_dim, num_tokens)

    @classmethod
    def from_config(cls, vqvae_config: Mapping[str, Any]) -> DiscreteVAE:
        """Build from a config's ``vqvae`` mapping; refuses settings this implementation lacks."""
        cfg = dict(vqvae_config)
        for key, supported in _SUPPORTED_DEFAULTS.items():
            value = cfg.pop(key, supported)
            if value != supported:
                raise DVAEError(f"vqvae.{key}={value!r} is not supported (only {supported!r})")
        for key in _TRAINING_ONLY_KEYS:
            cfg.pop(key, None)
        try:
            return cls(**cfg)
        except TypeError as exc:
            raise DVAEError(f"vqvae config not understood: {exc}") from None

    @torch.no_grad()
    def encode(self, mel: torch.Tensor) -> torch.Tensor:
        """(batch, channels, frames) log-mel -> (batch, ceil(frames/4), codebook_dim) encoder output."""
        if mel.dim() != 3 or mel.shape[1] != self.channels:
            raise ValueError(f"expected a (batch, {self.channels}, frames) mel, got {tuple(mel.shape)}")
        return self.encoder(mel).transpose(1, 2)

    @torch.no_grad()
    def get_codebook_indices(self, mel: torch.Tensor) -> torch.Tensor:
        """(batch, channels, frames) log-mel -> int64 codes (batch, ceil(ceil(frames/2)/2))."""
        was_training = self.training
        self.eval()
        try:
            return self.codebook.nearest(self.encode(mel))
        finally:
            self.train(was_training)

    @torch.no_grad()
    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        """int codes (batch, n) -> the decoder's reconstruction (batch, channels, n * 4)."""
        return self.decoder(self.codebook.lookup(codes).transpose(1, 2))


def build_dvae(vqvae_config: Mapping[str, Any]) -> DiscreteVAE:
    """A freshly initialised DVAE for a ``vqvae`` mapping (seed torch first for reproducible weights)."""
    return DiscreteVAE.from_config(vqvae_config)


def load_dvae(path: str | Path, vqvae_config: Mapping[str, Any], device: str | torch.device = "cpu") -> DiscreteVAE:
    """Load ``dvae.pth`` (``{"model": state_dict}``) strictly into a DVAE built from ``vqvae_config``."""
    path = Path(path)
    if not path.is_file():
        raise DVAEError(f"DVAE checkpoint not found: {path}")
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # any unpickling failure means "not a loadable checkpoint"
        raise DVAEError(f"{path}: not a loadable DVAE checkpoint ({type(exc).__name__}: {exc})") from None
    state_dict = checkpoint.get("model", checkpoint) if isinstance(checkpoint, dict) else None
    if not isinstance(state_dict, dict) or not all(isinstance(v, torch.Tensor) for v in state_dict.values()):
        raise DVAEError(f"{path}: expected {{'model': state_dict}} of tensors")
    model = build_dvae(vqvae_config)
    _check_keys(path, model.state_dict(), state_dict)
    model.load_state_dict(state_dict, strict=True)
    return model.to(device).eval()


def _check_keys(path: Path, expected: Mapping[str, torch.Tensor], actual: Mapping[str, torch.Tensor]) -> None:
    missing = [k for k in expected if k not in actual]
    unexpected = [k for k in actual if k not in expected]
    wrong = [
        f"{k} {tuple(actual[k].shape)} != {tuple(v.shape)}"
        for k, v in expected.items()
        if k in actual and tuple(actual[k].shape) != tuple(v.shape)
    ]
    if not (missing or unexpected or wrong):
        return
    parts = []
    for label, items in (("missing", missing), ("unexpected", unexpected), ("wrong shape", wrong)):
        if items:
            shown = ", ".join(items[:5]) + (f" (+{len(items) - 5} more)" if len(items) > 5 else "")
            parts.append(f"{label}: {shown}")
    raise DVAEError(f"{path}: DVAE checkpoint does not match the vqvae config ({'; '.join(parts)})")
