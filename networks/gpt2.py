"""GPT-2 backbone as IndexTTS uses it (ARCHITECTURE.md §3): inputs_embeds only, no wte, no wpe.

Our own implementation with the Hugging Face GPT-2 state-dict names (`h.N.attn.c_attn`, `ln_f`...),
so `gpt.*` keys of a real checkpoint load unchanged. Projection weights are stored (in, out), as
HF's Conv1D does. Attention is causal scaled-dot-product attention with no length cap: the sequence
may exceed upstream's `n_positions` because the conditioning latents come on top of both tables.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

LAYER_NORM_EPS = 1e-5
INIT_STD = 0.02


def gelu_new(x: Tensor) -> Tensor:
    """0.5·x·(1 + tanh(sqrt(2/π)·(x + 0.044715·x³))), GPT-2's default activation."""
    return F.gelu(x, approximate="tanh")


ACTIVATIONS: dict[str, Callable[[Tensor], Tensor]] = {
    "gelu_new": gelu_new,
    "gelu_pytorch_tanh": gelu_new,
    "gelu": F.gelu,
    "relu": F.relu,
    "silu": F.silu,
}


class TransposedLinear(nn.Module):
    """y = x @ W + b with W stored (in, out): HF GPT-2's `Conv1D` layout."""

    def __init__(self, in_features: int, out_features: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(in_features, out_features))
        self.bias = nn.Parameter(torch.zeros(out_features))
        nn.init.normal_(self.weight, std=INIT_STD)

    def forward(self, x: Tensor) -> Tensor:
        return F.linear(x, self.weight.t(), self.bias)


class CausalSelfAttention(nn.Module):
    def __init__(self, dim: int, heads: int, dropout: float) -> None:
        super().__init__()
        if dim % heads:
            raise ValueError(f"model_dim {dim} is not divisible by heads {heads}")
        self.heads = heads
        self.c_attn = TransposedLinear(dim, 3 * dim)
        self.c_proj = TransposedLinear(dim, dim)
        self.attn_dropout = dropout
        self.resid_dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        batch, length, dim = x.shape
        head_dim = dim // self.heads
        q, k, v = (
            t.view(batch, length, self.heads, head_dim).transpose(1, 2)
            for t in self.c_attn(x).split(dim, dim=2)
        )
        y = F.scaled_dot_product_attention(
            q, k, v, is_causal=True, dropout_p=self.attn_dropout if self.training else 0.0
        )
        return self.resid_dropout(self.c_proj(y.transpose(1, 2).reshape(batch, length, dim)))


class MLP(nn.Module):
    def __init__(self, dim: int, hidden: int, activation: Callable[[Tensor], Tensor], dropout: float) -> None:
        super().__init__()
        self.c_fc = TransposedLinear(dim, hidden)
        self.c_proj = TransposedLinear(hidden, dim)
        self.activation = activation
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.dropout(self.c_proj(self.activation(self.c_fc(x))))


class Block(nn.Module):
    def __init__(self, dim: int, heads: int, activation: Callable[[Tensor], Tensor], dropout: float) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(dim, eps=LAYER_NORM_EPS)
        self.attn = CausalSelfAttention(dim, heads, dropout)
        self.ln_2 = nn.LayerNorm(dim, eps=LAYER_NORM_EPS)
        self.mlp = MLP(dim, 4 * dim, activation, dropout)

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT2Backbone(nn.Module):
    """Embedding dropout, L pre-LN blocks, final `ln_f`. Input and output (B, S, D)."""

    def __init__(
        self, dim: int, layers: int, heads: int, activation: str = "gelu_new", dropout: float = 0.1
    ) -> None:
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ValueError(f"unsupported GPT-2 activation {activation!r}; known: {', '.join(ACTIVATIONS)}")
        self.drop = nn.Dropout(dropout)
        self.h = nn.ModuleList(Block(dim, heads, ACTIVATIONS[activation], dropout) for _ in range(layers))
        self.ln_f = nn.LayerNorm(dim, eps=LAYER_NORM_EPS)
        self.gradient_checkpointing = False
        # HF GPT-2 init: residual output projections get a depth-scaled std.
        for name, param in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(param, std=INIT_STD / math.sqrt(2 * layers))

    def forward(self, inputs_embeds: Tensor) -> Tensor:
        h = self.drop(inputs_embeds)
        for block in self.h:
            if self.gradient_checkpointing and torch.is_grad_enabled():
                h = checkpoint(block, h, use_reentrant=False)
            else:
                h = block(h)
        return self.ln_f(h)
