"""Inference in eval mode without disturbing a model that is also being trained (samples use the live model)."""

from __future__ import annotations

import torch


class EvalMode:
    """Put modules in eval mode and give each its own train flag back afterwards."""

    def __init__(self, *modules: torch.nn.Module) -> None:
        self.flags = [(m, m.training) for module in modules for m in module.modules()]

    def __enter__(self) -> None:
        for module, _ in self.flags:
            module.training = False

    def __exit__(self, *exc: object) -> None:
        for module, flag in self.flags:
            module.training = flag
