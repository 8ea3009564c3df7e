"""Perceiver resampler (IndexTTS `perceiver_encoder` / `emo_perceiver_encoder`), ARCHITECTURE.md §2.

A fixed set of learned latents cross-attends to the projected conformer output; the latents themselves
are prepended to the keys/values, so no attention row is ever fully masked. No LayerNorm inside the
layers, a GEGLU feed-forward (exact-erf GELU on the second half), and an L2 "RMS" norm at the end.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn


class GEGLU(nn.Module):
    def forward(self, x: Tensor) -> Tensor:
        value, gate = x.chunk(2, dim=-1)
        return value * F.gelu(gate)


def geglu_feed_forward(dim: int, mult: float) -> nn.Sequential:
    """Keys `0` (dim -> 2*inner) and `2` (inner -> dim), inner = int(dim * mult * 2 / 3) as upstream."""
    inner = int(dim * mult * 2 / 3)
    return nn.Sequential(nn.Linear(dim, inner * 2), GEGLU(), nn.Linear(inner, dim))


class LatentCrossAttention(nn.Module):
    """Queries from the latents; keys/values from [latents, context]; no biases, no norm."""

    def __init__(self, dim: int, heads: int, dim_head: int = 64) -> None:
        super().__init__()
        self.heads = heads
        self.dim_head = dim_head
        inner = heads * dim_head
        self.to_q = nn.Linear(dim, inner, bias=False)
        self.to_kv = nn.Linear(dim, inner * 2, bias=False)
        self.to_out = nn.Linear(inner, dim, bias=False)

    def _split_heads(self, x: Tensor) -> Tensor:
        batch, length, _ = x.shape
        return x.view(batch, length, self.heads, self.dim_head).transpose(1, 2)

    def forward(self, latents: Tensor, context: Tensor, key_mask: Tensor) -> Tensor:
        """latents (B, n, dim), context (B, T', dim), key_mask (B, n+T') bool."""
        kv_input = torch.cat((latents, context), dim=1)
        q = self._split_heads(self.to_q(latents))
        k, v = (self._split_heads(t) for t in self.to_kv(kv_input).chunk(2, dim=-1))
        # Latent keys are always valid, so a boolean mask (-inf) equals upstream's -FLT_MAX fill.
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=key_mask[:, None, None, :])
        batch, _, length, _ = out.shape
        return self.to_out(out.transpose(1, 2).reshape(batch, length, self.heads * self.dim_head))


class L2ScaleNorm(nn.Module):
    """x / max(||x||, 1e-12) * sqrt(dim) * gamma (upstream calls it RMSNorm; key `norm.gamma`)."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.scale = dim**0.5
        self.gamma = nn.Parameter(torch.ones(dim))

    def forward(self, x: Tensor) -> Tensor:
        return F.normalize(x, dim=-1) * self.scale * self.gamma


class PerceiverResampler(nn.Module):
    """(B, T', context_dim) + (B, 1, T') mask -> (B, num_latents, dim)."""

    def __init__(
        self,
        dim: int,
        context_dim: int,
        num_latents: int,
        heads: int,
        ff_mult: float,
        depth: int = 2,
        dim_head: int = 64,
    ) -> None:
        super().__init__()
        self.proj_context = nn.Linear(context_dim, dim) if context_dim != dim else nn.Identity()
        self.latents = nn.Parameter(torch.empty(num_latents, dim))
        nn.init.normal_(self.latents, std=0.02)
        self.layers = nn.ModuleList(
            nn.ModuleList([LatentCrossAttention(dim, heads, dim_head), geglu_feed_forward(dim, ff_mult)])
            for _ in range(depth)
        )
        self.norm = L2ScaleNorm(dim)

    def forward(self, context: Tensor, mask: Tensor | None = None) -> Tensor:
        batch = context.size(0)
        context = self.proj_context(context)
        latents = self.latents.unsqueeze(0).expand(batch, -1, -1)
        if mask is None:
            key_mask = torch.ones(
                batch, latents.size(1) + context.size(1), dtype=torch.bool, device=context.device
            )
        else:
            latent_keys = torch.ones(batch, latents.size(1), dtype=torch.bool, device=context.device)
            key_mask = torch.cat((latent_keys, mask.reshape(batch, -1).to(torch.bool)), dim=1)
        for attention, feed_forward in self.layers:
            latents = attention(latents, context, key_mask) + latents
            latents = feed_forward(latents) + latents
        return self.norm(latents)
