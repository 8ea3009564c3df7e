"""The Gradio side of a report job: a status line, a progress bar, the log, Stop, and the result outputs.

``job_panel(job, prefix)`` lays the panel out where it is called; ``wire_job(...)`` connects a Start
button: the form's values become the job's argv (``make_argv``; a bad value raises InputProblem and
nothing starts), a timer polls the job while it runs, and once it has ended ``render(result)`` turns
its report into the tab's tables and plots (``render(None)`` clears them when a new job starts). The
timer also fires once when the page loads, so a reload shows the last job's result again.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import gradio as gr

from webui.form_inputs import InputProblem
from webui.jobs.report_jobs import JobResult, ReportJob, job_result, start_job, stop_job
from webui.jobs.supervisor import RunAlreadyActive
from webui.plots import message_html

if TYPE_CHECKING:
    from webui.context import StudioContext

TICK_S = 1.0
Render = Callable[[JobResult | None], Sequence[Any]]


@dataclass
class SharedPanel:
    """One status line, progress bar, log and Stop for all the jobs of a tab (``tool_panel`` adds each job): they
    show the job started last, named by its title."""

    status: gr.HTML
    progress: gr.HTML
    log: gr.Textbox
    stop: gr.Button
    jobs: list[ReportJob] = field(default_factory=list)


@dataclass
class JobPanel:
    job: ReportJob
    message: gr.HTML  # why a Start was refused
    status: gr.HTML
    progress: gr.HTML
    log: gr.Textbox
    stop: gr.Button
    timer: gr.Timer
    shown: gr.State  # the run id whose result the page shows
    shared: SharedPanel | None = None  # the tab's one panel this job reports through (None: its own)
    title: str = ""  # the job's name on a shared panel ("Evaluate")

    @property
    def live(self) -> list[Any]:
        return [self.status, self.progress, self.log]


def job_panel(job: ReportJob, prefix: str) -> JobPanel:
    """The panel's components, laid out here (``prefix`` names their element ids: ``<prefix>-job-status``...)."""
    message = gr.HTML(elem_id=f"{prefix}-job-message")
    own = shared_job_panel(prefix)
    return JobPanel(job=job, message=message, status=own.status, progress=own.progress, log=own.log, stop=own.stop,
                    timer=gr.Timer(TICK_S, active=True), shown=gr.State(None))


def shared_job_panel(prefix: str) -> SharedPanel:
    """A tab's one job panel, laid out here (element ids ``<prefix>-job-status``, ``-job-stop``, ...)."""
    with gr.Row(equal_height=True):
        status = gr.HTML(elem_id=f"{prefix}-job-status", scale=5)
        stop = gr.Button("Stop", variant="stop", size="sm", scale=0, min_width=80, elem_id=f"{prefix}-job-stop")
    progress = gr.HTML(elem_id=f"{prefix}-job-progress")
    with gr.Accordion("Log", open=False):
        log = gr.Textbox(lines=8, max_lines=16, interactive=False, autoscroll=True, show_label=False,
                         elem_id=f"{prefix}-job-log")
    return SharedPanel(status=status, progress=progress, log=log, stop=stop)


def tool_panel(shared: SharedPanel, job: ReportJob, prefix: str, title: str) -> JobPanel:
    """A job that reports through the tab's shared panel; only its refusal line is laid out here."""
    shared.jobs.append(job)
    return JobPanel(job=job, message=gr.HTML(elem_id=f"{prefix}-job-message"), status=shared.status,
                    progress=shared.progress, log=shared.log, stop=shared.stop, timer=gr.Timer(TICK_S, active=True),
                    shown=gr.State(None), shared=shared, title=title)


def started_last(ctx: StudioContext, jobs: Sequence[ReportJob]) -> ReportJob | None:
    """The job of ``jobs`` that started last (None: none has run)."""
    started = [(status.started_at, index) for index, status in
               ((index, job.supervisor(ctx).poll()) for index, job in enumerate(jobs)) if status.started_at]
    return jobs[max(started)[1]] if started else None


def _titled(panel: JobPanel, status: str) -> str:
    return f"<b>{html.escape(panel.title)}</b> {status}" if panel.title and status else status


def job_turns(job: ReportJob) -> str:
    """The queue slot a job's Start and its timer's ticks share."""
    return f"job-turns:{job.name}"


