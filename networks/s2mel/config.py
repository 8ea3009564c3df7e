"""The sizes an S2Mel is built from, read from the ``s2mel`` section of IndexTTS2's config.yaml.

Upstream hard-codes two widths the config does not hold: the GPT width feeding ``gpt_layer`` (1280, the v2
GPT's model_dim) and the two hidden widths of ``gpt_layer`` (256, 128). They are parameters here so that the
shrunken fixtures (GPT width 64) build with the same code. The semantic width W (1024 real) is the length
regulator's ``in_channels``, which is also the width ``gpt_layer`` must produce.

Only the variant IndexTTS2 ships is implemented (continuous length regulator, DiT with U-ViT and long skips,
WaveNet final layer, style condition, no f0); a config asking for anything else is refused by name rather
than silently built as something it is not.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

REAL_GPT_DIM = 1280
REAL_GPT_LAYER_HIDDEN = (256, 128)

# (section, key) -> the only value this implementation supports.
_REQUIRED_SETTINGS: dict[tuple[str, str], Any] = {
    ("", "dit_type"): "DiT",
    ("length_regulator", "is_discrete"): False,
    ("length_regulator", "vector_quantize"): False,
    ("length_regulator", "f0_condition"): False,
    ("DiT", "style_condition"): True,
    ("DiT", "final_layer_type"): "wavenet",
    ("DiT", "f0_condition"): False,
    ("DiT", "is_causal"): False,
    ("DiT", "long_skip_connection"): True,
    ("DiT", "uvit_skip_connection"): True,
    ("DiT", "time_as_token"): False,
    ("DiT", "style_as_token"): False,
    ("DiT", "add_resblock_in_transformer"): False,
    ("wavenet", "style_condition"): True,
}


class S2MelConfigError(ValueError):
    """The ``s2mel`` config section is missing a value or asks for a variant that is not implemented."""


@dataclass(frozen=True)
class S2MelConfig:
    """Every size the S2Mel networks are built from (defaults: the real IndexTTS2 v2.0 values)."""

    semantic_dim: int = 1024  # length_regulator.in_channels = gpt_layer output = codec hidden size
    gpt_dim: int = REAL_GPT_DIM  # gpt_layer input (GPT model_dim)
    gpt_layer_hidden: tuple[int, int] = REAL_GPT_LAYER_HIDDEN
    with_gpt_layer: bool = True  # IndexTTS2 builds gpt_layer; IndexTTS-2.5 does not (no GPT latent)
    regulator_channels: int = 512  # length_regulator.channels
    regulator_blocks: int = 4  # len(length_regulator.sampling_ratios)
    regulator_codebook_size: int = 2048  # unused `embedding` rows kept in the checkpoint
    n_mels: int = 80  # DiT.in_channels
    style_dim: int = 192  # style_encoder.dim (CAMPPlus embedding)
    hidden_dim: int = 512  # DiT.hidden_dim
    num_heads: int = 8
    depth: int = 13
    content_dim: int = 512  # DiT.content_dim (width of the regulated condition)
    content_codebook_size: int = 1024  # unused `cond_embedder` rows kept in the checkpoint
    wavenet_hidden_dim: int = 512
    wavenet_layers: int = 8
    wavenet_kernel_size: int = 5
    wavenet_dilation_rate: int = 1
    wavenet_dropout: float = 0.2  # wavenet.p_dropout: acts only in train mode

    def __post_init__(self) -> None:
        if self.hidden_dim % self.num_heads:
            raise S2MelConfigError(
                f"s2mel DiT.hidden_dim {self.hidden_dim} is not divisible by num_heads {self.num_heads}"
            )
        if (self.hidden_dim // self.num_heads) % 2:
            raise S2MelConfigError(
                "s2mel DiT head width (hidden_dim / num_heads) must be even for the rotary embedding"
            )
        if self.content_dim != self.regulator_channels:
            raise S2MelConfigError(
                f"s2mel DiT.content_dim {self.content_dim} must equal length_regulator.channels "
                f"{self.regulator_channels} (the regulated condition feeds the DiT)"
            )
        if self.wavenet_hidden_dim != self.hidden_dim:
            raise S2MelConfigError(
                f"s2mel wavenet.hidden_dim {self.wavenet_hidden_dim} must equal "
                f"DiT.hidden_dim {self.hidden_dim} "
                "(the only layout known from checkpoints)"
            )
        if self.wavenet_kernel_size % 2 == 0:
            raise S2MelConfigError(f"s2mel wavenet.kernel_size must be odd, got {self.wavenet_kernel_size}")

    @classmethod
    def from_section(
        cls,
        s2mel: Mapping[str, Any],
        *,
        gpt_dim: int = REAL_GPT_DIM,
        gpt_layer_hidden: tuple[int, int] = REAL_GPT_LAYER_HIDDEN,
        with_gpt_layer: bool = True,
    ) -> S2MelConfig:
        """Sizes from a config's ``s2mel`` section; ``gpt_dim`` is the GPT's model_dim (``gpt.model_dim``).

        ``with_gpt_layer=False`` is IndexTTS-2.5's S2Mel (``gpt_dim`` / ``gpt_layer_hidden`` are then unused).
        """
        _check_supported(s2mel)
        regulator = _section(s2mel, "length_regulator")
        dit = _section(s2mel, "DiT")
        wavenet = _section(s2mel, "wavenet")
        return cls(
            semantic_dim=_int(regulator, "length_regulator", "in_channels"),
            gpt_dim=int(gpt_dim),
            gpt_layer_hidden=(int(gpt_layer_hidden[0]), int(gpt_layer_hidden[1])),
            with_gpt_layer=bool(with_gpt_layer),
            regulator_channels=_int(regulator, "length_regulator", "channels"),
            regulator_blocks=len(_value(regulator, "length_regulator", "sampling_ratios")),
            regulator_codebook_size=_int(regulator, "length_regulator", "content_codebook_size"),
            n_mels=_int(dit, "DiT", "in_channels"),
            style_dim=_int(_section(s2mel, "style_encoder"), "style_encoder", "dim"),
            hidden_dim=_int(dit, "DiT", "hidden_dim"),
            num_heads=_int(dit, "DiT", "num_heads"),
            depth=_int(dit, "DiT", "depth"),
            content_dim=_int(dit, "DiT", "content_dim"),
            content_codebook_size=_int(dit, "DiT", "content_codebook_size"),
            wavenet_hidden_dim=_int(wavenet, "wavenet", "hidden_dim"),
            wavenet_layers=_int(wavenet, "wavenet", "num_layers"),
            wavenet_kernel_size=_int(wavenet, "wavenet", "kernel_size"),
            wavenet_dilation_rate=_int(wavenet, "wavenet", "dilation_rate"),
            wavenet_dropout=float(wavenet.get("p_dropout", 0.2)),
        )


def _check_supported(s2mel: Mapping[str, Any]) -> None:
    for (section, key), wanted in _REQUIRED_SETTINGS.items():
        where = s2mel if not section else _section(s2mel, section)
        name = f"s2mel.{section}.{key}" if section else f"s2mel.{key}"
        if key not in where:
            continue  # an absent switch is read as the supported value
        if where[key] != wanted:
            raise S2MelConfigError(f"{name} = {where[key]!r} is not supported (IndexTTS2 uses {wanted!r})")


def _section(s2mel: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    value = s2mel.get(name)
    if not isinstance(value, Mapping):
        raise S2MelConfigError(f"config s2mel.{name} is missing or not a mapping")
    return value


def _value(section: Mapping[str, Any], section_name: str, key: str) -> Any:
    if key not in section:
        raise S2MelConfigError(f"config s2mel.{section_name}.{key} is missing")
    return section[key]


def _int(section: Mapping[str, Any], section_name: str, key: str) -> int:
    value = _value(section, section_name, key)
    if isinstance(value, bool) or not isinstance(value, int):
        raise S2MelConfigError(f"config s2mel.{section_name}.{key} must be an integer, got {value!r}")
    return value
