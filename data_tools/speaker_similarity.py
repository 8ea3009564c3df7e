"""Speaker similarity for checkpoint scoring: x-vector embeddings of a speaker-verification model, compared
by cosine.

    model = load_speaker_model("microsoft/wavlm-base-plus-sv")   # or a local model folder
    model.embed([samples, ...], sample_rate=24_000)              # -> float32 tensor [N, D] on the CPU
    model.similarity(reference, synthesised, sample_rate=24_000) # -> cosine in [-1, 1]

Any ``AutoModelForAudioXVector`` model works (WavLM, wav2vec2, UniSpeech-SAT, data2vec-audio, ... x-vector
heads) with its ``AutoFeatureExtractor``. Clips are resampled to the extractor's rate (soxr), sorted by
length and embedded in batches with the attention mask; on the GPU when there is one.

A clip's embedding does not depend on the clips batched with it:

- The x-vector head is run here rather than through the model's forward: the statistics pooling takes
  each clip's mean and standard deviation over exactly the TDNN frames made from its own samples.
  transformers' head counts those frames as if its dilated TDNN layers were not dilated, so in a padded
  batch a shorter clip's statistics would take in a few frames computed from padding (for
  wavlm-base-plus-sv's dilations 1, 2, 3: 6 frames, 0.12 s). For a single clip both give the same result.
- Models whose first convolution normalises over time (``feat_extract_norm="group"``, as in the base-size
  wav2vec2 and WavLM checkpoints) would see the padding in that normalisation; they embed one clip at a
  time. Scoring embeds a few dozen clips per checkpoint, so exactness wins over throughput here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from data_tools.speech_models import (
    TRAINING_ONLY_KEYS,
    first_line,
    length_batches,
    load_model_strictly,
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
# The speaker classifier and its AM-softmax loss sit after the embedding: only training uses them.
_CLASSIFIER_KEYS = ("classifier.*", "objective.*")


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
    network = load_model_strictly(AutoModelForAudioXVector, source, _WHAT, SpeakerModelError,
                                  (*TRAINING_ONLY_KEYS, *_CLASSIFIER_KEYS))
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
        self.batches_exactly = getattr(model.config, "feat_extract_norm", "layer") != "group"
        self.min_samples = _min_samples(model, self.sample_rate)

    def embed(self, waves: Sequence[np.ndarray], sample_rate: int, batch_size: int = 8) -> Any:
        """Embeddings of the clips, in the order given: a float32 CPU tensor [N, D]."""
        import torch

        clips = prepare_waves(waves, sample_rate, self.sample_rate, SpeakerModelError)
        for index, clip in enumerate(clips):
            if clip.size < self.min_samples:
                raise SpeakerModelError(f"clip {index}: {clip.size / self.sample_rate:.3f} s is too short to "
                                        f"embed a speaker (this model needs at least "
                                        f"{self.min_samples / self.sample_rate:.3f} s)")
        width = int(getattr(self.model.config, "xvector_output_dim", 0)) or 0
        rows: list[Any] = [None] * len(clips)
        lengths = [len(clip) for clip in clips]
        for batch in length_batches(lengths, batch_size if self.batches_exactly else 1, SpeakerModelError):
            inputs = self.feature_extractor([clips[i] for i in batch], sampling_rate=self.sample_rate,
                                            padding=True, return_attention_mask=True, return_tensors="pt")
            inputs = {name: tensor.to(self.device) for name, tensor in inputs.items()}
            with torch.inference_mode():
                embeddings = xvector_embeddings(self.model, inputs).float().cpu()
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


def _has_xvector_head(model: Any) -> bool:
    return all(hasattr(model, name) for name in ("projector", "tdnn", "feature_extractor"))


def _tdnn_shrink(model: Any) -> int:
    """Frames the TDNN layers consume: each leaves (kernel - 1) x dilation fewer than it is given."""
    config = model.config
    return sum((kernel - 1) * dilation for kernel, dilation in zip(config.tdnn_kernel, config.tdnn_dilation,
                                                                    strict=True))


def xvector_embeddings(model: Any, inputs: dict[str, Any]) -> Any:
    """The model's x-vector head, pooling each clip over exactly its own frames (see the module doc)."""
    import torch

    if not _has_xvector_head(model) or "attention_mask" not in inputs:
        return model(**inputs).embeddings
    weighted = bool(getattr(model.config, "use_weighted_layer_sum", False))
    outputs = model.base_model(**inputs, output_hidden_states=weighted)
    if weighted:
        layers = torch.stack(outputs.hidden_states, dim=1)
        hidden = (layers * model.layer_weights.softmax(dim=-1).view(-1, 1, 1)).sum(dim=1)
    else:
        hidden = outputs.last_hidden_state
    hidden = model.projector(hidden)
    for layer in model.tdnn:
        hidden = layer(hidden)
    frames = model._get_feat_extract_output_lengths(inputs["attention_mask"].sum(dim=1)) - _tdnn_shrink(model)
    statistics = [torch.cat([hidden[row, :count].mean(dim=0), hidden[row, :count].std(dim=0)])
                  for row, count in enumerate(frames.tolist())]
    return model.feature_extractor(torch.stack(statistics))


def _min_samples(model: Any, sample_rate: int) -> int:
    """Fewest samples that leave the pooling two TDNN frames (a standard deviation needs two)."""
    import torch

    if not _has_xvector_head(model) or not hasattr(model, "_get_feat_extract_output_lengths"):
        return sample_rate // 10
    needed = 2 + _tdnn_shrink(model)

    def enough(samples: int) -> bool:
        return int(model._get_feat_extract_output_lengths(torch.tensor([samples]))[0]) >= needed

    low, high = 1, 60 * sample_rate
    while low < high:
        middle = (low + high) // 2
        low, high = (low, middle) if enough(middle) else (middle + 1, high)
    return low
