"""IndexTTS2's flow-matching estimator (``cfm.estimator``): a DiT with adaptive RMSNorm, rotary attention,
U-ViT long skips and a WaveNet post-net.

forward(x (B, 80, T), prompt_x (B, 80, T), x_lens (B,) or (1,), t (B,), style (B, S), cond (B, T, C))
-> velocity (B, 80, T):
1. t1 = timestep embedding of t; cond -> ``cond_projection``.
2. [x^T, prompt_x^T, cond, style over time] -> ``cond_x_merge_linear``.
3. ``depth`` transformer blocks (first half push their outputs, second half pop one and merge it in through
   ``skip_in_linear``; the middle block neither), final adaptive norm.
4. Long skip: ``skip_linear`` of [transformer out, x^T].
5. ``conv1`` -> WaveNet conditioned on a second timestep embedding, + ``res_projection`` of the skip output,
   -> ``final_layer`` (LayerNorm modulated by t1, weight-normed linear) -> ``conv2`` to 80 bins.
``drop_condition=True`` zeroes the conditioning part of step 2 (classifier-free-guidance training).
Parameters that are in the checkpoint but not on this path (``x_embedder``, ``cond_embedder``,
``content_mask_embedder``, the ``input_pos`` buffer) are kept so the real file loads strictly.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from networks.s2mel.config import S2MelConfig
from networks.s2mel.wavenet import WaveNet
from networks.s2mel.weight_norm import WeightNormLinear

POSITION_TABLE_SIZE = 16384  # length of the stored ``input_pos`` buffer (upstream's fixed block size)
ROPE_BASE = 10000.0
NORM_EPS = 1e-5
TIME_SCALE = 1000.0
TIME_FREQUENCIES = 256

Taps = dict[str, Tensor] | None


class TimestepEmbedder(nn.Module):
    """t -> [cos, sin](1000 t * freqs) over 128 frequencies -> MLP (Linear, SiLU, Linear)."""

    def __init__(self, hidden: int, frequency_size: int = TIME_FREQUENCIES) -> None:
        super().__init__()
        half = frequency_size // 2
        self.mlp = nn.Sequential(nn.Linear(frequency_size, hidden), nn.SiLU(), nn.Linear(hidden, hidden))
        freqs = torch.exp(-math.log(10000.0) * torch.arange(half, dtype=torch.float32) / half)
        self.register_buffer("freqs", freqs)

    def forward(self, t: Tensor) -> Tensor:
        args = TIME_SCALE * t[:, None].float() * self.freqs[None]
        return self.mlp(torch.cat([torch.cos(args), torch.sin(args)], dim=-1))


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = NORM_EPS) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: Tensor) -> Tensor:
        xf = x.float()
        normed = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return normed.type_as(x) * self.weight


class AdaptiveRMSNorm(nn.Module):
    """w * RMSNorm(x) + b with [w, b] = ``project_layer``(c) split in halves."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.project_layer = nn.Linear(dim, 2 * dim)
        self.norm = RMSNorm(dim)

    def forward(self, x: Tensor, c: Tensor) -> Tensor:
        weight, bias = self.project_layer(c).chunk(2, dim=-1)
        return weight * self.norm(x) + bias


