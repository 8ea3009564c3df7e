"""How IndexTTS2 is assembled, each network built from its section of a config.yaml and loaded strictly.

- GPT (``gpt:``): ``build_gpt(config)`` -> UnifiedVoiceV2; ``load_gpt(model, state_dict)`` drops the
  inference-only aliases and loads strictly (networks.unified_voice). The optional gpt keys
  ``semantic_dim`` / ``emo_perceiver_dim`` (default 1024) set the widths upstream hard-codes.

The audio networks join here as they are written, one builder/loader pair each, from their sections:
w2v-BERT semantic features, the semantic codec (``semantic_codec:``), CAMPPlus speaker style, S2Mel
(``s2mel:``) and BigVGAN v2 (22.05 kHz, reusing networks.bigvgan's blocks).

- BigVGAN v2 (the hub's ``config.json``, not a config.yaml section; 2.5 uses the same vocoder):
  ``build_vocoder_v2(spec)``, ``load_vocoder_v2(path_or_state, spec)`` -> networks.bigvgan_v2.BigVGANV2.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from networks.bigvgan import VocoderError
from networks.bigvgan_v2 import BigVGANV2, BigVGANV2Spec, build_bigvgan_v2, load_bigvgan_v2
from networks.gpt_config import ConfigError
from networks.unified_voice import UnifiedVoiceV2, build_model, load_gpt_state_dict

VERSION = "2"


def build_gpt(config: Mapping[str, Any]) -> UnifiedVoiceV2:
    """The IndexTTS2 GPT from a whole config or its ``gpt:`` section; refuses a v1.5 section."""
    model = build_model(config)
    if not isinstance(model, UnifiedVoiceV2):
        raise ConfigError("gpt section describes an IndexTTS-1.5 GPT (no emo_condition_module), not IndexTTS2")
    return model


def load_gpt(model: UnifiedVoiceV2, state_dict: Mapping[str, Any]) -> list[str]:
    """Strict load of a ``gpt.pth`` state dict; returns the dropped inference-only key names."""
    return load_gpt_state_dict(model, state_dict)


# ----- audio networks (w2v-BERT, semantic codec, CAMPPlus, S2Mel, BigVGAN v2): added here next ---------------


def vocoder_v2_spec(spec: BigVGANV2Spec | Mapping[str, Any], source: str = "config.json") -> BigVGANV2Spec:
    """A BigVGANV2Spec as given, or read from a BigVGAN v2 ``config.json`` dict."""
    return spec if isinstance(spec, BigVGANV2Spec) else BigVGANV2Spec.from_config(spec, source)


def build_vocoder_v2(spec: BigVGANV2Spec | Mapping[str, Any],
                     device: torch.device | str | None = None) -> BigVGANV2:
    """A randomly initialised BigVGAN v2 (``device="meta"`` to only inspect keys and shapes)."""
    return build_bigvgan_v2(vocoder_v2_spec(spec), device)


def load_vocoder_v2(path_or_state: str | Path | Mapping[str, Any], spec: BigVGANV2Spec | Mapping[str, Any],
                    device: torch.device | str = "cpu") -> BigVGANV2:
    """``bigvgan_generator.pt`` (a path, or the dict read from it) strictly into the BigVGAN v2 ``spec``
    describes; weight norm folded, eval mode. Raises ConfigError / VocoderError (one line)."""
    spec = vocoder_v2_spec(spec)
    if isinstance(path_or_state, (str, Path)):
        path = Path(path_or_state)
        if not path.is_file():
            raise VocoderError(f"BigVGAN v2 weights not found: {path}")
        try:
            checkpoint = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as error:  # a truncated or foreign file: say which, in one line
            first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            raise VocoderError(f"{path} could not be read as a BigVGAN v2 generator file: {first_line}") from None
        return load_bigvgan_v2(checkpoint, spec, path, device)
    state = dict(path_or_state)
    if state and all(isinstance(value, torch.Tensor) for value in state.values()):
        state = {"generator": state}  # a bare generator state dict
    return load_bigvgan_v2(state, spec, "bigvgan_generator.pt", device)
