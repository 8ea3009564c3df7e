"""Training tab: the form from the trainer's options, pre-flight, the exact command, and the live run.

The run itself is a supervised subprocess (``python -m trainer.train ...``, under torchrun when the form
asks for more than one process); this tab starts it, stops it and shows it. What each browser session has
seen of the log and metrics lives in a per-session ``RunView`` (byte offsets), so a reload shows the run
again from its console.log and metrics.jsonl. Under torchrun the log box shows rank 0 (console.log) unless
the reader picks another rank's file.
"""

from __future__ import annotations

import html
import shlex
import socket
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import gradio as gr

from data_tools.paths import PathError, expand_path
from webui import launcher, rank_logs, samples_view
from webui import training_form as tf
from webui.context import StudioContext
from webui.logtail import LogTail, file_size
from webui.metrics_view import MetricsReader, progress_html
from webui.model_version import MODEL_NAMES, config_version, version_badge_html
from webui.preflight_view import preflight_html, run_preflight
from webui.run_record import CONSOLE_LOG
from webui.supervisor import RunAlreadyActive, RunStatus

TRAIN_LABEL = "train"
TENSORBOARD_JOB = "tensorboard"
POLL_S = 0.5  # the live log's refresh: p95 latency from trainer to browser stays under 1 s (bench/log_latency.py)
IDLE_POLL_S = 2.0  # while no run is going: notices a run started elsewhere, costs little
PLOT_EVERY_S = 5.0
STOP_GRACE_S = launcher.STOP_GRACE_S  # torchrun's --shutdown-timeout too: it never cuts a save shorter
# Keep the log scrolled to its newest line unless the reader scrolled up (then leave it where it is).
FOLLOW_LOG_JS = """() => {
  const box = document.querySelector('#training-log textarea');
  if (!box) return;
  if (!box.dataset.follow) {
    box.dataset.follow = '1';
    box.addEventListener('scroll', () => {
      box.dataset.follow = box.scrollTop + box.clientHeight >= box.scrollHeight - 40 ? '1' : '0';
    });
  }
  if (box.dataset.follow === '1') box.scrollTop = box.scrollHeight;
}"""
_STATE_COLORS = {"running": "#2e86de", "finished": "#1f8f4e", "stopped": "#c98a00", "failed": "#c0392b",
                 "killed": "#c0392b", "idle": "#5b6b7b"}


# -- what the form starts with ---------------------------------------------------------------------------
def workspace_files(ctx: StudioContext, output_dir: Path | None = None) -> tf.WorkspaceFiles:
    paths = ctx.paths
    return tf.WorkspaceFiles(train_manifest=paths.train_manifest, val_manifest=paths.val_manifest,
                             tokenizer=paths.tokenizer, config=paths.config,
                             base_checkpoint=paths.base_checkpoint,
                             output_dir=output_dir or paths.default_output_dir,
                             vocoder=paths.vocoder if paths.vocoder.is_file() else None)


def latest_training_run(ctx: StudioContext) -> RunStatus | None:
    """The running training run of this workspace, else the most recently started one."""
    runs = [s for s in ctx.registry.statuses() if s.label == TRAIN_LABEL]
    runs.sort(key=lambda s: (s.running, float(s.record.get("started_at_epoch") or 0.0)))
    return runs[-1] if runs else None


def initial_values(ctx: StudioContext) -> dict[str, Any]:
    """The last training run's options (so a reload or restart shows it again), else the demo preset."""
    run = latest_training_run(ctx)
    if run is not None:
        values = tf.values_from_trainer_argv(run.argv)
        if values is not None:
            return values
    return tf.apply_preset(tf.DEMO_PRESET, {}, workspace_files(ctx))


def preset_files(ctx: StudioContext, name: str) -> tf.WorkspaceFiles:
    """The files a preset fills in: the IndexTTS2 demo's for its preset, else the workspace's demo files."""
    return tf.demo_v2_files(ctx.workspace) if name == tf.DEMO_V2_PRESET else workspace_files(ctx)


# -- checkpoints for the resume dropdown -------------------------------------------------------------------
# Metadata only (no tensor data: milliseconds for a 7 GB file), cached per file version; the pre-flight and
# the trainer verify the checkpoint they resume from.
_labels: dict[tuple[int, int, int, int], tuple[int | None, str]] = {}
_labels_lock = threading.Lock()
_LABELS_MAX = 512


