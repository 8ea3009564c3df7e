"""A LoRA adapter file (``export --adapter-only``'s ``adapter.pth``) folded into a GPT state dict for synthesis.

The file is ``{"lora_config": LoRAConfig.to_dict(), "adapter": {module + ".lora_A" / ".lora_B": tensor}, "step"}``
(DoRA adapters also ``module + ".lora_magnitude.weight"``)
(trainer.checkpoints.export); merging is ``networks.lora.merged_state_dict`` (float32, the stock key layout).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import torch
from torch import Tensor

from trainer.synthesis.errors import SynthesisError


def merge_adapter_file(state: Mapping[str, Tensor], path: str | Path) -> dict[str, Tensor]:
    """``state`` with the adapters of ``path`` merged in; one-line SynthesisError for a bad or unfitting file."""
    from networks.lora import LoRAConfig, LoRAError, merged_state_dict
    from trainer.checkpoints import CheckpointError, load_checkpoint

    path = Path(path)
    try:
        payload = load_checkpoint(path)
    except CheckpointError as exc:
        raise SynthesisError(f"--adapter: {exc}") from None
    config, adapter = payload.get("lora_config"), payload.get("adapter")
    if not isinstance(config, Mapping) or not isinstance(adapter, Mapping) or not adapter:
        raise SynthesisError(f"{path} is not a LoRA adapter file (expected 'lora_config' and 'adapter', as "
                             "export --adapter-only writes)")
    bad = [key for key, value in adapter.items() if not isinstance(value, torch.Tensor)]
    if bad:
        raise SynthesisError(f"{path}: adapter entry {bad[0]} is not a tensor")
    try:
        return merged_state_dict(state, dict(adapter), LoRAConfig.from_dict(config))
    except (LoRAError, KeyError, TypeError, ValueError) as exc:
        raise SynthesisError(f"{path} does not fit this GPT: {' '.join(str(exc).split())}") from None
