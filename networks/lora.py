"""LoRA adapters on the GPT-2 blocks' projections, wrapping a module without editing it (peft's idea, our code).

``inject_lora(model, config)`` replaces the chosen ``TransposedLinear`` projections of the GPT-2 blocks
(``attn.c_attn``, ``attn.c_proj``, ``mlp.c_fc``, ``mlp.c_proj``) by ``LoRALinear``: it holds the *same*
``weight`` / ``bias`` Parameters (so the stock state-dict keys stay where they were) plus two float32 factors,
``lora_A`` (rank, in) and ``lora_B`` (out, rank):

    y = x @ W + b + scale * dropout(x) @ A^T @ B^T,      scale = alpha / rank

``lora_B`` starts at zero, so an adapted model starts bitwise equal to its base. Merging folds the update into
the weight, ``W + scale * A^T B^T`` (W is stored (in, out), HF Conv1D style), which is what a plain model with
the stock key layout loads (``merged_state_dict``); ``set_merged`` / ``set_adapters_enabled`` switch a live
model between adapted, merged and base behaviour (the Test tab's on/off).

DoRA (``LoRAConfig.dora``, weight-decomposed LoRA) adds a trained magnitude per output feature, peft's
``DoraLinearLayer`` (its ``weight`` is the ``.lora_magnitude.weight`` key, initialised to the column norms of W,
so the model still starts equal to its base): ``W' = m * (W + scale A^T B^T) / ||W + scale A^T B^T||`` (norm per
output feature). peft's layer computes the forward and the norm; merging uses the same norm, so a merged DoRA
weight is again a plain weight of the stock layout.

The factors are float32 Parameters and stay so under autocast (autocast casts the matmul inputs, never the
Parameters); ``keep_adapters_float32`` undoes a ``model.to(bfloat16)`` for them. Gradient checkpointing: the
GPT-2 backbone checkpoints blocks non-reentrantly, which sends gradients to the adapters even when no input of a
block requires grad (the re-entrant variant would send them nothing with a frozen base).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from networks.gpt2 import TransposedLinear

TARGETS = ("attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj")
MAGNITUDE_SUFFIX = ".lora_magnitude.weight"  # DoRA's magnitude vector (peft's DoraLinearLayer.weight)
ADAPTER_SUFFIXES = (".lora_A", ".lora_B", MAGNITUDE_SUFFIX)
BLOCKS_PREFIX = "gpt.h."


class LoRAError(ValueError):
    """A LoRA setting or an adapter state that does not fit the model (one line)."""


@dataclass(frozen=True)
class LoRAConfig:
    rank: int = 16
    alpha: float = 32.0
    dropout: float = 0.0
    targets: tuple[str, ...] = TARGETS
    layers: tuple[int, ...] | None = None  # block indices; None: every block
    dora: bool = False  # weight-decomposed: a trained magnitude per output feature beside A and B

    def __post_init__(self) -> None:
        if self.rank < 1:
            raise LoRAError(f"LoRA rank must be >= 1, got {self.rank}")
        if not 0.0 <= self.dropout < 1.0:
            raise LoRAError(f"LoRA dropout must lie in [0, 1), got {self.dropout}")
        unknown = [t for t in self.targets if t not in TARGETS]
        if unknown or not self.targets:
            raise LoRAError(f"unknown LoRA target(s) {', '.join(unknown) or '(none)'}; known: {', '.join(TARGETS)}")

    @property
    def scale(self) -> float:
        return self.alpha / self.rank

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["targets"] = list(self.targets)
        out["layers"] = None if self.layers is None else list(self.layers)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LoRAConfig:
        layers = data.get("layers")
        return cls(rank=int(data["rank"]), alpha=float(data["alpha"]), dropout=float(data.get("dropout", 0.0)),
                   targets=tuple(data.get("targets") or TARGETS),
                   layers=None if layers is None else tuple(int(i) for i in layers),
                   dora=bool(data.get("dora", False)))  # files from before DoRA: plain LoRA


class _FactorView:
    """A factor as peft's DoRA layer reads one (``.weight`` and a linear call) without a second Parameter."""

    def __init__(self, weight: Tensor) -> None:
        self.weight = weight

    def __call__(self, x: Tensor) -> Tensor:
        return F.linear(x, self.weight)


