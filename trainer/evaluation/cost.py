"""What evaluation at saves costs training, for the pre-flight: a line when the machine has no spare core or GPU.

Evaluation at saves runs in its own process (``process``), at a lower priority, on ``--eval-threads`` threads
or on ``--eval-device``. When training and evaluation together want more CPU threads than the machine has
cores, they share them while a save is measured: training then runs about ``cores / (training threads +
evaluation threads)`` as fast during that time. The line gives that rough figure and the way out (a GPU for
evaluation, fewer seeds or texts, or measuring after training with ``python -m trainer.evaluate``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from trainer.run_options import RunOptions, as_run_options


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def training_threads(opts: RunOptions | Mapping[str, Any]) -> int:
    """The CPU threads training keeps busy: its torch threads on CPU, about one (the feeding loop) on a GPU, and
    one per data-loading worker."""
    opts = as_run_options(opts)
    device = str(opts.device or "auto")
    workers = int(opts.num_workers or 0)
    if device.startswith("cuda") or (device == "auto" and _cuda_available()):
        return 1 + workers
    torch_threads = int(os.environ.get("OMP_NUM_THREADS") or 0) or (os.cpu_count() or 1)
    return max(1, torch_threads) + workers


def slowdown_note(opts: RunOptions | Mapping[str, Any], cores: int | None = None) -> str | None:
    """The pre-flight's line about evaluation at saves slowing training; None when there is room for it."""
    opts = as_run_options(opts)
    if not opts.eval_at_saves:
        return None
    if str(opts.eval_device or "cpu").startswith("cuda"):
        return None
    cores = cores or os.cpu_count() or 1
    train = training_threads(opts)
    evaluation = max(1, int(opts.eval_threads or 1))
    if train + evaluation <= cores:
        return None
    share = cores / (train + evaluation)
    return (f"evaluation at saves shares this machine's {cores} core(s) with training ({train} + {evaluation} "
            f"thread(s)): while a save is measured, training runs at about {share * 100:.0f} % of its speed "
            f"(about {(1 / share - 1) * 100:.0f} % slower); an --eval-device GPU, fewer --eval-sentences or seeds, or "
            "python -m trainer.evaluate after training avoid it")
