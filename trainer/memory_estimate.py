"""How much accelerator memory a training run needs, told before it starts, and what would make it fit.

Two steps, so the pre-flight can try alternatives cheaply:

- ``model_facts(gpt_config, opts)`` (memory_facts.py) counts on the meta device (no memory, no weights) what
  the model holds: every parameter, the ones a training step reaches, and the ones LoRA trains.
- ``estimate_run_memory(facts, shape)`` is plain arithmetic over those counts and the run's shape (batch,
  item length, amp, gradient checkpointing, LoRA, processes and sharding) -> :class:`MemoryEstimate`.

The parts of the estimate, in bytes at the step's peak:

- weights: fp32 master weights of every parameter (autocast keeps them fp32); FSDP shards them.
- gradients: fp32, one per trained parameter; DDP adds its bucket copy; FSDP shards them.
- optimizer: AdamW's two fp32 moments per trained parameter; FSDP shards them.
- autocast: under bf16/fp16 autocast caches a half copy of each weight the step multiplies (kept for backward).
- activations: what the forward saves for the backward, per token of the GPT-2 stack (counted below from
  its block: layer norms, qkv, attention output, MLP hidden, dropout masks), the text and mel logits with
  their cross-entropy, and (IndexTTS-1.5 only) the prompt's conformer. Gradient checkpointing keeps only each
  block's input, plus one block's activations while it is recomputed.

A CUDA device also holds its context and the allocator's rounding, which ``torch.cuda.max_memory_allocated``
does not show: :data:`CUDA_RESERVE_BYTES` is added before comparing with a card's size. The estimate is
checked against measured peaks: on a CPU by ``bench/real_size.py`` (and a small model in
``tests/test_memory_estimate.py``), on a GPU by ``bench/gpu_check.py``.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from trainer.memory_facts import ModelFacts, model_facts

GIB = 1 << 30
GPU_PRESETS_GB = (8, 12, 16, 24, 48, 80)
CUDA_RESERVE_BYTES = int(1.0 * GIB)  # CUDA context + allocator rounding, beyond max_memory_allocated
PREFLIGHT_PROMPT_FRAMES = 600  # IndexTTS-1.5 prompt mel frames assumed when the data does not say (~7 s)
BATCH_CHOICES = (1, 2, 4, 8, 16, 32, 64)
# The global batch a preset keeps (batch size x gradient accumulation), as the community trainers use.
PRESET_GLOBAL_BATCH = 32
# The items a preset is sized for (the pre-flight then checks the run's real longest item): 200 text tokens and
# 600 codes, about 24 s of speech at IndexTTS2's 25 codes per second.
PRESET_TEXT_TOKENS = 200
PRESET_CODES = 600
# A card sold as N GB reports a little less to CUDA (an 80 GB H100: 79.6 GiB; a 24 GB card: 23.6-24.0 GiB).
PRESET_USABLE_SHARE = 0.97


@dataclass(frozen=True)
class RunShape:
    """The run settings the memory depends on."""

    batch_size: int = 1
    text_tokens: int = 600  # per item: the longest item (or the model's limit)
    codes: int = 800
    prompt_frames: int = PREFLIGHT_PROMPT_FRAMES  # IndexTTS-1.5's prompt log-mel frames
    amp: str = "bf16"  # bf16 | fp16 | off
    grad_checkpointing: bool = False
    lora: bool = False
    world_size: int = 1
    strategy: str = "ddp"  # ddp | fsdp (when world_size > 1)
    device_type: str = "cuda"  # cpu: attention runs the math path and stores its probabilities


@dataclass(frozen=True)
class MemoryEstimate:
    """Bytes per process at the training step's peak."""

    weights: int
    gradients: int
    optimizer: int
    autocast: int
    activations: int
    trained: int  # parameters that train
    parameters: int
    shape: RunShape

    @property
    def peak(self) -> int:
        """What the allocator holds at the peak (comparable to ``torch.cuda.max_memory_allocated``)."""
        return self.weights + self.gradients + self.optimizer + self.autocast + self.activations

    @property
    def device_bytes(self) -> int:
        """What the card must have: the peak plus the CUDA context and allocator rounding."""
        return self.peak + (CUDA_RESERVE_BYTES if self.shape.device_type == "cuda" else 0)

    def breakdown(self) -> str:
        parts = {"weights": self.weights, "gradients": self.gradients, "AdamW": self.optimizer,
                 "autocast copies": self.autocast, "activations": self.activations}
        return ", ".join(f"{name} {gb(value)}" for name, value in parts.items() if value)


