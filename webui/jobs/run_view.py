"""The per-session view of a training run: what one browser session has seen of its log and metrics.

What each session has seen lives in a ``RunView`` (byte offsets), so a reload shows the run again from its
console.log and metrics.jsonl; ``poll_view`` is one timer tick and sends only what changed. Under torchrun the
log box shows rank 0 (console.log) unless the reader picks another rank's file.
"""

from __future__ import annotations

import html
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import gradio as gr

from data_tools.paths import PathError
from webui.context import StudioContext
from webui.jobs import rank_logs
from webui.jobs.logtail import LogTail, file_size
from webui.jobs.run_record import CONSOLE_LOG
from webui.jobs.supervisor import RunStatus
from webui.training.checkpoint_labels import checkpoint_choices
from webui.training.metrics_view import MetricsReader, progress_html

POLL_S = 0.5  # the live log's refresh: p95 latency from trainer to browser stays under 1 s (bench/log_latency.py)
IDLE_POLL_S = 2.0  # while no run is going: notices a run started elsewhere, costs little
PLOT_EVERY_S = 5.0
_STATE_COLORS = {"running": "#2e86de", "finished": "#1f8f4e", "stopped": "#c98a00", "failed": "#c0392b",
                 "killed": "#c0392b", "idle": "#5b6b7b"}


@dataclass
class RunView:
    output_dir: str
    run_id: str | None
    log: LogTail
    metrics: MetricsReader
    log_source: rank_logs.LogSource | None = None  # None: the run's console.log from its start offset
    sources: tuple[tuple[str, str], ...] = ()  # the (label, value) choices the log selector was last given
    last_status: str = ""
    last_state: str = ""
    plots_pending: bool = False  # metrics arrived that the plots do not show yet
    interval: float = 0.0  # the polling interval this session's timer was last set to
    plotted_at: float = 0.0  # time.monotonic() of the last plot update


def status_html(status: RunStatus) -> str:
    """The run's badge and summary, and the command it runs (what was actually started, from run.json)."""
    color = _STATE_COLORS.get(status.state, "#5b6b7b")
    parts = [
        f'<div id="train-status-line" data-state="{status.state}" data-run="{status.run_id or ""}">'
        f'<span style="background:{color};color:#fff;padding:2px 10px;border-radius:6px;font-weight:600;">'
        f"{status.state.upper()}</span> <span id=\"train-status-summary\">{html.escape(status.summary)}</span>"
    ]
    if status.ended_at:
        parts.append(f" <small>ended {html.escape(status.ended_at)}</small>")
    parts.append("</div>")
    if status.argv:
        verb = "running" if status.running else "ran"
        parts.append(f'<div><small>{verb}: <code id="train-status-command">{html.escape(status.command)}</code>'
                     "</small></div>")
    if status.state in ("failed", "killed") and status.tail:
        tail = "\n".join(status.tail.splitlines()[-25:])
        parts.append(f'<pre id="train-status-tail" style="max-height:18em;overflow:auto;">{html.escape(tail)}</pre>')
    return "".join(parts)


def error_html(message: str) -> str:
    return f'<div class="status-bad">error: {html.escape(message)}</div>'


def _new_view(output_dir: str, directory: Path, status: RunStatus) -> RunView:
    console = directory / CONSOLE_LOG
    log = LogTail.for_run(console, status.log_offset) if status.run_id else LogTail(console, file_size(console))
    return RunView(output_dir=output_dir, run_id=status.run_id, log=log, metrics=MetricsReader(directory))


def _choose_log(view: RunView, directory: Path, status: RunStatus, wanted: str | None) -> tuple[bool, Any]:
    """Point the view's log at the source the reader picked (rank 0's console.log unless another rank's file
    is picked and exists); returns (whether the log box must be redrawn, the selector's update)."""
    sources = rank_logs.log_sources(directory, status.argv, status.record.get("started_at_epoch"))
    choices = tuple((source.label, source.value) for source in sources)
    chosen = next((source for source in sources if source.value == wanted and source.value != rank_logs.CONSOLE),
                  None)
    switched = False
    if chosen != view.log_source:
        if chosen is None:
            view.log = _new_view(view.output_dir, directory, status).log
        else:
            view.log = LogTail.for_run(chosen.path, 0)
        view.log_source, switched = chosen, True
    selector: Any = gr.skip()
    if choices != view.sources:
        view.sources = choices
        selector = gr.update(choices=list(choices), value=chosen.value if chosen else rank_logs.CONSOLE,
                             visible=len(choices) > 1)
    return switched, selector


