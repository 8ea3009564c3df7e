"""Adapter strength: how much of a trained S2Mel applies at synthesis and export, from 0 (the base) to 1 (all).

The decoder at strength s has the weights ``base + s x (trained - base)`` (``torch.lerp``), where ``trained`` is
the run's decoder with any adapters merged (the stock layout the export writes). It is one rule for a LoRA and a
full fine-tune (and for any adapter that merges into the stock layout); for a LoRA it is the adapter's scale
times s. Strength 0 is the base decoder itself and strength 1 the merged decoder itself, bit for bit, so 0 speaks
exactly as the download folder's ``s2mel.pth`` and 1 exactly as the merged export. A fine-tune that helps the
voice but costs intelligibility can keep part of its gain at a lower strength (issue #38: +0.043 similarity for
+0.2 CER points at 0.6). The studio's Test tab checks its slider with :func:`check_strength`, so this module
imports torch and the networks only where a decoder is built.
"""

from __future__ import annotations

import copy
import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from networks.s2mel import S2Mel

FULL_STRENGTH = 1.0


def check_strength(value: Any, where: str = "adapter strength") -> float:
    """``value`` as a float in [0, 1]; ValueError (one line naming ``where``) otherwise."""
    try:
        strength = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{where} must be a number from 0 to 1, got {value!r:.40}") from None
    if math.isnan(strength) or not 0.0 <= strength <= 1.0:
        raise ValueError(f"{where} must be from 0 to 1, got {strength:g}")
    return strength


def at_strength(trained: S2Mel, base: S2Mel, strength: float) -> S2Mel:
    """A plain S2Mel in eval mode (adapters merged, no wrappers) at ``strength``; the inputs are untouched."""
    import torch

    from trainer.s2mel.lora import has_adapters, merged_copy

    strength = check_strength(strength)
    if strength == 0.0:
        plain = copy.deepcopy(base)
    else:
        plain = merged_copy(trained) if has_adapters(trained) else copy.deepcopy(trained)
        if strength != FULL_STRENGTH:
            start = base.state_dict()
            blended = {key: torch.lerp(start[key].to(value.device, value.dtype), value, strength)
                       if value.is_floating_point() else value for key, value in plain.state_dict().items()}
            plain.load_state_dict(blended)
    for parameter in plain.parameters():
        parameter.requires_grad_(False)
    return plain.eval()
