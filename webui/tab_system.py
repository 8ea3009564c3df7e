"""System tab: CPU, memory, disk, GPUs (NVML, never a CUDA context) and the studio's running processes."""

from __future__ import annotations

import contextlib
import shutil
from typing import Any

import gradio as gr
import pandas as pd
import psutil

from webui.context import StudioContext
from webui.process_tools import session_members

REFRESH_S = 5.0
GIB = 1024**3
PROCESS_COLUMNS = ["job", "state", "pid", "processes", "CPU %", "memory (GiB)", "started", "output dir", "command"]
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


def host_markdown(ctx: StudioContext) -> str:
    cpu = psutil.cpu_percent(interval=None)
    load = ", ".join(f"{value:.2f}" for value in psutil.getloadavg())
    memory = psutil.virtual_memory()
    disk = shutil.disk_usage(ctx.workspace)
    return (
        f"**CPU** {cpu:.0f}% of {psutil.cpu_count()} cores (load {load})  \n"
        f"**Memory** {memory.used / GIB:.1f} / {memory.total / GIB:.1f} GiB used ({memory.percent:.0f}%)  \n"
        f"**Disk** (workspace `{ctx.workspace}`): {disk.free / GIB:.1f} GiB free of {disk.total / GIB:.1f} GiB"
    )


def process_rows(ctx: StudioContext) -> list[list[Any]]:
    rows: list[list[Any]] = []
    for status in ctx.registry.statuses():
        members = session_members(status.record.get("sid")) if status.running else []
        cpu, rss = 0.0, 0
        for proc in members:
            with contextlib.suppress(psutil.Error):
                cpu += proc.cpu_percent(interval=None)
                rss += proc.memory_info().rss
        rows.append([status.label or "-", status.summary, status.pid, len(members), round(cpu, 1),
                     round(rss / GIB, 2), status.started_at, str(status.output_dir), status.command])
    rows.sort(key=lambda row: (not str(row[1]).startswith(("running", "stopping")), str(row[6] or "")), reverse=False)
    return rows


def refresh(ctx: StudioContext) -> tuple[str, pd.DataFrame, str, pd.DataFrame]:
    gpus, note = gpu_rows()
    return (
        host_markdown(ctx),
        pd.DataFrame(gpus, columns=GPU_COLUMNS),
        note,
        pd.DataFrame(process_rows(ctx), columns=PROCESS_COLUMNS),
    )


def build(ctx: StudioContext) -> None:
    psutil.cpu_percent(interval=None)  # prime: the first reading is always 0
    host = gr.Markdown(elem_id="system-host")
    gr.Markdown("### GPUs")
    gpus = gr.Dataframe(headers=GPU_COLUMNS, interactive=False, elem_id="system-gpus")
    gpu_note = gr.Markdown(elem_id="system-gpu-note")
    gr.Markdown("### Processes of this studio (supervised runs)")
    processes = gr.Dataframe(headers=PROCESS_COLUMNS, interactive=False, wrap=True, elem_id="system-processes")
    refresh_button = gr.Button("Refresh", elem_id="system-refresh", size="sm")
    timer = gr.Timer(REFRESH_S)

    outputs = [host, gpus, gpu_note, processes]
    for event in (refresh_button.click, timer.tick):
        event(lambda: refresh(ctx), outputs=outputs, show_progress="hidden", queue=False)
    gr.on(triggers=None, fn=lambda: refresh(ctx), outputs=outputs)  # page load
