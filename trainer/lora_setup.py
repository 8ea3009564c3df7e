"""LoRA in the trainer: which adapters a run trains, what else stays trainable, and adapters in checkpoints.

``--lora`` wraps the GPT-2 blocks' projections (``networks.lora``) and freezes every base parameter but the
parts kept trainable by setting (``--lora-train-heads``, ``--lora-train-embeddings``, ``--lora-train-lang-row``).
The optimizer holds only what trains (``trainer.steps.parameter_groups`` skips frozen parameters).

Checkpoints: ``model`` keeps the stock IndexTTS key layout (the base weights as they are, adapters NOT merged,
``networks.lora.base_state_dict``), and the adapters are the ``lora adapters`` component
(``extra["state"]["lora adapters"] = {"config": ..., "adapter": {name: tensor}}``), restored on resume after the
model is built and adapted. Resuming needs the same adapter layout (rank, alpha, targets, layers, DoRA or not):
anything else is refused by the plan, and ``--init-from`` a LoRA checkpoint starts from its *merged* weights.
Export merges the adapters (``merge_checkpoint_adapter``) or writes them alone (``--adapter-only``).
``--lora-dora`` makes them DoRA adapters (``networks.lora``): a magnitude vector per projection rides beside A and
B in the same component, and merging folds it in too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from networks.lora import (
    LoRAConfig,
    LoRAError,
    adapter_state_dict,
    inject_lora,
    is_adapter_key,
    load_adapter_state,
    merged_state_dict,
    parse_layers,
    parse_targets,
)
from trainer.run_options import RunOptions, as_run_options

ADAPTER_COMPONENT = "lora adapters"  # the name under extra["state"] in a checkpoint
# What stays trainable under --lora, by option (name prefixes of the GPT's parameters).
TRAINABLE_PARTS: dict[str, tuple[str, ...]] = {
    "lora_train_heads": ("text_head.", "mel_head.", "final_norm."),
    "lora_train_embeddings": ("text_embedding.", "mel_embedding.", "text_pos_embedding.", "mel_pos_embedding."),
    "lora_train_lang_row": ("lang_embedding.",),
}


def lora_config_of(opts: RunOptions | Mapping[str, Any]) -> LoRAConfig | None:
    """The adapters ``opts`` ask for (None without ``--lora``); LoRAError for a bad setting."""
    opts = as_run_options(opts)
    if not opts.lora:
        return None
    return LoRAConfig(rank=int(opts.lora_rank), alpha=float(opts.lora_alpha),
                      dropout=float(opts.lora_dropout),
                      targets=parse_targets(str(opts.lora_targets or "all")),
                      layers=parse_layers(str(opts.lora_layers or "")), dora=bool(opts.lora_dora))


def dora_refusal(opts: RunOptions | Mapping[str, Any]) -> str | None:
    """Why ``--lora-dora`` cannot apply (GPT and S2Mel runs alike): DoRA adapters are a kind of LoRA adapter."""
    opts = as_run_options(opts)
    if opts.lora_dora and not opts.lora:
        return "--lora-dora: DoRA adapters are LoRA adapters with a magnitude vector; give --lora too"
    return None


def lora_refusal(opts: RunOptions | Mapping[str, Any], gpt: Mapping[str, Any]) -> str | None:
    """Why the LoRA options cannot build adapters on the model of ``gpt`` (None: they can, or no --lora)."""
    opts = as_run_options(opts)
    refusal = dora_refusal(opts)
    if refusal:
        return refusal
    try:
        config = lora_config_of(opts)
    except LoRAError as exc:
        return f"--lora: {exc}"
    if config is None:
        return None
    layers = int(gpt["layers"])
    bad = [i for i in config.layers or () if i >= layers]
    if bad:
        return (f"--lora-layers {opts.lora_layers}: block(s) {', '.join(map(str, bad))} do not exist, the GPT "
                f"has blocks 0..{layers - 1}")
    return None


@dataclass
class Adaptation:
    """What ``adapt_model`` did (for the log and the components)."""

    config: LoRAConfig | None
    wrapped: list[str] = field(default_factory=list)
    trainable: int = 0
    frozen: int = 0
    kept: tuple[str, ...] = ()

    def lines(self) -> list[str]:
        if self.config is None:
            return []
        c = self.config
        parts = ", ".join(k.removeprefix("lora_train_") for k, on in self._kept_options() if on) or "nothing else"
        layers = "every block" if c.layers is None else f"blocks {','.join(map(str, c.layers))}"
        kind = "DoRA" if c.dora else "LoRA"
        return [f"{kind}: rank {c.rank}, alpha {c.alpha:g} (scale {c.scale:g}), dropout {c.dropout:g}, "
                f"{len(self.wrapped)} projections ({', '.join(c.targets)}; {layers}); also trained: {parts}",
                f"trainable {self.trainable:,} parameters, frozen {self.frozen:,}"]

    def _kept_options(self) -> list[tuple[str, bool]]:
        return [(option, any(p in self.kept for p in prefixes)) for option, prefixes in TRAINABLE_PARTS.items()]


def adapt_model(model: nn.Module, opts: RunOptions | Mapping[str, Any]) -> Adaptation:
    """Wrap the adapters and freeze the base as ``opts`` say (nothing without ``--lora``)."""
    opts = as_run_options(opts)
    config = lora_config_of(opts)
    if config is None:
        return Adaptation(None)
    wrapped = inject_lora(model, config)
    kept = tuple(prefix for option, prefixes in TRAINABLE_PARTS.items() if getattr(opts, option)
                 for prefix in prefixes)
    trainable = frozen = 0
    for name, param in model.named_parameters():
        train = is_adapter_key(name) or name.startswith(kept)
        param.requires_grad_(train)
        if train:
            trainable += param.numel()
        else:
            frozen += param.numel()
    return Adaptation(config, wrapped, trainable, frozen, kept)


# ----- checkpoints -------------------------------------------------------------------------------------------


class LoRAAdapters:
    """The adapter factors and their layout: ``extra["state"]["lora adapters"]`` (added to a run with --lora)."""

    name, core = ADAPTER_COMPONENT, False

    def __init__(self, model: nn.Module, config: LoRAConfig) -> None:
        self.model, self.config = model, config

    def state_dict(self) -> dict[str, Any]:
        return {"config": self.config.to_dict(), "adapter": adapter_state_dict(self.model)}

    def load_state_dict(self, saved: dict[str, Any], notes: list[str]) -> None:
        load_adapter_state(self.model, saved["adapter"], "the checkpoint's LoRA adapters")
        notes.append(f"LoRA adapters ({len(saved['adapter'])} tensors)")


def checkpoint_adapter(ckpt: Mapping[str, Any]) -> tuple[LoRAConfig, dict[str, torch.Tensor]] | None:
    """The adapters a checkpoint holds (None: a plain one)."""
    extra = ckpt.get("extra")
    state = extra.get("state") if isinstance(extra, Mapping) else None
    saved = state.get(ADAPTER_COMPONENT) if isinstance(state, Mapping) else None
    if not saved:
        return None
    return LoRAConfig.from_dict(saved["config"]), dict(saved["adapter"])


def merge_checkpoint_adapter(ckpt: Mapping[str, Any], state: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """``state`` (the checkpoint's stock-layout weights) with its adapters folded in; unchanged without any."""
    found = checkpoint_adapter(ckpt)
    if found is None:
        return dict(state)
    config, adapter = found
    return merged_state_dict(state, adapter, config)


def _layout(config: LoRAConfig) -> tuple[Any, ...]:
    return (config.rank, config.alpha, config.targets, config.layers, config.dora)


def _describe(config: LoRAConfig) -> str:
    layers = "all" if config.layers is None else ",".join(map(str, config.layers))
    kind = "DoRA, " if config.dora else ""
    return f"{kind}rank {config.rank}, alpha {config.alpha:g}, targets {','.join(config.targets)}, layers {layers}"


def lora_resume_refusal(ckpt: Mapping[str, Any], opts: RunOptions | Mapping[str, Any], where: str) -> str | None:
    """Why ``ckpt`` cannot be resumed with these LoRA options (adapters lost, added or of another layout)."""
    opts = as_run_options(opts)
    saved = checkpoint_adapter(ckpt)
    try:
        now = lora_config_of(opts)
    except LoRAError:
        return None  # refused by the options check already
    if saved is None and now is None:
        return None
    if saved is None:
        return (f"{where} was trained without LoRA adapters: --lora cannot be switched on for a resume; start a "
                "LoRA run from its weights with --init-from")
    if now is None:
        return (f"{where} holds LoRA adapters ({_describe(saved[0])}): resume it with --lora and the same settings, "
                "or continue from its merged weights with --init-from")
    if _layout(saved[0]) != _layout(now):
        return (f"{where} holds LoRA adapters of another layout ({_describe(saved[0])}) than the options now "
                f"({_describe(now)}): resume with the same LoRA settings, or continue from its merged weights "
                "with --init-from")
    return None
