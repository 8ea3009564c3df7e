"""Learning-rate schedule: linear warm-up, then cosine decay to MIN_LR_RATIO of the peak.

The factor for optimizer step ``k`` (1-based) is ``k / warmup`` during warm-up, so the very first step
already trains at ``lr / warmup`` (never at 0). ``LambdaLR`` calls the function with the number of
steps completed so far (0 before the first step), hence the ``+ 1``.
"""

from __future__ import annotations

import math

import torch

MIN_LR_RATIO = 0.1


def lr_factor(completed_steps: int, warmup_steps: int, total_steps: int) -> float:
    step = completed_steps + 1  # the step about to be taken, 1-based
    if warmup_steps > 0 and step <= warmup_steps:
        return step / warmup_steps
    decay_steps = max(1, total_steps - warmup_steps)
    progress = min(1.0, max(0.0, (step - warmup_steps) / decay_steps))
    return MIN_LR_RATIO + (1.0 - MIN_LR_RATIO) * 0.5 * (1.0 + math.cos(math.pi * progress))


def build_scheduler(optimizer: torch.optim.Optimizer, warmup_steps: int, total_steps: int
                    ) -> torch.optim.lr_scheduler.LambdaLR:
    return torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda completed: lr_factor(completed, warmup_steps, total_steps)
    )


def set_peak_lr(scheduler: torch.optim.lr_scheduler.LambdaLR, peak_lr: float) -> None:
    """Use a new peak lr after restoring a scheduler (a changed --learning-rate on resume); a group with an
    ``lr_mult`` (trainer.steps.parameter_groups) keeps its multiple of it."""
    groups = scheduler.optimizer.param_groups
    scheduler.base_lrs = [peak_lr * group.get("lr_mult", 1.0) for group in groups]
    for group, base_lr, factor_fn in zip(groups, scheduler.base_lrs, scheduler.lr_lambdas):
        group["initial_lr"] = base_lr
        group["lr"] = base_lr * factor_fn(scheduler.last_epoch)
