"""IndexTTS-2.5's semantic codec (upstream ``EnhancedCodec``): 25 Hz codes from 50 Hz w2v-BERT features.

It is IndexTTS2's RepCodec (``networks.semantic_codec``: the same Vocos backbones and the same factorised
quantiser, reused here, not redefined) with a time reduction around it:

- ``down``: Conv1d hidden -> hidden, kernel 3, stride 2, padding 1 (+ exact GELU): T frames -> ceil(T / 2);
- ``up``: Conv1d hidden -> hidden, kernel 3, stride 1, padding 1, after a nearest x2 repeat in time.

``quantize(features (B, T, hidden))`` -> (codes (B, ceil(T/2)), quantised (B, ceil(T/2), hidden)); the codes
are the GPT's targets. ``decode(codes (B, M))`` -> (B, 2M, hidden): the 50 Hz embeddings S2Mel reads
(``S_infer``). Real sizes (the ``semantic_codec`` config section, unchanged from v2): hidden 1024, Vocos 384 /
2048 / 12 layers, codebook 8192 x 8; ``num_quantizers`` 1 and ``downsample_scale`` 2 are constructor defaults
the config does not override. ``codec.pth`` is ``{"model": state_dict}`` (243 keys, order down, up, encoder,
decoder, quantizer); :func:`load_codec25` loads it strictly, where upstream silently keeps random weights
for every key whose name or shape does not fit.
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
from networks.semantic_codec import (
    CodeSearch,
    FactorizedVectorQuantizer,
    ResidualQuantizer,
    SemanticCodecConfig,
    VocosBackbone,
    codec_state_dict,
)

CODEC_FILE_NAME = "codec.pth"  # upstream hard-codes this name inside the model folder
TIME_REDUCTION = 2  # the only downsample_scale upstream's decode supports (50 Hz features -> 25 Hz codes)


@dataclass(frozen=True)
class Codec25Config(SemanticCodecConfig):
    """The ``semantic_codec`` section as IndexTTS-2.5 reads it: the same keys, ``downsample_scale`` 2."""

    downsample_scale: int = TIME_REDUCTION

    def check_supported(self) -> None:
        if self.num_quantizers != 1 or self.downsample_scale != TIME_REDUCTION:
            raise ValueError(
                "semantic_codec config: IndexTTS-2.5's codec supports only num_quantizers 1 and "
                f"downsample_scale {TIME_REDUCTION}, got {self.num_quantizers} and {self.downsample_scale}"
            )


def _backbone(config: Codec25Config) -> nn.Sequential:
    return nn.Sequential(
        VocosBackbone(
            config.hidden_size, config.vocos_dim, config.vocos_intermediate_dim, config.vocos_num_layers
        ),
        nn.Linear(config.vocos_dim, config.hidden_size),
    )


class Codec25(nn.Module):
    """The 2.5 codec: ``quantize`` (features -> 25 Hz codes) and ``decode`` (codes -> 50 Hz embeddings)."""

    def __init__(self, config: Codec25Config | None = None) -> None:
        super().__init__()
        self.config = config = config or Codec25Config()
        config.check_supported()
        hidden = config.hidden_size
        # Registration order = the real codec.pth key order.
        self.down = nn.Conv1d(hidden, hidden, kernel_size=3, stride=TIME_REDUCTION, padding=1)
        self.up = nn.Conv1d(hidden, hidden, kernel_size=3, stride=1, padding=1)
        self.encoder = _backbone(config)
        self.decoder = _backbone(config)
        self.quantizer = ResidualQuantizer(
            hidden, config.codebook_size, config.codebook_dim, config.num_quantizers
        )

    @property
    def vq(self) -> FactorizedVectorQuantizer:
        return self.quantizer.quantizers[0]

    def encode(self, features: Tensor) -> Tensor:
        """features (B, T, hidden) -> encoder output (B, hidden, ceil(T/2)).

        An odd last frame is kept (the stride-2 conv sees a zero-padded window), as upstream's ``quantize``
        does; its training ``forward`` drops that frame instead.
        """
        self._check_features(features)
        reduced = F.gelu(self.down(features.transpose(1, 2)))
        return self.encoder(reduced).transpose(1, 2)

    def latents(self, features: Tensor) -> Tensor:
        """features (B, T, hidden) -> z_e (B, codebook_dim, ceil(T/2)), the in_project output."""
        return self.vq.in_project(self.encode(features))

    def search(self, features: Tensor) -> CodeSearch:
        """Codes with their runner-up and best-minus-second score margin (how close each decision was)."""
        return self.vq.search(self.latents(features))

    def quantize(self, features: Tensor) -> tuple[Tensor, Tensor]:
        """features (B, T, hidden) -> (codes int64 (B, ceil(T/2)), quantised (B, ceil(T/2), hidden)).

        The quantised output is ``out_project`` of the raw codebook rows, as upstream returns it.
        """
        codes = self.search(features).codes
        return codes, self.embed_codes(codes).transpose(1, 2)

    def embed_codes(self, codes: Tensor) -> Tensor:
        """codes (B, M) -> out_project(codebook rows) (B, hidden, M) (upstream ``vq2emb``)."""
        self._check_codes(codes)
        return self.vq.vq2emb(codes)

    def decode(self, codes: Tensor) -> Tensor:
        """codes (B, M) -> (B, 2M, hidden): decoder, nearest x2 repeat in time, ``up`` conv (S2Mel input)."""
        decoded = self.decoder(self.embed_codes(codes)).transpose(1, 2)  # (B, hidden, M)
        doubled = F.interpolate(decoded, scale_factor=TIME_REDUCTION, mode="nearest")
        return self.up(doubled).transpose(1, 2)

    def _check_features(self, features: Tensor) -> None:
        if features.dim() != 3 or features.shape[-1] != self.config.hidden_size or features.shape[1] < 1:
            raise ValueError(
                f"IndexTTS-2.5 codec expects features (batch, frames >= 1, {self.config.hidden_size}), "
                f"got {tuple(features.shape)}"
            )

    def _check_codes(self, codes: Tensor) -> None:
        if codes.dim() != 2 or codes.dtype.is_floating_point:
            raise ValueError(
                "IndexTTS-2.5 codec expects integer codes of shape (batch, codes), "
                f"got {tuple(codes.shape)} {codes.dtype}"
            )
        low, high = (int(codes.min()), int(codes.max())) if codes.numel() else (0, 0)
        if low < 0 or high >= self.config.codebook_size:
            raise ValueError(f"codes must lie in 0..{self.config.codebook_size - 1}, got {low}..{high}")


def codec25_config(section: Codec25Config | Mapping[str, Any] | None) -> Codec25Config:
    """The config from a ``semantic_codec`` section (None: the real sizes); unknown keys are refused."""
    if isinstance(section, Codec25Config):
        return section
    return Codec25Config.from_section(section or {})


def build_codec25(
    section: Codec25Config | Mapping[str, Any] | None = None, *, device: str | torch.device | None = None
) -> Codec25:
    """A randomly initialised codec from the config section; ``device="meta"`` builds the layout only."""
    config = codec25_config(section)
    if device is None:
        return Codec25(config)
    with torch.device(device):
        return Codec25(config)


def read_codec25_state_dict(path: str | Path) -> Mapping[str, Any]:
    """The state dict in a ``codec.pth`` (``{"model": state_dict}``, or flat), read with weights_only."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"IndexTTS-2.5 codec weights not found: {path}")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # pickle / zip errors: one line naming the file
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ValueError(
            f"{path} cannot be read as weights only ({first}); if it also holds optimizer state or other "
            "objects, re-save just its 'model' state dict"
        ) from None
    if not isinstance(payload, Mapping):
        raise ValueError(f"{path} holds {type(payload).__name__}, not a codec state dict")
    return codec_state_dict(payload)


def load_codec25(
    path: str | Path,
    section: Codec25Config | Mapping[str, Any] | None = None,
    *,
    device: str | torch.device = "cpu",
) -> Codec25:
    """Build the codec from the config section and load ``path`` strictly (eval mode).

    Built on the meta device and the file's tensors assigned (no random init). A config whose sizes do not
    fit the file raises StateDictMismatchError, one line naming the first missing / unexpected /
    mis-shaped key.
    """
    config = codec25_config(section)
    state = read_codec25_state_dict(path)
    model = build_codec25(config, device="meta")
    load_strict(model, state, str(path), assign=True)
    return model.to(device).eval()
