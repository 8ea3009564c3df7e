"""SeamlessM4T filter-bank features, the input of w2v-BERT 2.0 (transformers' ``SeamlessM4TFeatureExtractor``).

16 kHz audio -> 80-bin Kaldi-style log fbank at 100 Hz -> per-utterance mean/variance normalisation ->
padding (value 1.0) -> pairs of frames stacked into 160-dim vectors at 50 Hz, plus the attention mask.
The extractor is configured with w2v-bert-2.0's preprocessor settings (``W2V_BERT_2_PREPROCESSOR``) unless a
local folder or model id with its own ``preprocessor_config.json`` is given.

Batches are padded to the longest item, as the community preprocessing does; padded frames read 1.0 and
carry mask 0, and the features of a padded item differ from those of the item alone only where padded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor
from transformers import SeamlessM4TFeatureExtractor

FEATURE_SAMPLE_RATE = 16000

W2V_BERT_2_PREPROCESSOR: dict[str, Any] = {
    "feature_size": 80,
    "num_mel_bins": 80,
    "sampling_rate": FEATURE_SAMPLE_RATE,
    "stride": 2,
    "padding_value": 1.0,
    "return_attention_mask": True,
}


def build_feature_extractor(settings: Mapping[str, Any] | None = None) -> SeamlessM4TFeatureExtractor:
    """The extractor from settings (None: w2v-bert-2.0's preprocessor values)."""
    return SeamlessM4TFeatureExtractor(**dict(W2V_BERT_2_PREPROCESSOR if settings is None else settings))


def load_feature_extractor(
    name_or_path: str | Path, *, local_files_only: bool = False
) -> SeamlessM4TFeatureExtractor:
    """The extractor from a folder (or model id) holding ``preprocessor_config.json``."""
    if Path(name_or_path).is_absolute() and not Path(name_or_path).is_dir():
        raise FileNotFoundError(f"feature extractor folder not found: {name_or_path}")
    try:
        return SeamlessM4TFeatureExtractor.from_pretrained(
            str(name_or_path), local_files_only=local_files_only
        )
    except OSError as exc:
        raise FileNotFoundError(
            f"cannot load feature extractor from {name_or_path}: {exc}".splitlines()[0]
        ) from None


def _as_float32(wave: Tensor | np.ndarray) -> np.ndarray:
    array = wave.detach().cpu().numpy() if isinstance(wave, Tensor) else np.asarray(wave)
    if array.ndim != 1:
        raise ValueError(f"each waveform must be 1-D (mono samples), got shape {array.shape}")
    if array.shape[0] == 0:
        raise ValueError("cannot extract features from an empty waveform")
    return np.ascontiguousarray(array, dtype=np.float32)


def extract_features(
    extractor: SeamlessM4TFeatureExtractor,
    waves: Tensor | np.ndarray | Sequence[Tensor | np.ndarray],
    sampling_rate: int = FEATURE_SAMPLE_RATE,
) -> tuple[Tensor, Tensor]:
    """16 kHz mono waveform(s) -> (input_features float32 [B, T, 160], attention_mask int [B, T]).

    ``waves``: one 1-D signal, a 2-D (B, N) array/tensor, or a list of 1-D signals of any lengths (padded to
    the longest). Lengths in frames are ``attention_mask.sum(1)``.
    """
    if sampling_rate != extractor.sampling_rate:
        raise ValueError(f"features need {extractor.sampling_rate} Hz audio, got {sampling_rate} Hz")
    if isinstance(waves, (Tensor, np.ndarray)):
        waves = [waves] if waves.ndim == 1 else list(waves)
    batch = [_as_float32(wave) for wave in waves]
    if not batch:
        raise ValueError("no waveforms given")
    encoded = extractor(
        batch if len(batch) > 1 else batch[0],
        sampling_rate=sampling_rate,
        padding=True,
        return_attention_mask=True,
        return_tensors="pt",
    )
    return encoded["input_features"].to(torch.float32), encoded["attention_mask"]