def gb(count: float) -> str:
    """Sizes are printed in GB of 2**30 bytes, as nvidia-smi and torch count a card's memory."""
    return f"{count / GIB:.1f} GB"


# ----- the arithmetic ----------------------------------------------------------------------------------


def _layer_bytes_per_token(dim: int, amp: bool, dropout: bool) -> int:
    """What one GPT-2 block saves for backward, per token.

    fp32: ln_1 in, ln_1 out (c_attn's input), q k v, attention out (c_proj's input), ln_2 in, ln_2 out,
    MLP hidden (4 d, gelu's input) and gelu out (4 d, c_proj's input): 16 d floats. Under autocast the matmul
    inputs and outputs are half (2 bytes) while the residual stream and layer-norm inputs stay fp32. Dropout
    keeps a one-byte mask after attention and after the MLP.
    """
    masks = 2 * dim if dropout else 0
    if not amp:
        return 16 * dim * 4 + masks
    fp32_floats = 2  # the two layer-norm inputs (the residual stream)
    half_floats = 1 + 3 + 1 + 1 + 4 + 4  # the two normed inputs, qkv, attention out, MLP hidden, gelu out
    return fp32_floats * dim * 4 + half_floats * dim * 2 + masks


def _attention_bytes(facts: ModelFacts, positions: int, element: int, math_path: bool) -> int:
    """Math-path attention (CPU, or dropout without a fused kernel) keeps the probabilities, per item and layer."""
    if not math_path:
        return facts.heads * positions * 4  # the fused kernels' log-sum-exp
    masks = facts.heads * positions * positions if facts.dropout > 0 else 0
    return 3 * facts.heads * positions * positions * element + masks  # scores, probabilities, dropped


