"""IndexTTS-2.5 data preparation: audio -> the audio half of a 2.5 GPT training item, as inference computes it.

Upstream ships no 2.5 training code; these are the steps of ``infer_v2_5`` (shared reference README_audio.md
section 2), one function each:

1. speaker prompt: ``librosa.load`` at 22050 Hz (soxr_hq), cut to 15 s; ``audio_16k`` = torchaudio's
   ``Resample(22050, 16000)`` of that copy (:func:`load_speaker_prompt`, :func:`speaker_audio_16k`);
   emotion prompt: a separate 16 kHz soxr load, cut to 15 s (:func:`load_emotion_prompt`);
2. SeamlessM4T features -> w2v-BERT layer 17 -> stats normalisation (:func:`semantic_features`);
3. 25 Hz codes = the 2.5 codec's ``quantize`` of those features (:func:`codes_of`);
4. speaker vector = CAM++ of the mean-removed Kaldi fbank of ``audio_16k`` (:func:`speaker_style`);
5. emotion vector = the GPT's ``merge_emovec`` rule (:func:`emotion_vector`).

The networks are passed in (:class:`Prep25Networks`); the GPT is anything with IndexTTS2's ``get_emovec``
(the 2.5 GPT keeps that path unchanged), so this module does not depend on where the GPT lives.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import torch
from torch import Tensor

from networks.campplus import CAMPPlus
from networks.codec25 import Codec25
from networks.frontends.resample import load_audio_like_librosa, sinc_resample
from networks.frontends.seamless_features import FEATURE_SAMPLE_RATE, extract_features

SPEAKER_PROMPT_RATE = 22050  # librosa.load's default rate, which infer keeps for the speaker prompt
MAX_PROMPT_SECONDS = 15  # infer cuts both prompts to 15 s after loading

# (input_features (B, T, 160), attention_mask (B, T)) -> normalised w2v-BERT features (B, T, W)
FeatureModel = Callable[[Tensor, Tensor], Tensor]


class EmotionEncoder(Protocol):
    def get_emovec(self, emo_cond_mels: Tensor, emo_cond_mel_lengths: Tensor | None = None) -> Tensor: ...


@dataclass
class SpeakerPrompt:
    """The speaker prompt as infer holds it: (1, N) at 22050 Hz and its (1, N') 16 kHz sinc copy."""

    audio_22k: Tensor
    audio_16k: Tensor


@dataclass
class Prep25Networks:
    """What 2.5 data preparation runs: feature extractor + w2v-BERT features, codec, CAM++, and the GPT
    (only for the emotion vector; None skips it)."""

    extractor: Any  # transformers SeamlessM4TFeatureExtractor
    features: FeatureModel  # e.g. networks.w2v_bert.SemanticFeatureModel
    codec: Codec25
    campplus: CAMPPlus
    gpt: EmotionEncoder | None = None


@dataclass
class Prepared25:
    """One utterance's 2.5 audio preparation: features, codes, speaker and emotion vectors."""

    spk_cond_emb: Tensor  # (1, T, W) normalised w2v features of audio_16k (50 Hz)
    codes: Tensor  # (1, ceil(T/2)) int64, 25 Hz
    style: Tensor  # (1, 192) CAM++ speaker vector
    emo_cond_emb: Tensor | None  # (1, T_e, W) features of the emotion prompt, when one was given
    emo_vec: Tensor | None  # (1, D) merged emotion vector, when a GPT was given

    def training_item(self, text_ids: Tensor, lang: int) -> dict[str, Any]:
        """The stored 2.5 GPT training item: codes [M], text_ids, lang, spk_emb [192], emo_vec [D]."""
        if self.emo_vec is None:
            raise ValueError("a 2.5 training item needs the emotion vector: prepare with a GPT")
        return {
            "codes": self.codes[0],
            "text_ids": text_ids,
            "lang": int(lang),
            "spk_emb": self.style[0],
            "emo_vec": self.emo_vec[0],
        }


def speaker_audio_16k(audio_22k: Tensor) -> Tensor:
    """infer's 16 kHz copy of the 22.05 kHz speaker prompt: torchaudio ``Resample(22050, 16000)`` exactly."""
    return sinc_resample(audio_22k, SPEAKER_PROMPT_RATE, FEATURE_SAMPLE_RATE, kernel_dtype="float64")


def load_speaker_prompt(path: str | Path) -> SpeakerPrompt:
    """The speaker prompt file as infer reads it: 22050 Hz soxr_hq load cut to 15 s, and its 16 kHz copy."""
    audio_22k = torch.from_numpy(
        load_audio_like_librosa(path, sr=SPEAKER_PROMPT_RATE, max_seconds=MAX_PROMPT_SECONDS)
    )[None]
    return SpeakerPrompt(audio_22k=audio_22k, audio_16k=speaker_audio_16k(audio_22k))


def load_emotion_prompt(path: str | Path) -> Tensor:
    """The emotion prompt as infer reads it: a direct 16 kHz soxr_hq load, cut to 15 s, (1, N)."""
    return torch.from_numpy(
        load_audio_like_librosa(path, sr=FEATURE_SAMPLE_RATE, max_seconds=MAX_PROMPT_SECONDS)
    )[None]


@torch.no_grad()
def semantic_features(extractor: Any, features: FeatureModel, audio_16k: Tensor) -> Tensor:
    """16 kHz audio (1, N) or (N,) -> normalised w2v-BERT layer-17 features (1, T, W) at 50 Hz."""
    wave = audio_16k.reshape(-1) if audio_16k.dim() == 2 and audio_16k.shape[0] == 1 else audio_16k
    if wave.dim() != 1:
        raise ValueError(f"semantic_features takes one mono waveform, got shape {tuple(audio_16k.shape)}")
    input_features, attention_mask = extract_features(extractor, wave)
    return features(input_features, attention_mask)


@torch.no_grad()
def codes_of(codec: Codec25, spk_cond_emb: Tensor) -> Tensor:
    """Normalised features (B, T, W) -> 25 Hz codes (B, ceil(T/2)) (upstream ``get_scode``)."""
    return codec.quantize(spk_cond_emb)[0]


def speaker_style(campplus: CAMPPlus, audio_16k: Tensor) -> Tensor:
    """The 2.5 speaker vector: CAM++ of the 16 kHz prompt, (B, 192)."""
    return campplus.style_of(audio_16k)


@torch.no_grad()
def emotion_vector(
    gpt: EmotionEncoder,
    spk_cond_emb: Tensor,
    emo_cond_emb: Tensor | None = None,
    *,
    alpha: float = 1.0,
    spk_lengths: Tensor | None = None,
    emo_lengths: Tensor | None = None,
) -> Tensor:
    """infer's ``merge_emovec``: base = emovec(speaker), emo = emovec(emotion prompt), (emo - base) * alpha + base.

    Without an emotion prompt the speaker features are both (infer's default, alpha 1). Features are
    (B, T, W). Lengths default to every frame: for an unpadded prompt this equals infer's width-1024 length
    quirk (README_audio.md section 6); a padded batch must pass its true frame counts.
    """
    if emo_cond_emb is None:
        emo_cond_emb = spk_cond_emb
    base = gpt.get_emovec(spk_cond_emb.transpose(1, 2), _frame_lengths(spk_cond_emb, spk_lengths))
    emotion = gpt.get_emovec(emo_cond_emb.transpose(1, 2), _frame_lengths(emo_cond_emb, emo_lengths))
    return (emotion - base) * alpha + base


def _frame_lengths(features: Tensor, lengths: Tensor | None) -> Tensor:
    if features.dim() != 3:
        raise ValueError(f"emotion features must be (batch, frames, width), got {tuple(features.shape)}")
    if lengths is None:
        return torch.full((features.shape[0],), features.shape[1], dtype=torch.long, device=features.device)
    return lengths.to(device=features.device, dtype=torch.long)


def prepare_audio(
    nets: Prep25Networks, prompt: SpeakerPrompt, emo_audio_16k: Tensor | None = None, *, alpha: float = 1.0
) -> Prepared25:
    """Every audio part of a 2.5 training item from one utterance (and an optional emotion prompt)."""
    spk_cond_emb = semantic_features(nets.extractor, nets.features, prompt.audio_16k)
    emo_cond_emb = (
        semantic_features(nets.extractor, nets.features, emo_audio_16k) if emo_audio_16k is not None else None
    )
    emo_vec = None
    if nets.gpt is not None:
        emo_vec = emotion_vector(nets.gpt, spk_cond_emb, emo_cond_emb, alpha=alpha)
    return Prepared25(
        spk_cond_emb=spk_cond_emb,
        codes=codes_of(nets.codec, spk_cond_emb),
        style=speaker_style(nets.campplus, prompt.audio_16k),
        emo_cond_emb=emo_cond_emb,
        emo_vec=emo_vec,
    )
