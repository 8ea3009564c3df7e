"""The GPT-2 blocks of an IndexTTS GPT driven one position at a time, with a key/value cache.

``generate_codes`` (generation.py) decides which codes to feed; this module only runs the model's own
sub-modules (``model.gpt.h[i]``, ``ln_f``, ``final_norm``, ``mel_head``, the mel embeddings) step by step,
keeping keys and values, or recomputing the whole sequence each step (``use_cache=False``, the reference).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from networks.unified_voice import UnifiedVoice


class CachedDecoder:
    """Drives the GPT-2 blocks one position at a time, keeping keys and values (or recomputing them).

    ``start(prefix, mask, capacity)`` runs the prefix and returns the logits of its last position;
    ``step(tokens, position_row)`` feeds one mel code per row; ``reorder(rows)`` follows beam choices.
    With ``use_cache=False`` every step recomputes the whole sequence (the reference for tests/benches).
    """

    def __init__(self, model: UnifiedVoice, use_cache: bool = True) -> None:
        self.model = model
        self.use_cache = use_cache
        self.blocks = list(model.gpt.h)
        self.heads = self.blocks[0].attn.heads
        self.keys: list[Tensor] = []
        self.values: list[Tensor] = []
        self.length = 0
        self.key_mask: Tensor | None = None  # (R, capacity) bool; None when nothing is padded
        self.embeds: Tensor | None = None  # uncached mode: every input so far

    def _logits(self, last: Tensor) -> Tensor:
        model = self.model
        return model.mel_head(model.final_norm(model.gpt.ln_f(last))).float()

    def _split(self, x: Tensor, block: torch.nn.Module) -> tuple[Tensor, Tensor, Tensor]:
        rows, length, dim = x.shape
        head_dim = dim // self.heads
        q, k, v = block.attn.c_attn(block.ln_1(x)).split(dim, dim=2)
        return tuple(t.view(rows, length, self.heads, head_dim).transpose(1, 2) for t in (q, k, v))  # type: ignore[return-value]

    def _finish_block(self, x: Tensor, attended: Tensor, block: torch.nn.Module) -> Tensor:
        rows, _, length, _ = attended.shape
        x = x + block.attn.c_proj(attended.transpose(1, 2).reshape(rows, length, -1))
        return x + block.mlp.c_proj(block.mlp.activation(block.mlp.c_fc(block.ln_2(x))))

    def _full(self, x: Tensor, key_mask: Tensor | None, capacity: int | None) -> Tensor:
        """Run a whole sequence causally; with ``capacity`` fill the cache. Returns the last position's logits."""
        rows, length, _ = x.shape
        mask = None
        if key_mask is not None and not bool(key_mask[:, :length].all()):
            causal = torch.ones(length, length, dtype=torch.bool, device=x.device).tril()
            # A padded query may attend to itself, so no row is fully masked (no NaN from padding).
            own = torch.eye(length, dtype=torch.bool, device=x.device)
            mask = causal & (key_mask[:, None, None, :length] | own)
        if capacity is not None:
            self.keys, self.values = [], []
        for block in self.blocks:
            q, k, v = self._split(x, block)
            if capacity is not None:
                cache_k = k.new_empty(rows, self.heads, capacity, k.size(-1))
                cache_v = v.new_empty(rows, self.heads, capacity, v.size(-1))
                cache_k[:, :, :length] = k
                cache_v[:, :, :length] = v
                self.keys.append(cache_k)
                self.values.append(cache_v)
            attended = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=mask is None)
            x = self._finish_block(x, attended, block)
        return self._logits(x[:, -1])

    def start(self, prefix: Tensor, key_mask: Tensor, capacity: int) -> Tensor:
        rows, length, _ = prefix.shape
        padded = not bool(key_mask.all())
        self.key_mask = None
        if padded:
            self.key_mask = torch.ones(rows, capacity, dtype=torch.bool, device=prefix.device)
            self.key_mask[:, :length] = key_mask
        self.length = length
        if self.use_cache:
            return self._full(prefix, self.key_mask, capacity)
        self.embeds = prefix
        return self._full(prefix, self.key_mask, None)

    def step(self, tokens: Tensor, position_row: int) -> Tensor:
        model = self.model
        x = model.mel_embedding(tokens) + model.mel_pos_embedding.emb.weight[position_row]
        x = x.unsqueeze(1).to(self.embeds.dtype if self.embeds is not None else self.keys[0].dtype)
        if not self.use_cache:
            assert self.embeds is not None
            self.embeds = torch.cat((self.embeds, x), dim=1)
            self.length += 1
            return self._full(self.embeds, self.key_mask, None)
        t = self.length
        mask = None if self.key_mask is None else self.key_mask[:, None, None, : t + 1]
        for index, block in enumerate(self.blocks):
            q, k, v = self._split(x, block)
            self.keys[index][:, :, t] = k[:, :, 0]
            self.values[index][:, :, t] = v[:, :, 0]
            attended = F.scaled_dot_product_attention(
                q, self.keys[index][:, :, : t + 1], self.values[index][:, :, : t + 1], attn_mask=mask
            )
            x = self._finish_block(x, attended, block)
        self.length = t + 1
        return self._logits(x[:, -1])

    def reorder(self, rows: Tensor) -> None:
        """Row i continues from row ``rows[i]`` (a beam step's choices).

        The cache is rewritten in place, and only where it changes: the rows whose source is another row,
        and only their filled positions (``[:length]``, not the whole capacity). A step where every beam
        extends itself copies nothing; otherwise the copy is O(moved rows x length), never O(capacity).
        """
        if self.embeds is not None:  # uncached reference path: plain gather
            self.embeds = self.embeds.index_select(0, rows)
        if self.key_mask is not None:
            self.key_mask = self.key_mask.index_select(0, rows)
        if not self.keys:
            return
        moved = (rows != torch.arange(rows.numel(), device=rows.device)).nonzero().squeeze(1)
        if moved.numel() == 0:
            return
        sources = rows.index_select(0, moved)
        t = self.length
        for cache in (*self.keys, *self.values):
            filled = cache[:, :, :t]
            # index_select copies the sources out first, so a row that is both read and written is safe.
            filled.index_copy_(0, moved, filled.index_select(0, sources))

