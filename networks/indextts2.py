"""How IndexTTS2 is assembled, each network built from its section of a config.yaml and loaded strictly.

- GPT (``gpt:``): ``build_gpt(config)`` -> UnifiedVoiceV2; ``load_gpt(model, state_dict)`` drops the
  inference-only aliases and loads strictly (networks.unified_voice). The optional gpt keys
  ``semantic_dim`` / ``emo_perceiver_dim`` (default 1024) set the widths upstream hard-codes.

The audio networks join here as they are written, one builder/loader pair each, from their sections:
w2v-BERT semantic features, the semantic codec (``semantic_codec:``), CAMPPlus speaker style, S2Mel
(``s2mel:``) and BigVGAN v2 (22.05 kHz, reusing networks.bigvgan's blocks).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

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
