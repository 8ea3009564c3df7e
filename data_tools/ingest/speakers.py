"""Speakers told apart: each clip's speaker embedding, clustered per recording and then across recordings.

Embeddings come from a speaker network we already load: CAM++ (``campplus_cn_common.bin`` or any state dict of
its layout; the sizes are read from the weights) or a transformers x-vector model (``*ForXVector``, a folder or an
id the user gives). They are cached per clip in the source records, so a rerun embeds only new clips and a new
threshold costs nothing but the clustering.

Clustering is agglomerative (average linkage over cosine distance, scipy) with one threshold the user sets: two
groups whose mean cosine similarity is at least ``threshold`` are the same speaker. Within a recording first
(a conversation's turns), then the recordings' groups across recordings by their mean embeddings, so one
person recorded twice gets one label. A group with under 8 s of speech then joins the most similar larger one.
The embeddings are centred on their mean over the whole run first: what
every clip shares (the channel, the language) says nothing about who speaks. Labels are ``<prefix>1``,
``<prefix>2``, ... by total speech, most first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

EMBED_RATE = 16_000
MIN_SPEAKER_SECONDS = 8.0  # less speech than this is not kept as a speaker of its own
DEFAULT_THRESHOLD = 0.3  # of centred embeddings: one voice ~0.5 on average, two voices below 0


class SpeakerError(ValueError):
    """A speaker model that cannot be used, or settings that cannot work (one line)."""


class CampplusEmbedder:
    """CAM++ over 16 kHz audio; sizes inferred from the state dict (the real model or a shrunk one)."""

    def __init__(self, path: Path, device: str = "cpu") -> None:
        import torch

        from networks.campplus import load_campplus

        try:
            state = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as exc:  # a truncated or foreign file
            raise SpeakerError(f"{path}: not a CAMPPlus state dict ({' '.join(str(exc).split())[:160]})") from None
        try:
            sizes = {"init_channels": state["xvector.tdnn.linear.weight"].shape[0],
                     "embedding_size": state["xvector.dense.linear.weight"].shape[0],
                     "growth_rate": state["xvector.block1.tdnnd1.cam_layer.linear_local.weight"].shape[0]}
            sizes["bn_size"] = state["xvector.block1.tdnnd1.linear1.weight"].shape[0] // sizes["growth_rate"]
            self.model = load_campplus(state, source=str(path), **sizes).to(device)
        except (KeyError, TypeError, AttributeError, ValueError, RuntimeError) as exc:
            raise SpeakerError(f"{path}: not a CAMPPlus state dict ({' '.join(str(exc).split())[:160]})") from None
        self.device = device

    def embed(self, wave_16k: np.ndarray) -> np.ndarray:
        import torch

        with torch.inference_mode():
            return self.model.style_of(torch.from_numpy(wave_16k.astype(np.float32))[None])[0].cpu().numpy()


class XVectorEmbedder:
    """A transformers x-vector model (``AutoModelForAudioXVector``): its ``embeddings`` output."""

    def __init__(self, source: str, device: str = "cpu") -> None:
        from transformers import AutoFeatureExtractor, AutoModelForAudioXVector

        try:
            self.extractor = AutoFeatureExtractor.from_pretrained(source)
            self.model = AutoModelForAudioXVector.from_pretrained(source).to(device).eval()
        except (OSError, ValueError, KeyError) as exc:
            raise SpeakerError(f"--speaker-model {source}: not an x-vector model folder or id "
                               f"({' '.join(str(exc).split())[:160]})") from None
        self.device = device

    def embed(self, wave_16k: np.ndarray) -> np.ndarray:
        import torch

        inputs = self.extractor(wave_16k, sampling_rate=EMBED_RATE, return_tensors="pt")
        with torch.inference_mode():
            output = self.model(**{k: v.to(self.device) for k, v in inputs.items()})
        return output.embeddings[0].float().cpu().numpy()


def load_embedder(source: str | Path, device: str = "cpu") -> CampplusEmbedder | XVectorEmbedder:
    """A CAM++ weights file (.bin/.pt/.pth) or an x-vector model folder or id."""
    path = Path(source)
    if path.is_file():
        return CampplusEmbedder(path, device)
    return XVectorEmbedder(str(source), device)


@dataclass(frozen=True)
class Clip:
    id: str
    source: str
    seconds: float
    embedding: np.ndarray


def label_speakers(clips: Sequence[Clip], threshold: float = DEFAULT_THRESHOLD, prefix: str = "spk",
                   min_seconds: float = MIN_SPEAKER_SECONDS) -> dict[str, str]:
    """Clip id -> speaker label (see the module's text)."""
    if not 0 < threshold < 1:
        raise SpeakerError(f"speaker threshold {threshold} must be between 0 and 1 (a cosine similarity)")
    if not clips:
        return {}
    vectors = np.stack([clip.embedding for clip in clips]).astype(np.float64)
    vectors = _unit(vectors - vectors.mean(axis=0)) if len(clips) > 1 else _unit(vectors)
    groups: list[list[int]] = []  # clip indices, per recording's speaker
    by_source: dict[str, list[int]] = {}
    for index, clip in enumerate(clips):
        by_source.setdefault(clip.source, []).append(index)
    for members in by_source.values():
        for cluster in _clusters(vectors[members], threshold):
            groups.append([members[k] for k in cluster])
    centroids = np.stack([_unit(vectors[group].mean(axis=0)) for group in groups])
    speakers: list[list[int]] = [[i for g in merged for i in groups[g]] for merged in _clusters(centroids, threshold)]
    speakers = _fold_small(speakers, vectors, [clip.seconds for clip in clips], min_seconds)
    speakers.sort(key=lambda members: (-sum(clips[i].seconds for i in members), min(clips[i].id for i in members)))
    return {clips[i].id: f"{prefix}{rank}" for rank, members in enumerate(speakers, 1) for i in members}


def _fold_small(speakers: list[list[int]], vectors: np.ndarray, seconds: list[float], min_seconds: float
                ) -> list[list[int]]:
    """Groups with less than ``min_seconds`` of speech join the most similar larger group: one odd clip (a
    cough, a shout, a line read differently) is rarely a speaker of its own, and too little to train one."""
    big = [members for members in speakers if sum(seconds[i] for i in members) >= min_seconds]
    if not big or len(big) == len(speakers):
        return speakers
    centroids = np.stack([_unit(vectors[members].mean(axis=0)) for members in big])
    for members in speakers:
        if sum(seconds[i] for i in members) < min_seconds:
            nearest = int(np.argmax(centroids @ _unit(vectors[members].mean(axis=0))))
            big[nearest] = big[nearest] + members
    return big


def _clusters(vectors: np.ndarray, threshold: float) -> list[list[int]]:
    if len(vectors) == 1:
        return [[0]]
    from scipy.cluster.hierarchy import fcluster, linkage

    distances = np.clip(1.0 - vectors @ vectors.T, 0.0, 2.0)
    condensed = distances[np.triu_indices(len(vectors), k=1)]
    tree = linkage(condensed, method="average")
    labels = fcluster(tree, t=1.0 - threshold, criterion="distance")
    return [list(np.flatnonzero(labels == label)) for label in sorted(set(labels))]


def _unit(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=-1, keepdims=True)
    return vectors / np.maximum(norms, 1e-9)


def embed_clip(embedder: Any, path: Path) -> list[float]:
    """A clip file's embedding (read, mixed to mono, resampled to 16 kHz)."""
    import soundfile as sf
    import soxr

    audio, rate = sf.read(str(path), dtype="float32", always_2d=True)
    mono = audio.mean(axis=1)
    if rate != EMBED_RATE:
        mono = soxr.resample(mono, rate, EMBED_RATE).astype(np.float32)
    return [round(float(v), 6) for v in embedder.embed(mono)]
