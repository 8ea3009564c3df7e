"""System tab data: host figures, GPUs through NVML when present, and the studio's supervised runs."""

from __future__ import annotations

import sys
from pathlib import Path

from webui.context import StudioContext
from webui.process_tools import wait_until
from webui.tab_system import GPU_COLUMNS, PROCESS_COLUMNS, CpuMeter, gpu_rows, refresh

FAKE = Path(__file__).resolve().parent / "fake_trainer.py"


def test_refresh_lists_running_runs_with_their_processes(tmp_path: Path) -> None:
    ctx = StudioContext.create(tmp_path)
    out = tmp_path / "runs" / "one"
    supervisor = ctx.registry.get(out)
    ctx.registry.get(tmp_path / "runs" / "never-started")  # known but idle: not a process of the studio
    supervisor.start([sys.executable, str(FAKE), "--output-dir", str(out), "--grandchild"], label="train")
    meter = CpuMeter()
    try:
        assert wait_until(lambda: "grandchild pid" in supervisor.read_log(0)[0], 20)
        host, gpus, note, processes = refresh(ctx, meter)
        assert "**CPU**" in host and "**Memory**" in host and "**Disk**" in host
        assert list(gpus.columns) == GPU_COLUMNS and note  # a GPU table, or the reason there is none
        assert list(processes.columns) == PROCESS_COLUMNS and len(processes) == 1
        row = processes.iloc[0]
        assert row["job"] == "train" and row["state"] == "running" and row["processes"] == 3  # wrapper, trainer, grandchild
        assert row["output dir"] == str(out.resolve()) and str(FAKE) in row["command"]
    finally:
        supervisor.stop(grace_s=20)
    processes = refresh(ctx, meter)[3]
    assert processes.iloc[0]["state"] == "stopped" and processes.iloc[0]["processes"] == 0


def test_gpu_rows_never_raise() -> None:
    rows, note = gpu_rows()
    assert isinstance(rows, list) and isinstance(note, str) and note
