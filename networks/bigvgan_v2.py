"""BigVGAN v2 (``nvidia/bigvgan_v2_22khz_80band_256x``), the vocoder of IndexTTS2 and IndexTTS-2.5: 80-band log-mel
-> 22.05 kHz waveform.

Written from shared/reference/README_indextts2_audio.md section 7 and the fixtures; no upstream code. It is the
v1.5 generator (networks.bigvgan) without speaker conditioning, built from the same blocks: conv_pre 80 -> C0
(kernel 7), per stage a transposed conv then the mean of the AMP blocks, an anti-aliased SnakeBeta, conv_post
-> 1 (kernel 7), and at the end ``tanh`` or, as the real config says (``use_tanh_at_final: false``), a clamp to
[-1, 1]; ``use_bias_at_final: false`` drops conv_post's bias. Key layout: the real ``bigvgan_generator.pt``
``{"generator": state_dict}`` in weight-norm form (783 keys at real size).

Public API:

- ``BigVGANV2Spec.from_config(config)``: the sizes, from the hub's ``config.json`` as a dict (or the fixtures'
  ``fixture_bigvgan``, same keys); training-only keys are ignored. ``HUB_CONFIG`` holds the real generator
  values (C0 1536, stage widths 768 ... 24).
- ``BigVGANV2(spec)``: ``forward(mel)`` (B, num_mels, F) -> (B, 1, F * 256) in [-1, 1];
  ``fold_weight_norm()`` is upstream's ``remove_weight_norm()`` (same output, fewer ops).
- ``build_bigvgan_v2(spec, device)``: random weights (``device="meta"`` to inspect keys and shapes).
- ``load_bigvgan_v2(checkpoint, spec, path)``: a read ``{"generator": state_dict}`` (or ``{"model": ...}``)
  strictly into a model built from ``spec``; weight norm folded, eval mode; VocoderError (one line) otherwise.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from networks.bigvgan import (
    Activation1d,
    VocoderError,
    WeightNormConv,
    check_generator_sizes,
    fold_weight_norms,
    mean_of_blocks,
    upsampling_stages,
    vocoder_state_of,
)
from networks.gpt_config import ConfigError
from networks.loading import StateDictMismatchError, load_strict

REPO_ID = "nvidia/bigvgan_v2_22khz_80band_256x"
# The generator settings of the hub's config.json (README_indextts2_audio.md section 7).
HUB_CONFIG: dict[str, Any] = {
    "resblock": "1",
    "upsample_rates": [4, 4, 2, 2, 2, 2],
    "upsample_kernel_sizes": [8, 8, 4, 4, 4, 4],
    "upsample_initial_channel": 1536,
    "resblock_kernel_sizes": [3, 7, 11],
    "resblock_dilation_sizes": [[1, 3, 5], [1, 3, 5], [1, 3, 5]],
    "use_tanh_at_final": False,
    "use_bias_at_final": False,
    "activation": "snakebeta",
    "snake_logscale": True,
    "num_mels": 80,
    "n_fft": 1024,
    "hop_size": 256,
    "win_size": 1024,
    "sampling_rate": 22050,
    "fmin": 0,
    "fmax": None,
}
_REQUIRED = ("upsample_rates", "upsample_kernel_sizes", "upsample_initial_channel", "resblock_kernel_sizes",
             "resblock_dilation_sizes", "num_mels", "sampling_rate")


@dataclass(frozen=True)
class BigVGANV2Spec:
    upsample_rates: tuple[int, ...]
    upsample_kernel_sizes: tuple[int, ...]
    upsample_initial_channel: int
    resblock_kernel_sizes: tuple[int, ...]
    resblock_dilation_sizes: tuple[tuple[int, ...], ...]
    num_mels: int = 80
    sampling_rate: int = 22050
    snake_logscale: bool = True
    use_tanh_at_final: bool = False
    use_bias_at_final: bool = False

    @property
    def samples_per_frame(self) -> int:
        return math.prod(self.upsample_rates)

    @classmethod
    def from_config(cls, config: Mapping[str, Any], source: str = "config.json") -> BigVGANV2Spec:
        """From a BigVGAN v2 ``config.json`` dict. ``use_tanh_at_final`` / ``use_bias_at_final`` default to true
        when absent (BigVGAN's own default); the 22 kHz model sets both false."""
        if not isinstance(config, Mapping):
            raise ConfigError(f"{source}: a BigVGAN v2 config must be a mapping, not {type(config).__name__}")
        missing = [key for key in _REQUIRED if key not in config]
        if missing:
            raise ConfigError(f"{source}: BigVGAN v2 config lacks {', '.join(missing)}")
        if str(config.get("resblock", "1")) != "1":
            raise ConfigError(f"{source}: resblock {config['resblock']!r} is not supported (only '1')")
        if config.get("activation", "snakebeta") != "snakebeta":
            raise ConfigError(f"{source}: activation {config['activation']!r} is not supported (only 'snakebeta')")
        try:
            spec = cls(
                upsample_rates=tuple(int(v) for v in config["upsample_rates"]),
                upsample_kernel_sizes=tuple(int(v) for v in config["upsample_kernel_sizes"]),
                upsample_initial_channel=int(config["upsample_initial_channel"]),
                resblock_kernel_sizes=tuple(int(v) for v in config["resblock_kernel_sizes"]),
                resblock_dilation_sizes=tuple(tuple(int(d) for d in ds) for ds in config["resblock_dilation_sizes"]),
                num_mels=int(config["num_mels"]),
                sampling_rate=int(config["sampling_rate"]),
                snake_logscale=bool(config.get("snake_logscale", True)),
                use_tanh_at_final=bool(config.get("use_tanh_at_final", True)),
                use_bias_at_final=bool(config.get("use_bias_at_final", True)),
            )
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"{source}: bad BigVGAN v2 config ({exc})") from None
        check_generator_sizes(spec, source, section="bigvgan")
        hop = config.get("hop_size")
        if hop is not None and int(hop) != spec.samples_per_frame:
            raise ConfigError(f"{source}: hop_size {hop} differs from the product of upsample_rates "
                              f"({spec.samples_per_frame})")
        return spec


