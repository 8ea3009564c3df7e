"""Heavy tab actions as supervised jobs that end in a report file (no Gradio here).

A data check over a million-line manifest or the verification of a 7 GB checkpoint must never block
the page. Each such action is a ``ReportJob``: its CLI runs under the studio's supervisor in
``<workspace>/jobs/<name>/`` (run.json, console.log, progress from the log's tqdm bar, stop), and
writes its result to ``<workspace>/jobs/<name>/report.json`` (its own ``--json PATH``, or its stdout
through ``webui.jobs.stdout_report``). The tab reads the report back when the job has ended and shows it
as before. A reload or a restarted UI finds the job, running or ended, in the same folder.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from webui.jobs.job_view import JobView, job_view
from webui.jobs.outcome import last_error_line
from webui.jobs.run_record import FINAL_STATES
from webui.jobs.supervisor import RunAlreadyActive

if TYPE_CHECKING:
    from webui.context import StudioContext
    from webui.jobs.supervisor import RunSupervisor

REPORT_NAME = "report.json"
LOG_TAIL_BYTES = 16 * 1024
STOP_GRACE_S = 10.0


@dataclass(frozen=True)
class ReportJob:
    """One kind of job: its folder name under jobs/, and which exit codes still mean "here is the report"."""

    name: str
    report_exits: tuple[int, ...] = (0,)  # e.g. the data checker exits 1 when it found problems
    writes_report: bool = True  # False: the job's result is its output files (exit 0 says they are there)

    def folder(self, ctx: StudioContext) -> Path:
        return ctx.job_dir(self.name)

    def report_path(self, ctx: StudioContext) -> Path:
        return self.folder(ctx) / REPORT_NAME

    def supervisor(self, ctx: StudioContext) -> RunSupervisor:
        return ctx.supervisor(self.folder(ctx))


def stdout_report_argv(python: str, report: Path, module: str, *args: str) -> list[str]:
    """``python -m webui.jobs.stdout_report --out REPORT -- MODULE ARGS...`` (for CLIs that print their report)."""
    return [python, "-m", "webui.jobs.stdout_report", "--out", str(report), "--", module, *args]


@dataclass(frozen=True)
class _Shown:
    """What job_view reads from a status (state, summary, running), adjusted for report exits."""

    state: str
    summary: str
    running: bool


@dataclass(frozen=True)
class JobResult:
    """A job as it stands: what its panel shows, and, once it has ended, its report or why there is none."""

    view: JobView
    run_id: str | None
    state: str  # idle | running | finished | failed | stopped | killed
    argv: tuple[str, ...]
    exit_code: int | None
    report_text: str | None  # the report's text, when the job ended with one
    error: str  # one line: why an ended job left no usable report ('' otherwise)

    @property
    def ended(self) -> bool:
        return self.state in FINAL_STATES

    def report_json(self) -> Any:
        """The report parsed as JSON (raises ValueError with a one-line reason)."""
        if self.report_text is None:
            raise ValueError(self.error or "the job left no report")
        try:
            return json.loads(self.report_text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"the job's report is not valid JSON ({exc.msg} at line {exc.lineno})") from None


def _why_no_report(state: str, exit_code: int | None, tail: str, summary: str, stop_requested: bool) -> str:
    if state == "stopped" or stop_requested:
        return "stopped before it finished"
    quoted = last_error_line(tail)
    if quoted:
        return quoted.removeprefix("error:").removeprefix("ERROR:").strip() or quoted
    return summary if exit_code is None else f"{summary}; see the log"


def job_result(ctx: StudioContext, job: ReportJob) -> JobResult:
    """Poll the job (cheap: run.json, the log tail and, after the end, the report file)."""
    supervisor = job.supervisor(ctx)
    status = supervisor.poll()
    tail = supervisor.log_tail(LOG_TAIL_BYTES)
    report_text, error = None, ""
    shown = _Shown(status.state, status.summary, status.running)
    if status.state in FINAL_STATES:
        report = job.report_path(ctx)
        if not job.writes_report and status.exit_code == 0:
            pass
        elif status.exit_code in job.report_exits and report.is_file():
            try:
                report_text = report.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                error = f"cannot read the report {report}: {exc}"
            if report_text is not None and not report_text.strip():  # a refusal printed its error line only
                report_text = None
                error = _why_no_report(status.state, status.exit_code, tail, status.summary, status.stop_requested)
        else:
            error = _why_no_report(status.state, status.exit_code, tail, status.summary, status.stop_requested)
        if report_text is not None and status.exit_code != 0:
            shown = _Shown("finished", f"finished (exit {status.exit_code}: see the result)", False)
    return JobResult(view=job_view(shown, tail), run_id=status.run_id, state=status.state, argv=status.argv,
                     exit_code=status.exit_code, report_text=report_text, error=error)


def start_job(ctx: StudioContext, job: ReportJob, argv: list[str], env: dict[str, str] | None = None) -> JobResult:
    """Start ``argv`` as this job (its previous report removed first); raises RunAlreadyActive if it runs.

    ``env``: the job's whole environment (default the studio's), e.g. to hand it a secret that must not be in
    its argv (argv is recorded in run.json and shown in the System tab)."""
    supervisor = job.supervisor(ctx)
    current = supervisor.poll()
    if current.running:
        raise RunAlreadyActive(supervisor.output_dir, current.pid)
    job.report_path(ctx).unlink(missing_ok=True)
    ctx.run_background(job.name, argv, env=env)
    return job_result(ctx, job)


def stop_job(ctx: StudioContext, job: ReportJob) -> JobResult:
    """Stop the job (SIGINT, then escalating); the tools write nothing half-done."""
    job.supervisor(ctx).stop(grace_s=STOP_GRACE_S, term_s=5.0, kill_s=5.0)
    return job_result(ctx, job)
