"""Pre-flight: the run plan's checks, rendered, without training.

``run_preflight(values)`` builds the same ``RunPlan`` the trainer executes (``trainer.plan.make_plan``)
with checkpoint tensors memory-mapped, and returns it; ``python -m trainer.train --preflight <flags>``
prints its lines (exit 0, or 2 with the first failure; ``--preflight-processes N`` checks for a torchrun
job of N processes) and the UI shows ``to_dict()``. Nothing here writes to the output directory or takes
its lock.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainer.plan import Check, RunPlan, make_plan
from trainer.plan_files import CHECKPOINTS_OF_HEADROOM, checkpoint_size_estimate
from trainer.run_options import RunOptions, as_run_options

PreflightReport = RunPlan

__all__ = ["CHECKPOINTS_OF_HEADROOM", "Check", "PreflightReport", "checkpoint_size_estimate", "run_preflight"]


def run_preflight(values: RunOptions | Mapping[str, Any]) -> RunPlan:
    """Every pre-start check on the trainer's option ``values`` (never raises for bad input), for a job of
    ``--preflight-processes`` processes (rank 0's view: every rank has as many batches). A plain dict is
    taken strictly (``RunOptions.from_dict``)."""
    values = as_run_options(values)
    if values.train == "s2mel":  # the S2Mel decoder's own checks
        from trainer.s2mel.run_plan import make_s2mel_plan

        return make_s2mel_plan(values).plan
    processes = values.preflight_processes
    return make_plan(values, mmap=True, world_size=processes, distributed=processes > 1)