def _dora_layer() -> nn.Module:
    from peft.tuners.lora.dora import DoraLinearLayer  # peft only where DoRA is used

    return DoraLinearLayer(fan_in_fan_out=True)  # W stored (in, out), as peft's HF Conv1D case


def dora_weight(weight: Tensor, lora_a: Tensor, lora_b: Tensor, scale: float, magnitude: Tensor) -> Tensor:
    """The merged DoRA weight in ``weight``'s (in, out) layout and dtype (float32 arithmetic, peft's norm)."""
    w, a, b = weight.float(), lora_a.float(), lora_b.float()
    norm = _dora_layer().get_weight_norm(w, b @ a, scale)  # per output feature: ||W + scale B A|| along in
    merged = (w + (a.t() @ b.t()) * scale) * (magnitude.float().to(w.device) / norm).view(1, -1)
    return merged.to(weight.dtype)


class LoRALinear(nn.Module):
    """A ``TransposedLinear`` with a low-rank update; shares the wrapped module's ``weight`` and ``bias``."""

    def __init__(self, base: TransposedLinear, rank: int, alpha: float, dropout: float = 0.0,
                 dora: bool = False) -> None:
        super().__init__()
        self.weight = base.weight
        self.bias = base.bias
        in_features, out_features = base.weight.shape
        device = base.weight.device
        self.lora_A = nn.Parameter(torch.empty(rank, in_features, dtype=torch.float32, device=device))
        self.lora_B = nn.Parameter(torch.zeros(out_features, rank, dtype=torch.float32, device=device))
        nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))  # as nn.Linear (and peft) initialise A
        self.scale = alpha / rank
        self.dropout = nn.Dropout(dropout) if dropout > 0 else nn.Identity()
        self.enabled = True  # False: behave as the base projection
        self.merged = False  # True: the update is folded into ``weight``
        self.lora_magnitude: nn.Module | None = None
        self._unmerged: Tensor | None = None  # DoRA: the weight before merging, put back exactly by unmerge
        if dora:
            self.lora_magnitude = _dora_layer()
            with torch.no_grad():  # magnitude = the column norms of W (B is zero): starts as the base
                self.lora_magnitude.update_layer(base_layer=self, lora_A=self.lora_A.detach().float(),
                                                 lora_B=self.lora_B.detach(), scaling=self.scale)
            self.lora_magnitude.weight.data = self.lora_magnitude.weight.data.float()

    def delta(self) -> Tensor:
        """The update in the weight's (in, out) layout: scale * A^T B^T."""
        return (self.lora_A.t() @ self.lora_B.t()) * self.scale

    def forward(self, x: Tensor) -> Tensor:
        out = F.linear(x, self.weight.t(), self.bias)
        if not self.enabled or self.merged:
            return out
        if self.lora_magnitude is not None:  # peft's DoRA forward, as its Linear variant calls it
            keep_base = isinstance(self.dropout, nn.Identity) or not self.training
            extra = self.lora_magnitude(self.dropout(x), lora_A=_FactorView(self.lora_A),
                                        lora_B=_FactorView(self.lora_B), scaling=self.scale,
                                        base_layer=self, base_result=out if keep_base else None)
            return out + extra.to(out.dtype)  # float32 magnitudes would lift autocast's half outputs
        update = F.linear(F.linear(self.dropout(x), self.lora_A), self.lora_B)
        return out + update * self.scale

    @torch.no_grad()
    def merge(self) -> None:
        if self.merged:
            return
        if self.lora_magnitude is not None:
            self._unmerged = self.weight.detach().clone()
            self.weight.copy_(dora_weight(self.weight, self.lora_A, self.lora_B, self.scale,
                                          self.lora_magnitude.weight))
        else:
            self.weight.add_(self.delta().to(self.weight.dtype))
        self.merged = True

    @torch.no_grad()
    def unmerge(self) -> None:
        if not self.merged:
            return
        if self._unmerged is not None:
            self.weight.copy_(self._unmerged)
            self._unmerged = None
        else:
            self.weight.sub_(self.delta().to(self.weight.dtype))
        self.merged = False