def start_action(ctx: StudioContext, job: ReportJob, make_argv: Callable[..., list[str]],
                 *values: Any, make_env: Callable[..., dict[str, str] | None] | None = None
                 ) -> tuple[str, JobResult | None]:
    """Build the argv (and, with ``make_env``, the environment) from the form and start the job:
    ('' or the one-line reason nothing started, result)."""
    try:
        argv = make_argv(*values)
        return "", start_job(ctx, job, argv, env=make_env(*values) if make_env is not None else None)
    except (InputProblem, RunAlreadyActive, RuntimeError, OSError) as exc:
        text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return message_html(text), None


def result_message(result: JobResult | None, what: str) -> str:
    """The verdict line for a job without a usable report: '' while none ended, else the one-line reason."""
    if result is None:
        return ""
    return message_html(result.error or f"the {what} left no report")


def report_view(result: JobResult | None, render: Callable[[Any], str], no_report: str = "") -> str:
    """What a panel shows of a job's report: nothing before the job, ``render(report)`` of its JSON report, or a
    one-line message saying why there is none (or why the report lacks what ``render`` reads)."""
    if result is None:
        return ""
    try:
        return render(result.report_json())
    except (ValueError, KeyError, TypeError) as exc:
        return message_html(str(exc).splitlines()[0] if str(exc) else no_report)


def wire_job(ctx: StudioContext, panel: JobPanel, start: gr.Button, inputs: Sequence[Any],
             make_argv: Callable[..., list[str]], outputs: Sequence[Any], render: Render,
             preview: Callable[..., Sequence[Any]] | None = None,
             make_env: Callable[..., dict[str, str] | None] | None = None,
             render_inputs: Sequence[Any] = ()) -> None:
    """Start, Stop and the polling timer of one job; ``outputs`` get ``render(result)`` when it ends.

    While the job runs, ``outputs`` show ``preview(*values)`` (default: ``render(None)``, i.e. cleared).
    ``make_env(*values)``: the job's environment (default the studio's). ``render_inputs``: components whose
    values ``render`` gets after the result (``render(result, *values)``), e.g. the session's project, so a page
    that opens on a job of another project can leave its fields alone.
    """
    skip = gr.skip()
    blank = [skip] * len(outputs)

    def on_start(*values: Any) -> list[Any]:
        message, result = start_action(ctx, panel.job, make_argv, *values, make_env=make_env)
        if result is None:
            return [message, skip, skip, skip, skip, *blank]
        view = result.view
        shown = preview(*values) if preview is not None else render(None)
        return ["", _titled(panel, view.status), view.progress, view.log,
                gr.Timer(active=True), *shown]

    def on_tick(shown: str | None, *extra: Any) -> list[Any]:
        result = job_result(ctx, panel.job)
        view = result.view
        timer = gr.Timer(active=view.running)
        status = "" if result.state == "idle" else _titled(panel, view.status)  # a job never run says nothing
        live = [status, view.progress, view.log]
        if panel.shared is not None and started_last(ctx, panel.shared.jobs) is not panel.job:
            live = [skip, skip, skip]  # the shared panel shows the job started last, not this one
        if result.ended and result.run_id != shown:
            return [*live, timer, result.run_id, *render(result, *extra)]
        return [*live, timer, shown, *blank]

    def on_stop() -> list[Any]:
        if panel.shared is not None and not job_result(ctx, panel.job).view.running:
            return [skip, skip, skip, skip]  # the shared Stop stops whichever of the tab's jobs runs
        try:
            view = stop_job(ctx, panel.job).view
        except RuntimeError as exc:
            return [message_html(str(exc)), skip, skip, skip]
        return ["", view.status, view.progress, view.log]

    # Start and the timer's tick take turns (one queue slot per job): a tick that read the job before Start
    # launched it would otherwise answer after Start and switch the timer off, and the result never showed.
    turns = job_turns(panel.job)
    start.click(on_start, inputs=list(inputs), outputs=[panel.message, *panel.live, panel.timer, *outputs],
                concurrency_id=turns, concurrency_limit=1)
    panel.timer.tick(on_tick, inputs=[panel.shown, *render_inputs], outputs=[*panel.live, panel.timer, panel.shown, *outputs],
                     show_progress="hidden", concurrency_id=turns, concurrency_limit=1)
    panel.stop.click(on_stop, outputs=[panel.message, *panel.live], concurrency_limit=None)
