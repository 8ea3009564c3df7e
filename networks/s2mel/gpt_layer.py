"""``gpt_layer``: GPT latents -> the semantic width, three Linear layers with bias and no activation
(real widths 1280 -> 256 -> 128 -> 1024; upstream hard-codes all of them)."""

from __future__ import annotations

from torch import nn


def build_gpt_layer(gpt_dim: int, semantic_dim: int, hidden: tuple[int, int] = (256, 128)) -> nn.Sequential:
    """nn.Sequential with keys ``0``, ``1``, ``2`` as in ``s2mel.pth``'s ``net.gpt_layer``."""
    return nn.Sequential(
        nn.Linear(gpt_dim, hidden[0]), nn.Linear(hidden[0], hidden[1]), nn.Linear(hidden[1], semantic_dim)
    )