def _checkpoint_label(path: Path) -> tuple[int | None, str]:
    """(step, label) of one checkpoint file from its metadata (cached per file version)."""
    from trainer.checkpoints import CheckpointError
    from trainer.checkpoints.metadata import read_metadata
    from trainer.checkpoints.store import step_of

    stat = path.stat()
    key = (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)
    with _labels_lock:
        if key in _labels:
            return _labels[key]
        try:
            meta = read_metadata(path)
            step = meta.step if meta.step is not None else step_of(path)
            loss = f"{meta.last_val_loss:.4f}" if meta.last_val_loss is not None else "-"
            model = MODEL_NAMES.get(str(meta.model_version), "model ?")
            kind = "" if meta.kind == "studio" else f" · {meta.kind} (repair it in the Checkpoints tab)"
            entry = (step, f"{path.name} · step {step if step is not None else '?'} · val loss {loss} · {model}{kind}")
        except CheckpointError as exc:
            reason = str(exc).split(" is not a loadable checkpoint: ", 1)[-1]
            entry = (step_of(path), f"{path.name} · unreadable: {reason}")
        if len(_labels) >= _LABELS_MAX:
            _labels.pop(next(iter(_labels)))
        _labels[key] = entry
        return entry


def checkpoint_choices(output_dir: str) -> list[tuple[str, str]]:
    """(label, value) pairs: "latest (auto)" first, then the output dir's checkpoints, newest step first."""
    choices = [(tf.RESUME_AUTO_LABEL, tf.RESUME_AUTO)]
    try:
        directory = expand_path(output_dir.strip(), "--output-dir") if output_dir.strip() else None
    except PathError:
        return choices
    if directory is None or not directory.is_dir():
        return choices
    entries: list[tuple[int, str, str]] = []
    for path in sorted(directory.glob("*.pth")):
        try:
            step, label = _checkpoint_label(path)
        except OSError:
            continue  # rotated away meanwhile
        entries.append((step if step is not None else -1, label, str(path)))
    entries.sort(key=lambda entry: -entry[0])
    return choices + [(label, value) for _, label, value in entries]


# -- the per-session view of a run ---------------------------------------------------------------------------
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


def _frames(view: RunView) -> tuple[Any, Any, Any]:
    return tuple(_plot_update(f) for f in (view.metrics.loss_frame(), view.metrics.top1_frame(),
                                           view.metrics.lr_frame()))


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
    plots = (skip, skip, skip)
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
        progress=(progress_html(view.metrics.last_train, status.running, view.metrics.eta_s)
                  if (fresh or metrics_changed or ended_now) else skip),
        log=log_text(view) if (fresh or log_changed) else skip,
        loss=plots[0], top1=plots[1], lr=plots[2],
        resume_choices=gr.update(choices=checkpoint_choices(output_dir)) if (fresh or ended_now) else skip,
        timer=gr.update(value=interval) if interval != view.interval else skip,
        resume=False if (ended_now and status.state == "finished" and resume_ticked) else skip,
        preflight_report="" if stale_report else skip,
        preflight_for=None if stale_report else skip,
        log_source=selector,
    )
    view.last_status, view.last_state, view.interval = status_text, status.state, interval
    return tick


# -- start ---------------------------------------------------------------------------------------------------
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


# -- TensorBoard ---------------------------------------------------------------------------------------------
def _free_port(host: str, start: int = 6006, tries: int = 50) -> int:
    for port in range(start, start + tries):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            try:
                probe.bind((host if host not in ("0.0.0.0", "") else "127.0.0.1", port))
                return port
            except OSError:
                continue
    raise RuntimeError(f"no free port for TensorBoard in {start}-{start + tries - 1}")


def _loopback(host: str) -> bool:
    host = host.strip("[]").lower()
    return host in ("localhost", "") or host.startswith("127.") or host == "::1"