def rotary_table(length: int, head_dim: int, dtype: torch.dtype, device: torch.device) -> Tensor:
    """(length, head_dim / 2, 2) [cos, sin] of position * base^(-2i / head_dim) (float32, then ``dtype``)."""
    inv_freq = 1.0 / (
        ROPE_BASE ** (torch.arange(0, head_dim, 2, device=device)[: head_dim // 2].float() / head_dim)
    )
    angles = torch.outer(torch.arange(length, device=device).float(), inv_freq)
    return torch.stack([torch.cos(angles), torch.sin(angles)], dim=-1).to(dtype)


def apply_rotary(x: Tensor, table: Tensor) -> Tensor:
    """Rotate adjacent channel pairs (2i, 2i + 1) of x (B, T, H, D) by the table (T, D / 2, 2)."""
    pairs = x.float().reshape(*x.shape[:-1], -1, 2)
    table = table.view(1, pairs.shape[1], 1, pairs.shape[3], 2)
    rotated = torch.stack(
        [
            pairs[..., 0] * table[..., 0] - pairs[..., 1] * table[..., 1],
            pairs[..., 1] * table[..., 0] + pairs[..., 0] * table[..., 1],
        ],
        dim=-1,
    )
    return rotated.flatten(3).type_as(x)


class Attention(nn.Module):
    def __init__(self, dim: int, num_heads: int) -> None:
        super().__init__()
        self.dim = dim
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.wqkv = nn.Linear(dim, 3 * dim, bias=False)
        self.wo = nn.Linear(dim, dim, bias=False)

    def forward(self, x: Tensor, rope: Tensor, mask: Tensor) -> Tensor:
        batch, length, _ = x.shape
        q, k, v = self.wqkv(x).split(self.dim, dim=-1)
        shape = (batch, length, self.num_heads, self.head_dim)
        q = apply_rotary(q.view(shape), rope).transpose(1, 2)
        k = apply_rotary(k.view(shape), rope).transpose(1, 2)
        v = v.view(shape).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=0.0)
        return self.wo(y.transpose(1, 2).contiguous().view(batch, length, self.dim))


def swiglu_width(dim: int) -> int:
    """Smallest multiple of 256 >= int(2 * 4 * dim / 3)."""
    width = int(2 * 4 * dim / 3)
    return -(-width // 256) * 256


class FeedForward(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        inner = swiglu_width(dim)
        self.w1 = nn.Linear(dim, inner, bias=False)
        self.w3 = nn.Linear(dim, inner, bias=False)
        self.w2 = nn.Linear(inner, dim, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class TransformerBlock(nn.Module):
    def __init__(self, dim: int, num_heads: int) -> None:
        super().__init__()
        self.attention = Attention(dim, num_heads)
        self.feed_forward = FeedForward(dim)
        self.ffn_norm = AdaptiveRMSNorm(dim)
        self.attention_norm = AdaptiveRMSNorm(dim)
        self.skip_in_linear = nn.Linear(2 * dim, dim)  # every block owns one; only the receiving half uses it

    def forward(self, x: Tensor, c: Tensor, rope: Tensor, mask: Tensor, skip: Tensor | None) -> Tensor:
        if skip is not None:
            x = self.skip_in_linear(torch.cat([x, skip], dim=-1))
        h = x + self.attention(self.attention_norm(x, c), rope, mask)
        return h + self.feed_forward(self.ffn_norm(h, c))


class Transformer(nn.Module):
    def __init__(self, dim: int, num_heads: int, depth: int) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.layers = nn.ModuleList(TransformerBlock(dim, num_heads) for _ in range(depth))
        self.norm = AdaptiveRMSNorm(dim)

    def forward(self, x: Tensor, c: Tensor, mask: Tensor) -> Tensor:
        middle = len(self.layers) // 2
        rope = rotary_table(x.shape[1], x.shape[-1] // self.num_heads, x.dtype, x.device)
        pushed: list[Tensor] = []
        for i, layer in enumerate(self.layers):
            x = layer(x, c, rope, mask, pushed.pop() if i > middle else None)
            if i < middle:
                pushed.append(x)
        return self.norm(x, c)


class FinalLayer(nn.Module):
    """LayerNorm (no affine) modulated by [shift, scale] = Linear(SiLU(c)), then a weight-normed linear."""

    def __init__(self, dim: int, cond_dim: int) -> None:
        super().__init__()
        self.norm_final = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.linear = WeightNormLinear(dim, dim)
        self.adaLN_modulation = nn.Sequential(nn.SiLU(), nn.Linear(cond_dim, 2 * dim))

    def forward(self, x: Tensor, c: Tensor) -> Tensor:
        shift, scale = self.adaLN_modulation(c).chunk(2, dim=-1)
        return self.linear(self.norm_final(x) * (1 + scale.unsqueeze(1)) + shift.unsqueeze(1))


class DiT(nn.Module):
    """The estimator; see the module docstring. ``taps`` (a dict) receives the named intermediates."""

    def __init__(self, config: S2MelConfig) -> None:
        super().__init__()
        hidden, n_mels, wn = config.hidden_dim, config.n_mels, config.wavenet_hidden_dim
        self.n_mels = n_mels
        self.style_dim = config.style_dim
        self.content_dim = config.content_dim
        self.transformer = Transformer(hidden, config.num_heads, config.depth)
        self.x_embedder = WeightNormLinear(n_mels, hidden)
        self.cond_embedder = nn.Embedding(config.content_codebook_size, hidden)
        self.content_mask_embedder = nn.Embedding(1, hidden)
        self.cond_projection = nn.Linear(config.content_dim, hidden)
        self.t_embedder = TimestepEmbedder(hidden)
        self.t_embedder2 = TimestepEmbedder(wn)
        self.register_buffer("input_pos", torch.arange(POSITION_TABLE_SIZE))
        self.cond_x_merge_linear = nn.Linear(2 * n_mels + hidden + config.style_dim, hidden)
        self.skip_linear = nn.Linear(hidden + n_mels, hidden)
        self.conv1 = nn.Linear(hidden, wn)
        self.wavenet = WaveNet(
            wn,
            config.wavenet_kernel_size,
            config.wavenet_dilation_rate,
            config.wavenet_layers,
            cond_channels=wn,
            dropout=config.wavenet_dropout,
        )
        self.res_projection = nn.Linear(hidden, wn)
        self.final_layer = FinalLayer(wn, hidden)
        self.conv2 = nn.Conv1d(wn, n_mels, 1)

    def forward(
        self,
        x: Tensor,
        prompt_x: Tensor,
        x_lens: Tensor,
        t: Tensor,
        style: Tensor,
        cond: Tensor,
        taps: Taps = None,
        *,
        drop_condition: bool = False,
    ) -> Tensor:
        """``drop_condition``: classifier-free-guidance training; every merged channel after the noisy mel (prompt
        mel, projected content, style) is multiplied by 0 before ``cond_x_merge_linear``, as upstream's train mode
        does when its class-dropout draw falls below ``class_dropout_prob`` (the draw is the trainer's)."""
        batch, _, length = x.shape
        frames = torch.arange(length, device=x.device)[None, :] < x_lens.reshape(-1, 1)  # (B or 1, T)
        frames = frames.expand(batch, length)
        t1 = self.t_embedder(t)
        cond = self.cond_projection(cond)
        x = x.transpose(1, 2)
        merged = torch.cat(
            [x, prompt_x.transpose(1, 2), cond, style[:, None, :].expand(batch, length, -1)], dim=-1
        )
        if drop_condition:
            merged = torch.cat([merged[..., : self.n_mels], merged[..., self.n_mels :] * 0], dim=-1)
        x_in = self.cond_x_merge_linear(merged)
        attn_mask = frames[:, None, None, :].expand(batch, 1, length, length)
        transformed = self.transformer(x_in, t1.unsqueeze(1), attn_mask)
        x_res = self.skip_linear(torch.cat([transformed, x], dim=-1))
        t2 = self.t_embedder2(t)
        wave = self.wavenet(
            self.conv1(x_res).transpose(1, 2), frames[:, None, :].to(x.dtype), t2.unsqueeze(2)
        )
        final = self.final_layer(wave.transpose(1, 2) + self.res_projection(x_res), t1)
        if taps is not None:
            taps.update(
                dit_t1=t1,
                dit_cond_projection_out=cond,
                dit_x_in=x_in,
                dit_transformer_out=transformed,
                dit_skip_linear_out=x_res,
                dit_wavenet_out=wave,
                dit_final_layer_out=final,
            )
        return self.conv2(final.transpose(1, 2))
