"""After torchrun restarts the workers of an elastic run, they continue from the newest checkpoint.

torchrun's c10d rendezvous with a node range (``--nnodes MIN:MAX``) restarts every worker when a node is lost
(or one fails), with the nodes that remain. A restarted worker (``TORCHELASTIC_RESTART_COUNT`` > 0) resumes as
``--resume auto`` does, whatever its command line says, once the run's output folder holds a checkpoint: the
command may name the checkpoint the run first started from, and resuming from it again would redo the steps
since. The sampler maps the saved position onto the new world size (``trainer.sampler.resume_position``).

torchrun restarts workers whatever their exit code, also after a stop (Stop in the studio SIGINTs the trainers,
which save and exit 130). A restarted worker whose run's last lifecycle event in metrics.jsonl is a stopped
``end`` exits 130 at once, before the process group, so the stop holds until torchrun runs out of restarts.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from trainer.checkpoints.resume import checkpoint_files_exist
from trainer.run_options import RunOptions

RESTART_COUNT_ENV = "TORCHELASTIC_RESTART_COUNT"
AUTO = "auto"
METRICS_FILE = "metrics.jsonl"
LIFECYCLE_EVENTS = ("start", "resume", "end")
_TAIL_BYTES = 256 * 1024  # the end of metrics.jsonl read for the last lifecycle event


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


def last_lifecycle_event(output_dir: str | Path) -> dict[str, Any] | None:
    """The newest start, resume or end event near the end of ``output_dir``'s metrics.jsonl (None: none there)."""
    try:
        with open(Path(output_dir) / METRICS_FILE, "rb") as handle:
            handle.seek(max(0, os.fstat(handle.fileno()).st_size - _TAIL_BYTES))
            data = handle.read()
    except OSError:
        return None
    for line in reversed(data.splitlines()):
        try:
            event = json.loads(line)
        except ValueError:
            continue  # a torn line, or the cut first line of the window
        if isinstance(event, dict) and event.get("event") in LIFECYCLE_EVENTS:
            return event
    return None


def stopped_before_restart(output_dir: str | Path) -> str | None:
    """The line to print when torchrun restarted the workers of a run that was stopped; None otherwise."""
    if restart_count() == 0:
        return None
    event = last_lifecycle_event(output_dir)
    if event is None or event.get("event") != "end" or event.get("status") != "stopped":
        return None
    return (f"torchrun restarted the workers (restart {restart_count()}) of a run stopped at step {event.get('step')}: "
            "not training again")
