"""What an S2Mel run trains: the whole decoder, or peft LoRA adapters on the DiT's plain Linear layers.

peft wraps ``nn.Linear`` layers as they are (``inject_adapter_in_model``), so the DiT needs no edit; its
``lora_B`` starts at zero, so the adapted model starts bitwise equal to its base. It keeps the trainer's
promises: adapters are ordinary Parameters (optimizer state and exact resume as for any weight), their init and
dropout draw from torch's global RNG (saved with every checkpoint), and merging uses peft's own ``merge``.

DoRA (``dora``, peft's ``use_dora``) adds a trained magnitude vector per wrapped layer (peft's
``lora_magnitude_vector``, saved with the factors); it starts equal to the base too, and peft's ``merge`` folds it
in, so the merged model is again the stock layout.

Default targets: the transformer's attention (``wqkv``, ``wo``) and SwiGLU (``w1``, ``w2``, ``w3``) layers.
Never the parameters that get no gradient on the training path (``skip_in_linear`` of the blocks without a
U-ViT skip, ``x_embedder``, the embeddings; README_indextts2_audio.md 10.1). ``train_regulator`` also trains
the (small) length regulator fully beside the adapters.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from peft import LoraConfig, get_peft_model_state_dict, inject_adapter_in_model, set_peft_model_state_dict
from peft.tuners.lora import LoraLayer
from torch import Tensor, nn

from networks.s2mel import S2Mel

ADAPTER_NAME = "default"
TARGET_GROUPS: dict[str, str] = {
    "attention": r"transformer\.layers\.\d+\.attention\.(wqkv|wo)",
    "feed_forward": r"transformer\.layers\.\d+\.feed_forward\.w[123]",
    "norms": r"transformer\.(layers\.\d+\.(attention_norm|ffn_norm)|norm)\.project_layer",
    "io": r"(cond_projection|cond_x_merge_linear|skip_linear|conv1|res_projection)",
}
DEFAULT_TARGETS = ("attention", "feed_forward")
MODES = ("full", "lora")


class S2MelLoRAError(ValueError):
    """A LoRA setting or adapter state that does not fit this S2Mel (one line)."""


@dataclass(frozen=True)
class S2MelLoRASettings:
    rank: int = 16
    alpha: float = 32.0
    dropout: float = 0.0
    targets: tuple[str, ...] = DEFAULT_TARGETS
    train_regulator: bool = False
    dora: bool = False  # weight-decomposed LoRA (peft's DoRA): a magnitude vector per wrapped layer too

    def __post_init__(self) -> None:
        if self.rank < 1:
            raise S2MelLoRAError(f"S2Mel LoRA rank must be at least 1, got {self.rank}")
        unknown = sorted(set(self.targets) - set(TARGET_GROUPS))
        if unknown or not self.targets:
            raise S2MelLoRAError(
                f"S2Mel LoRA targets {unknown or '(none)'}: choose from {sorted(TARGET_GROUPS)}"
            )

    def peft_config(self) -> LoraConfig:
        pattern = "|".join(f"({TARGET_GROUPS[name]})" for name in self.targets)
        return LoraConfig(
            r=self.rank, lora_alpha=self.alpha, lora_dropout=self.dropout, target_modules=rf"^({pattern})$",
            use_dora=self.dora,
        )

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> S2MelLoRASettings:
        """The settings a checkpoint's ``lora`` record holds (records from before DoRA: plain LoRA)."""
        return cls(rank=int(record["rank"]), alpha=float(record["alpha"]), dropout=float(record["dropout"]),
                   targets=tuple(record["targets"]), train_regulator=bool(record["train_regulator"]),
                   dora=bool(record.get("dora", False)))


def attach_lora(model: S2Mel, settings: S2MelLoRASettings) -> list[str]:
    """Wrap the DiT's target layers with adapters in place; freeze everything else (but the regulator if asked).

    Returns the wrapped module names (relative to ``cfm.estimator``).
    """
    estimator = model.cfm.estimator
    inject_adapter_in_model(settings.peft_config(), estimator, adapter_name=ADAPTER_NAME)
    wrapped = [name for name, module in estimator.named_modules() if isinstance(module, LoraLayer)]
    if not wrapped:
        raise S2MelLoRAError(f"S2Mel LoRA targets {settings.targets} matched no layer of the DiT")
    for name, parameter in model.named_parameters():
        parameter.requires_grad_(
            "lora_" in name or (settings.train_regulator and name.startswith("length_regulator"))
        )
    return wrapped


def has_adapters(model: nn.Module) -> bool:
    return any(isinstance(module, LoraLayer) for module in model.modules())


def adapter_state_dict(model: S2Mel) -> dict[str, Tensor]:
    """The adapter factors (peft's key names, adapter name dropped), detached."""
    return {key: value.detach() for key, value in get_peft_model_state_dict(model.cfm.estimator).items()}


def load_adapter_state(model: S2Mel, state: Mapping[str, Tensor], where: str) -> None:
    """Load adapter factors into a model already wrapped by :func:`attach_lora`; every key must fit."""
    result = set_peft_model_state_dict(model.cfm.estimator, dict(state), adapter_name=ADAPTER_NAME)
    unexpected = list(getattr(result, "unexpected_keys", []) or [])
    missing = [key for key in getattr(result, "missing_keys", []) or [] if "lora_" in key]
    if unexpected or missing:
        raise S2MelLoRAError(
            f"{where}: adapter does not fit this S2Mel (unexpected {unexpected[:3]}, missing {missing[:3]})"
        )


def merged_copy(model: S2Mel) -> S2Mel:
    """A plain S2Mel with every adapter folded into its base weight (the stock layout); ``model`` is untouched."""
    merged = copy.deepcopy(model)
    estimator = merged.cfm.estimator
    for name, module in list(estimator.named_modules()):
        if isinstance(module, LoraLayer):
            module.merge(safe_merge=True)
            parent_name, _, child = name.rpartition(".")
            parent = estimator.get_submodule(parent_name) if parent_name else estimator
            setattr(parent, child, module.get_base_layer())
    for parameter in merged.parameters():
        parameter.requires_grad_(False)
    return merged


def stock_net_state_dict(model: S2Mel) -> dict[str, dict[str, Tensor]]:
    """The ``net`` dict of a stock ``s2mel.pth`` from a full or LoRA-wrapped model (adapters merged)."""
    plain = merged_copy(model) if has_adapters(model) else model
    return {
        part: {k: v.detach().clone() for k, v in state.items()}
        for part, state in plain.net_state_dict().items()
    }