def _block_count(model: nn.Module) -> int:
    blocks = getattr(getattr(model, "gpt", None), "h", None)
    if blocks is None:
        raise LoRAError("the model has no GPT-2 blocks (gpt.h) to adapt")
    return len(blocks)


def inject_lora(model: nn.Module, config: LoRAConfig) -> list[str]:
    """Wrap the configured projections of ``model.gpt.h`` in place; returns the wrapped modules' names."""
    if adapter_modules(model):
        raise LoRAError("the model already carries LoRA adapters")
    count = _block_count(model)
    layers = range(count) if config.layers is None else config.layers
    bad = [i for i in layers if not 0 <= i < count]
    if bad:
        raise LoRAError(f"LoRA layer(s) {', '.join(map(str, bad))} out of range: the GPT has blocks 0..{count - 1}")
    wrapped = []
    for index in sorted(set(layers)):
        block = model.gpt.h[index]
        for target in config.targets:
            parent_name, attr = target.split(".")
            parent = getattr(block, parent_name)
            base = getattr(parent, attr)
            if not isinstance(base, TransposedLinear):
                raise LoRAError(f"gpt.h.{index}.{target} is a {type(base).__name__}, not a TransposedLinear")
            setattr(parent, attr, LoRALinear(base, config.rank, config.alpha, config.dropout, config.dora))
            wrapped.append(f"gpt.h.{index}.{target}")
    return wrapped


def adapter_modules(model: nn.Module) -> dict[str, LoRALinear]:
    return {name: module for name, module in model.named_modules() if isinstance(module, LoRALinear)}


def is_adapter_key(key: str) -> bool:
    return key.endswith(ADAPTER_SUFFIXES)


def adapter_parameters(model: nn.Module) -> list[nn.Parameter]:
    return [p for name, p in model.named_parameters() if is_adapter_key(name)]


def adapter_state_dict(model: nn.Module) -> dict[str, Tensor]:
    """The adapters alone: ``{module name + '.lora_A' / '.lora_B': tensor}``."""
    return {name: p.detach() for name, p in model.named_parameters() if is_adapter_key(name)}


def base_state_dict(model: nn.Module) -> dict[str, Tensor]:
    """The model's state dict without adapter factors: the stock key layout (weights unmerged, as trained)."""
    if any(module.merged for module in adapter_modules(model).values()):
        raise LoRAError("the adapters are merged into the weights: unmerge them before saving the base weights")
    return {key: value for key, value in model.state_dict().items() if not is_adapter_key(key)}


@torch.no_grad()
def load_adapter_state(model: nn.Module, state: Mapping[str, Tensor], where: str) -> None:
    """Copy saved adapter factors into the model's adapters, strictly (first missing / unexpected / mis-shaped)."""
    params = dict((name, p) for name, p in model.named_parameters() if is_adapter_key(name))
    missing = sorted(set(params) - set(state))
    unexpected = sorted(set(state) - set(params))
    if missing or unexpected:
        first = f"missing {missing[0]}" if missing else f"unexpected {unexpected[0]}"
        raise LoRAError(f"{where}: the adapter state does not fit this model's adapters ({first})")
    for name, param in params.items():
        value = state[name]
        if tuple(value.shape) != tuple(param.shape):
            raise LoRAError(f"{where}: adapter {name} has shape {tuple(value.shape)}, the model's is "
                            f"{tuple(param.shape)}")
        param.copy_(value)


def _adapter_module(key: str) -> str:
    return next(key.removesuffix(suffix) for suffix in ADAPTER_SUFFIXES if key.endswith(suffix))


