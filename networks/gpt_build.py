"""Build the GPT of any IndexTTS generation from a ``gpt:`` section: one call for code that trains or checks all.

``spk_cond_mode: campplus`` in the section (the studio's marker for IndexTTS-2.5, kept in its checkpoints'
model config) builds the 2.5 GPT (``networks.gpt_v25``); anything else goes to ``networks.unified_voice``
(v2 when the section has an ``emo_condition_module``, else v1.5).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from networks.gpt_v25 import SPK_COND_MODE, build_gpt_v25
from networks.unified_voice import UnifiedVoice, build_model


def build_any_gpt(config: Mapping[str, Any]) -> UnifiedVoice:
    """The v1.5, v2 or 2.5 GPT of ``config`` (a gpt section or a whole loaded config), freshly initialised."""
    gpt = config["gpt"] if "gpt" in config and "model_dim" not in config else config
    if isinstance(gpt, Mapping) and gpt.get("spk_cond_mode") == SPK_COND_MODE:
        return build_gpt_v25(gpt)
    return build_model(config)