def tensorboard_html(bind_host: str, port: str, page_host: str) -> str:
    """The link to TensorBoard and, where the browser is elsewhere, how to reach a loopback-only one."""
    if _loopback(bind_host):
        url = f"http://127.0.0.1:{port}/"
        link = f'<a id="train-tensorboard-url" href="{html.escape(url)}" target="_blank">TensorBoard: {html.escape(url)}</a>'
        if _loopback(page_host):
            return link + " <small>(listens on this machine only)</small>"
        machine = page_host if page_host and not page_host.endswith("gradio.live") else "THE-STUDIO-MACHINE"
        hint = f"ssh -N -L {port}:127.0.0.1:{port} USER@{machine}"
        return (link + ' <div id="train-tensorboard-hint"><small>TensorBoard has no login, so it listens on the '
                "studio's machine only (app.py --tensorboard-host changes that). From your computer, open a tunnel "
                f"and then the link: <code>{html.escape(hint)}</code></small></div>")
    shown = page_host if bind_host in ("0.0.0.0", "::") and page_host else bind_host
    url = f"http://{shown}:{port}/"
    return (f'<a id="train-tensorboard-url" href="{html.escape(url)}" target="_blank">TensorBoard: {html.escape(url)}</a>'
            f" <small>(listens on {html.escape(bind_host)} without a login, as app.py --tensorboard-host asked)</small>")


def start_tensorboard(ctx: StudioContext, output_dir: str, page_host: str = "") -> str:
    if not output_dir.strip():
        return '<span class="status-bad">set the output dir first</span>'
    try:
        logdir = expand_path(output_dir.strip(), "--output-dir")
    except PathError as exc:
        return f'<span class="status-bad">{html.escape(str(exc))}</span>'
    supervisor = ctx.registry.get(ctx.job_dir(TENSORBOARD_JOB))
    status = supervisor.poll()
    argv = list(status.argv)
    if status.running and str(logdir) in argv and ctx.tensorboard_host in argv:
        port = argv[argv.index("--port") + 1]
    else:
        if status.running:
            supervisor.stop(grace_s=5, term_s=5)
        port = str(_free_port(ctx.tensorboard_host))
        argv = [sys.executable, "-m", "tensorboard.main", "--logdir", str(logdir), "--port", port,
                "--host", ctx.tensorboard_host]
        try:
            supervisor.start(argv, cwd=ctx.repo_root, label=TENSORBOARD_JOB)
        except (RunAlreadyActive, RuntimeError) as exc:
            return f'<span class="status-bad">{html.escape(str(exc))}</span>'
    return tensorboard_html(ctx.tensorboard_host, port, page_host)


def page_host(request: gr.Request | None) -> str:
    """The host name the browser used to reach the studio ('' when unknown)."""
    if request is None:
        return ""
    host = request.headers.get("host") or ""
    return host.rsplit(":", 1)[0] if not host.endswith("]") else host


# -- the tab -------------------------------------------------------------------------------------------------
VERSIONED = ("train_manifest", "val_manifest", *tf.SAMPLE_OPTIONS)  # fields whose label/state follow the model


def _component(option: tf.Option, value: Any, version: str | None) -> gr.components.Component:
    common = {"label": tf.field_label(option, version), "info": tf.field_info(option, version),
              "elem_id": tf.elem_id(option), "interactive": tf.applies(option, version)}
    if option.repeatable:
        return gr.Textbox(value=value, lines=2, placeholder="one path per line", **common)
    if option.kind == "bool":
        return gr.Checkbox(value=value, **common)
    if option.kind == "int":
        return gr.Number(value=value, precision=0, minimum=option.minimum, **common)
    if option.kind == "float":
        return gr.Number(value=value, minimum=option.minimum, step=1e-9, **common)
    if option.kind == "choice":
        return gr.Dropdown(choices=list(option.choices or ()), value=value, **common)
    return gr.Textbox(value=value, **common)


def version_view(config: str) -> list[Any]:
    """The model badge and the version-dependent fields' updates (VERSIONED order) for the typed config."""
    found = config_version(config)
    updates = []
    for name in VERSIONED:
        option = tf.trainer_options.option_by_name(name)
        updates.append(gr.update(label=tf.field_label(option, found.version),
                                 info=tf.field_info(option, found.version),
                                 interactive=tf.applies(option, found.version)))
    return [version_badge_html(found), *updates]


def _form_updates(values: dict[str, Any]) -> list[Any]:
    fields, resume_ticked, resume_from = tf.form_from_values(values)
    choices = checkpoint_choices(str(values.get("output_dir") or ""))
    if resume_from not in [value for _, value in choices]:
        choices.append((resume_from, resume_from))
    return [*fields, resume_ticked, gr.update(choices=choices, value=resume_from),
            command_preview(values)]


