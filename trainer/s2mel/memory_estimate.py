"""How much memory an S2Mel training step needs, told by the pre-flight (a note: it refuses nothing).

The GPT's estimate (``trainer.memory_estimate``) counts a GPT; this one counts the S2Mel decoder the same way:

- weights: fp32, every parameter of the decoder (counted on the meta device: no memory, no weights read);
- gradients and AdamW's two moments: fp32, per trained parameter (every parameter in a full fine-tune; a LoRA's
  factors, and a DoRA's magnitude vectors, on the wrapped Linear layers);
- activations: what the forward keeps for the backward, per mel frame of the batch's longest item, through the
  DiT's ``depth`` transformer blocks (:data:`BLOCK_FLOATS` hidden-wide floats per frame) and its WaveNet's layers
  (:data:`WAVENET_FLOATS` per frame), plus attention: fused kernels keep a log-sum-exp per head and frame, a CPU's
  math path the scores and probabilities (frames squared). The S2Mel trainer runs in fp32, without checkpointing.

An item's length (:func:`item_frames`): with each clip its own prompt ("own") it is the clip; with cross-clip
prompts ("cross", ``trainer.s2mel.cross_prompt``) it is another clip's first frames (up to the high end of the
prompt fraction, 0.5 by default, of that clip, which can be the longest) followed by the whole target, so up to
1.5 times the longest clip. The counts per frame are an approximation of the blocks' saved tensors (not yet
checked against a measured peak on a GPU); the item length is exact.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from trainer.memory_estimate import CUDA_RESERVE_BYTES, gb

FLOAT = 4  # fp32
BLOCK_FLOATS = 16  # per frame and DiT block, in hidden widths: norms, q k v, attention out, SwiGLU's two halves ...
WAVENET_FLOATS = 4  # per frame and WaveNet layer, in its hidden width: the gated input, its halves, the output
ADAMW_MOMENTS = 2


@dataclass(frozen=True)
class S2MelShape:
    """The run settings an S2Mel step's memory depends on."""

    batch_size: int
    clip_frames: int  # the longest clip's mel frames
    prompt: str = "own"  # the resolved prompt mode: own | cross
    prompt_fraction_high: float = 0.5  # the most of the prompt clip a cross item takes
    device_type: str = "cuda"  # cpu: attention runs the math path and keeps its probabilities


@dataclass(frozen=True)
class S2MelMemoryEstimate:
    weights: int
    gradients: int
    optimizer: int
    activations: int
    item_frames: int
    device_type: str

    @property
    def peak(self) -> int:
        return self.weights + self.gradients + self.optimizer + self.activations

    @property
    def device_bytes(self) -> int:
        return self.peak + (CUDA_RESERVE_BYTES if self.device_type == "cuda" else 0)

    def breakdown(self) -> str:
        parts = {"weights": self.weights, "gradients": self.gradients, "AdamW": self.optimizer,
                 "activations": self.activations}
        return ", ".join(f"{name} {gb(value)}" for name, value in parts.items() if value)


def item_frames(clip_frames: int, prompt: str, prompt_fraction_high: float = 0.5) -> int:
    """The mel frames of the longest item a step can build from clips of at most ``clip_frames``."""
    if prompt == "cross":
        return clip_frames + math.floor(prompt_fraction_high * clip_frames)
    return clip_frames


@dataclass(frozen=True)
class S2MelFacts:
    """What the decoder's memory depends on: its parameters and the DiT's sizes."""

    parameters: int
    trained: int
    hidden: int
    heads: int
    depth: int
    wavenet_hidden: int
    wavenet_layers: int


def s2mel_facts(section: Mapping[str, Any], model_kwargs: Mapping[str, Any], lora: Any | None) -> S2MelFacts:
    """The facts of the decoder a config's ``s2mel`` section builds (``lora``: the run's
    :class:`trainer.s2mel.lora.S2MelLoRASettings`, None for a full fine-tune), counted on the meta device."""
    import torch
    from torch import nn

    from networks.s2mel import S2Mel

    with torch.device("meta"):
        model = S2Mel.from_config(section, **model_kwargs)
    parameters = sum(p.numel() for p in model.parameters())
    trained = parameters if lora is None else _lora_parameters(model.cfm.estimator, lora, nn.Linear)
    c = model.config
    return S2MelFacts(parameters, trained, c.hidden_dim, c.num_heads, c.depth, c.wavenet_hidden_dim, c.wavenet_layers)


def _lora_parameters(estimator: Any, lora: Any, linear: type) -> int:
    from trainer.s2mel.lora import TARGET_GROUPS

    pattern = re.compile("|".join(f"({TARGET_GROUPS[name]})" for name in lora.targets))
    count = 0
    for name, module in estimator.named_modules():
        if isinstance(module, linear) and pattern.fullmatch(name):
            count += lora.rank * (module.in_features + module.out_features)
            count += module.out_features if lora.dora else 0
    return count


def estimate_s2mel_memory(facts: S2MelFacts, shape: S2MelShape) -> S2MelMemoryEstimate:
    frames = item_frames(shape.clip_frames, shape.prompt, shape.prompt_fraction_high)
    per_frame = (facts.depth * BLOCK_FLOATS * facts.hidden + facts.wavenet_layers * WAVENET_FLOATS
                 * facts.wavenet_hidden) * FLOAT
    if shape.device_type == "cuda":
        attention = facts.depth * facts.heads * frames * FLOAT
    else:
        attention = facts.depth * 2 * facts.heads * frames * frames * FLOAT
    activations = shape.batch_size * (per_frame * frames + attention)
    return S2MelMemoryEstimate(weights=facts.parameters * FLOAT, gradients=facts.trained * FLOAT,
                               optimizer=facts.trained * ADAMW_MOMENTS * FLOAT, activations=activations,
                               item_frames=frames, device_type=shape.device_type)


def memory_line(estimate: S2MelMemoryEstimate, shape: S2MelShape) -> str:
    """The pre-flight's words."""
    items = (f"items up to {estimate.item_frames} mel frames: another clip's first "
             f"{shape.prompt_fraction_high:.0%} then the target" if shape.prompt == "cross"
             else f"items up to {estimate.item_frames} mel frames")
    return (f"about {gb(estimate.device_bytes)} per process at the step's peak (batch {shape.batch_size}, {items}; "
            f"{estimate.breakdown()})")
