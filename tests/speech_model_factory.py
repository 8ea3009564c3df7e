"""Tiny random transformers speech models saved as local folders (never downloaded): a CTC recogniser,
an MMS-style one with per-language adapters, and an x-vector speaker model. Seconds on a CPU."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

SAMPLE_RATE = 16_000
LETTERS = "abcdefghij"


def _vocab(letters: str) -> dict[str, int]:
    tokens = ["<pad>", "<s>", "</s>", "<unk>", "|", *letters]
    return {token: index for index, token in enumerate(tokens)}


# Two convolutions (kernel 10 stride 5, kernel 8 stride 4: 800 frames/s) keep tests fast; the wav2vec2
# layout (seven convolutions, 320x down to 50 frames/s, the real models' rate) for benchmarks.
TINY_CONV = {"conv_dim": (16, 16), "conv_stride": (5, 4), "conv_kernel": (10, 8)}
# WavLM's relative position bias costs frames squared: at 800 frames/s it took seconds per clip, so the
# x-vector model runs at 200 frames/s (the real 50 would make clips under 0.32 s too short for the TDNN).
XVECTOR_CONV = {"conv_dim": (16, 16, 16), "conv_stride": (5, 4, 4), "conv_kernel": (10, 8, 4)}
WAV2VEC2_CONV = {"conv_dim": (32,) * 7, "conv_stride": (5, 2, 2, 2, 2, 2, 2), "conv_kernel": (10, 3, 3, 3, 3, 2, 2)}


def _tiny_wav2vec2_config(vocab_size: int, hidden: int = 16, layers: int = 2, conv: dict | None = None,
                          feat_extract_norm: str = "layer", **extra):
    from transformers import Wav2Vec2Config

    return Wav2Vec2Config(
        vocab_size=vocab_size, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=2,
        intermediate_size=2 * hidden, **(conv or TINY_CONV), conv_bias=True,
        num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=2, feat_extract_norm=feat_extract_norm,
        do_stable_layer_norm=feat_extract_norm == "layer", pad_token_id=0, hidden_dropout=0.0, attention_dropout=0.0,
        activation_dropout=0.0, feat_proj_dropout=0.0, final_dropout=0.0, layerdrop=0.0, **extra)


def _feature_extractor(attention_mask: bool = True):
    from transformers import Wav2Vec2FeatureExtractor

    return Wav2Vec2FeatureExtractor(feature_size=1, sampling_rate=SAMPLE_RATE, padding_value=0.0,
                                    do_normalize=True, return_attention_mask=attention_mask)


def _sharpen_head(model, seed: int) -> None:
    """A random head gives near-uniform letters; scale it so frames pick tokens decisively (mixed blanks)."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        head = model.lm_head
        head.weight.copy_(torch.randn(head.weight.shape, generator=generator) * 2.0)
        head.bias.zero_()