def _conformer_bytes(facts: ModelFacts, frames: int, amp: bool) -> int:
    """IndexTTS-1.5's prompt conformer, per item: ~40 widths per position per block (two macaron
    feed-forwards of 4x width, relative-position attention, the convolution module, their norms) and
    the attention scores; the perceiver is small beside it."""
    if facts.conformer is None:
        return 0
    blocks, width, heads, subsampling = facts.conformer
    positions = max(frames // subsampling, 1)
    element = 2 if amp else 4
    per_block = positions * width * 40 * element + 4 * heads * positions * positions * 4
    return blocks * per_block + frames * 100 * 4 * 8  # + the subsampling convolutions on the full frames


def activation_bytes(facts: ModelFacts, shape: RunShape) -> int:
    """Saved activations of one micro-batch (per process)."""
    amp = shape.amp in ("bf16", "fp16")
    element = 2 if amp else 4
    text_positions = shape.text_tokens + 2
    mel_positions = shape.codes + 2
    positions = facts.cond_positions + text_positions + mel_positions
    tokens = shape.batch_size * positions
    math_path = shape.device_type != "cuda"
    layer_item = (_layer_bytes_per_token(facts.dim, amp, facts.dropout > 0) * positions
                  + _attention_bytes(facts, positions, element, math_path))
    if shape.grad_checkpointing:
        stack = tokens * facts.dim * 4 * facts.layers + shape.batch_size * layer_item
    else:
        stack = shape.batch_size * layer_item * facts.layers
    # Embeddings, their sum and dropout mask, the final norm's input and output.
    edges = tokens * facts.dim * (4 + 4 + 1 + 4 + element)
    # Logits (half from the head under autocast, then fp32), cross-entropy's log-probabilities, and two
    # gradients of their size (log-probabilities', logits') while the backward passes through the heads.
    per_logit = (element if amp else 0) + 4 * 4
    logits = shape.batch_size * per_logit * (text_positions * facts.text_vocab + mel_positions * facts.mel_vocab)
    conformer = shape.batch_size * _conformer_bytes(facts, shape.prompt_frames, amp)
    return stack + edges + logits + conformer


def estimate_run_memory(facts: ModelFacts, shape: RunShape) -> MemoryEstimate:
    """Bytes per process at the step's peak for ``facts``' GPT trained as ``shape`` says."""
    trained = facts.lora_trained if shape.lora else facts.reached
    parameters = facts.parameters + (facts.lora_extra if shape.lora else 0)
    world = max(int(shape.world_size), 1)
    shard = world if shape.strategy == "fsdp" and world > 1 else 1
    weights = 4 * parameters // shard
    gradients = 4 * trained // shard
    if world > 1 and shard == 1:
        gradients *= 2  # DDP's bucket copy of the gradients
    optimizer = 8 * trained // shard
    reached = facts.reached + (facts.lora_extra if shape.lora else 0)
    autocast = 2 * reached if shape.amp in ("bf16", "fp16") else 0
    return MemoryEstimate(weights=weights, gradients=gradients, optimizer=optimizer, autocast=autocast,
                          activations=activation_bytes(facts, shape), trained=trained, parameters=parameters,
                          shape=shape)


# ----- the pre-flight: fits or not, and what would ---------------------------------------------------


def _with(shape: RunShape, **changes: Any) -> RunShape:
    return dataclasses.replace(shape, **changes)


def fitting_change(facts: ModelFacts, shape: RunShape, gpu_bytes: int) -> tuple[str, MemoryEstimate] | None:
    """The first change (cheapest in speed and quality first) whose estimate fits ``gpu_bytes``."""
    candidates: list[tuple[str, RunShape]] = []
    if not shape.grad_checkpointing:
        candidates.append(("--grad-checkpointing", _with(shape, grad_checkpointing=True)))
    if shape.amp == "off" and shape.device_type == "cuda":
        candidates.append(("--amp bf16", _with(shape, amp="bf16")))
        candidates.append(("--amp bf16 --grad-checkpointing", _with(shape, amp="bf16", grad_checkpointing=True)))
    smaller = [size for size in BATCH_CHOICES if size < shape.batch_size]
    for size in reversed(smaller):
        accumulation = max(shape.batch_size // size, 1)
        candidates.append((f"--batch-size {size} --grad-accumulation {accumulation} (x the current accumulation)"
                           + ("" if shape.grad_checkpointing else " --grad-checkpointing"),
                           _with(shape, batch_size=size, grad_checkpointing=True)))
    if shape.world_size > 1 and shape.strategy != "fsdp":
        candidates.append(("FSDP sharding over the run's GPUs", _with(shape, strategy="fsdp")))
    if not shape.lora:
        candidates.append(("--lora", _with(shape, lora=True)))
        candidates.append(("--lora --grad-checkpointing", _with(shape, lora=True, grad_checkpointing=True)))
        candidates.append(("--lora --grad-checkpointing --batch-size 1",
                           _with(shape, lora=True, grad_checkpointing=True, batch_size=1)))
    for option, changed in candidates:
        estimate = estimate_run_memory(facts, changed)
        if estimate.device_bytes <= gpu_bytes:
            return option, estimate
    return None


def memory_line(estimate: MemoryEstimate, gpu_bytes: int | None) -> str:
    """'this run needs about X GB per GPU; this GPU has Y GB' with the parts."""
    where = "per GPU" if estimate.shape.device_type == "cuda" else "of memory"
    has = f"; this GPU has {gb(gpu_bytes)}" if gpu_bytes else ""
    return (f"this run needs about {gb(estimate.device_bytes)} {where}{has} ({estimate.breakdown()}; "
            f"{estimate.trained:,} of {estimate.parameters:,} parameters train)")


def memory_refusal(facts: ModelFacts, shape: RunShape, gpu_bytes: int) -> str | None:
    """One sentence refusing a run whose estimate exceeds ``gpu_bytes``, naming the option that fits; None: fits."""
    estimate = estimate_run_memory(facts, shape)
    if estimate.device_bytes <= gpu_bytes:
        return None
    found = fitting_change(facts, shape, gpu_bytes)
    advice = (f"with {found[0]} it needs about {gb(found[1].device_bytes)}" if found
              else "no setting fits this card: use a GPU with more memory or shard over several with FSDP")
    return f"{memory_line(estimate, gpu_bytes)}: it cannot fit; {advice}"


def run_shape(opts: Mapping[str, Any], gpt: Mapping[str, Any], device_type: str, world_size: int = 1,
              longest: tuple[int, int] | None = None, strategy: str = "ddp") -> RunShape:
    """The shape of the run ``opts`` describe; ``longest`` = (text tokens, codes) of the longest training item,
    else the model's limits."""
    text, codes = longest or (int(gpt["max_text_tokens"]), int(gpt["max_mel_tokens"]))
    amp = str(opts.get("amp") or "off")
    return RunShape(batch_size=int(opts.get("batch_size") or 1), text_tokens=text, codes=codes,
                    amp="off" if amp == "auto" else amp, grad_checkpointing=bool(opts.get("grad_checkpointing")),
                    lora=bool(opts.get("lora")), world_size=world_size, strategy=strategy, device_type=device_type)


def gpu_bytes_of(opts: Mapping[str, Any], device: torch.device | None) -> int | None:
    """The card's memory: ``--gpu-memory-gb`` when given (tests, or to override detection), else CUDA's."""
    given = opts.get("gpu_memory_gb")
    if given:
        return int(float(given) * GIB)
    if device is not None and device.type == "cuda":
        with contextlib.suppress(RuntimeError, AssertionError):
            return int(torch.cuda.get_device_properties(device).total_memory)
    return None


# ----- presets per card ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Preset:
    gpu_gb: int
    options: dict[str, Any]  # trainer options: amp, lora, grad_checkpointing, batch_size, grad_accumulation
    estimate: MemoryEstimate | None  # None: nothing fits

    def line(self) -> str:
        if self.estimate is None:
            return f"{self.gpu_gb} GB: nothing fits"
        flags = " ".join(f"--{k.replace('_', '-')}" + ("" if v is True else f" {v}")
                         for k, v in self.options.items() if v is not False)
        return f"{self.gpu_gb} GB: {flags} (~{gb(self.estimate.device_bytes)})"


def preset_for(facts: ModelFacts, gpu_gb: int, text_tokens: int = PRESET_TEXT_TOKENS, codes: int = PRESET_CODES,
               lora: bool | None = None) -> Preset:
    """The fastest settings that fit a ``gpu_gb`` card for items up to (text_tokens, codes): full fine-tune
    before LoRA (``lora`` True or False: only that), no checkpointing before checkpointing, then the largest
    batch; bf16 throughout."""
    budget = int(gpu_gb * GIB * PRESET_USABLE_SHARE)
    for with_lora in (False, True) if lora is None else (lora,):
        for checkpointing in (False, True):
            for size in reversed(BATCH_CHOICES):
                shape = RunShape(batch_size=size, text_tokens=text_tokens, codes=codes, amp="bf16",
                                 grad_checkpointing=checkpointing, lora=with_lora)
                estimate = estimate_run_memory(facts, shape)
                if estimate.device_bytes <= budget:
                    options = {"amp": "bf16", "lora": with_lora, "grad_checkpointing": checkpointing, "batch_size": size,
                               "grad_accumulation": max(PRESET_GLOBAL_BATCH // size, 1)}
                    return Preset(gpu_gb, options, estimate)
    return Preset(gpu_gb, {}, None)


def gpu_presets(facts: ModelFacts, text_tokens: int = PRESET_TEXT_TOKENS, codes: int = PRESET_CODES,
                lora: bool | None = None, sizes: Sequence[int] = GPU_PRESETS_GB) -> list[Preset]:
    """The preset of each card size (GB): the one source of the training form's GPU presets
    (``trainer.gpu_preset``)."""
    return [preset_for(facts, size, text_tokens, codes, lora) for size in sizes]


# ----- the pre-flight check -----------------------------------------------------------------------------


def longest_item(items: Sequence[Any]) -> tuple[int, int, int] | None:
    """(text tokens, codes, prompt frames) bounding every item (a batch of the longest is the worst case)."""
    if not items:
        return None
    text = max(int(item.text_ids.size) for item in items)
    codes = max(int(item.num_codes) for item in items)
    prompt = max(int(getattr(item, "prompt_frames", 0) or 0) for item in items)
    return text, codes, prompt or PREFLIGHT_PROMPT_FRAMES


def memory_check(opts: Mapping[str, Any], gpt: Mapping[str, Any], device: torch.device | None,
                 world_size: int = 1, items: Sequence[Any] = (), strategy: str = "ddp",
                 facts: ModelFacts | None = None) -> tuple[bool, str, bool]:
    """The pre-flight's memory line as (ok, message, warning) for ``RunPlan.add("memory", ...)``.

    A card size comes from ``--gpu-memory-gb`` or the CUDA device; with neither (a CPU run) the line only
    informs. A run whose estimate exceeds the card is refused, naming the option that fits."""
    facts = facts or model_facts(gpt, opts)
    bounds = longest_item(items)
    gpu_bytes = gpu_bytes_of(opts, device)
    device_type = "cuda" if gpu_bytes is not None else (device.type if device is not None else "cpu")
    shape = run_shape(opts, gpt, device_type, world_size, bounds[:2] if bounds else None, strategy)
    if bounds:
        shape = dataclasses.replace(shape, prompt_frames=bounds[2])
    if gpu_bytes is None:
        estimate = estimate_run_memory(facts, shape)
        return True, memory_line(estimate, None) + " (no GPU size to check: --gpu-memory-gb gives one)", False
    refusal = memory_refusal(facts, shape, gpu_bytes)
    if refusal:
        return False, refusal, False
    estimate = estimate_run_memory(facts, shape)
    tight = estimate.device_bytes > 0.9 * gpu_bytes
    return True, memory_line(estimate, gpu_bytes) + ("; little headroom" if tight else ""), tight
