"""NaN and Inf in a checkpoint's model weights and optimizer moments: saving, export, repair and verify refuse them.

A check of values, not of bytes (the content digest, ``trainer.checkpoints.digest``, proves the bytes).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch


def nonfinite_tensors(ckpt: Mapping[str, Any], limit: int = 3) -> list[str]:
    """Names of model weights and optimizer moments holding NaN or Inf (at most ``limit``; empty if none)."""
    named: list[tuple[str, torch.Tensor]] = []
    model = ckpt.get("model")
    if isinstance(model, Mapping):
        named += [(f"model weight {k}", v) for k, v in model.items() if isinstance(v, torch.Tensor)]
    optimizer = ckpt.get("optimizer")
    state = optimizer.get("state") if isinstance(optimizer, Mapping) else None
    if isinstance(state, Mapping):
        names = ckpt.get("optimizer_param_names")
        flat = [n for group in names for n in group] if isinstance(names, list) else []
        for index, entry in state.items():
            if not isinstance(entry, Mapping):
                continue
            owner = flat[index] if isinstance(index, int) and 0 <= index < len(flat) else f"parameter #{index}"
            named += [(f"optimizer {key} of {owner}", value) for key, value in entry.items()
                      if isinstance(value, torch.Tensor)]
    floats = [(name, t) for name, t in named if t.is_floating_point() and t.numel()]
    if not floats:
        return []
    # min and max propagate NaN and are +-Inf when any element is: both finite <=> every element is. One pass
    # over each tensor with no temporary of its size (isfinite(t) allocated a bool tensor per tensor, about
    # 10x the CPU for a whole checkpoint). Each flag comes to the host on its own: a state may mix devices.
    flags = torch.stack([torch.isfinite(torch.stack(torch.aminmax(t))).all().cpu() for _, t in floats])
    bad = [name for (name, _), ok in zip(floats, flags.tolist()) if not ok]
    if len(bad) > limit:
        return [*bad[:limit], f"{len(bad) - limit} more"]
    return bad


def nonfinite_reason(names: list[str]) -> str:
    """The one-line reason a checkpoint with these non-finite tensors is refused."""
    return "non-finite values (NaN/Inf) in " + ", ".join(names)
