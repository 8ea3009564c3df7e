"""Speaker similarity for checkpoint scoring: x-vector embeddings of a speaker-verification model, compared
by cosine.

    model = load_speaker_model("microsoft/wavlm-base-plus-sv")   # or a local model folder
    model.embed([samples, ...], sample_rate=24_000)              # -> float32 tensor [N, D] on the CPU
    model.similarity(reference, synthesised, sample_rate=24_000) # -> cosine in [-1, 1]

Any ``AutoModelForAudioXVector`` model works (WavLM, wav2vec2, UniSpeech-SAT, data2vec-audio, ... x-vector
heads) with its ``AutoFeatureExtractor``. Clips are resampled to the extractor's rate (soxr), sorted by
length and embedded in batches with the attention mask (the x-vector pooling then averages only real
frames); on the GPU when there is one. Models whose first convolution normalises over time
(``feat_extract_norm="group"``, e.g. wavlm-base-plus-sv) see the padding there, so a clip's embedding in a
batch can differ slightly from its embedding alone; length sorting keeps that padding small.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from data_tools.speech_models import (
    first_line,
    length_batches,
    model_config,
    prepare_waves,
    require_head,
    resolve_device,
)


class SpeakerModelError(ValueError):
    """A model or input the speaker embedder cannot use (one line: what and where)."""


# About 95M parameters; licence from memory (the WavLM code is MIT): check the model card.
SUGGESTED_SPEAKER_MODEL = "microsoft/wavlm-base-plus-sv"
_WHAT = "speaker-verification (x-vector) model"


def load_speaker_model(model: str, device: str = "auto") -> SpeakerEmbedder:
    """An x-vector speaker embedder from a local model folder or a model id."""
    source, config = model_config(model, SpeakerModelError)
    from transformers.models.auto.modeling_auto import MODEL_FOR_AUDIO_XVECTOR_MAPPING_NAMES

    require_head(source, config, "ForXVector", tuple(MODEL_FOR_AUDIO_XVECTOR_MAPPING_NAMES), _WHAT,
                 SpeakerModelError)
    torch_device = resolve_device(device, SpeakerModelError)
    from transformers import AutoFeatureExtractor, AutoModelForAudioXVector

    try:
        feature_extractor = AutoFeatureExtractor.from_pretrained(source)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise SpeakerModelError(f"{source}: its feature extractor does not load ({first_line(exc)})") from None
    try:
        network = AutoModelForAudioXVector.from_pretrained(source)
    except (OSError, ValueError, KeyError, RuntimeError) as exc:
        raise SpeakerModelError(f"{source}: the x-vector model does not load ({first_line(exc)})") from None
    network.eval().to(torch_device)
    return SpeakerEmbedder(network, feature_extractor, torch_device, source)


class SpeakerEmbedder:
    """A loaded x-vector model and its feature extractor."""

    def __init__(self, model: Any, feature_extractor: Any, device: Any, source: str) -> None:
        self.model = model
        self.feature_extractor = feature_extractor
        self.device = device
        self.source = source
        self.sample_rate = int(feature_extractor.sampling_rate)

    def embed(self, waves: Sequence[np.ndarray], sample_rate: int, batch_size: int = 8) -> Any:
        """Embeddings of the clips, in the order given: a float32 CPU tensor [N, D]."""
        import torch

        clips = prepare_waves(waves, sample_rate, self.sample_rate, SpeakerModelError)
        for index, clip in enumerate(clips):
            if clip.size < self.sample_rate // 10:
                raise SpeakerModelError(f"clip {index}: {clip.size / self.sample_rate:.3f} s is too short to "
                                        "embed a speaker (needs at least 0.1 s)")
        width = int(getattr(self.model.config, "xvector_output_dim", 0)) or 0
        rows: list[Any] = [None] * len(clips)
        for batch in length_batches([len(clip) for clip in clips], batch_size, SpeakerModelError):
            inputs = self.feature_extractor([clips[i] for i in batch], sampling_rate=self.sample_rate,
                                            padding=True, return_attention_mask=True, return_tensors="pt")
            inputs = {name: tensor.to(self.device) for name, tensor in inputs.items()}
            with torch.inference_mode():
                embeddings = self.model(**inputs).embeddings.float().cpu()
            for index, row in zip(batch, embeddings, strict=True):
                rows[index] = row
        if not rows:
            return torch.zeros((0, width), dtype=torch.float32)
        return torch.stack(rows)

    def similarity(self, a_wave: np.ndarray, b_wave: np.ndarray, sample_rate: int) -> float:
        """Cosine similarity of two clips' speaker embeddings (1.0: the same voice print)."""
        import torch

        a, b = self.embed([a_wave, b_wave], sample_rate)
        return float(torch.nn.functional.cosine_similarity(a, b, dim=0))
