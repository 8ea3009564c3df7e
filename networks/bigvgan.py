"""The IndexTTS v1.5 BigVGAN decoder: GPT latents + a reference mel -> 24 kHz waveform.

Written from shared/reference/fixtures_indextts15_infer/FIXTURES.md ("the v1.5 BigVGAN generator"); no
upstream code. The module tree reproduces the real ``bigvgan_generator.pth`` key layout (1029 keys for
the real sizes: weight-normed convs as ``bias``/``weight_g``/``weight_v``, SnakeBeta ``alpha``/``beta``,
the anti-aliasing filters, the ECAPA speaker encoder, ``cond_layer`` and ``conds.i``).

Public API:

- ``VocoderSpec.from_config(config)``: the sizes, read from the ``bigvgan:`` section of a config.yaml
  (keys listed in ``VOCODER_KEYS``; ``bigvgan.speaker_encoder`` optionally shrinks the ECAPA encoder,
  see :class:`networks.ecapa.EcapaSpec`; without it upstream's fixed widths are used).
- ``BigVGAN(spec)``: ``speaker_embedding(mel_ref)`` (B, T, 100) -> (B, 1, S); ``decode(latent, speaker)``
  (B, M, gpt_dim) -> (B, 1, M * 1024) in [-1, 1] (tanh); ``forward(latent, mel_ref)`` does both.
  ``fold_weight_norm()`` turns each weight_g/weight_v pair into one ``weight`` (as infer.py does).
- ``load_bigvgan(checkpoint, spec, path, source, device)``: loads a read vocoder file,
  ``{"generator": state_dict}`` (the real file) or ``{"model": state_dict}``, strictly into a model built
  from ``spec``, folds weight norm, eval mode. Raises :class:`VocoderError` (one line) for another layout.
  Reading the file is the caller's job (trainer.synthesis.vocoder_loading), assembling from a config
  ``networks.indextts15``'s.

The blocks (``WeightNormConv``, ``SnakeBeta``, ``Activation1d``, ``AMPBlock``, ``kaiser_sinc_filter``) and the
generator's common parts (``upsampling_stages``, ``mean_of_blocks``, ``check_generator_sizes``,
``fold_weight_norms``) are generic: BigVGAN v2 (networks.bigvgan_v2, IndexTTS2's 22.05 kHz vocoder) reuses them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from networks.ecapa import EcapaSpec, EcapaTDNN
from networks.gpt_config import ConfigError
from networks.loading import state_dict_mismatches

FILTER_TAPS = 12
FILTER_CUTOFF = 0.25
FILTER_HALF_WIDTH = 0.3
SNAKE_EPS = 1e-9
# Keys of the bigvgan: section the generator reads; the rest (discriminators, losses) is training-only.
VOCODER_KEYS = (
    "resblock", "upsample_rates", "upsample_kernel_sizes", "upsample_initial_channel", "resblock_kernel_sizes",
    "resblock_dilation_sizes", "feat_upsample", "speaker_embedding_dim", "cond_d_vector_in_each_upsampling_layer",
    "gpt_dim", "activation", "snake_logscale", "num_mels", "sampling_rate",
)


class VocoderError(ValueError):
    """A vocoder file that cannot be used; the message is one line saying what and where."""


@dataclass(frozen=True)
class VocoderSpec:
    upsample_rates: tuple[int, ...]
    upsample_kernel_sizes: tuple[int, ...]
    upsample_initial_channel: int
    resblock_kernel_sizes: tuple[int, ...]
    resblock_dilation_sizes: tuple[tuple[int, ...], ...]
    speaker_embedding_dim: int
    gpt_dim: int
    num_mels: int = 100
    sampling_rate: int = 24000
    snake_logscale: bool = True
    cond_in_each_upsampling_layer: bool = True
    speaker_encoder: EcapaSpec = field(default_factory=EcapaSpec)

    @property
    def samples_per_frame(self) -> int:
        return math.prod(self.upsample_rates)

    @classmethod
    def from_config(cls, config: Mapping[str, Any], source: str = "config") -> VocoderSpec:
        """From a whole config (its ``bigvgan:`` section) or the section itself."""
        section = config.get("bigvgan") if "bigvgan" in config else config
        if not isinstance(section, Mapping):
            raise ConfigError(f"{source}: no 'bigvgan:' section (the vocoder's sizes)")
        missing = [key for key in VOCODER_KEYS if key not in section and key not in _OPTIONAL_KEYS]
        if missing:
            raise ConfigError(f"{source}: bigvgan section lacks {', '.join(missing)}")
        if str(section.get("resblock", "1")) != "1":
            raise ConfigError(f"{source}: bigvgan.resblock {section['resblock']!r} is not supported (only '1')")
        if section.get("activation", "snakebeta") != "snakebeta":
            raise ConfigError(f"{source}: bigvgan.activation {section['activation']!r} is not supported "
                              "(only 'snakebeta')")
        if section.get("feat_upsample", False):
            raise ConfigError(f"{source}: bigvgan.feat_upsample true is not supported (v1.5 uses false)")
        try:
            encoder = EcapaSpec.from_mapping(section.get("speaker_encoder"))
            spec = cls(
                upsample_rates=tuple(int(v) for v in section["upsample_rates"]),
                upsample_kernel_sizes=tuple(int(v) for v in section["upsample_kernel_sizes"]),
                upsample_initial_channel=int(section["upsample_initial_channel"]),
                resblock_kernel_sizes=tuple(int(v) for v in section["resblock_kernel_sizes"]),
                resblock_dilation_sizes=tuple(tuple(int(d) for d in ds) for ds in section["resblock_dilation_sizes"]),
                speaker_embedding_dim=int(section["speaker_embedding_dim"]),
                gpt_dim=int(section["gpt_dim"]),
                num_mels=int(section.get("num_mels", 100)),
                sampling_rate=int(section.get("sampling_rate", 24000)),
                snake_logscale=bool(section.get("snake_logscale", True)),
                cond_in_each_upsampling_layer=bool(section.get("cond_d_vector_in_each_upsampling_layer", True)),
                speaker_encoder=encoder,
            )
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"{source}: bad bigvgan section ({exc})") from None
        check_generator_sizes(spec, source)
        return spec


def check_generator_sizes(spec: Any, source: str, section: str = "bigvgan") -> None:
    """The stage lists of a generator spec agree in length and the widths halve exactly (v1.5 and v2)."""
    if len(spec.upsample_rates) != len(spec.upsample_kernel_sizes):
        raise ConfigError(f"{source}: {section}.upsample_rates and upsample_kernel_sizes differ in length")
    if len(spec.resblock_kernel_sizes) != len(spec.resblock_dilation_sizes):
        raise ConfigError(f"{source}: {section}.resblock_kernel_sizes and resblock_dilation_sizes differ in length")
    if spec.upsample_initial_channel % 2 ** len(spec.upsample_rates):
        raise ConfigError(f"{source}: {section}.upsample_initial_channel must halve "
                          f"{len(spec.upsample_rates)} times")


_OPTIONAL_KEYS = ("resblock", "feat_upsample", "activation", "snake_logscale", "num_mels", "sampling_rate",
                  "cond_d_vector_in_each_upsampling_layer")


def kaiser_sinc_filter(cutoff: float = FILTER_CUTOFF, half_width: float = FILTER_HALF_WIDTH,
                       taps: int = FILTER_TAPS) -> Tensor:
    """(1, 1, taps) Kaiser-windowed sinc low-pass, normalised to sum 1 (even taps centred at +-0.5...)."""
    half = taps // 2
    attenuation = 2.285 * (half - 1) * math.pi * (4 * half_width) + 7.95
    if attenuation > 50.0:
        beta = 0.1102 * (attenuation - 8.7)
    elif attenuation >= 21.0:
        beta = 0.5842 * (attenuation - 21.0) ** 0.4 + 0.07886 * (attenuation - 21.0)
    else:
        beta = 0.0
    window = torch.kaiser_window(taps, periodic=False, beta=beta)
    time = torch.arange(-half, half) + 0.5 if taps % 2 == 0 else torch.arange(taps) - half
    taps_values = 2 * cutoff * window * torch.sinc(2 * cutoff * time)
    return (taps_values / taps_values.sum()).view(1, 1, taps)


class WeightNormConv(nn.Module):
    """A Conv1d (or ConvTranspose1d) held as weight = g * v / ||v|| (norm over all dims but 0).

    Parameters are registered as ``bias``, ``weight_g``, ``weight_v`` (the checkpoint's order); after
    :meth:`fold` only ``bias`` and ``weight`` remain. ``bias=False`` (BigVGAN v2's ``conv_post``) has none.
    """

    bias: nn.Parameter | None

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, *, stride: int = 1,
                 dilation: int = 1, padding: int = 0, transposed: bool = False, bias: bool = True) -> None:
        super().__init__()
        self.stride, self.dilation, self.padding, self.transposed = stride, dilation, padding, transposed
        shape = (in_channels, out_channels, kernel_size) if transposed else (out_channels, in_channels, kernel_size)
        if bias:
            self.bias = nn.Parameter(torch.zeros(out_channels))
        else:
            self.register_parameter("bias", None)
        v = torch.empty(shape)
        nn.init.normal_(v, 0.0, 0.01)  # BigVGAN's init_weights, applied before weight norm
        self.weight_g = nn.Parameter(v.norm(dim=(1, 2), keepdim=True))
        self.weight_v = nn.Parameter(v)
        self.folded = False

    def folded_weight(self) -> Tensor:
        return self.weight_v * (self.weight_g / self.weight_v.norm(dim=(1, 2), keepdim=True))

    def fold(self) -> None:
        if self.folded:
            return
        weight = self.folded_weight().detach()
        del self.weight_g
        del self.weight_v
        self.weight = nn.Parameter(weight)
        self.folded = True

    def forward(self, x: Tensor) -> Tensor:
        weight = self.weight if self.folded else self.folded_weight()
        if self.transposed:
            return F.conv_transpose1d(x, weight, self.bias, stride=self.stride, padding=self.padding)
        return F.conv1d(x, weight, self.bias, stride=self.stride, padding=self.padding, dilation=self.dilation)


class SnakeBeta(nn.Module):
    """y = x + sin(a x)^2 / (b + 1e-9), a = exp(alpha), b = exp(beta) per channel (log-scale form)."""

    def __init__(self, channels: int, logscale: bool = True) -> None:
        super().__init__()
        self.logscale = logscale
        init = torch.zeros if logscale else torch.ones
        self.alpha = nn.Parameter(init(channels))
        self.beta = nn.Parameter(init(channels))

    def forward(self, x: Tensor) -> Tensor:
        alpha = self.alpha.view(1, -1, 1)
        beta = self.beta.view(1, -1, 1)
        if self.logscale:
            alpha, beta = alpha.exp(), beta.exp()
        return x + torch.sin(x * alpha).pow(2) / (beta + SNAKE_EPS)


class UpSample2x(nn.Module):
    """Replicate-pad 5, depthwise transposed conv (stride 2) with the filter, x2, drop 15 at each end."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("filter", kaiser_sinc_filter())
        self.pad = FILTER_TAPS // 2 - 1
        self.crop = self.pad * 2 + (FILTER_TAPS - 2) // 2

    def forward(self, x: Tensor) -> Tensor:
        channels = x.size(1)
        x = F.pad(x, (self.pad, self.pad), mode="replicate")
        x = 2 * F.conv_transpose1d(x, self.filter.expand(channels, -1, -1), stride=2, groups=channels)
        return x[..., self.crop : -self.crop]


class LowPassFilter(nn.Module):
    """Replicate-pad 5 left and 6 right, depthwise conv with stride 2."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("filter", kaiser_sinc_filter())

    def forward(self, x: Tensor) -> Tensor:
        channels = x.size(1)
        x = F.pad(x, (FILTER_TAPS // 2 - 1, FILTER_TAPS // 2), mode="replicate")
        return F.conv1d(x, self.filter.expand(channels, -1, -1), stride=2, groups=channels)


class DownSample2x(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lowpass = LowPassFilter()

    def forward(self, x: Tensor) -> Tensor:
        return self.lowpass(x)


class Activation1d(nn.Module):
    """Anti-aliased SnakeBeta: upsample x2, activation, downsample x2."""

    def __init__(self, channels: int, logscale: bool) -> None:
        super().__init__()
        self.act = SnakeBeta(channels, logscale)
        self.upsample = UpSample2x()
        self.downsample = DownSample2x()

    def forward(self, x: Tensor) -> Tensor:
        return self.downsample(self.act(self.upsample(x)))


class AMPBlock(nn.Module):
    """Three (act, dilated conv, act, conv) residual branches; type "1"."""

    def __init__(self, channels: int, kernel_size: int, dilations: tuple[int, ...], logscale: bool) -> None:
        super().__init__()
        self.convs1 = nn.ModuleList(
            WeightNormConv(channels, channels, kernel_size, dilation=d, padding=d * (kernel_size - 1) // 2)
            for d in dilations
        )
        self.convs2 = nn.ModuleList(
            WeightNormConv(channels, channels, kernel_size, padding=(kernel_size - 1) // 2) for _ in dilations
        )
        self.activations = nn.ModuleList(Activation1d(channels, logscale) for _ in range(2 * len(dilations)))

    def forward(self, x: Tensor) -> Tensor:
        for index, (conv1, conv2) in enumerate(zip(self.convs1, self.convs2)):
            y = conv1(self.activations[2 * index](x))
            x = x + conv2(self.activations[2 * index + 1](y))
        return x


def upsampling_stages(initial_channel: int, rates: tuple[int, ...], kernels: tuple[int, ...],
                      resblock_kernels: tuple[int, ...], resblock_dilations: tuple[tuple[int, ...], ...],
                      logscale: bool) -> tuple[nn.ModuleList, nn.ModuleList, list[int]]:
    """The generator's ``ups`` (one transposed conv per stage, in a one-element list: the ``ups.i.0`` keys) and
    ``resblocks`` (len(resblock_kernels) AMP blocks per stage, stage-major), and the stage widths
    (initial_channel halved per stage)."""
    ups = nn.ModuleList()
    resblocks = nn.ModuleList()
    widths = [initial_channel // 2 ** (index + 1) for index in range(len(rates))]
    for width, rate, kernel in zip(widths, rates, kernels):
        ups.append(nn.ModuleList([WeightNormConv(width * 2, width, kernel, stride=rate,
                                                 padding=(kernel - rate) // 2, transposed=True)]))
    for width in widths:
        for kernel, dilations in zip(resblock_kernels, resblock_dilations):
            resblocks.append(AMPBlock(width, kernel, dilations, logscale))
    return ups, resblocks, widths


def mean_of_blocks(blocks: nn.ModuleList, x: Tensor) -> Tensor:
    """One stage's multi-receptive-field fusion: the mean of its AMP blocks, each applied to ``x``."""
    total = blocks[0](x)
    for block in blocks[1:]:
        total = total + block(x)
    return total / len(blocks)


def fold_weight_norms(model: nn.Module) -> None:
    """Fold every WeightNormConv of ``model`` into a plain weight (upstream's ``remove_weight_norm``)."""
    for module in model.modules():
        if isinstance(module, WeightNormConv):
            module.fold()


class BigVGAN(nn.Module):
    """The v1.5 generator (see the module docstring)."""

    def __init__(self, spec: VocoderSpec) -> None:
        super().__init__()
        self.spec = spec
        c0 = spec.upsample_initial_channel
        self.num_kernels = len(spec.resblock_kernel_sizes)
        self.conv_pre = WeightNormConv(spec.gpt_dim, c0, 7, padding=3)
        self.ups, self.resblocks, widths = upsampling_stages(
            c0, spec.upsample_rates, spec.upsample_kernel_sizes, spec.resblock_kernel_sizes,
            spec.resblock_dilation_sizes, spec.snake_logscale)
        self.activation_post = Activation1d(widths[-1], spec.snake_logscale)
        self.conv_post = WeightNormConv(widths[-1], 1, 7, padding=3)
        self.speaker_encoder = EcapaTDNN(spec.num_mels, spec.speaker_embedding_dim, spec.speaker_encoder)
        self.cond_layer = nn.Conv1d(spec.speaker_embedding_dim, c0, 1)
        if spec.cond_in_each_upsampling_layer:
            self.conds = nn.ModuleList(nn.Conv1d(spec.speaker_embedding_dim, w, 1) for w in widths)

    def fold_weight_norm(self) -> None:
        fold_weight_norms(self)

    def speaker_embedding(self, mel_ref: Tensor) -> Tensor:
        """(B, T, num_mels) reference log-mel -> (B, 1, S)."""
        return self.speaker_encoder(mel_ref)

    def decode(self, latent: Tensor, speaker: Tensor) -> Tensor:
        """(B, M, gpt_dim) latents and (B, 1, S) speaker embeddings -> (B, 1, M * samples_per_frame)."""
        s = speaker.transpose(1, 2)
        x = self.conv_pre(latent.transpose(1, 2)) + self.cond_layer(s)
        for index, stage in enumerate(self.ups):
            for up in stage:
                x = up(x)
            if self.spec.cond_in_each_upsampling_layer:
                x = x + self.conds[index](s)
            x = mean_of_blocks(self.resblocks[index * self.num_kernels : (index + 1) * self.num_kernels], x)
        return torch.tanh(self.conv_post(self.activation_post(x)))

    def forward(self, latent: Tensor, mel_ref: Tensor) -> Tensor:
        return self.decode(latent, self.speaker_embedding(mel_ref))


def build_bigvgan(spec: VocoderSpec, device: torch.device | str | None = None) -> BigVGAN:
    """A randomly initialised generator (``device="meta"`` to only inspect keys and shapes)."""
    with torch.device(device or "cpu"):
        return BigVGAN(spec)


def vocoder_state_of(obj: Any, path: Path) -> dict[str, Tensor]:
    """The generator state dict inside a loaded vocoder file: ``generator`` (real) or ``model`` (fixtures)."""
    if isinstance(obj, dict):
        for key in ("generator", "model"):
            state = obj.get(key)
            if isinstance(state, dict) and state and all(isinstance(v, Tensor) for v in state.values()):
                return state
    keys = ", ".join(sorted(str(k) for k in obj)[:6]) if isinstance(obj, dict) else type(obj).__name__
    raise VocoderError(f"{path} is not a BigVGAN generator file: expected {{'generator': state_dict}} "
                       f"(bigvgan_generator.pth), found top-level keys {keys}")


def load_bigvgan(checkpoint: Any, spec: VocoderSpec, path: str | Path, source: str = "config",
                 device: torch.device | str = "cpu") -> BigVGAN:
    """A loaded vocoder file's generator, strictly, into a BigVGAN built from ``spec``; eval mode, weight
    norm folded. ``path`` and ``source`` (the config) only name things in the VocoderError message."""
    path = Path(path)
    state = vocoder_state_of(checkpoint, path)
    model = build_bigvgan(spec, "meta")
    problems = state_dict_mismatches(model, state)
    if problems:
        raise VocoderError(f"{path} does not fit the BigVGAN described by the bigvgan section of {source}: "
                           + "; ".join(problems))
    state = {k: (v.float() if v.is_floating_point() else v) for k, v in state.items()}
    model.load_state_dict(state, strict=True, assign=True)
    model.fold_weight_norm()
    return model.to(device).eval()