@dataclass
class FormColumn:
    preset: gr.Dropdown
    apply_preset: gr.Button
    save_yaml: gr.Button
    yaml_file: gr.File
    load_yaml: gr.File
    message: gr.Markdown
    version: gr.HTML  # the model badge beside --config
    fields: dict[str, Any]  # option name -> component


@dataclass
class RunColumn:
    resume: gr.Checkbox
    resume_from: gr.Dropdown
    refresh: gr.Button
    command: gr.Textbox
    preflight: gr.Button
    start: gr.Button
    stop: gr.Button
    force_stop: gr.Button
    start_message: gr.HTML
    preflight_report: gr.HTML
    status: gr.HTML
    progress: gr.HTML
    log: gr.Textbox
    tensorboard: gr.Button
    tensorboard_link: gr.HTML
    log_source: gr.Dropdown


def _form_column(values: dict[str, Any]) -> FormColumn:
    fields_init, _, _ = tf.form_from_values(values)
    version = config_version(str(values.get("config") or ""))
    with gr.Row(equal_height=True):
        preset = gr.Dropdown(list(tf.PRESETS), value=tf.DEMO_PRESET, label="Preset", elem_id="train-preset", scale=3)
        apply_preset = gr.Button("Apply preset", elem_id="train-apply-preset", scale=1)
    with gr.Accordion("Save or load the form (YAML)", open=False, elem_id="train-yaml-section"):
        save_yaml = gr.Button("Save form as YAML", elem_id="train-save-yaml")
        yaml_file = gr.File(label="Saved form", interactive=False, elem_id="train-yaml-file", height=90)
        load_yaml = gr.File(label="Load form from YAML (a saved form or a run's train_config.yaml)",
                            file_types=[".yaml", ".yml"], type="filepath", elem_id="train-load-yaml", height=90)
    message = gr.Markdown(elem_id="train-form-message")
    fields: dict[str, Any] = {}
    badge = None
    for group in tf.GROUPS:
        with gr.Accordion(group, open=group == tf.GROUPS[0], elem_id=f"train-group-{group.split()[0].lower()}"):
            for option, value in zip(tf.FORM_OPTIONS, fields_init):
                if option.group == group:
                    fields[option.name] = _component(option, value, version.version)
                    if option.name == "config":
                        badge = gr.HTML(version_badge_html(version), elem_id="train-model-version")
    with gr.Accordion("Processes and nodes (torchrun)", open=False, elem_id="train-group-processes"):
        for option, value in zip(tf.LAUNCH_OPTIONS, fields_init[len(tf.FORM_OPTIONS):]):
            fields[option.name] = _component(option, value, None)
    assert badge is not None
    return FormColumn(preset, apply_preset, save_yaml, yaml_file, load_yaml, message, badge, fields)


def _run_column(values: dict[str, Any]) -> RunColumn:
    _, resume_init, resume_from_init = tf.form_from_values(values)
    with gr.Row(equal_height=True):
        resume = gr.Checkbox(value=resume_init, label="Resume", elem_id="train-resume", scale=1,
                             info="continue this output dir's run (optimizer, schedule, data position)")
        resume_from = gr.Dropdown(choices=checkpoint_choices(str(values.get("output_dir") or "")),
                                  value=resume_from_init, label="Resume from", allow_custom_value=True,
                                  elem_id="train-resume-from", scale=3)
        refresh = gr.Button("Refresh", elem_id="train-refresh-checkpoints", scale=0, min_width=90)
    command = gr.Textbox(value=command_preview(values), label="Command (exactly what Start runs)",
                         lines=3, interactive=False, buttons=["copy"], elem_id="train-command")
    with gr.Row():
        preflight = gr.Button("Pre-flight check", elem_id="train-preflight")
        start = gr.Button("Start", variant="primary", elem_id="train-start")
        stop = gr.Button("Stop (save, then exit)", elem_id="train-stop")
        force_stop = gr.Button("Force stop", variant="stop", elem_id="train-force-stop")
    start_message = gr.HTML(elem_id="train-start-message")
    preflight_report = gr.HTML(elem_id="train-preflight-report")
    status = gr.HTML(elem_id="train-status")
    progress = gr.HTML(elem_id="train-progress")
    log_source = gr.Dropdown([("console.log", rank_logs.CONSOLE)], value=rank_logs.CONSOLE, label="Log of",
                             visible=False, elem_id="train-log-source",
                             info="torchrun runs: rank 0's console (every rank's lines, prefixed) or one rank's "
                                  "own stdout / stderr")
    log = gr.Textbox(label="Log", lines=20, max_lines=20, interactive=False, autoscroll=True, elem_id="training-log")
    with gr.Row(equal_height=True):
        tensorboard = gr.Button("Start TensorBoard", elem_id="train-tensorboard", scale=1)
        tensorboard_link = gr.HTML(elem_id="train-tensorboard-link")
    return RunColumn(resume, resume_from, refresh, command, preflight, start, stop, force_stop, start_message,
                     preflight_report, status, progress, log, tensorboard, tensorboard_link, log_source)


