"""Starting a training run from the Training tab's form, and the command box that shows exactly what Start runs.

The run is a supervised subprocess (``webui.jobs.supervisor``) labelled ``TRAIN_LABEL``; a refused Start says why in
one line and leaves the badge of the run that goes on.
"""

from __future__ import annotations

import shlex
from typing import Any, NamedTuple

import gradio as gr

from data_tools.paths import PathError
from webui.context import StudioContext
from webui.jobs import launcher
from webui.jobs.run_view import POLL_S, error_html, status_html
from webui.jobs.supervisor import RunAlreadyActive
from webui.training import training_form as tf

TRAIN_LABEL = "train"


class Started(NamedTuple):
    """What Start sends to the page: the badge is replaced only by a run that really started."""

    status: Any  # the new run's status, or gr.skip() (a refused Start leaves the badge of the run that goes on)
    message: str  # '' or the one-line reason nothing started
    command: Any  # the argv that was started (or would have been), shell-quoted
    timer: Any
    preflight_report: Any  # cleared unless the report was made for exactly this command
    preflight_for: Any


def start_run(ctx: StudioContext, values: dict[str, Any] | None, preflight_for: str | None = None,
              form_error: str = "") -> Started:
    """Start the trainer for the form's values (read once: the command shown is the command started)."""
    skip = gr.skip()
    if values is None:
        return Started(skip, error_html(form_error), skip, skip, skip, skip)
    missing = tf.missing_required(values)
    if missing:
        return Started(skip, error_html(f"required: {', '.join(missing)}"), skip, skip, skip, skip)
    argv = tf.run_argv(values)
    command = shlex.join(argv)
    try:
        started = ctx.registry.get(values["output_dir"]).start(argv, cwd=ctx.repo_root, label=TRAIN_LABEL)
    except (RunAlreadyActive, RuntimeError, PathError) as exc:
        return Started(skip, error_html(str(exc)), command, skip, skip, skip)
    same_report = preflight_for == started.command
    return Started(status_html(started), "", started.command, gr.update(value=POLL_S),
                   skip if same_report else "", skip if same_report else None)


def command_preview(values: dict[str, Any]) -> str:
    """The command box: exactly what Start runs, shell-quoted (or the one line why it cannot run)."""
    try:
        return shlex.join(tf.run_argv(values))
    except launcher.LaunchError as exc:
        return f"error: {exc}"


def form_changed(values: dict[str, Any] | None, preflight_for: str | None, form_error: str = "") -> tuple[Any, ...]:
    """(command preview, pre-flight report, pre-flight-for): a report about another command is cleared."""
    command = command_preview(values) if values is not None else f"error: {form_error}"
    if preflight_for is not None and preflight_for != command:
        return command, "", None
    return command, gr.skip(), gr.skip()
