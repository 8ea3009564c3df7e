"""System tab: CPU, memory, disk, GPUs (NVML, never a CUDA context) and the studio's running processes."""

from __future__ import annotations

import contextlib
import shutil
import threading
from collections.abc import Callable
from typing import Any

import gradio as gr
import pandas as pd
import psutil

from webui.context import StudioContext

REFRESH_S = 5.0
RUNNING_REFRESH_S = 1.0  # while a run goes: its end shows within a second, not after a 5 s old snapshot
GIB = 1024**3
PROCESS_COLUMNS = ["job", "state", "pid", "processes", "CPU %", "memory (GiB)", "started", "output dir", "outcome",
                   "command"]
GPU_COLUMNS = ["index", "name", "utilisation %", "memory used (GiB)", "memory total (GiB)", "temperature °C"]


def gpu_rows() -> tuple[list[list[Any]], str]:
    """One row per NVIDIA GPU through NVML (which creates no CUDA context), and a note."""
    try:
        import pynvml
    except ImportError:
        return [], "NVML not available (nvidia-ml-py not installed)"
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        return [], f"no NVIDIA GPU found ({exc})"
    rows: list[list[Any]] = []
    try:
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            name = pynvml.nvmlDeviceGetName(handle)
            memory = pynvml.nvmlDeviceGetMemoryInfo(handle)
            utilisation: Any = "?"
            temperature: Any = "?"
            with contextlib.suppress(pynvml.NVMLError):
                utilisation = pynvml.nvmlDeviceGetUtilizationRates(handle).gpu
            with contextlib.suppress(pynvml.NVMLError):
                temperature = pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU)
            rows.append([index, name if isinstance(name, str) else name.decode(), utilisation,
                         round(memory.used / GIB, 2), round(memory.total / GIB, 2), temperature])
        driver = pynvml.nvmlSystemGetDriverVersion()
        return rows, f"NVIDIA driver {driver if isinstance(driver, str) else driver.decode()}"
    except pynvml.NVMLError as exc:
        return rows, f"NVML error: {exc}"
    finally:
        with contextlib.suppress(pynvml.NVMLError):
            pynvml.nvmlShutdown()


class CpuMeter:
    """CPU use between two readings, for the host and for processes, without sharing psutil's global state."""

    def __init__(self) -> None:
        self.lock = threading.Lock()  # refreshes from several browser sessions take turns
        self._host = psutil.cpu_times()
        self._procs: dict[int, psutil.Process] = {}

    def host_percent(self) -> float:
        now = psutil.cpu_times()
        busy = sum(now) - now.idle - getattr(now, "iowait", 0.0)
        busy_before = sum(self._host) - self._host.idle - getattr(self._host, "iowait", 0.0)
        total = sum(now) - sum(self._host)
        self._host = now
        return 100.0 * (busy - busy_before) / total if total > 0 else 0.0

    def process_percent(self, proc: psutil.Process) -> float:
        """% of one core since this process was last measured (0 the first time)."""
        known = self._procs.get(proc.pid)
        if known is None or known.create_time() != proc.create_time():
            self._procs[proc.pid] = known = proc
            known.cpu_percent(interval=None)
            return 0.0
        return known.cpu_percent(interval=None)

    def forget_except(self, pids: set[int]) -> None:
        for pid in [pid for pid in self._procs if pid not in pids]:
            del self._procs[pid]


def host_markdown(ctx: StudioContext, meter: CpuMeter) -> str:
    cpu = meter.host_percent()
    load = ", ".join(f"{value:.2f}" for value in psutil.getloadavg())
    memory = psutil.virtual_memory()
    disk = shutil.disk_usage(ctx.workspace)
    return (
        f"**CPU** {cpu:.0f}% of {psutil.cpu_count()} cores (load {load})  \n"
        f"**Memory** {memory.used / GIB:.1f} / {memory.total / GIB:.1f} GiB used ({memory.percent:.0f}%)  \n"
        f"**Disk** (workspace `{ctx.workspace}`): {disk.free / GIB:.1f} GiB free of {disk.total / GIB:.1f} GiB"
    )


def process_rows(ctx: StudioContext, meter: CpuMeter) -> list[list[Any]]:
    """One row per supervised run of this workspace (running first), with its whole session's CPU and memory."""
    rows: list[list[Any]] = []
    seen: set[int] = set()
    statuses = [s for s in ctx.registry.statuses() if s.state != "idle"]
    statuses.sort(key=lambda s: (not s.running, -float(s.record.get("started_at_epoch") or 0.0)))
    for status in statuses:
        members = ctx.registry.get(status.output_dir).run_processes(status.record) if status.running else []
        cpu, rss = 0.0, 0
        for proc in members:
            with contextlib.suppress(psutil.Error):
                cpu += meter.process_percent(proc)
                rss += proc.memory_info().rss
                seen.add(proc.pid)
        rows.append([status.label or "-", status.state, status.pid, len(members), round(cpu, 1),
                     round(rss / GIB, 2), status.started_at, str(status.output_dir), status.summary,
                     status.command])
    meter.forget_except(seen)
    return rows


def refresh(ctx: StudioContext, meter: CpuMeter) -> tuple[str, pd.DataFrame, str, pd.DataFrame, Any]:
    """(host, GPUs, GPU note, processes, timer update): the timer refreshes fast while a run goes."""
    gpus, note = gpu_rows()
    with meter.lock:
        host, processes = host_markdown(ctx, meter), process_rows(ctx, meter)
    frame = pd.DataFrame(processes, columns=PROCESS_COLUMNS)
    interval = RUNNING_REFRESH_S if (frame["state"] == "running").any() else REFRESH_S
    return (host, pd.DataFrame(gpus, columns=GPU_COLUMNS), note, frame, gr.update(value=interval))


def build(ctx: StudioContext) -> Callable[[gr.Tab], None]:
    """The tab's components; returns how to refresh when the tab is opened (a run that ended meanwhile
    shows ended at once, not after up to REFRESH_S of a stale table)."""
    meter = CpuMeter()  # one for the studio: CPU shown is the use between two refreshes
    host = gr.Markdown(elem_id="system-host")
    gr.Markdown("### GPUs")
    gpus = gr.Dataframe(headers=GPU_COLUMNS, interactive=False, elem_id="system-gpus")
    gpu_note = gr.Markdown(elem_id="system-gpu-note")
    gr.Markdown("### Processes of this studio (supervised runs)")
    processes = gr.Dataframe(headers=PROCESS_COLUMNS, interactive=False, wrap=True, elem_id="system-processes")
    refresh_button = gr.Button("Refresh", elem_id="system-refresh", size="sm")
    timer = gr.Timer(REFRESH_S)

    outputs = [host, gpus, gpu_note, processes, timer]
    for event in (refresh_button.click, timer.tick):
        event(lambda: refresh(ctx, meter), outputs=outputs, show_progress="hidden", queue=False)
    gr.on(triggers=None, fn=lambda: refresh(ctx, meter), outputs=outputs)  # page load

    def on_select(tab: gr.Tab) -> None:
        tab.select(lambda: refresh(ctx, meter), outputs=outputs, show_progress="hidden", queue=False)

    return on_select
