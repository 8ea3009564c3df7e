"""Strict loading of real key layouts: every network of the package loads through here.

Upstream loads several of its files with ``strict=False``, so a wrong config "loads" and makes noise. Here a
state dict either fits the module exactly (same keys, same shapes) or is refused with a message that names the
differences, the first one first.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from torch import Tensor, nn


class StateDictMismatchError(ValueError):
    """A state dict does not fit the module it is loaded into (the message names the keys)."""


def state_dict_mismatches(model: nn.Module, state_dict: Mapping[str, Any]) -> list[str]:
    """Human-readable differences between a state dict and the model's keys and shapes (empty if none).

    Missing keys come first, then unexpected keys, then shape (or type) mismatches by key name.
    """
    expected = {name: tuple(tensor.shape) for name, tensor in model.state_dict().items()}
    problems: list[str] = []
    missing = sorted(set(expected) - set(state_dict))
    unexpected = sorted(set(state_dict) - set(expected))
    if missing:
        problems.append(f"missing {len(missing)} key(s): {_preview(missing)}")
    if unexpected:
        problems.append(f"unexpected {len(unexpected)} key(s): {_preview(unexpected)}")
    for name in sorted(set(expected) & set(state_dict)):
        value = state_dict[name]
        if not isinstance(value, Tensor):
            problems.append(f"{name}: checkpoint holds {type(value).__name__}, not a tensor")
        elif tuple(value.shape) != expected[name]:
            problems.append(f"{name}: checkpoint {list(value.shape)} vs model {list(expected[name])}")
    return problems


def _preview(names: list[str], limit: int = 8) -> str:
    shown = ", ".join(names[:limit])
    return shown if len(names) <= limit else f"{shown}, ... ({len(names) - limit} more)"


def load_strict(model: nn.Module, state_dict: Mapping[str, Any], source: str, *, assign: bool = False) -> None:
    """Load ``state_dict`` into ``model`` only if keys and shapes match exactly.

    Raises StateDictMismatchError("<source> does not fit <Module>: ...") naming the differences; the model is
    left untouched then. ``assign=True`` keeps the given tensors (for modules built on the meta device).
    """
    problems = state_dict_mismatches(model, state_dict)
    if problems:
        raise StateDictMismatchError(f"{source} does not fit {type(model).__name__}: " + "; ".join(problems))
    model.load_state_dict(dict(state_dict), strict=True, assign=assign)
