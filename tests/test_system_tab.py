"""System tab data: host figures, GPUs through NVML (a stand-in NVML here), and the studio's supervised runs."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import gradio as gr

from webui.context import StudioContext
from webui.jobs.process_tools import wait_until
from webui.jobs.supervisor import RunSupervisor
from webui.system.tab_system import (
    GPU_COLUMNS,
    PROCESS_COLUMNS,
    REFRESH_S,
    RUNNING_REFRESH_S,
    CpuMeter,
    gpu_rows,
    refresh,
)

FAKE = Path(__file__).resolve().parent / "fake_trainer.py"
GIB = 1024**3


class FakeNVMLError(Exception):
    pass


def fake_pynvml(fail_init: bool = False) -> types.ModuleType:
    """A stand-in for nvidia-ml-py's ``pynvml``: two GPUs, one without a temperature sensor."""
    module = types.ModuleType("pynvml")
    module.NVMLError = FakeNVMLError
    module.NVML_TEMPERATURE_GPU = 0
    module.calls = []

    def init() -> None:
        module.calls.append("init")
        if fail_init:
            raise FakeNVMLError("Driver Not Loaded")

    gpus = [("NVIDIA H200", 37, 12 * GIB, 141 * GIB, 55), (b"NVIDIA L4", 0, GIB // 2, 24 * GIB, None)]

    def temperature(index: int, sensor: int) -> int:
        if gpus[index][4] is None:
            raise FakeNVMLError("Not Supported")
        return gpus[index][4]

    module.nvmlInit = init
    module.nvmlShutdown = lambda: module.calls.append("shutdown")
    module.nvmlDeviceGetCount = lambda: len(gpus)
    module.nvmlDeviceGetHandleByIndex = lambda index: index
    module.nvmlDeviceGetName = lambda index: gpus[index][0]
    module.nvmlDeviceGetUtilizationRates = lambda index: types.SimpleNamespace(gpu=gpus[index][1], memory=0)
    module.nvmlDeviceGetMemoryInfo = lambda index: types.SimpleNamespace(used=gpus[index][2], total=gpus[index][3],
                                                                       free=gpus[index][3] - gpus[index][2])
    module.nvmlDeviceGetTemperature = temperature
    module.nvmlSystemGetDriverVersion = lambda: b"550.54.15"
    return module


def test_gpu_rows_from_nvml(monkeypatch) -> None:
    nvml = fake_pynvml()
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    rows, note = gpu_rows()
    assert rows == [[0, "NVIDIA H200", 37, 12.0, 141.0, 55], [1, "NVIDIA L4", 0, 0.5, 24.0, "?"]]
    assert note == "NVIDIA driver 550.54.15"
    assert nvml.calls == ["init", "shutdown"]  # NVML is released after every reading


def test_gpu_rows_without_a_driver_say_why(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(fail_init=True))
    assert gpu_rows() == ([], "no NVIDIA GPU found (Driver Not Loaded)")
    monkeypatch.setitem(sys.modules, "pynvml", None)  # not installed: import fails
    assert gpu_rows() == ([], "NVML not available (nvidia-ml-py not installed)")


def test_refresh_lists_running_runs_with_their_processes(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml())
    ctx = StudioContext.create(tmp_path)
    out = tmp_path / "runs" / "one"
    supervisor = ctx.registry.get(out)
    ctx.registry.get(tmp_path / "runs" / "never-started")  # known but idle: not a process of the studio
    supervisor.start([sys.executable, str(FAKE), "--output-dir", str(out), "--grandchild", "--setsid-child"],
                     label="train")
    meter = CpuMeter()
    try:
        assert wait_until(lambda: "setsid child pid" in supervisor.read_log(0)[0], 20)
        host, gpus, note, processes, timer = refresh(ctx, meter)
        assert "**CPU**" in host and "**Memory**" in host and "**Disk**" in host
        assert list(gpus.columns) == GPU_COLUMNS and list(gpus["name"]) == ["NVIDIA H200", "NVIDIA L4"]
        assert note == "NVIDIA driver 550.54.15"
        assert list(processes.columns) == PROCESS_COLUMNS and len(processes) == 1
        row = processes.iloc[0]
        # wrapper, trainer, grandchild and the child that left the session: all counted
        assert row["job"] == "train" and row["state"] == "running" and row["processes"] == 4
        assert row["output dir"] == str(out.resolve()) and str(FAKE) in row["command"]
        assert timer == gr.update(value=RUNNING_REFRESH_S)  # fast while a run goes
    finally:
        supervisor.stop(grace_s=20)
    _, _, _, processes, timer = refresh(ctx, meter)
    assert processes.iloc[0]["state"] == "stopped" and processes.iloc[0]["processes"] == 0
    assert timer == gr.update(value=REFRESH_S)


def test_a_run_that_ended_is_shown_ended_at_the_next_refresh(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml())
    ctx = StudioContext.create(tmp_path)
    out = tmp_path / "runs" / "short"
    ctx.registry.get(out).start([sys.executable, str(FAKE), "--output-dir", str(out), "--steps", "3"],
                                label="train")
    meter = CpuMeter()
    assert refresh(ctx, meter)[3].iloc[0]["state"] == "running"
    watcher = RunSupervisor(out)  # another observer learns of the end; the tab must not lag behind it
    assert wait_until(lambda: not watcher.poll().running, 20)
    assert refresh(ctx, meter)[3].iloc[0]["state"] == "finished"


def test_idle_studio_refreshes_slowly(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml())
    assert refresh(StudioContext.create(tmp_path), CpuMeter())[4] == gr.update(value=REFRESH_S)


def test_opening_the_system_tab_refreshes_it_at_once(tmp_path: Path, monkeypatch) -> None:
    """Switching to the tab runs the same refresh as the timer: a run that ended meanwhile shows ended."""
    from webui import studio

    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml())
    ctx = StudioContext.create(tmp_path)
    blocks = studio.build_studio(ctx, tabs=(("System", "webui.system.tab_system", "tab-system"),))
    tab = next(block for block in blocks.blocks.values() if getattr(block, "elem_id", None) == "tab-system")
    on_open = [fn for fn in blocks.fns.values() if (tab._id, "select") in fn.targets
               and "system-processes" in [output.elem_id for output in fn.outputs]]
    assert len(on_open) == 1  # (the studio's project follower listens to every tab's opening too)

    out = tmp_path / "runs" / "short"
    ctx.registry.get(out).start([sys.executable, str(FAKE), "--output-dir", str(out), "--steps", "3"],
                                label="train")
    watcher = RunSupervisor(out)
    assert wait_until(lambda: not watcher.poll().running, 20)
    processes = on_open[0].fn()[3]
    assert processes.iloc[0]["state"] == "finished"
