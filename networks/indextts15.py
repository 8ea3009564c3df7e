"""How IndexTTS-1.5 is assembled: the GPT, the DVAE and the BigVGAN v1.5 vocoder (with its ECAPA speaker
encoder), each built from its section of a config.yaml and loaded strictly.

- GPT (``gpt:``): ``build_gpt(config)`` -> UnifiedVoice; ``load_gpt(model, state_dict)`` drops the
  inference-only aliases and loads strictly (networks.unified_voice).
- DVAE (``vqvae:``): ``build_dvae(config)``, ``load_dvae(path, config, device)`` -> DiscreteVAE, mel -> codes
  for data preparation (networks.dvae).
- Vocoder (``bigvgan:``): ``vocoder_spec(config)``, ``build_vocoder(config, device)``, and
  ``load_vocoder(checkpoint, config, path, source, device)`` for a vocoder file the caller has read
  (networks.bigvgan; ECAPA in networks.ecapa).

Each function takes the whole loaded config (or, where said, the section itself).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from networks.bigvgan import BigVGAN, VocoderSpec, build_bigvgan, load_bigvgan
from networks.dvae import DiscreteVAE, DVAEError
from networks.dvae import build_dvae as _build_dvae_from_section
from networks.dvae import load_dvae as _load_dvae_from_section
from networks.gpt_config import ConfigError
from networks.unified_voice import UnifiedVoice, build_model, load_gpt_state_dict

VERSION = "1.5"


def build_gpt(config: Mapping[str, Any]) -> UnifiedVoice:
    """The v1.5 GPT from a whole config or its ``gpt:`` section; refuses an IndexTTS2 section."""
    model = build_model(config)
    if model.version != VERSION:
        raise ConfigError("gpt section describes an IndexTTS2 GPT (it has emo_condition_module), not IndexTTS-1.5")
    return model


def load_gpt(model: UnifiedVoice, state_dict: Mapping[str, Any]) -> list[str]:
    """Strict load of a ``gpt.pth`` state dict; returns the dropped inference-only key names."""
    return load_gpt_state_dict(model, state_dict)


def _vqvae_section(config: Mapping[str, Any]) -> Mapping[str, Any]:
    section = config.get("vqvae") if "vqvae" in config else config
    if not isinstance(section, Mapping):
        raise DVAEError("config has no 'vqvae:' section (the DVAE's sizes)")
    return section


def build_dvae(config: Mapping[str, Any]) -> DiscreteVAE:
    """A freshly initialised DVAE from a whole config or its ``vqvae:`` section."""
    return _build_dvae_from_section(_vqvae_section(config))


def load_dvae(path: str | Path, config: Mapping[str, Any], device: str | torch.device = "cpu") -> DiscreteVAE:
    """``dvae.pth`` ({"model": state_dict}) strictly into a DVAE from a whole config or its ``vqvae:`` section."""
    return _load_dvae_from_section(path, _vqvae_section(config), device)


def vocoder_spec(config: Mapping[str, Any], source: str = "config") -> VocoderSpec:
    """The BigVGAN v1.5 sizes from a whole config (its ``bigvgan:`` section) or the section itself."""
    return VocoderSpec.from_config(config, source)


def build_vocoder(config: Mapping[str, Any], device: torch.device | str | None = None) -> BigVGAN:
    """A randomly initialised BigVGAN v1.5 (``device="meta"`` to only inspect keys and shapes)."""
    return build_bigvgan(vocoder_spec(config), device)


def load_vocoder(checkpoint: Any, config: Mapping[str, Any], path: str | Path, source: str = "config",
                 device: torch.device | str = "cpu") -> BigVGAN:
    """A read vocoder file (``{"generator": ...}`` or ``{"model": ...}``) strictly into the BigVGAN the
    config describes; weight norm folded, eval mode. Raises ConfigError / VocoderError (one line)."""
    return load_bigvgan(checkpoint, vocoder_spec(config, source), path, source, device)