class BigVGANV2(nn.Module):
    """The v2 generator (see the module docstring)."""

    def __init__(self, spec: BigVGANV2Spec) -> None:
        super().__init__()
        self.spec = spec
        self.num_kernels = len(spec.resblock_kernel_sizes)
        self.conv_pre = WeightNormConv(spec.num_mels, spec.upsample_initial_channel, 7, padding=3)
        self.ups, self.resblocks, widths = upsampling_stages(
            spec.upsample_initial_channel, spec.upsample_rates, spec.upsample_kernel_sizes,
            spec.resblock_kernel_sizes, spec.resblock_dilation_sizes, spec.snake_logscale)
        self.activation_post = Activation1d(widths[-1], spec.snake_logscale)
        self.conv_post = WeightNormConv(widths[-1], 1, 7, padding=3, bias=spec.use_bias_at_final)

    def fold_weight_norm(self) -> None:
        """Upstream's ``remove_weight_norm()``: one plain weight per conv; the output does not change."""
        fold_weight_norms(self)

    def stage_blocks(self, stage: int) -> nn.ModuleList:
        """The AMP blocks of one upsampling stage (their outputs are averaged)."""
        return self.resblocks[stage * self.num_kernels : (stage + 1) * self.num_kernels]

    def forward(self, mel: Tensor) -> Tensor:
        """(B, num_mels, F) log-mel -> (B, 1, F * samples_per_frame) waveform in [-1, 1]."""
        x = self.conv_pre(mel)
        for index, stage in enumerate(self.ups):
            for up in stage:
                x = up(x)
            x = mean_of_blocks(self.stage_blocks(index), x)
        x = self.conv_post(self.activation_post(x))
        return torch.tanh(x) if self.spec.use_tanh_at_final else x.clamp(-1.0, 1.0)


def build_bigvgan_v2(spec: BigVGANV2Spec, device: torch.device | str | None = None) -> BigVGANV2:
    """A randomly initialised v2 generator (``device="meta"`` to only inspect keys and shapes)."""
    with torch.device(device or "cpu"):
        return BigVGANV2(spec)


def load_bigvgan_v2(checkpoint: Any, spec: BigVGANV2Spec, path: str | Path = "bigvgan_generator.pt",
                    device: torch.device | str = "cpu") -> BigVGANV2:
    """A read ``bigvgan_generator.pt`` (``{"generator": state_dict}``; ``{"model": ...}`` too) strictly into the
    generator ``spec`` describes; weight norm folded, eval mode. Raises VocoderError (one line naming the first
    missing / unexpected / mis-shaped key); ``path`` only names the file in that message."""
    path = Path(path)
    state = vocoder_state_of(checkpoint, path)
    model = build_bigvgan_v2(spec, "meta")
    state = {k: (v.float() if v.is_floating_point() else v) for k, v in state.items()}
    try:
        load_strict(model, state, f"{path} (BigVGAN v2 generator)", assign=True)
    except StateDictMismatchError as exc:
        raise VocoderError(str(exc)) from None
    model.fold_weight_norm()
    return model.to(device).eval()
