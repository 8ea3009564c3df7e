"""Load any GPT checkpoint for synthesis: ours (training checkpoints), exports, or a bare IndexTTS gpt.pth.

The model config follows the checkpoint toolkit's rule (``trainer.checkpoints.export``): a checkpoint of
ours carries its ``model_config`` (a grown vocabulary included); a bare or community file is described by
the config.yaml, with ``number_text_tokens`` taken from the weights' text-embedding rows. The model is
built on the meta device and the weights assigned (float32), so loading consumes no global RNG state.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from generations.registry import build_gpt
from networks.loading import state_dict_mismatches
from networks.unified_voice import INFERENCE_ONLY_PREFIXES, UnifiedVoice
from trainer.synthesis.errors import SynthesisError


def gpt_config_for(ckpt: dict[str, Any], state: Mapping[str, torch.Tensor], config: Mapping[str, Any],
                   config_path: str | Path | None) -> dict[str, Any]:
    from trainer.checkpoints import checkpoint_kind
    from trainer.checkpoints.export import _gpt_config  # the toolkit's rule, shared on purpose

    return _gpt_config(ckpt, checkpoint_kind(ckpt), state, dict(config), config_path)


def model_from_state(gpt_config: Mapping[str, Any], state: Mapping[str, torch.Tensor], source: str,
                     device: torch.device | str = "cpu", version: str = "1.5") -> UnifiedVoice:
    """Build the GPT of ``gpt_config`` (its generation's class, as its entry builds it), check it is a ``version``
    network, and load ``state`` strictly (inference aliases dropped)."""
    with torch.device("meta"):
        model = build_gpt(dict(gpt_config))
    if model.version != version:
        from generations.registry import name_of

        raise SynthesisError(f"{source} is an {name_of(model.version)} GPT: an {name_of(version)} GPT is needed here")
    kept = {k: v for k, v in state.items() if not k.startswith(INFERENCE_ONLY_PREFIXES)}
    problems = state_dict_mismatches(model, kept)
    if problems:
        raise SynthesisError(f"{source} does not fit its model config: " + "; ".join(problems))
    kept = {k: (v.float() if v.is_floating_point() else v) for k, v in kept.items()}
    model.load_state_dict(kept, strict=True, assign=True)
    return model.to(device).eval()


def load_gpt(checkpoint: str | Path, config: Mapping[str, Any], config_path: str | Path | None = None,
             device: torch.device | str = "cpu", version: str = "1.5", *, adapter: bool = True) -> UnifiedVoice:
    """The GPT of ``checkpoint`` (any kind), in eval mode on ``device``. Raises SynthesisError/CheckpointError.

    A LoRA training checkpoint speaks with its adapters merged into the weights; ``adapter=False`` gives its
    base weights alone (the Test tab's "adapter off"), which for a frozen base are the base model's."""
    from trainer.checkpoints import CheckpointError, checkpoint_kind, load_checkpoint, model_state_of

    path = Path(checkpoint)
    ckpt = load_checkpoint(path)
    state = model_state_of(ckpt)
    if checkpoint_kind(ckpt) == "unknown" or state is None:
        raise SynthesisError(f"{path} holds no IndexTTS GPT weights (top-level keys: {', '.join(sorted(ckpt)[:6])})")
    if adapter:
        from trainer.lora_setup import merge_checkpoint_adapter

        state = merge_checkpoint_adapter(ckpt, state)
    if "text_embedding.weight" not in state:
        raise SynthesisError(f"{path} has no text_embedding.weight: not an IndexTTS GPT checkpoint")
    try:
        gpt = gpt_config_for(ckpt, state, config, config_path)
    except CheckpointError as exc:
        raise SynthesisError(str(exc)) from None
    return model_from_state(gpt, state, str(path), device, version)
