"""The rest of a tiny IndexTTS-2.5 download folder in the demo workspace, so IndexTTS-2.5 speaks on a CPU at once.

``build`` writes config.yaml, gpt.pth and the .tiktoken table; this module adds every other network
2.5 synthesis loads (``networks.indextts25``), all random and tiny, under the real file names, in well under a
second:

- ``codec.pth`` (``{"model": ...}``): the 2.5 codec (``networks.codec25``) of ``DEMO_SEMANTIC_DIM`` channels;
- ``s2mel.pth`` (``{"net": ...}``): the demos' CFM/DiT and length regulator (``demo.s2mel_kit``) with a
  192-wide style, built without ``gpt_layer`` as 2.5 does;
- ``campplus_cn_common.bin``: a CAMPPlus of few channels whose embedding is 192 wide (the GPT's ``spk_emb_proj``
  and S2Mel's style input read 192);
- ``bigvgan/config.json`` + ``bigvgan/bigvgan_generator.pt``: the demos' BigVGAN v2 (32 initial channels,
  22050 Hz, audible noise);
- ``w2v-bert-2.0/`` (``save_pretrained`` + the SeamlessM4T preprocessor settings) and ``wav2vec2bert_stats.pt``.

``synthesis_sections()`` gives the config.yaml keys that size them (and ``gpt_widths()`` the GPT's
``semantic_dim`` / ``emo_perceiver_dim``, so its emotion conformer reads these features). No emotion matrices: 2.5
needs them only for emotion weights.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from demo.feature_kit import CODEC_SECTION, DEMO_SEMANTIC_DIM, W2V_BERT_SETTINGS
from demo.s2mel_kit import BIGVGAN_DIR, CAMPPLUS_FILE, plain_state, save_weights, write_bigvgan
from demo.s2mel_kit import CAMPPLUS_SIZES as SHARED_CAMPPLUS_SIZES
from demo.s2mel_kit import s2mel_section as shared_s2mel_section

SPEAKER_STYLE_DIM = 192  # CAM++'s embedding: the 2.5 GPT's spk_emb_proj input (fixed) and S2Mel's style
CAMPPLUS_SIZES = {**SHARED_CAMPPLUS_SIZES, "embedding_size": SPEAKER_STYLE_DIM}
CODEC_FILE = "codec.pth"
S2MEL_FILE = "s2mel.pth"
STATS_FILE = "wav2vec2bert_stats.pt"
W2V_BERT_DIR = "w2v-bert-2.0"


def s2mel_section() -> dict[str, Any]:
    """The demos' S2Mel section with a 192-wide style (2.5 builds it without gpt_layer)."""
    section = shared_s2mel_section()
    section["style_encoder"] = {"dim": SPEAKER_STYLE_DIM}
    return section


def gpt_widths() -> dict[str, int]:
    """Keys added to the demo's gpt section: its emotion conformer reads the tiny w2v-BERT's features."""
    return {"semantic_dim": DEMO_SEMANTIC_DIM, "emo_perceiver_dim": DEMO_SEMANTIC_DIM}


def synthesis_sections() -> dict[str, Any]:
    """The config.yaml keys of the synthesis networks (file names relative to the config's folder)."""
    return {"semantic_codec": dict(CODEC_SECTION), "s2mel": s2mel_section(), "campplus": dict(CAMPPLUS_SIZES),
            "s2mel_checkpoint": S2MEL_FILE, "w2v_stat": STATS_FILE}


def synthesis_ready(checkpoints: Path) -> bool:
    """Whether ``checkpoints`` holds the synthesis networks (demos from before 2.5 synthesis do not)."""
    return all((checkpoints / name).exists() for name in (CODEC_FILE, S2MEL_FILE, CAMPPLUS_FILE, STATS_FILE,
                                                           f"{BIGVGAN_DIR}/config.json", f"{W2V_BERT_DIR}/config.json"))


def write_synthesis_kit(checkpoints: Path, seed: int) -> None:
    """Random codec, S2Mel (no gpt_layer), CAMPPlus, BigVGAN v2, w2v-BERT and its stats into ``checkpoints``."""
    import torch

    from networks.campplus import CAMPPlus
    from networks.codec25 import Codec25, codec25_config
    from networks.frontends.seamless_features import build_feature_extractor
    from networks.s2mel import S2Mel
    from networks.w2v_bert import build_w2v_bert

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        save_weights(checkpoints / CODEC_FILE, {"model": plain_state(Codec25(codec25_config(CODEC_SECTION)))})
        s2mel = S2Mel.from_config(s2mel_section(), with_gpt_layer=False)
        save_weights(checkpoints / S2MEL_FILE,
                     {"net": {part: plain_state(getattr(s2mel, part)) for part in s2mel.net_parts}})
        save_weights(checkpoints / CAMPPLUS_FILE, plain_state(CAMPPlus(**CAMPPLUS_SIZES)))
        write_bigvgan(checkpoints)
        w2v = build_w2v_bert(W2V_BERT_SETTINGS)
        w2v.save_pretrained(checkpoints / W2V_BERT_DIR)
        build_feature_extractor().save_pretrained(checkpoints / W2V_BERT_DIR)
        generator = torch.Generator().manual_seed(seed + 1)
        stats = {"mean": 0.1 * torch.randn(DEMO_SEMANTIC_DIM, generator=generator),
                 "var": 0.5 + torch.rand(DEMO_SEMANTIC_DIM, generator=generator)}
        save_weights(checkpoints / STATS_FILE, stats)
