"""The values an IndexTTS2 (or 2.5) synthesis takes and gives: S2Mel settings, emotion control, a prepared voice,
the CFM start noise, and the result with what each segment did. ``S2MelSynthesizer`` (s2mel_pipeline.py) uses them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from networks.emotion_matrix import EMOTIONS
from networks.s2mel import DEFAULT_CFG_RATE, DEFAULT_STEPS
from trainer.synthesis.pipeline import SynthResult

NoiseSource = Callable[[int, tuple[int, ...]], Tensor]


@dataclass(frozen=True)
class MelSettings:
    """The S2Mel (CFM) settings: Euler steps (upstream 25; fewer is faster and rougher), CFG rate, noise seed."""

    steps: int = DEFAULT_STEPS
    cfg_rate: float = DEFAULT_CFG_RATE
    seed: int = 0

    def problems(self) -> list[str]:
        out = []
        if self.steps < 1:
            out.append(f"steps must be >= 1, got {self.steps}")
        if not self.cfg_rate >= 0:
            out.append(f"cfg_rate must be >= 0, got {self.cfg_rate}")
        return out


@dataclass(frozen=True)
class EmotionControl:
    """How the emotion is set: by the speaker prompt (default), an emotion ``reference`` blended with ``alpha``
    (0 = the speaker's own, 1 = the reference's), or 8 ``weights`` (happy, angry, sad, afraid, disgusted,
    melancholic, surprised, calm; scaled by ``alpha`` when it is not 1)."""

    reference: str | Path | None = None
    alpha: float = 1.0
    weights: tuple[float, ...] | None = None

    def problems(self) -> list[str]:
        out = []
        if self.reference is not None and self.weights is not None:
            out.append("give an emotion reference or emotion weights, not both (upstream ignores the reference "
                       "when weights are given)")
        if not 0.0 <= self.alpha <= 1.0:
            out.append(f"emotion alpha must be in [0, 1], got {self.alpha}")
        if self.weights is not None:
            if len(self.weights) != len(EMOTIONS):
                out.append(f"emotion weights must be {len(EMOTIONS)} numbers ({', '.join(EMOTIONS)}), "
                           f"got {len(self.weights)}")
            elif any(not 0.0 <= w <= 1.0 for w in self.weights):
                out.append(f"emotion weights must each lie in [0, 1], got {list(self.weights)}")
        return out


@dataclass
class VoicePrompt:
    """Everything one speaker prompt gives (compute once with ``prepare_voice``, reuse for many texts)."""

    audio_22k: Tensor  # (1, N) float32
    audio_16k: Tensor  # (1, N')
    features: Tensor  # spk_cond_emb (1, T, W)
    semantic_ref: Tensor  # S_ref (1, T, W)
    ref_mel: Tensor  # (1, 80, T_ref)
    style: Tensor  # (1, S) CAMPPlus
    prompt_condition: Tensor  # (1, T_ref, C)
    speaker_latents: Tensor  # (1, 32, D): the GPT's conditioning latents (speech_conditioning_latent)
    emotion_features: Tensor  # (1, T_e, W): the same file read at 16 kHz (the default emotion prompt)
    seconds: float = 0.0


@dataclass
class SegmentInfo:
    text: str
    text_ids: list[int]
    codes: np.ndarray  # int64 (M,), the codes voiced (cut at the first stop)
    hit_stop: bool
    mel_frames: int

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, "text_tokens": len(self.text_ids), "codes": int(self.codes.size),
                "hit_stop": self.hit_stop, "mel_frames": self.mel_frames}


@dataclass
class S2MelSynthResult(SynthResult):
    """A whole text: the joined waveform plus what each segment did."""

    segments: list[SegmentInfo] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "segments": [segment.to_dict() for segment in self.segments]}


def seeded_noise(seed: int) -> NoiseSource:
    """Segment i's CFM start noise from a CPU generator seeded with ``seed + i`` (independent of the device)."""

    def draw(index: int, shape: tuple[int, ...]) -> Tensor:
        return torch.randn(shape, generator=torch.Generator().manual_seed(int(seed) + index))

    return draw
