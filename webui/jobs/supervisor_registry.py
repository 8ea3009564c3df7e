"""One ``RunSupervisor`` per output directory for the whole UI process, and the runs found again under the
workspace after a restart (their ``run.json``).
"""

from __future__ import annotations

import threading
from pathlib import Path

from data_tools.paths import expand_path
from webui.jobs.run_record import RUN_JSON
from webui.jobs.run_status import RunStatus
from webui.jobs.supervisor import RunSupervisor


class SupervisorRegistry:
    """One RunSupervisor per output directory for the whole UI process, found again after restarts."""

    def __init__(self, workspace: Path, scan_depth: int = 3) -> None:
        self.workspace = Path(workspace).resolve()
        self.scan_depth = scan_depth
        self._supervisors: dict[Path, RunSupervisor] = {}
        self._lock = threading.Lock()

    def get(self, output_dir: Path | str) -> RunSupervisor:
        """The supervisor of ``output_dir`` (``~`` expanded; raises data_tools.paths.PathError if it cannot be)."""
        key = expand_path(output_dir, "output dir").resolve()
        with self._lock:
            supervisor = self._supervisors.get(key)
            if supervisor is None:
                supervisor = self._supervisors[key] = RunSupervisor(key)
            return supervisor

    def discover(self) -> list[RunSupervisor]:
        """Supervisors for every run.json under the workspace (a few levels deep) plus known ones."""
        found: set[Path] = set()
        for depth in range(1, self.scan_depth + 1):
            pattern = "/".join(["*"] * depth) + "/" + RUN_JSON
            found.update(path.parent for path in self.workspace.glob(pattern))
        with self._lock:
            found.update(self._supervisors)
        return [self.get(path) for path in sorted(found)]

    def statuses(self, running_only: bool = False) -> list[RunStatus]:
        statuses = [supervisor.poll() for supervisor in self.discover()]
        return [s for s in statuses if s.running] if running_only else statuses

    def latest_running(self, label: str | None = None) -> RunStatus | None:
        """The most recently started running run (optionally with this label)."""
        running = [s for s in self.statuses(running_only=True) if label is None or s.label == label]
        running.sort(key=lambda s: float(s.record.get("started_at_epoch") or 0.0))
        return running[-1] if running else None