def log_text(view: RunView) -> str:
    """The log box: the console as it is; a rank's file under a line naming it (and saying why it is empty)."""
    source = view.log_source
    if source is None:
        return view.log.text()
    text = view.log.text()
    return f"[{source.label}: {source.path}]\n{text}" if text else rank_logs.empty_note(source)


def _plot_update(frame: Any) -> Any:
    """The plot's data, with a caption that says how much of the run it covers."""
    if frame.empty:
        return gr.update(value=frame, caption="no points yet")
    return gr.update(value=frame, caption=f"{len(frame)} points, up to step {int(frame['step'].max())}")


def _frames(view: RunView) -> tuple[Any, Any, Any, Any]:
    return tuple(_plot_update(f) for f in (view.metrics.loss_frame(), view.metrics.top1_frame(),
                                           view.metrics.lr_frame(), view.metrics.eval_frame()))


_SKIP = gr.skip()


class Tick(NamedTuple):
    """What one timer tick sends to the page (``gr.skip()`` where nothing changed)."""

    view: Any
    status: Any
    progress: Any
    log: Any
    loss: Any
    top1: Any
    lr: Any
    resume_choices: Any
    timer: Any
    resume: Any  # unticked when a run finished: there is nothing left to resume
    preflight_report: Any  # cleared when a run starts or ends: a report from before describes another moment
    preflight_for: Any
    log_source: Any = None  # the rank selector's choices (torchrun runs: rank 0's console, each rank's files)
    evaluation: Any = _SKIP  # CER, WER, SIM over steps (checkpoint evaluation)


def poll_view(ctx: StudioContext, view: RunView | None, output_dir: str, resume_ticked: bool = False,
              log_source: str | None = None) -> Tick:
    """One timer tick. The timer polls fast only while the run is going."""
    output_dir = (output_dir or "").strip()
    skip = gr.skip()
    try:
        supervisor = ctx.registry.get(output_dir) if output_dir else None
    except PathError as exc:
        return Tick(None, error_html(str(exc)), "", "", skip, skip, skip, skip, gr.update(value=IDLE_POLL_S),
                    skip, skip, skip, skip)
    if supervisor is None:
        return Tick(None, status_html(RunStatus(state="idle", output_dir=Path("."))), "", "", skip, skip, skip, skip,
                    gr.update(value=IDLE_POLL_S), skip, skip, skip, skip)
    status = supervisor.poll()
    fresh = view is None or view.output_dir != output_dir or view.run_id != status.run_id
    if fresh:
        view = _new_view(output_dir, supervisor.output_dir, status)
    assert view is not None
    switched, selector = _choose_log(view, supervisor.output_dir, status, log_source)
    # The log first, then the metrics: the trainer records a step's event before printing its line, so the
    # progress bar is never behind the log it sits above.
    log_changed = view.log.poll() or switched
    metrics_changed = view.metrics.poll()
    status_text = status_html(status)
    ended_now = view.last_state == "running" and status.state != "running"
    started_now = status.running and (fresh or view.last_state != "running")
    plots = (skip, skip, skip, skip)
    # Re-drawing three charts costs the browser far more than the log does: at most every PLOT_EVERY_S.
    view.plots_pending = view.plots_pending or metrics_changed
    now = time.monotonic()
    if fresh or ended_now or (view.plots_pending and now - view.plotted_at >= PLOT_EVERY_S):
        plots = _frames(view)
        view.plots_pending, view.plotted_at = False, now
    interval = POLL_S if status.running else IDLE_POLL_S
    stale_report = ended_now or (started_now and not fresh)
    tick = Tick(
        view=view,
        status=status_text if (fresh or status_text != view.last_status) else skip,
        progress=(progress_html(view.metrics.progress_event, status.running, view.metrics.eta_s)
                  if (fresh or metrics_changed or ended_now) else skip),
        log=log_text(view) if (fresh or log_changed) else skip,
        loss=plots[0], top1=plots[1], lr=plots[2],
        resume_choices=gr.update(choices=checkpoint_choices(output_dir)) if (fresh or ended_now) else skip,
        timer=gr.update(value=interval) if interval != view.interval else skip,
        resume=False if (ended_now and status.state == "finished" and resume_ticked) else skip,
        preflight_report="" if stale_report else skip,
        preflight_for=None if stale_report else skip,
        log_source=selector,
        evaluation=plots[3],
    )
    view.last_status, view.last_state, view.interval = status_text, status.state, interval
    return tick
