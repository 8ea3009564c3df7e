"""Training tab: the form from the trainer's options, pre-flight, the exact command, and the live run.

The run itself is a supervised subprocess (``python -m trainer.train ...``, under torchrun when the form
asks for more than one process); this tab starts it, stops it and lays out and wires what shows it: the
per-session view of the run is ``webui.jobs.run_view``, the resume dropdown's labels ``webui.training.checkpoint_labels``,
TensorBoard ``webui.training.tensorboard``, the form's first values ``webui.training.form_values``, Start and the
command box ``webui.training.run_start``.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gradio as gr

from data_tools.paths import PathError
from webui.context import StudioContext
from webui.jobs import launcher, rank_logs, watch_panel
from webui.jobs.run_view import POLL_S, error_html, poll_view, status_html
from webui.model_version import config_version, version_badge_html
from webui.project import follow
from webui.training import field_marks as fm
from webui.training import mark_view, samples_view
from webui.training import training_form as tf
from webui.training.checkpoint_labels import checkpoint_choices
from webui.training.first_view import SUMMARY_ROWS, data_summary_html
from webui.training.form_io import FormIO, form_updates
from webui.training.form_values import initial_form, preset_values, project_refill
from webui.training.preflight_view import preflight_html, run_preflight
from webui.training.run_start import Started, command_preview, form_changed, start_run
from webui.training.tensorboard import page_host, start_tensorboard

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


# -- the tab -------------------------------------------------------------------------------------------------
# Fields whose label and presence follow the model: an option that does nothing for the model's generation is
# hidden, not shown greyed out (the form shows only what applies; the registry entry says what that is).
VERSIONED = ("train_manifest", "val_manifest", *tf.SAMPLE_OPTIONS, *tf.GENERATION_OPTIONS)
MARKS_TURN = "train-field-marks"  # the events that write the fields' small text, one at a time


def _component(option: tf.Option, value: Any, version: str | None,
               mark: str | None = None) -> gr.components.Component:
    applies = tf.applies(option, version)
    common = {"label": tf.field_label(option, version), "info": mark_view.marked_info(option, version, mark),
              "elem_id": tf.elem_id(option), "interactive": applies, "visible": applies}
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


def version_view(config: str, shown: dict[str, Any] | None = None) -> list[Any]:
    """The model badge and the version-dependent fields' updates (VERSIONED order) for the typed config; ``shown``:
    the marks on the page (``mark_view``), kept in the fields' small text."""
    found = config_version(config)
    marks = (shown or {}).get(mark_view.SHOWN_KEY, {})
    updates = []
    for name in VERSIONED:
        option = tf.trainer_options.option_by_name(name)
        applies = tf.applies(option, found.version)
        updates.append(gr.update(label=tf.field_label(option, found.version), interactive=applies, visible=applies,
                                 info=mark_view.marked_info(option, found.version, marks.get(name))))
    return [version_badge_html(found), *updates]


@dataclass
class FormColumn:
    preset: gr.Dropdown
    apply_preset: gr.Button
    save_yaml: gr.Button
    yaml_file: gr.File
    load_yaml: gr.File
    message: gr.Markdown
    version: gr.HTML  # the model badge, in the first view
    fields: dict[str, Any]  # option name -> component
    data_summary: gr.HTML  # the first view's read-only data and model
    change_data: gr.Button  # opens the data and model section
    sections: dict[str, gr.Accordion]  # field_marks.SECTIONS -> its accordion
    marks: gr.State  # the changed fields' marks the page shows (mark_view)
    baseline: gr.State  # the preset the form was last filled from: what the marks compare with


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


def _form_column(values: dict[str, Any], preset_name: str) -> FormColumn:
    fields_init, _, _ = tf.form_from_values(values)
    version = config_version(str(values.get("config") or ""))
    shown = mark_view.initial_view(values, preset_name)
    marks, counts = shown[mark_view.SHOWN_KEY], shown[mark_view.COUNTS_KEY]
    with gr.Row(equal_height=True):
        preset = gr.Dropdown(list(tf.preset_names()), value=preset_name, label="Preset", elem_id="train-preset", scale=3)
        apply_preset = gr.Button("Apply preset", elem_id="train-apply-preset", scale=1)
    with gr.Accordion("Save or load the form (YAML)", open=False, elem_id="train-yaml-section"):
        save_yaml = gr.Button("Save form as YAML", elem_id="train-save-yaml")
        yaml_file = gr.File(label="Saved form", interactive=False, elem_id="train-yaml-file", height=90)
        load_yaml = gr.File(label="Load form from YAML (a saved form or a run's train_config.yaml)",
                            file_types=[".yaml", ".yml"], type="filepath", elem_id="train-load-yaml", height=90)
    message = gr.Markdown(elem_id="train-form-message")
    fields: dict[str, Any] = {}
    initial = dict(zip((option.name for option in tf.FORM_OPTIONS), fields_init))
    with gr.Group(elem_id="train-first-view"):
        summary = gr.HTML(data_summary_html([initial[name] for name, _ in SUMMARY_ROWS]),
                          elem_id="train-data-summary")
        badge = gr.HTML(version_badge_html(version), elem_id="train-model-version")
        change = gr.Button("Change the data and model", size="sm", elem_id="train-change-data")
        for name in tf.FIRST_VIEW:
            option = tf.trainer_options.option_by_name(name)
            fields[name] = _component(option, initial[name], version.version, marks.get(name))
    sections = {}
    for section in fm.SECTIONS:  # a section holding a changed field opens, its title counts them
        with gr.Accordion(fm.section_title(section, counts[section]), open=counts[section] > 0,
                          elem_id=f"train-group-{section.split()[0].lower()}") as sections[section]:
            for option, value in zip(tf.FIELD_OPTIONS, fields_init):
                if fm.section_of(option.name) == section:
                    fields[option.name] = _component(option, value, version.version, marks.get(option.name))
    return FormColumn(preset, apply_preset, save_yaml, yaml_file, load_yaml, message, badge, fields, summary, change,
                      sections, gr.State(shown), gr.State(preset_name))


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


