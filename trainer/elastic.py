"""After torchrun restarts the workers of an elastic run, they continue from the newest checkpoint.

torchrun's c10d rendezvous with a node range (``--nnodes MIN:MAX``) restarts every worker when a node is lost
(or one fails), with the nodes that remain. A restarted worker (``TORCHELASTIC_RESTART_COUNT`` > 0) resumes as
``--resume auto`` does, whatever its command line says, once the run's output folder holds a checkpoint: the
command may name the checkpoint the run first started from, and resuming from it again would redo the steps
since. The sampler maps the saved position onto the new world size (``trainer.sampler.resume_position``).
"""

from __future__ import annotations

import os

from trainer.checkpoints.resume import checkpoint_files_exist
from trainer.run_options import RunOptions

RESTART_COUNT_ENV = "TORCHELASTIC_RESTART_COUNT"
AUTO = "auto"


def restart_count() -> int:
    """How many times torchrun has restarted this run's workers (0 outside torchrun, or a bad value)."""
    text = os.environ.get(RESTART_COUNT_ENV, "0").strip()
    return int(text) if text.isdigit() else 0


def resume_after_restart(opts: RunOptions) -> tuple[RunOptions, str | None]:
    """(the options to run, the line to print or None): ``--resume auto`` for a restarted worker whose output
    folder holds a checkpoint; the options unchanged otherwise."""
    restarts = restart_count()
    if restarts == 0 or str(opts.resume).strip() == AUTO or not checkpoint_files_exist(opts.output_dir):
        return opts, None
    return (opts.replace(resume=AUTO),
            f"torchrun restarted the workers (restart {restarts}): resuming from the newest checkpoint in "
            f"{opts.output_dir} instead of --resume {opts.resume or '(none)'}")
