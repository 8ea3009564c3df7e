"""IndexTTS-2.5 synthesis from codes to mel (the part before the vocoder), as ``infer_v2_5`` runs it.

Per speaker prompt (:func:`speaker_prompt_condition`): ``ref_mel`` = the S2Mel log-mel of the 22.05 kHz prompt,
and the prompt condition = the length regulator applied to the **continuous** normalised w2v features
(IndexTTS2 used the codec-quantised ones here).

Per segment (:func:`segment_mel`): S_infer = ``codec.decode(codes)`` (B, 2M, W) with no GPT latent; target
length int(2M * 1.72 * duration_factor); CFM (25 Euler steps, CFG 0.7 by default); the frames after the prompt.
``duration_factor`` (default 1.0) only stretches the mel; the codes are unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from networks.codec25 import Codec25
from networks.frontends.s2mel_mel import S2MelMelSettings, s2mel_log_mel
from networks.s2mel import DEFAULT_CFG_RATE, DEFAULT_STEPS, S2Mel, target_mel_frames


@dataclass
class PromptCondition:
    """What S2Mel needs of the speaker prompt, computed once: its mel, its condition, its CAM++ style."""

    ref_mel: Tensor  # (1, 80, T_ref)
    condition: Tensor  # (1, T_ref, C)
    style: Tensor  # (1, 192)


def speaker_prompt_condition(
    s2mel: S2Mel,
    audio_22k: Tensor,
    spk_cond_emb: Tensor,
    style: Tensor,
    mel_settings: S2MelMelSettings | None = None,
) -> PromptCondition:
    """ref_mel of the 22.05 kHz prompt (1, N) and the regulated continuous features (1, T, W) -> condition."""
    ref_mel = s2mel_log_mel(audio_22k, mel_settings)
    condition = s2mel.prompt_condition(spk_cond_emb, ref_mel.shape[-1])
    return PromptCondition(ref_mel=ref_mel, condition=condition, style=style)


@torch.no_grad()
def segment_mel(
    codec: Codec25,
    s2mel: S2Mel,
    codes: Tensor,
    prompt: PromptCondition,
    *,
    duration_factor: float = 1.0,
    steps: int = DEFAULT_STEPS,
    cfg_rate: float = DEFAULT_CFG_RATE,
    noise: Tensor | None = None,
    generator: torch.Generator | None = None,
    trace: dict[str, object] | None = None,
) -> Tensor:
    """25 Hz codes (1, M) -> mel (1, 80, int(2M * 1.72 * duration_factor)) for the vocoder.

    ``noise`` (1, 80, T_ref + F) fixes the CFM start; otherwise it is drawn from ``generator`` (or torch's
    global generator, as upstream). ``trace`` receives S2Mel's intermediates.
    """
    if duration_factor <= 0:
        raise ValueError(f"duration_factor must be positive, got {duration_factor}")
    semantic = codec.decode(codes)
    return s2mel.infer_features(
        prompt_condition=prompt.condition,
        ref_mel=prompt.ref_mel,
        style=prompt.style,
        semantic=semantic,
        target_frames=target_mel_frames(semantic.shape[1], duration_factor),
        steps=steps,
        cfg_rate=cfg_rate,
        noise=noise,
        generator=generator,
        trace=trace,
    )