def _wire_yaml(form: FormColumn, io: FormIO) -> None:
    def on_save_yaml(*raw: Any) -> tuple[Any, str]:
        try:
            text = tf.form_yaml(io.values(*raw))
        except tf.FormError as exc:
            return None, f"error: {exc}"
        path = Path(tempfile.mkdtemp(prefix="studio-form-")) / "training_form.yaml"
        path.write_text(text, encoding="utf-8")
        return str(path), "form saved: download it above"

    def on_load_yaml(path: str | None, *marked: Any) -> list[Any]:
        if not path:
            return [gr.skip()] * len(io.outputs) + [""]
        raw, baseline, shown = io.split(marked)
        current, _ = io.read(*raw)
        try:
            loaded, notes = tf.values_from_yaml(Path(path).read_text(encoding="utf-8"), base=current)
        except (OSError, UnicodeDecodeError, tf.FormError) as exc:
            return [gr.skip()] * len(io.outputs) + [f"error: cannot load the form: {exc}"]
        return [*form_updates(loaded, baseline, shown), "form loaded" + (f" ({'; '.join(notes)})" if notes else "")]

    form.save_yaml.click(on_save_yaml, inputs=io.inputs, outputs=[form.yaml_file, form.message])
    form.load_yaml.upload(on_load_yaml, inputs=[form.load_yaml, *io.inputs, *io.marks_in],
                          outputs=[*io.outputs, form.message])


def _wire_form(ctx: StudioContext, form: FormColumn, run: RunColumn, io: FormIO, preflight_for: gr.State) -> None:
    output_dir, config = form.fields["output_dir"], form.fields["config"]

    def on_form_change(*raw: Any) -> tuple[Any, ...]:
        values, problem = io.read(*raw[:-1])
        return form_changed(values, raw[-1], problem)

    # .change on resume too: a finished run unticks it from the timer, and the command must follow.
    # Queued, one at a time, the latest last: unqueued events run in parallel and an older preview could land
    # after a newer one (seen under load: the box lagged two quick edits).
    # Text fields on .change: Gradio's Textbox sends .input only from key events, so a paste (Ctrl+V or the
    # context menu) changed the value without a preview until the next key press.
    edits = [c.change if isinstance(c, gr.Textbox) else c.input for c in io.inputs if c is not run.resume]
    gr.on([*edits, run.resume.change], on_form_change,
          inputs=[*io.inputs, preflight_for], outputs=[run.command, run.preflight_report, preflight_for],
          show_progress="hidden", trigger_mode="always_last", concurrency_limit=1)
    shown = [form.fields[name] for name, _ in SUMMARY_ROWS]
    gr.on([field.change for field in shown], lambda *raw: data_summary_html(raw), inputs=shown,
          outputs=form.data_summary, show_progress="hidden", trigger_mode="always_last", concurrency_limit=1)
    data_section = form.sections[tf.trainer_options.GROUP_DATA]
    form.change_data.click(lambda: gr.Accordion(open=True), outputs=data_section, show_progress="hidden")
    # The config decides the model version: its badge, the manifests' labels, the options that apply.
    config.change(version_view, inputs=[config, form.marks], outputs=[form.version, *io.versioned],
                  show_progress="hidden", concurrency_limit=1, concurrency_id=MARKS_TURN)
    mark_view.wire(form.baseline, io.fields, io.inputs, list(form.sections.values()), form.marks, io.read, MARKS_TURN)

    def resume_choices(out: str) -> Any:
        return gr.update(choices=checkpoint_choices(out or ""))

    run.resume.input(resume_choices, inputs=output_dir, outputs=run.resume_from, show_progress="hidden")
    run.refresh.click(resume_choices, inputs=output_dir, outputs=run.resume_from)

    def on_apply_preset(name: str, project_name: str | None, *marked: Any) -> list[Any]:
        raw, baseline, shown = io.split(marked)
        current, _ = io.read(*raw)
        values, message = preset_values(ctx, name, project_name, current or {})
        return [*form_updates(values, baseline, shown, name), message]

    project = [ctx.project_state] if ctx.project_state is not None else [gr.State(None)]
    form.apply_preset.click(on_apply_preset, inputs=[form.preset, *project, *io.inputs, *io.marks_in],
                            outputs=[*io.outputs, form.message])
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


