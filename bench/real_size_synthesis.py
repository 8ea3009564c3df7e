"""One short synthesis with every network of a generation at its real size (random weights), on the CPU.

Used by ``bench/real_size.py`` (in its own process, for the peak memory) and ``bench/gpu_check.py`` (for the
real-time factor on a GPU). The networks are built in memory from the real configurations and handed to the
studio's own synthesizers (``trainer.synthesis``): v1.5's GPT + BigVGAN v1.5; IndexTTS2's and 2.5's GPT,
w2v-BERT 2.0, semantic codec (2.5: its own codec), CAMPPlus, S2Mel and BigVGAN v2. The GPT decodes greedily up
to ``codes`` codes (random weights rarely stop earlier); the prompt is 3 s of noise (1.5: a
log-mel of noise).
"""

from __future__ import annotations

import json
import time
from typing import Any

import torch

PROMPT_SECONDS = 3.0
TEXT_IDS = list(range(20, 44))  # 24 text tokens
EMO_NUM = (3, 17, 2, 8, 4, 5, 10, 24)  # rows per emotion in feat1 / feat2 (upstream's)


def _gpt(generation: str, device: torch.device) -> Any:
    from bench.real_size import real_gpt_config
    from generations.registry import build_gpt

    return build_gpt(real_gpt_config(generation)[0]).to(device).eval()


def _v15(codes: int, device: torch.device) -> tuple[Any, Any]:
    from bench.real_size import REFERENCE
    from networks.bigvgan import VocoderSpec, build_bigvgan
    from trainer.synthesis.generation import DecodeSettings
    from trainer.synthesis.pipeline import Synthesizer

    shapes = json.loads((REFERENCE / "fixtures_indextts15_infer" / "indextts15_bigvgan_state_dict_shapes.json").read_text())
    vocoder = build_bigvgan(VocoderSpec.from_config({"bigvgan": shapes["config"]}), str(device)).eval()
    synth = Synthesizer(_gpt("1.5", device), vocoder)
    frames = int(PROMPT_SECONDS * 24000 / 256)
    reference = torch.randn(1, 100, frames, generator=torch.Generator().manual_seed(0), device="cpu") - 4
    settings = DecodeSettings(mode="greedy", max_codes=codes)
    return synth, lambda: synth.synthesize_ids(TEXT_IDS, reference, settings)


def _audio_parts(generation: str, device: torch.device) -> dict[str, Any]:
    from bench.real_size import REAL_CODEC_SECTION, real_s2mel
    from networks.bigvgan_v2 import HUB_CONFIG
    from networks.campplus import REAL_SIZES, CAMPPlus
    from networks.frontends.seamless_features import build_feature_extractor
    from networks.indextts2 import build_vocoder_v2
    from networks.w2v_bert import SemanticFeatureModel, SemanticStats, build_w2v_bert

    w2v = build_w2v_bert(None)
    width = int(w2v.config.hidden_size)
    semantic = SemanticFeatureModel(w2v, SemanticStats(torch.zeros(width), torch.ones(width)))
    if generation == "2":
        from networks.semantic_codec import SemanticCodec, SemanticCodecConfig

        codec = SemanticCodec(SemanticCodecConfig.from_section(REAL_CODEC_SECTION))
    else:
        from networks.codec25 import build_codec25

        codec = build_codec25(REAL_CODEC_SECTION)
    rows = sum(EMO_NUM)
    from bench.real_size import REAL_S2MEL_SECTION

    return {
        "config": {"s2mel": REAL_S2MEL_SECTION, "emo_num": list(EMO_NUM)}, "files": None,
        "extractor": build_feature_extractor(), "semantic": semantic.to(device).eval(), "codec": codec.to(device).eval(),
        "campplus": CAMPPlus(**REAL_SIZES).to(device).eval(),
        "s2mel": real_s2mel(meta=False, gpt_layer=generation == "2").to(device).eval(),
        "vocoder": build_vocoder_v2(HUB_CONFIG, str(device)).eval(),
        "spk_matrix": torch.randn(rows, 192, device=device), "emo_matrix": torch.randn(rows, 1280, device=device),
        "emo_num": EMO_NUM,
    }


def _s2mel_generation(generation: str, codes: int, steps: int, device: torch.device) -> tuple[Any, Any]:
    from trainer.synthesis.generation import DecodeSettings

    parts = _audio_parts(generation, device) | {"gpt": _gpt(generation, device)}
    if generation == "2":
        from networks.indextts2 import IndexTTS2Networks
        from trainer.synthesis.s2mel_pipeline import S2MelSynthesizer
        from trainer.synthesis.s2mel_types import MelSettings

        synth: Any = S2MelSynthesizer(IndexTTS2Networks(**parts))
        mel: Any = MelSettings(steps=steps)
    else:
        from generations.indextts25.synthesis import MelSettings25, SynthesizerV25
        from networks.indextts25 import IndexTTS25Networks

        synth = SynthesizerV25(IndexTTS25Networks(**parts), language="en")
        mel = MelSettings25(steps=steps)
    generator = torch.Generator().manual_seed(0)
    audio_22k = torch.randn(1, int(PROMPT_SECONDS * 22050), generator=generator, device="cpu") * 0.1
    audio_16k = torch.randn(1, int(PROMPT_SECONDS * 16000), generator=generator, device="cpu") * 0.1
    settings = DecodeSettings(mode="greedy", max_codes=codes)

    def speak() -> Any:
        voice = synth.voice_from_audio(audio_22k.to(device), audio_16k.to(device))
        return synth.synthesize_ids([TEXT_IDS], voice, settings=settings, mel=mel)

    return synth, speak


def synthesize_once(generation: str, codes: int, steps: int, device: str = "cpu") -> dict[str, Any]:
    """Build the generation's real networks, synthesise once; seconds, audio seconds and real-time factor."""
    where = torch.device(device)
    torch.manual_seed(0)
    with torch.inference_mode():
        built = time.perf_counter()
        with where:  # weights are made where they run (a GPU initialises them in a blink)
            _, speak = _v15(codes, where) if generation == "1.5" else _s2mel_generation(generation, codes, steps, where)
        build_seconds = time.perf_counter() - built
        started = time.perf_counter()
        result = speak()
        if where.type == "cuda":
            torch.cuda.synchronize(where)
        seconds = time.perf_counter() - started
    audio_seconds = float(result.audio_seconds)
    return {"seconds": seconds, "audio_seconds": audio_seconds, "rtf": seconds / max(audio_seconds, 1e-9),
            "build_seconds": build_seconds, "codes": int(result.codes.size)}
