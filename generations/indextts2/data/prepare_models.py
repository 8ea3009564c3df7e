"""IndexTTS2 preparation's networks and per-batch computation (``data_tools.prepare_v2`` runs them).

Audio the community way (mono, 24 kHz, 16 kHz, torchaudio's functional sinc resampler), the networks loaded
strictly once (w2v-BERT up to layer 17 + stats, the semantic codec, the base GPT's conditioning and emotion
path, the SentencePiece tokenizer), and one padded batch through them (the community recipe).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from data_tools import paired_prep
from data_tools.paired_prep import PrepareError

COMMUNITY_RATE = 24_000  # the community recipe resamples everything to 24 kHz first
FEATURE_RATE = 16_000


# ---------------------------------------------------------------------------------------------
# Audio, the community way


def load_community_audio(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """(24 kHz, 16 kHz) mono float32: channels averaged, then torchaudio's functional sinc resampler twice."""
    import soundfile
    import torch

    from data_tools.audio import AudioError
    from networks.frontends.resample import sinc_resample

    if not path.is_file():
        raise AudioError(f"{path}: audio file not found")
    try:
        data, rate = soundfile.read(str(path), dtype="float32", always_2d=True)
    except (RuntimeError, OSError, ValueError) as exc:  # libsndfile errors are RuntimeErrors
        raise AudioError(f"{path}: unreadable audio ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})"
                         ) from None
    if data.size == 0:
        raise AudioError(f"{path}: audio has no samples")
    wave = torch.from_numpy(np.ascontiguousarray(data.T)).mean(dim=0)
    if not bool(torch.isfinite(wave).all()):
        raise AudioError(f"{path}: audio contains NaN or infinite samples")
    wave_24k = sinc_resample(wave, int(rate), COMMUNITY_RATE)
    wave_16k = sinc_resample(wave_24k, COMMUNITY_RATE, FEATURE_RATE)
    return wave_24k.numpy(), wave_16k.numpy()


# ---------------------------------------------------------------------------------------------
# The models


@dataclass
class PreparationModels:
    """Everything the per-batch computation needs, loaded once (strictly) on one device."""

    extractor: Any  # SeamlessM4TFeatureExtractor
    semantic: Any  # networks.w2v_bert.SemanticFeatureModel
    codec: Any  # networks.semantic_codec.SemanticCodec
    gpt: Any  # networks.unified_voice.UnifiedVoiceV2
    tokenizer: Any  # data_tools.text_tokenizer.TextTokenizer
    device: Any  # torch.device
    max_text_tokens: int
    max_codes: int


def gpt_state_dict(path: Path) -> Mapping[str, Any]:
    """A ``gpt.pth``: a plain state dict (the release) or ``{"model": ...}`` (trainer checkpoints, fixtures)."""
    import torch

    if not path.is_file():
        raise PrepareError(f"base GPT not found: {path}")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises many types for a damaged or foreign file
        raise PrepareError(f"{path}: cannot load the base GPT ({type(exc).__name__}: {exc})".splitlines()[0]) from None
    if isinstance(payload, Mapping) and isinstance(payload.get("model"), Mapping):
        payload = payload["model"]
    if not isinstance(payload, Mapping):
        raise PrepareError(f"{path}: not a state dict")
    return payload


def load_models(config: Mapping[str, Any], *, gpt: Path, codec: Path, w2v_bert: str, w2v_stats: Path,
                tokenizer: Path, device: Any) -> PreparationModels:
    """Load every network strictly (a wrong file is refused in one line naming the first bad key)."""
    import torch

    from data_tools.text_tokenizer import TextTokenizer
    from networks import indextts2
    from networks.gpt_config import ConfigError
    from networks.loading import StateDictMismatchError
    from networks.semantic_codec import load_semantic_codec

    try:
        gpt_model = indextts2.build_gpt(config["gpt"])
        indextts2.load_gpt(gpt_model, gpt_state_dict(gpt))
    except (ConfigError, StateDictMismatchError) as exc:
        raise paired_prep.refuse(f"base GPT {gpt}", exc) from None
    if "semantic_codec" not in config or not isinstance(config["semantic_codec"], Mapping):
        raise PrepareError("the config has no 'semantic_codec:' section (an IndexTTS2 config.yaml is needed)")
    try:
        codec_model = load_semantic_codec(codec, config["semantic_codec"])
    except (FileNotFoundError, ValueError) as exc:
        raise paired_prep.refuse("semantic codec", exc) from None
    extractor, semantic = paired_prep.load_semantic_features(w2v_bert, w2v_stats)
    paired_prep.check_semantic_widths(semantic, codec_model, gpt_model)
    if not tokenizer.is_file():
        raise PrepareError(f"tokenizer not found: {tokenizer}")
    try:
        text_tokenizer = TextTokenizer(tokenizer)
    except (OSError, RuntimeError, ValueError) as exc:
        raise paired_prep.refuse(f"tokenizer {tokenizer}", exc) from None
    with torch.no_grad():
        for module in (semantic, codec_model, gpt_model):
            module.to(device).eval()
    return PreparationModels(extractor=extractor, semantic=semantic, codec=codec_model, gpt=gpt_model,
                             tokenizer=text_tokenizer, device=device,
                             max_text_tokens=int(config["gpt"]["max_text_tokens"]),
                             max_codes=int(config["gpt"]["max_mel_tokens"]))


@dataclass
class BatchOutputs:
    """The model outputs of one padded batch (on the CPU), for tests and the benchmark."""

    feat: Any  # (B, T, W) normalised w2v-BERT features
    codes: Any  # (B, T) int64
    lengths: Any  # (B,) valid frames
    conditioning: Any  # (B, 32, D)
    emo_perceiver_out: Any  # (B, P)
    emovec_layer_out: Any  # (B, D)
    emo_vec: Any  # (B, D)


def run_models(models: PreparationModels, features: Any, mask: Any) -> BatchOutputs:
    """One padded batch through w2v-BERT, the stats, the codec and the base GPT's conditioning (community recipe)."""
    import torch

    with torch.inference_mode():
        features = features.to(models.device, non_blocking=True)
        mask = mask.to(models.device, non_blocking=True)
        feat = models.semantic(features, mask)
        codes, _ = models.codec.quantize(feat)
        lengths = mask.sum(1)
        channels_first = feat.transpose(1, 2)
        conditioning = models.gpt.get_conditioning(channels_first, lengths)
        emo_latent = models.gpt.get_emo_conditioning(channels_first, lengths)
        emovec_layer_out = models.gpt.emovec_layer(emo_latent)
        emo_vec = models.gpt.emo_layer(emovec_layer_out)  # = get_emovec, its stages kept for the tests
        outputs = (feat, codes, lengths, conditioning, emo_latent, emovec_layer_out, emo_vec)
        feat, codes, lengths, conditioning, emo_latent, emovec_layer_out, emo_vec = (t.cpu() for t in outputs)
    return BatchOutputs(feat=feat, codes=codes, lengths=lengths, conditioning=conditioning,
                        emo_perceiver_out=emo_latent, emovec_layer_out=emovec_layer_out, emo_vec=emo_vec)