def build_ctc_model(folder: Path, seed: int = 0, hidden: int = 16, layers: int = 2, conv: dict | None = None,
                    base_style: bool = False) -> Path:
    """A random Wav2Vec2ForCTC with its processor (feature extractor + CTC tokenizer) in ``folder``.
    ``base_style``: as wav2vec2-base-960h, group norm in the first convolution and no attention mask."""
    import torch
    from transformers import Wav2Vec2CTCTokenizer, Wav2Vec2ForCTC, Wav2Vec2Processor

    folder.mkdir(parents=True, exist_ok=True)
    vocab = _vocab(LETTERS)
    (folder / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
    tokenizer = Wav2Vec2CTCTokenizer(str(folder / "vocab.json"))
    Wav2Vec2Processor(feature_extractor=_feature_extractor(attention_mask=not base_style),
                      tokenizer=tokenizer).save_pretrained(folder)
    torch.manual_seed(seed)
    model = Wav2Vec2ForCTC(_tiny_wav2vec2_config(len(vocab), hidden=hidden, layers=layers, conv=conv,
                                                 feat_extract_norm="group" if base_style else "layer"))
    _sharpen_head(model, seed)
    model.save_pretrained(folder)
    return folder


def build_mms_style_model(folder: Path, languages: dict[str, str], seed: int = 0) -> Path:
    """A Wav2Vec2ForCTC with attention adapters (``adapter_attn_dim``), one ``adapter.<lang>.safetensors``
    per language (adapter layers + a head sized to that language's vocabulary) and a nested vocab.json."""
    import torch
    from safetensors.torch import save_file
    from transformers import Wav2Vec2CTCTokenizer, Wav2Vec2ForCTC, Wav2Vec2Processor

    folder.mkdir(parents=True, exist_ok=True)
    vocabs = {lang: _vocab(letters) for lang, letters in languages.items()}
    (folder / "vocab.json").write_text(json.dumps(vocabs), encoding="utf-8")
    first = next(iter(languages))
    tokenizer = Wav2Vec2CTCTokenizer(str(folder / "vocab.json"), target_lang=first)
    Wav2Vec2Processor(feature_extractor=_feature_extractor(), tokenizer=tokenizer).save_pretrained(folder)
    # The saved tokenizer must not pin a language: the caller picks one (as with facebook/mms-1b-all).
    config_file = folder / "tokenizer_config.json"
    tokenizer_config = json.loads(config_file.read_text(encoding="utf-8"))
    tokenizer_config.pop("target_lang", None)
    config_file.write_text(json.dumps(tokenizer_config), encoding="utf-8")
    (folder / "vocab.json").write_text(json.dumps(vocabs), encoding="utf-8")
    torch.manual_seed(seed)
    model = Wav2Vec2ForCTC(_tiny_wav2vec2_config(len(vocabs[first]), adapter_attn_dim=8))
    _sharpen_head(model, seed)
    model.save_pretrained(folder)
    for offset, (lang, vocab) in enumerate(vocabs.items()):
        generator = torch.Generator().manual_seed(seed + 100 + offset)
        weights = {}
        for name, parameter in model._get_adapters().items():
            shape = (len(vocab), *parameter.shape[1:]) if name.startswith("lm_head") else parameter.shape
            weights[name] = torch.randn(shape, generator=generator) * (2.0 if name.startswith("lm_head") else 0.5)
        save_file(weights, str(folder / f"adapter.{lang}.safetensors"))
    return folder


def build_xvector_model(folder: Path, seed: int = 0, feat_extract_norm: str = "layer", conv: dict | None = None
                        ) -> Path:
    """A random WavLMForXVector (wavlm-base-plus-sv's TDNN kernels and dilations) with its feature extractor
    in ``folder``. The head's weights are scaled up so embeddings are of order one, not 1e-5. ``conv``: the
    feature encoder's convolutions (default XVECTOR_CONV, 200 frames/s)."""
    import torch
    from transformers import WavLMConfig, WavLMForXVector

    folder.mkdir(parents=True, exist_ok=True)
    config = WavLMConfig(
        hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32, **(conv or XVECTOR_CONV), conv_bias=True, num_conv_pos_embeddings=16,
        num_conv_pos_embedding_groups=2, feat_extract_norm=feat_extract_norm,
        do_stable_layer_norm=feat_extract_norm == "layer", num_buckets=16, max_bucket_distance=64,
        tdnn_dim=(16, 16, 16, 16, 32), tdnn_kernel=(5, 3, 3, 1, 1), tdnn_dilation=(1, 2, 3, 1, 1),
        xvector_output_dim=12, hidden_dropout=0.0, attention_dropout=0.0, activation_dropout=0.0,
        feat_proj_dropout=0.0, final_dropout=0.0, layerdrop=0.0)
    torch.manual_seed(seed)
    model = WavLMForXVector(config)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if name.startswith(("projector", "tdnn", "feature_extractor")) and parameter.dim() == 2:
                parameter.normal_(std=parameter.shape[1] ** -0.5)
    model.save_pretrained(folder)
    _feature_extractor().save_pretrained(folder)
    return folder


def noise_clips(lengths_s: list[float], seed: int = 0, sample_rate: int = SAMPLE_RATE) -> list[np.ndarray]:
    """Band-limited random signals of the given durations (float32, about -20 dBFS)."""
    rng = np.random.default_rng(seed)
    clips = []
    for seconds in lengths_s:
        white = rng.standard_normal(int(seconds * sample_rate)).astype(np.float32)
        smooth = np.convolve(white, np.ones(8, dtype=np.float32) / 8, mode="same")
        clips.append((0.1 * smooth / (np.abs(smooth).max() + 1e-9)).astype(np.float32))
    return clips


def judge_models(root: Path) -> dict[str, Path]:
    """The tiny recogniser and speaker model an evaluation scores with: {"asr": folder, "speaker": folder}."""
    return {"asr": build_ctc_model(root / "ctc"), "speaker": build_xvector_model(root / "xvector")}


def tone_wav(path: Path, hz: float = 140.0, seconds: float = 1.0, rate: int = 24_000) -> Path:
    """A quiet sine tone: a reference voice for the tiny models (they speak noise through the real path anyway)."""
    import soundfile

    t = np.arange(int(rate * seconds)) / rate
    soundfile.write(path, (0.3 * np.sin(2 * np.pi * hz * t)).astype(np.float32), rate)
    return path
