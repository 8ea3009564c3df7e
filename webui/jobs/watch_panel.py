"""The Training tab's "Watch a run folder" panel: a run started elsewhere, followed read-only (``webui.jobs.watch``)."""

from __future__ import annotations

from typing import Any

import gradio as gr

from webui.jobs.run_view import IDLE_POLL_S, POLL_S, error_html
from webui.jobs.watch import Watch, WatchError, open_watch, poll_watch


def start_watch(folder: str) -> tuple[Any, ...]:
    """Watch pressed: (watch state, status, progress, log, loss plot, timer) for the folder, or the one-line error."""
    try:
        watch = open_watch(folder)
    except WatchError as exc:
        return None, error_html(str(exc)), "", "", gr.skip(), gr.Timer(active=False)
    return (watch, *tick_watch(watch)[1:5], gr.Timer(value=POLL_S, active=True))


def tick_watch(watch: Watch | None) -> tuple[Any, ...]:
    """One timer tick: (watch state, status, progress, log, loss plot, timer), ``gr.skip()`` where unchanged."""
    skip = gr.skip()
    if watch is None:
        return None, skip, skip, skip, skip, gr.Timer(active=False)
    tick = poll_watch(watch)
    loss = watch.metrics.loss_frame() if tick.metrics_changed else skip
    return (watch,
            skip if tick.status is None else tick.status,
            skip if tick.progress is None else tick.progress,
            skip if tick.log is None else tick.log,
            loss,
            gr.Timer(value=POLL_S if tick.running else IDLE_POLL_S))


def build() -> None:
    with gr.Accordion("Watch a run folder (a run started elsewhere: Slurm, SkyPilot, a shell)", open=False,
                      elem_id="watch-section"):
        with gr.Row():
            folder = gr.Textbox(label="Run folder (the trainer's --output-dir)", scale=4, elem_id="watch-folder")
            watch_button = gr.Button("Watch", scale=1, elem_id="watch-start")
            gr.Button("Stop", scale=1, interactive=False, elem_id="watch-stop")  # not ours to stop
        status = gr.HTML(elem_id="watch-status")
        progress = gr.HTML(elem_id="watch-progress")
        log = gr.Textbox(label="Log (rank 0)", lines=12, max_lines=12, autoscroll=True, interactive=False,
                         elem_id="watch-log")
        loss = gr.LinePlot(None, x="step", y="value", color="series", height=240, title="loss",
                           elem_id="watch-loss-plot")
    state = gr.State(None, time_to_live=600)
    timer = gr.Timer(POLL_S, active=False)
    outputs = [state, status, progress, log, loss, timer]
    watch_button.click(start_watch, inputs=folder, outputs=outputs, show_progress="hidden")
    folder.submit(start_watch, inputs=folder, outputs=outputs, show_progress="hidden")
    timer.tick(tick_watch, inputs=state, outputs=outputs, show_progress="hidden", queue=False,
               trigger_mode="always_last")