def merged_state_dict(base: Mapping[str, Tensor], adapter: Mapping[str, Tensor], config: LoRAConfig
                      ) -> dict[str, Tensor]:
    """Stock-layout weights with the adapters folded in (float32 arithmetic); the keys are exactly ``base``'s."""
    out = dict(base)
    for module in {_adapter_module(key) for key in adapter if is_adapter_key(key)}:
        a, b = adapter.get(module + ".lora_A"), adapter.get(module + ".lora_B")
        magnitude = adapter.get(module + MAGNITUDE_SUFFIX)
        weight_key = module + ".weight"
        if a is None or b is None or weight_key not in out:
            raise LoRAError(f"adapter {module} does not match the weights (lora_A, lora_B and {weight_key} needed)")
        if config.dora and magnitude is None:
            raise LoRAError(f"DoRA adapter {module} has no magnitude vector ({module}{MAGNITUDE_SUFFIX})")
        weight = out[weight_key]
        delta = (a.float().t() @ b.float().t()) * config.scale
        if tuple(delta.shape) != tuple(weight.shape):
            raise LoRAError(f"adapter {module} gives an update of shape {tuple(delta.shape)} for a weight of shape "
                            f"{tuple(weight.shape)}")
        if config.dora:
            assert magnitude is not None
            if tuple(magnitude.shape) != (weight.shape[1],):
                raise LoRAError(f"DoRA adapter {module} has a magnitude of shape {tuple(magnitude.shape)} for "
                                f"{weight.shape[1]} output features")
            out[weight_key] = dora_weight(weight, a.to(weight.device), b.to(weight.device), config.scale, magnitude)
        else:
            out[weight_key] = (weight.float() + delta.to(weight.device)).to(weight.dtype)
    return out


def set_adapters_enabled(model: nn.Module, enabled: bool) -> None:
    """On: the adapted model; off: the base model's behaviour (merged adapters are unmerged first)."""
    for module in adapter_modules(model).values():
        if not enabled:
            module.unmerge()
        module.enabled = enabled


def set_merged(model: nn.Module, merged: bool) -> None:
    """Fold the adapters into the weights (faster inference) or take them out again."""
    for module in adapter_modules(model).values():
        module.merge() if merged else module.unmerge()


def keep_adapters_float32(model: nn.Module) -> None:
    """After ``model.to(dtype)``: put the adapter factors back in float32."""
    for module in adapter_modules(model).values():
        params = [module.lora_A, module.lora_B]
        if module.lora_magnitude is not None:
            params.append(module.lora_magnitude.weight)
        for param in params:
            if param.dtype != torch.float32:
                param.data = param.data.float()


def parse_layers(text: str) -> tuple[int, ...] | None:
    """``""`` -> None (every block); ``"0-3,10"`` -> (0, 1, 2, 3, 10)."""
    text = text.strip()
    if not text:
        return None
    out: list[int] = []
    for part in (p.strip() for p in text.split(",")):
        try:
            lo, _, hi = part.partition("-")
            first, last = int(lo), int(hi) if hi else int(lo)
        except ValueError:
            raise LoRAError(f"LoRA layers {text!r}: expected block indices like '0-3,10', got {part!r}") from None
        if first < 0 or last < first:
            raise LoRAError(f"LoRA layers {text!r}: {part!r} is not a range of block indices")
        out.extend(range(first, last + 1))
    return tuple(sorted(set(out)))


def parse_targets(text: str) -> tuple[str, ...]:
    """``"all"`` or a comma list of ``attn.c_attn``, ``attn.c_proj``, ``mlp.c_fc``, ``mlp.c_proj``."""
    items = [t.strip() for t in text.split(",") if t.strip()]
    if not items or items == ["all"]:
        return TARGETS
    unknown = [t for t in items if t not in TARGETS]
    if unknown:
        raise LoRAError(f"unknown LoRA target(s) {', '.join(unknown)}; known: {', '.join(TARGETS)} (or all)")
    return tuple(t for t in TARGETS if t in items)

