"""IndexTTS2's S2Mel: semantic codes (+ GPT latents) -> 80-band mel by flow matching with a DiT estimator.

Entry points: :func:`load_s2mel` (config section + ``s2mel.pth`` -> eval model), :class:`S2Mel` with
``prompt_condition(S_ref, T_ref)`` once per speaker prompt and ``infer(...)`` per segment. The prompt mel
comes from ``networks.frontends.s2mel_mel.s2mel_log_mel``.
"""

from networks.s2mel.config import S2MelConfig, S2MelConfigError
from networks.s2mel.model import (
    DEFAULT_CFG_RATE,
    DEFAULT_STEPS,
    S2Mel,
    S2MelCheckpointError,
    load_s2mel,
    read_s2mel_net,
    target_mel_frames,
)

__all__ = [
    "DEFAULT_CFG_RATE",
    "DEFAULT_STEPS",
    "S2Mel",
    "S2MelCheckpointError",
    "S2MelConfig",
    "S2MelConfigError",
    "load_s2mel",
    "read_s2mel_net",
    "target_mel_frames",
]