def build(ctx: StudioContext) -> Any:
    values, preset = initial_form(ctx, ctx.project_state.value if ctx.project_state is not None else None)
    with gr.Row():
        with gr.Column(scale=2, min_width=380):
            form = _form_column(values, preset or tf.DEMO_PRESET)
        with gr.Column(scale=3, min_width=480):
            run = _run_column(values)
    with gr.Row():
        plot_args = {"x": "step", "y": "value", "color": "series", "height": 260}
        loss_plot = gr.LinePlot(None, title="loss", elem_id="train-loss-plot", **plot_args)
        top1_plot = gr.LinePlot(None, title="mel top-1 accuracy", elem_id="train-top1-plot", **plot_args)
        lr_plot = gr.LinePlot(None, title="learning rate", elem_id="train-lr-plot", **plot_args)
        eval_plot = gr.LinePlot(None, title="evaluation: CER, WER, speaker similarity, speaking rate (x real), runaway share",
                                elem_id="train-eval-plot",
                                **plot_args)
    samples = samples_view.build("train-samples")  # the model speaks at every save: players by step
    watch_panel.build()  # a run started elsewhere (Slurm, SkyPilot), followed read-only
    io = FormIO(form, run, VERSIONED)
    output_dir = form.fields["output_dir"]
    view = gr.State(None, time_to_live=600)  # refreshed by every tick; a closed page frees it in 10 min
    preflight_for = gr.State(None)  # the command the pre-flight report on the page was made for
    timer = gr.Timer(POLL_S)
    _wire_form(ctx, form, run, io, preflight_for)
    _wire_actions(ctx, run, io, output_dir, preflight_for, timer)
    samples.wire(output_dir, timer)

    tick_outputs = [view, run.status, run.progress, run.log, loss_plot, top1_plot, lr_plot, run.resume_from, timer,
                    run.resume, run.preflight_report, preflight_for, run.log_source, eval_plot]
    timer.tick(lambda v, out, ticked, source: poll_view(ctx, v, out, ticked, source),
               inputs=[view, output_dir, run.resume, run.log_source],
               outputs=tick_outputs, show_progress="hidden", queue=False, trigger_mode="always_last").then(
        None, js=FOLLOW_LOG_JS)

    def on_load(baseline: str | None, shown: Any, project_name: str | None = None) -> list[Any]:
        # The last (or running) training run's options, so a reload or a restarted UI shows it again.
        values, preset = initial_form(ctx, project_name)
        return [*form_updates(values, baseline, shown, preset), None]

    if ctx.project_state is None or ctx.project_stamp is None:
        gr.on(triggers=None, fn=on_load, inputs=io.marks_in, outputs=[*io.outputs, view], show_progress="hidden")
        return None

    def on_open(project_name: str | None, *marked: Any) -> list[Any]:
        raw, baseline, shown = io.split(marked)
        current, _ = io.read(*raw)
        values, message = project_refill(ctx, project_name, current)
        updates = form_updates(values, baseline, shown) if values is not None else [gr.skip()] * len(io.outputs)
        return [*updates, message]

    def on_project(stamp: Any, *marked: Any) -> list[Any]:
        """The page loaded (the project's run, else its data), a project was picked (its data under its
        generation's preset), or a step finished (its newly prepared data, when the form trains on other)."""
        name, cause = follow.stamp_name(stamp), follow.stamp_cause(stamp)
        if cause == follow.STEP:
            return [*on_open(name, *marked), gr.skip()]
        _, baseline, shown = io.split(marked)
        if cause == follow.LOAD:
            return [*on_load(baseline, shown, name)[:-1], gr.skip(), None]
        values, preset = initial_form(ctx, name, picked=True)
        return [*form_updates(values, baseline, shown, preset),
                f"filled from project **{name}**" if name else gr.skip(), gr.skip()]

    follow.follow(ctx, on_project, [*io.outputs, form.message, view], [*io.inputs, *io.marks_in])

    def on_select(tab: gr.Tab) -> None:  # the project's data prepared meanwhile: the form takes it
        tab.select(on_open, inputs=[ctx.project_state, *io.inputs, *io.marks_in], outputs=[*io.outputs, form.message],
                   show_progress="hidden")

    return on_select
