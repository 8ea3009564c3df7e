"""Tiny S2Mel models and clips for the S2Mel training tests (built here, nothing downloaded)."""

from __future__ import annotations

import copy
import math
from pathlib import Path

import torch

from networks.s2mel import S2Mel
from trainer.s2mel.batches import S2MelClip

SEMANTIC_DIM = 12
GPT_DIM = 10
STYLE_DIM = 6

TINY_SECTION = {
    "reg_loss_type": "l1",
    "style_encoder": {"dim": STYLE_DIM},
    "length_regulator": {
        "channels": 16,
        "in_channels": SEMANTIC_DIM,
        "content_codebook_size": 32,
        "sampling_ratios": [1, 1],
        "is_discrete": False,
    },
    "DiT": {
        "hidden_dim": 16,
        "num_heads": 2,
        "depth": 3,
        "class_dropout_prob": 0.1,
        "in_channels": 80,
        "content_dim": 16,
        "content_codebook_size": 8,
    },
    "wavenet": {"hidden_dim": 16, "num_layers": 2, "kernel_size": 3, "dilation_rate": 1, "p_dropout": 0.2},
}


def model_kwargs(generation: str) -> dict:
    if generation == "2":
        return {"gpt_dim": GPT_DIM, "gpt_layer_hidden": (8, 8), "with_gpt_layer": True}
    return {"with_gpt_layer": False}


def tiny_model(generation: str, seed: int = 0) -> S2Mel:
    torch.manual_seed(seed)
    return S2Mel.from_config(copy.deepcopy(TINY_SECTION), **model_kwargs(generation))


def tiny_clips(generation: str, count: int = 6, seed: int = 0) -> list[S2MelClip]:
    """Clips whose mel follows their semantic input, so a decoder can learn something in a few steps."""
    g = torch.Generator().manual_seed(seed)
    clips = []
    for i in range(count):
        frames = 24 + 4 * i
        sem_len = max(2, int(frames / 1.72))
        code_embedding = torch.randn(sem_len, SEMANTIC_DIM, generator=g)
        idx = torch.clamp((torch.arange(frames) * sem_len / frames).long(), max=sem_len - 1)
        bins = torch.linspace(0, math.pi, 80)[:, None]
        mel = (
            -6
            + 2 * torch.sin(bins * (1 + code_embedding[idx, 0][None, :].abs()))
            + 0.1 * torch.randn(80, frames, generator=g)
        )
        latent = torch.randn(sem_len, GPT_DIM, generator=g) if generation == "2" else None
        clips.append(
            S2MelClip(
                mel=mel,
                style=torch.randn(STYLE_DIM, generator=g),
                code_embedding=code_embedding,
                gpt_latent=latent,
                name=f"clip{i}",
            )
        )
    return clips


def save_base(model: S2Mel, folder: Path) -> Path:
    path = folder / "s2mel.pth"
    torch.save({"net": model.net_state_dict()}, path)
    return path
