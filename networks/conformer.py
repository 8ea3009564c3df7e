"""Conformer conditioning encoder (IndexTTS `conditioning_encoder` / `emo_conditioning_encoder`).

Follows shared/reference/ARCHITECTURE.md §1 exactly, including two upstream quirks that the real
checkpoints were trained with: the relative-position term has no rel_shift (it depends on the absolute
key index), and the convolution module zeroes padded frames *before* pointwise_conv1, so GLU(bias)
leaks into the last valid frames through the depthwise convolution. Dropout is 0 everywhere upstream,
so none is built here: train and eval are identical.

Module and parameter names match the upstream state-dict keys (`embed.conv.0`, `encoders.N.self_attn`...).

Attention runs through `scaled_dot_product_attention` (see `RelPositionMultiHeadedAttention`); the
hand-written softmax it replaced stays as `eager_attention`, selected per module by `use_eager_attention`,
for the parity tests and bench/model_attention.py only. With `gradient_checkpointing` set on the encoder,
each block is recomputed in backward.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

LAYER_NORM_EPS = 1e-5


def sinusoidal_table(max_positions: int, dim: int) -> Tensor:
    """The (1, max_positions, dim) table of `embed.pos_enc.pe`, computed in float32 like upstream."""
    position = torch.arange(0, max_positions, dtype=torch.float32).unsqueeze(1)
    div_term = torch.exp(torch.arange(0, dim, 2, dtype=torch.float32) * -(math.log(10000.0) / dim))
    table = torch.zeros(max_positions, dim, dtype=torch.float32)
    table[:, 0::2] = torch.sin(position * div_term)
    table[:, 1::2] = torch.cos(position * div_term)
    return table.unsqueeze(0)


class RelPositionalEncoding(nn.Module):
    """Scales the input by sqrt(d) and returns the unscaled absolute table rows 0..T-1 beside it."""

    def __init__(self, dim: int, max_positions: int = 5000) -> None:
        super().__init__()
        self.xscale = math.sqrt(dim)
        self.register_buffer("pe", sinusoidal_table(max_positions, dim), persistent=True)

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor]:
        frames = x.size(1)
        if frames > self.pe.size(1):
            raise ValueError(
                f"conditioning input too long: {frames} subsampled frames, the position table has {self.pe.size(1)}"
            )
        return x * self.xscale, self.pe[:, :frames]


class Conv2dSubsampling2(nn.Module):
    """3x3 stride-2 conv over (time, feature), channel-major flatten, then a linear layer to d."""

    def __init__(self, input_dim: int, dim: int, max_positions: int = 5000) -> None:
        super().__init__()
        self.conv = nn.Sequential(nn.Conv2d(1, dim, 3, 2), nn.ReLU())
        self.out = nn.Sequential(nn.Linear(dim * ((input_dim - 1) // 2), dim))
        self.pos_enc = RelPositionalEncoding(dim, max_positions)

    def forward(self, x: Tensor, valid: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """x (B, T, C), valid (B, 1, T) -> (x (B, T', d) scaled, pos_emb (1, T', d), mask (B, 1, T'))."""
        if x.size(1) < 3:
            raise ValueError(f"conditioning input has {x.size(1)} frames; at least 3 are needed")
        h = self.conv(x.unsqueeze(1))
        batch, channels, frames, freqs = h.shape
        h = self.out(h.transpose(1, 2).reshape(batch, frames, channels * freqs))
        h, pos_emb = self.pos_enc(h)
        return h, pos_emb, valid[:, :, 2::2]


class RelPositionMultiHeadedAttention(nn.Module):
    """Self-attention with the learned u/v biases and a position term on absolute key index (no shift).

    Scores are ``((q+u)·k + (q+v)·p) / sqrt(d_k)``. Both terms are one dot product over 2·d_k channels,
    ``[q+u, q+v]·[k, p]``, so SDPA gets those as query and key (with the same 1/sqrt(d_k) scale) and the
    padding mask as a boolean key mask. Nothing T x T is built outside the kernel, unlike an additive
    float bias for the position term (which also needs a gradient and so keeps SDPA on its math path).
    The value is zero-padded to 2·d_k because fused kernels (the CPU flash kernel) want one head size.
    """

    def __init__(self, heads: int, dim: int) -> None:
        super().__init__()
        self.heads = heads
        self.d_k = dim // heads
        self.linear_q = nn.Linear(dim, dim)
        self.linear_k = nn.Linear(dim, dim)
        self.linear_v = nn.Linear(dim, dim)
        self.linear_out = nn.Linear(dim, dim)
        self.linear_pos = nn.Linear(dim, dim, bias=False)
        self.pos_bias_u = nn.Parameter(torch.empty(heads, self.d_k))
        self.pos_bias_v = nn.Parameter(torch.empty(heads, self.d_k))
        nn.init.xavier_uniform_(self.pos_bias_u)
        nn.init.xavier_uniform_(self.pos_bias_v)
        self.eager = False  # the hand-written reference path; see use_eager_attention

    def forward(self, x: Tensor, mask: Tensor, pos_emb: Tensor) -> Tensor:
        """x (B, T, d), mask (B, 1, T) bool over keys, pos_emb (1, T, d)."""
        batch, frames, _ = x.shape
        q = self.linear_q(x).view(batch, frames, self.heads, self.d_k)
        k = self.linear_k(x).view(batch, frames, self.heads, self.d_k).transpose(1, 2)
        v = self.linear_v(x).view(batch, frames, self.heads, self.d_k).transpose(1, 2)
        p = self.linear_pos(pos_emb).view(pos_emb.size(0), frames, self.heads, self.d_k).transpose(1, 2)
        q_u = (q + self.pos_bias_u).transpose(1, 2)
        q_v = (q + self.pos_bias_v).transpose(1, 2)
        attend = eager_attention if self.eager else sdpa_attention
        out = attend(q_u, q_v, k, p, v, mask).transpose(1, 2).reshape(batch, frames, self.heads * self.d_k)
        return self.linear_out(out)


def eager_attention(q_u: Tensor, q_v: Tensor, k: Tensor, p: Tensor, v: Tensor, mask: Tensor) -> Tensor:
    """The scores as written in ARCHITECTURE.md §1, softmax by hand. (B, H, T, d_k) in and out."""
    scores = (q_u @ k.transpose(-2, -1) + q_v @ p.transpose(-2, -1)) / math.sqrt(q_u.size(-1))
    masked = ~mask.unsqueeze(1)  # (B, 1, 1, T): the same key mask for every head and query row
    attn = torch.softmax(scores.masked_fill(masked, float("-inf")), dim=-1)
    attn = attn.masked_fill(masked, 0.0)  # a fully masked row gives 0 instead of NaN
    return attn @ v


def sdpa_attention(q_u: Tensor, q_v: Tensor, k: Tensor, p: Tensor, v: Tensor, mask: Tensor) -> Tensor:
    """The same numbers as `eager_attention` through one SDPA call. (B, H, T, d_k) in and out."""
    d_k = q_u.size(-1)
    dtype = k.dtype  # under autocast q+u is float32 (the biases are), k and p are the autocast dtype
    query = torch.cat((q_u, q_v), dim=-1).to(dtype)
    key = torch.cat((k, p.to(dtype).expand(k.size(0), -1, -1, -1)), dim=-1)
    value = F.pad(v, (0, d_k))
    # An item with no valid key would make every score -inf (NaN out of SDPA, also in backward), so its
    # keys stay unmasked and its output is zeroed afterwards: the eager path's 0 for a fully masked row.
    has_keys = mask.any(dim=-1, keepdim=True)  # (B, 1, 1)
    key_mask = (mask | ~has_keys).unsqueeze(1)  # (B, 1, 1, T)
    out = F.scaled_dot_product_attention(query, key, value, attn_mask=key_mask, scale=1.0 / math.sqrt(d_k))
    return out[..., :d_k].masked_fill(~has_keys.unsqueeze(1), 0.0)


def use_eager_attention(module: nn.Module, eager: bool = True) -> None:
    """Switch every conformer attention inside ``module`` to the hand-written path (or back to SDPA).

    For the parity tests and the benchmark; training always uses SDPA.
    """
    for sub in module.modules():
        if isinstance(sub, RelPositionMultiHeadedAttention):
            sub.eager = eager


class ConvolutionModule(nn.Module):
    """Pointwise conv + GLU, depthwise conv (k=15, centred), LayerNorm, SiLU, pointwise conv."""

    def __init__(self, dim: int, kernel_size: int = 15) -> None:
        super().__init__()
        self.pointwise_conv1 = nn.Conv1d(dim, 2 * dim, 1)
        self.depthwise_conv = nn.Conv1d(dim, dim, kernel_size, padding=(kernel_size - 1) // 2, groups=dim)
        self.norm = nn.LayerNorm(dim, eps=LAYER_NORM_EPS)
        self.pointwise_conv2 = nn.Conv1d(dim, dim, 1)

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        """x (B, T, d), mask (B, 1, T)."""
        padded = ~mask
        h = x.transpose(1, 2).masked_fill(padded, 0.0)  # zeroed before conv1, as upstream (see module doc)
        h = F.glu(self.pointwise_conv1(h), dim=1)
        h = self.depthwise_conv(h)
        h = F.silu(self.norm(h.transpose(1, 2)).transpose(1, 2))
        h = self.pointwise_conv2(h).masked_fill(padded, 0.0)
        return h.transpose(1, 2)


class PositionwiseFeedForward(nn.Module):
    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.w_1 = nn.Linear(dim, hidden)
        self.w_2 = nn.Linear(hidden, dim)

    def forward(self, x: Tensor) -> Tensor:
        return self.w_2(F.silu(self.w_1(x)))


class ConformerBlock(nn.Module):
    """Pre-norm block: attention, convolution, feed-forward (all residual scale 1), then a final norm."""

    def __init__(self, dim: int, heads: int, ffn_dim: int, kernel_size: int) -> None:
        super().__init__()
        self.self_attn = RelPositionMultiHeadedAttention(heads, dim)
        self.feed_forward = PositionwiseFeedForward(dim, ffn_dim)
        self.conv_module = ConvolutionModule(dim, kernel_size)
        self.norm_ff = nn.LayerNorm(dim, eps=LAYER_NORM_EPS)
        self.norm_mha = nn.LayerNorm(dim, eps=LAYER_NORM_EPS)
        self.norm_conv = nn.LayerNorm(dim, eps=LAYER_NORM_EPS)
        self.norm_final = nn.LayerNorm(dim, eps=LAYER_NORM_EPS)

    def forward(self, x: Tensor, mask: Tensor, pos_emb: Tensor) -> Tensor:
        x = x + self.self_attn(self.norm_mha(x), mask, pos_emb)
        x = x + self.conv_module(self.norm_conv(x), mask)
        x = x + self.feed_forward(self.norm_ff(x))
        return self.norm_final(x)


class ConformerEncoder(nn.Module):
    """(B, T, C) features + lengths -> (B, T', d) hidden states and the (B, 1, T') validity mask."""

    def __init__(
        self,
        input_size: int,
        output_size: int,
        attention_heads: int,
        linear_units: int,
        num_blocks: int,
        kernel_size: int = 15,
        max_positions: int = 5000,
    ) -> None:
        super().__init__()
        if output_size % attention_heads:
            raise ValueError(
                f"conformer output_size {output_size} is not divisible by heads {attention_heads}"
            )
        self.embed = Conv2dSubsampling2(input_size, output_size, max_positions)
        self.encoders = nn.ModuleList(
            ConformerBlock(output_size, attention_heads, linear_units, kernel_size) for _ in range(num_blocks)
        )
        self.after_norm = nn.LayerNorm(output_size, eps=LAYER_NORM_EPS)
        self.gradient_checkpointing = False  # recompute each block in backward (set by the model)

    def forward(self, x: Tensor, lengths: Tensor | None = None) -> tuple[Tensor, Tensor]:
        frames = x.size(1)
        if lengths is None:
            valid = torch.ones(x.size(0), 1, frames, dtype=torch.bool, device=x.device)
        else:
            steps = torch.arange(frames, device=x.device)
            valid = (steps.unsqueeze(0) < lengths.to(x.device).unsqueeze(1)).unsqueeze(1)
        h, pos_emb, mask = self.embed(x, valid)
        recompute = self.gradient_checkpointing and torch.is_grad_enabled()
        for block in self.encoders:
            h = checkpoint(block, h, mask, pos_emb, use_reentrant=False) if recompute else block(h, mask, pos_emb)
        return self.after_norm(h), mask