class FormIO:
    """The form's components as one list of inputs/outputs, and reading values from what they hold."""

    def __init__(self, form: FormColumn, run: RunColumn) -> None:
        self.fields = [form.fields[option.name] for option in tf.FIELD_OPTIONS]
        self.inputs = [*self.fields, run.resume, run.resume_from]
        self.outputs = [*self.fields, run.resume, run.resume_from, run.command]
        self.versioned = [form.fields[name] for name in VERSIONED]

    def values(self, *raw: Any) -> dict[str, Any]:
        return tf.values_from_form(list(raw[: len(self.fields)]), bool(raw[-2]), raw[-1])

    def read(self, *raw: Any) -> tuple[dict[str, Any] | None, str]:
        try:
            return self.values(*raw), ""
        except tf.FormError as exc:
            return None, str(exc)


def _wire_yaml(form: FormColumn, io: FormIO) -> None:
    def on_save_yaml(*raw: Any) -> tuple[Any, str]:
        try:
            text = tf.form_yaml(io.values(*raw))
        except tf.FormError as exc:
            return None, f"error: {exc}"
        path = Path(tempfile.mkdtemp(prefix="studio-form-")) / "training_form.yaml"
        path.write_text(text, encoding="utf-8")
        return str(path), "form saved: download it above"

    def on_load_yaml(path: str | None, *raw: Any) -> list[Any]:
        if not path:
            return [gr.skip()] * len(io.outputs) + [""]
        current, _ = io.read(*raw)
        try:
            loaded, notes = tf.values_from_yaml(Path(path).read_text(encoding="utf-8"), base=current)
        except (OSError, UnicodeDecodeError, tf.FormError) as exc:
            return [gr.skip()] * len(io.outputs) + [f"error: cannot load the form: {exc}"]
        return [*_form_updates(loaded), "form loaded" + (f" ({'; '.join(notes)})" if notes else "")]

    form.save_yaml.click(on_save_yaml, inputs=io.inputs, outputs=[form.yaml_file, form.message])
    form.load_yaml.upload(on_load_yaml, inputs=[form.load_yaml, *io.inputs], outputs=[*io.outputs, form.message])


def _wire_form(ctx: StudioContext, form: FormColumn, run: RunColumn, io: FormIO, preflight_for: gr.State) -> None:
    output_dir, config = form.fields["output_dir"], form.fields["config"]

    def on_form_change(*raw: Any) -> tuple[Any, ...]:
        values, problem = io.read(*raw[:-1])
        return form_changed(values, raw[-1], problem)

    # .change on resume too: a finished run unticks it from the timer, and the command must follow.
    # Queued, one at a time, the latest last: unqueued events run in parallel and an older preview could land
    # after a newer one (seen under load: the box lagged two quick edits).
    gr.on([*(c.input for c in io.inputs if c is not run.resume), run.resume.change], on_form_change,
          inputs=[*io.inputs, preflight_for], outputs=[run.command, run.preflight_report, preflight_for],
          show_progress="hidden", trigger_mode="always_last", concurrency_limit=1)
    # The config decides the model version: its badge, the manifests' labels, the options that apply.
    config.change(version_view, inputs=config, outputs=[form.version, *io.versioned], show_progress="hidden")

    def resume_choices(out: str) -> Any:
        return gr.update(choices=checkpoint_choices(out or ""))

    run.resume.input(resume_choices, inputs=output_dir, outputs=run.resume_from, show_progress="hidden")
    run.refresh.click(resume_choices, inputs=output_dir, outputs=run.resume_from)

    def on_apply_preset(name: str, *raw: Any) -> list[Any]:
        current, _ = io.read(*raw)
        values = tf.apply_preset(name, current or {}, preset_files(ctx, name))
        return [*_form_updates(values), f"preset **{name}** applied"]

    form.apply_preset.click(on_apply_preset, inputs=[form.preset, *io.inputs], outputs=[*io.outputs, form.message])
    _wire_yaml(form, io)


