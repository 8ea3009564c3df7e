"""What the run supervisor reports: a run's state as the UI shows it (``RunStatus``), and the refusal to start a
second run in one output directory (``RunAlreadyActive``).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from webui.jobs import outcome
from webui.jobs.run_record import FAILED, KILLED, RUNNING, STOPPED

IDLE = "idle"


class RunAlreadyActive(RuntimeError):
    """A run is already going on in this output directory."""

    def __init__(self, output_dir: Path, pid: int | None) -> None:
        super().__init__(f"output dir {output_dir} is in use by a running process (PID {pid}); stop it first")
        self.output_dir = output_dir
        self.pid = pid


@dataclass(frozen=True)
class RunStatus:
    """A snapshot of one run, as the UI shows it."""

    state: str  # idle | running | finished | failed | stopped | killed
    output_dir: Path
    label: str = ""
    run_id: str | None = None
    pid: int | None = None
    argv: tuple[str, ...] = ()
    started_at: str | None = None
    ended_at: str | None = None
    exit_code: int | None = None
    signal: int | None = None
    stop_requested: bool = False
    log_offset: int = 0
    failure: outcome.Failure | None = None
    events: outcome.RunEvents = field(default_factory=outcome.RunEvents, compare=False)  # of a run that ended
    tail: str = ""
    record: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def running(self) -> bool:
        return self.state == RUNNING

    @property
    def command(self) -> str:
        return shlex.join(self.argv)

    @property
    def saved_step(self) -> int | None:
        """The step of the last checkpoint this run committed (its ``save`` events), None if none."""
        return self.events.saved_step

    @property
    def summary(self) -> str:
        code = f" (exit {self.exit_code})" if self.exit_code is not None else ""
        if self.state == IDLE:
            return "no run yet"
        if self.state == RUNNING:
            verb = "stopping" if self.stop_requested else "running"
            return f"{verb} (pid {self.pid}, started {self.started_at})"
        if self.state == STOPPED:
            kept = outcome.stop_summary(self.events)
            return f"stopped, {kept}{code}" if kept else f"stopped{code}"
        saved = f"; last checkpoint at step {self.saved_step}" if self.saved_step is not None else ""
        if self.state in (FAILED, KILLED) and self.failure is not None:
            prefix = "failed" if self.state == FAILED else "killed"
            if self.failure.kind == outcome.KILLED_BY_SIGNAL:
                return f"{prefix}: {self.failure.detail}{saved}{code}"
            return f"{prefix}: {self.failure.describe()}{saved}{code}"
        return f"{self.state}{code}"
