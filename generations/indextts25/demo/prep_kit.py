"""Tiny random IndexTTS-2.5 preparation networks, laid out as a 2.5 download folder (tests and benchmarks).

``write_prep_kit(folder)`` writes ``config.yaml`` (``version: 2.5``; a ``gpt`` section reading w2v-BERT
features of ``width`` channels, a small ``semantic_codec`` and ``campplus`` section), ``gpt.pth`` (the 2.5
GPT, real key layout and the full text table), ``codec.pth`` (the 2.5 codec), ``campplus_cn_common.bin``
(a small CAM++ giving real 192-wide vectors), and the w2v-BERT folder + stats of ``demo.feature_kit``:
what ``python -m data_tools.prepare_v25 --config <folder>/config.yaml --w2v-bert <folder>/w2v-bert`` needs.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from data_tools.config import save_config
from data_tools.fileio import atomic_write_with
from demo.data import paired_gpt_section
from demo.feature_kit import CODEC_SECTION, DEMO_SEMANTIC_DIM, FeatureKit, write_feature_kit
from generations.indextts25.data.tiktoken_table import BASE_VOCAB_SIZE

CAMPPLUS_SECTION = {"growth_rate": 8, "bn_size": 2, "init_channels": 16}


@dataclass(frozen=True)
class PrepKit:
    folder: Path
    config: Path
    gpt: Path
    codec: Path
    campplus: Path
    w2v_bert: Path
    w2v_stats: Path


def kit_config(width: int, max_text_tokens: int, max_mel_tokens: int, model_dim: int = 32) -> dict:
    """A 2.5 config.yaml: IndexTTS2's gpt layout (``version: 2.5`` marks it) at tiny sizes."""
    return {
        "gpt": paired_gpt_section(model_dim, BASE_VOCAB_SIZE, max_text_tokens, max_mel_tokens,
                                  semantic_dim=width, emo_perceiver_dim=width),
        "semantic_codec": {**CODEC_SECTION, "hidden_size": width},
        "campplus": dict(CAMPPLUS_SECTION),
        "gpt_checkpoint": "gpt.pth",
        "w2v_stat": FeatureKit.under(Path(".")).w2v_stats.name,
        "version": 2.5,
    }


def write_prep_kit(folder: Path, seed: int = 0, width: int = DEMO_SEMANTIC_DIM, max_text_tokens: int = 160,
                     max_mel_tokens: int = 250) -> PrepKit:
    """Random 2.5 preparation networks under ``folder`` (see the module docstring)."""
    from networks.campplus import CAMPPlus
    from networks.codec25 import build_codec25
    from networks.gpt_v25 import build_gpt_v25

    folder = Path(folder)
    features = write_feature_kit(folder, seed, semantic_dim=width)
    config = kit_config(width, max_text_tokens, max_mel_tokens)
    save_config(config, folder / "config.yaml")
    torch.manual_seed(seed + 10)
    kit = PrepKit(folder=folder, config=folder / "config.yaml", gpt=folder / "gpt.pth", codec=folder / "codec.pth",
                    campplus=folder / "campplus_cn_common.bin", w2v_bert=features.w2v_bert, w2v_stats=features.w2v_stats)
    models = ((kit.gpt, build_gpt_v25(config), True), (kit.codec, build_codec25(config["semantic_codec"]), True),
              (kit.campplus, CAMPPlus(**CAMPPLUS_SECTION), False))
    for path, model, wrapped in models:
        state = {key: value.detach().clone().contiguous() for key, value in model.state_dict().items()}
        payload = {"model": state} if wrapped else state
        atomic_write_with(path, lambda handle, payload=payload: torch.save(payload, handle))
    return kit