def _wire_actions(ctx: StudioContext, run: RunColumn, io: FormIO, output_dir: Any, preflight_for: gr.State,
                  timer: gr.Timer) -> None:
    def on_preflight(*raw: Any) -> tuple[Any, ...]:
        values, problem = io.read(*raw)
        if values is None:
            return error_html(problem), gr.skip(), None
        missing = tf.missing_required(values)
        if missing:
            return error_html(f"required: {', '.join(missing)}"), gr.skip(), None
        shown = command_preview(values)
        return preflight_html(run_preflight(values)), shown, shown

    def on_start(*raw: Any) -> Started:
        values, problem = io.read(*raw[:-1])
        return start_run(ctx, values, raw[-1], problem)

    def on_stop(out: str, force: bool) -> tuple[Any, str]:
        if not (out or "").strip():
            return gr.skip(), ""
        try:
            supervisor = ctx.registry.get(out.strip())
            final = supervisor.force_stop() if force else supervisor.stop(grace_s=STOP_GRACE_S)
        except (RuntimeError, PathError) as exc:
            return gr.skip(), error_html(str(exc))
        return status_html(final), ""

    def on_tensorboard(out: str, request: gr.Request) -> str:
        return start_tensorboard(ctx, out or "", page_host(request))

    run.preflight.click(on_preflight, inputs=io.inputs, outputs=[run.preflight_report, run.command, preflight_for])
    run.start.click(on_start, inputs=[*io.inputs, preflight_for],
                    outputs=[run.status, run.start_message, run.command, timer, run.preflight_report, preflight_for])
    stopped = [run.status, run.start_message]
    run.stop.click(lambda out: on_stop(out, False), inputs=output_dir, outputs=stopped, concurrency_limit=None)
    run.force_stop.click(lambda out: on_stop(out, True), inputs=output_dir, outputs=stopped, concurrency_limit=None)
    run.tensorboard.click(on_tensorboard, inputs=output_dir, outputs=run.tensorboard_link)


def build(ctx: StudioContext) -> None:
    values = initial_values(ctx)
    with gr.Row():
        with gr.Column(scale=2, min_width=380):
            form = _form_column(values)
        with gr.Column(scale=3, min_width=480):
            run = _run_column(values)
    with gr.Row():
        plot_args = {"x": "step", "y": "value", "color": "series", "height": 260}
        loss_plot = gr.LinePlot(None, title="loss", elem_id="train-loss-plot", **plot_args)
        top1_plot = gr.LinePlot(None, title="mel top-1 accuracy", elem_id="train-top1-plot", **plot_args)
        lr_plot = gr.LinePlot(None, title="learning rate", elem_id="train-lr-plot", **plot_args)
    samples = samples_view.build("train-samples")  # the model speaks at every save: players by step
    io = FormIO(form, run)
    output_dir = form.fields["output_dir"]
    view = gr.State(None, time_to_live=600)  # refreshed by every tick; a closed page frees it in 10 min
    preflight_for = gr.State(None)  # the command the pre-flight report on the page was made for
    timer = gr.Timer(POLL_S)
    _wire_form(ctx, form, run, io, preflight_for)
    _wire_actions(ctx, run, io, output_dir, preflight_for, timer)
    samples.wire(output_dir, timer)

    tick_outputs = [view, run.status, run.progress, run.log, loss_plot, top1_plot, lr_plot, run.resume_from, timer,
                    run.resume, run.preflight_report, preflight_for, run.log_source]
    timer.tick(lambda v, out, ticked, source: poll_view(ctx, v, out, ticked, source),
               inputs=[view, output_dir, run.resume, run.log_source],
               outputs=tick_outputs, show_progress="hidden", queue=False, trigger_mode="always_last").then(
        None, js=FOLLOW_LOG_JS)

    def on_load() -> list[Any]:
        # The last (or running) training run's options, so a reload or a restarted UI shows it again.
        return [*_form_updates(initial_values(ctx)), None]

    gr.on(triggers=None, fn=on_load, outputs=[*io.outputs, view], show_progress="hidden")
