"""Does an S2Mel adapter change anything? Health's adapter check (``trainer.evaluation.health``) for S2Mel LoRA /
DoRA checkpoints and adapter files, measured where S2Mel checkpoints are scored (``python -m trainer.s2mel.evaluate``).

The checks, cheapest first, each enough to flag "adapter changes nothing":

1. the file: every ``lora_B`` factor is zero, and neither a DoRA magnitude vector nor a trained length regulator
   could change the decoder on its own;
2. the weights: the decoder with the adapter merged equals the base decoder (within the rounding of a merge; a
   DoRA whose B matrices stayed zero and whose magnitudes never moved merges so);
3. the speech: the held-out voices spoken with the same seeds through the stock and the trained decoder give the
   very same audio.

A flagged adapter is left out by the keep gate (:func:`trainer.s2mel.keep.decide_adapter`), so the export never
takes it unless the user overrides the gate: the S2Mel side of "never best.pth".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from trainer.evaluation.health import adapter_of, summary_of

MERGE_RTOL, MERGE_ATOL = 1e-6, 1e-9  # a merge's own rounding (DoRA rescales by m / ||W||), far below one step's change
MERGED_TO_BASE_REASON = "its weights merge into the base decoder's unchanged"


def adapter_weights_zero(obj: Mapping[str, Any]) -> bool | None:
    """Whether an S2Mel run checkpoint's or adapter file's adapter provably adds nothing from the file alone (all
    B factors zero, no DoRA magnitude, no trained regulator); None when it holds no adapter (a full fine-tune)."""
    adapter = obj.get("adapter")
    if obj.get("mode") != "lora" or not isinstance(adapter, Mapping) or not adapter:
        return None
    b_factors = [t for name, t in adapter.items() if "lora_B" in name and isinstance(t, torch.Tensor)]
    if not b_factors or any(bool(t.any()) for t in b_factors):
        return False
    magnitudes = any("lora_magnitude_vector" in name for name in adapter)
    return not magnitudes and obj.get("regulator") is None


def merges_to_base(trained: nn.Module, base: nn.Module) -> bool:
    """Whether ``trained`` (a plain decoder, adapters merged) has the very weights of ``base``."""
    mine, theirs = trained.state_dict(), base.state_dict()
    if set(mine) != set(theirs):
        return False
    for key, value in mine.items():
        other = theirs[key].to(value.device)
        if value.shape != other.shape:
            return False
        if value.is_floating_point():
            if not torch.allclose(value, other.to(value.dtype), rtol=MERGE_RTOL, atol=MERGE_ATOL):
                return False
        elif not torch.equal(value, other):
            return False
    return True


def same_audio(stock: Sequence[Sequence[np.ndarray]], trained: Sequence[Sequence[np.ndarray]]) -> bool:
    """Whether every voice's clips are the very same through both decoders."""
    pairs = [(a, b) for voice_a, voice_b in zip(stock, trained) for a, b in zip(voice_a, voice_b)]
    return len(stock) == len(trained) and bool(pairs) and all(
        a.shape == b.shape and np.array_equal(a, b) for a, b in pairs)


def s2mel_adapter_block(obj: Mapping[str, Any], trained: nn.Module, base: nn.Module,
                        stock_clips: Sequence[Sequence[np.ndarray]],
                        trained_clips: Sequence[Sequence[np.ndarray]]) -> dict[str, Any] | None:
    """Health's adapter block of an S2Mel checkpoint (None: no adapter). ``trained``: the decoder at a strength
    above 0, adapters merged; ``trained_clips``: the voices spoken through it."""
    zero = adapter_weights_zero(obj)
    if zero is None or zero:
        return adapter_of(zero, None)
    if merges_to_base(trained, base):
        return adapter_of(True, None, zero_reason=MERGED_TO_BASE_REASON)
    return adapter_of(False, same_audio(stock_clips, trained_clips))


def s2mel_health(adapter: dict[str, Any] | None) -> dict[str, Any]:
    """The ``health`` block of ``s2mel_scores.json``: the adapter check and its one-phrase summary."""
    health: dict[str, Any] = {"adapter": adapter}
    health["summary"] = summary_of(health)
    return health


def unchanged_reason(health: Any) -> str | None:
    """Why the keep gate must leave the adapter out ("adapter changes nothing (...)"), from a scores file's health
    block; None when the adapter applies or was not checked. A damaged block counts as not checked."""
    adapter = health.get("adapter") if isinstance(health, Mapping) else None
    if not isinstance(adapter, Mapping) or not adapter.get("flagged"):
        return None
    return f"adapter changes nothing ({adapter.get('reason')})"
