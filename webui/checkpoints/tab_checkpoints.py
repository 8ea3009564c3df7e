"""The Checkpoints tab: list, verify, inspect, repair and export checkpoints, over the checkpoint toolkit.

Every rule (what a verdict means, how repair and export lay out files) lives in ``trainer.checkpoints``;
this module only turns its results into tables. The list comes first from each file's metadata (no
tensor data: milliseconds for a 7 GB file; it names the model version), then a supervised job verifies
every file and fills in the verdicts. Verify, inspect, repair and export load whole checkpoints, so each
runs as a job too (``python -m trainer.checkpoints VERB ... --json``, see ``webui.jobs.report_jobs``): a
multi-GB file never blocks the page. Callbacks are plain functions; ``build(ctx)`` wires them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import gradio as gr

from webui.checkpoints.checkpoints_project import (
    newest_project_run,
    project_export_dir,
    run_config,
    run_of_project,
)
from webui.checkpoints.rows import (
    LIST_COLUMNS,
    LIST_JOB,
    NOT_VERIFIED,
    ListView,
    find_output_dirs,
    list_argv,
    list_view,
    list_view_of,
)
from webui.checkpoints.scores import evaluate_section
from webui.checkpoints.tools import (
    BASE_FILES,
    DTYPES,
    EXPORT_COLUMNS,
    EXPORT_JOB,
    INSPECT_JOB,
    REPAIR_COLUMNS,
    REPAIR_JOB,
    VERIFY_COLUMNS,
    VERIFY_JOB,
    export_argv,
    export_view_of,
    inspect_argv,
    inspect_view_of,
    repair_argv,
    repair_view_of,
    verify_argv,
    verify_view_of,
)
from webui.jobs.job_panel import SharedPanel, shared_job_panel, tool_panel, wire_job
from webui.jobs.report_jobs import JobResult
from webui.plots import (
    empty_frame,
)

if TYPE_CHECKING:
    from webui.context import StudioContext


# What the scores mean, for someone who has not met CER before (issue 40).
SCORE_LEGEND = (
    "<small>**CER / WER**: the share of characters / words a speech recogniser gets wrong when it hears the model "
    "(lower is better; clear real speech usually reads under 10 %, and the recogniser's own floor on real "
    "recordings is the best a model can reach). **SIM**: how close the voice is to the reference speaker (cosine, "
    "higher is better; the same speaker usually scores above 0.6). **[low, high]**: the 95 % interval over the "
    "items measured; *one item* has none. The demo's models are random stand-ins: their scores are meaningless "
    "(a CER far above 100 % is normal there).</small>")


# -- layout -------------------------------------------------------------------------------------------------
def _list_section(ctx: StudioContext) -> tuple[gr.Dropdown, gr.Dropdown, SharedPanel]:
    """The output folder, its checkpoints, the picker and the tab's one job panel; returns (the picker, the folder,
    the panel): the other sections' inputs."""
    workspace = ctx.workspace
    dirs = find_output_dirs(workspace)
    default = str(ctx.paths.default_output_dir)
    gr.Markdown("### Checkpoints of an output directory")
    with gr.Row():
        output_dir = gr.Dropdown(choices=dirs, value=default if default in dirs else (dirs[0] if dirs else default),
                                 allow_custom_value=True, scale=5, label="Output directory",
                                 elem_id="ckpt-output-dir",
                                 info="a training run's --output-dir (folders under the workspace's runs/)")
        refresh = gr.Button("Refresh folders", scale=1, elem_id="ckpt-refresh-dirs")
        run = gr.Button("List checkpoints", variant="primary", scale=1, elem_id="ckpt-list-run")
    message = gr.HTML(elem_id="ckpt-list-message")
    table = gr.Dataframe(value=empty_frame(LIST_COLUMNS), interactive=False, wrap=True, elem_id="ckpt-list-table",
                         label="Checkpoints (newest first; click a row to pick it)")
    gr.Markdown(SCORE_LEGEND, elem_id="ckpt-score-legend")
    paths = gr.State([])
    checkpoint = gr.Dropdown(choices=[], value=None, allow_custom_value=True, label="Checkpoint",
                             elem_id="ckpt-path", info="pick from the list or type a path; the tools below act on it")
    gr.Markdown("#### The running tool (whichever of the tools below ran last: its progress, its log, Stop)")
    shared = shared_job_panel("ckpt")
    panel = tool_panel(shared, LIST_JOB, "ckpt-list", "List")

    def shown(view: ListView) -> list[Any]:
        picked = view.paths[0] if view.paths else None
        return [view.message, view.table, gr.Dropdown(choices=view.paths, value=picked), view.row_paths]

    def on_pick_row(listed: list[str], event: gr.SelectData):
        row = event.index[0] if isinstance(event.index, (list, tuple)) else event.index
        picked = listed[row] if isinstance(row, int) and 0 <= row < len(listed) else ""
        return gr.Dropdown(value=picked) if picked else gr.Dropdown()  # the base row picks nothing

    def on_refresh(current: str):
        choices = find_output_dirs(workspace)
        return gr.Dropdown(choices=choices, value=current or (choices[0] if choices else None))

    wire_job(ctx, panel, run, [output_dir],
             lambda folder: list_argv(ctx.python, folder, workspace, LIST_JOB.report_path(ctx)),
             [message, table, checkpoint, paths], lambda result: shown(list_view_of(result, workspace)),
             preview=lambda folder: shown(list_view(folder, workspace)))
    output_dir.change(lambda folder: shown(list_view(folder, workspace, None, NOT_VERIFIED)), inputs=output_dir,
                      outputs=[message, table, checkpoint, paths])
    refresh.click(on_refresh, inputs=output_dir, outputs=output_dir)
    table.select(on_pick_row, inputs=paths, outputs=checkpoint)
    if ctx.project_state is not None:  # the project's newest run, when the page opens and when another is picked
        def project_run(name: str | None) -> Any:
            project = ctx.project(name)
            if project is None:
                return gr.skip()
            from trainer.project import defaults_for

            found = defaults_for(project, "checkpoints")
            if not found["run"]:
                return gr.skip()
            return gr.Dropdown(choices=sorted(set(find_output_dirs(workspace)) | set(found["runs"])),
                               value=found["run"])

        ctx.project_state.change(project_run, inputs=ctx.project_state, outputs=output_dir)
        gr.on(triggers=None, fn=project_run, inputs=ctx.project_state, outputs=output_dir)
    evaluate_section(ctx, output_dir, [message, table, checkpoint, paths], shown, shared)
    return checkpoint, output_dir, shared


def _project_run_on_open(ctx: StudioContext, output_dir: gr.Dropdown) -> Any:
    """How the tab follows the project when it is opened: a folder that is none of the project's runs gives way to
    its newest run (trained since the page opened); a run of the project the user picked stays."""
    def opened(name: str | None, current: str | None) -> Any:
        project = ctx.project(name)
        newest = newest_project_run(project)
        if not newest or run_of_project(current, project):
            return gr.skip()
        return gr.Dropdown(choices=sorted({*find_output_dirs(ctx.workspace), newest}), value=newest)

    def on_select(tab: gr.Tab) -> None:
        if ctx.project_state is not None:
            tab.select(opened, inputs=[ctx.project_state, output_dir], outputs=output_dir, show_progress="hidden")

    return on_select


def _verify_section(ctx: StudioContext, checkpoint: gr.Dropdown, shared: SharedPanel) -> None:
    gr.Markdown("### Verify")
    with gr.Row():
        tokenizer = gr.Textbox(value=str(ctx.paths.tokenizer), label="Tokenizer to check against (optional)",
                               elem_id="ckpt-verify-tokenizer")
        config = gr.Textbox(value=str(ctx.paths.config), label="Config to check against (optional)",
                            elem_id="ckpt-verify-config")
    run = gr.Button("Verify", variant="primary", elem_id="ckpt-verify-run")
    panel = tool_panel(shared, VERIFY_JOB, "ckpt-verify", "Verify")
    verdict = gr.HTML(elem_id="ckpt-verify-verdict")
    table = gr.Dataframe(value=empty_frame(VERIFY_COLUMNS), interactive=False, wrap=True, label="Components",
                         elem_id="ckpt-verify-table")

    def render(result: JobResult | None) -> list[Any]:
        view = verify_view_of(result)
        return [view.verdict, view.table]

    wire_job(ctx, panel, run, [checkpoint, tokenizer, config],
             lambda *values: verify_argv(ctx.python, *values, ctx.workspace, VERIFY_JOB.report_path(ctx)),
             [verdict, table], render)


def _inspect_section(ctx: StudioContext, checkpoint: gr.Dropdown, shared: SharedPanel) -> None:
    gr.Markdown("### Inspect")
    run = gr.Button("Inspect", elem_id="ckpt-inspect-run")
    panel = tool_panel(shared, INSPECT_JOB, "ckpt-inspect", "Inspect")
    message = gr.HTML(elem_id="ckpt-inspect-message")
    table = gr.Dataframe(value=empty_frame(["field", "value"]), interactive=False, wrap=True, label="Key facts",
                         elem_id="ckpt-inspect-table")
    wire_job(ctx, panel, run, [checkpoint],
             lambda path: inspect_argv(ctx.python, path, ctx.workspace, INSPECT_JOB.report_path(ctx)),
             [message, table], inspect_view_of)


def _repair_section(ctx: StudioContext, checkpoint: gr.Dropdown, shared: SharedPanel) -> None:
    gr.Markdown("### Repair a community or older checkpoint\nWrites the current format to a NEW file beside the "
                "original (the original is never changed) and says what carried over and what could not.")
    with gr.Row():
        out_name = gr.Textbox(value="", label="New file name (empty: <name>_repaired.pth beside the original)",
                              elem_id="ckpt-repair-out")
        config = gr.Textbox(value=str(ctx.paths.config), elem_id="ckpt-repair-config",
                            label="Config the run started from (community checkpoints do not record it)")
        tokenizer = gr.Textbox(value="", label="Tokenizer the run used (optional: records its hash)",
                               elem_id="ckpt-repair-tokenizer")
        base_vocab = gr.Number(value=0, precision=0, minimum=0, label="Base vocabulary size (0: from the config)",
                               elem_id="ckpt-repair-base-vocab")
    run = gr.Button("Repair into a new file", variant="primary", elem_id="ckpt-repair-run")
    panel = tool_panel(shared, REPAIR_JOB, "ckpt-repair", "Repair")
    message = gr.HTML(elem_id="ckpt-repair-result")
    table = gr.Dataframe(value=empty_frame(REPAIR_COLUMNS), interactive=False, wrap=True,
                         label="What the repair carried over, supplied, and could not", elem_id="ckpt-repair-table")
    wire_job(ctx, panel, run, [checkpoint, out_name, config, tokenizer, base_vocab],
             lambda *values: repair_argv(ctx.python, *values, ctx.workspace, REPAIR_JOB.report_path(ctx)),
             [message, table], repair_view_of)


def _export_section(ctx: StudioContext, checkpoint: gr.Dropdown, shared: SharedPanel) -> None:
    gr.Markdown("### Export for IndexTTS inference")
    with gr.Row(equal_height=True):
        out_dir = gr.Textbox(label="Export folder (a project's run: its exports/<run>_<checkpoint>; "
                             "empty: workspace/exports/<run>_<checkpoint>_<time>)", scale=4,
                             elem_id="ckpt-export-dir")
        dtype = gr.Radio(choices=list(DTYPES), value="fp32", label="Weights dtype", scale=2,
                         elem_id="ckpt-export-dtype")
        safetensors = gr.Checkbox(value=False, label="Also write gpt.safetensors", scale=1,
                                  elem_id="ckpt-export-safetensors")
    with gr.Row():
        config = gr.Textbox(value=str(ctx.paths.config), elem_id="ckpt-export-config",
                            label="Config for the non-GPT sections of config.yaml (dataset, vqvae, ...)")
        tokenizer = gr.Textbox(value="", elem_id="ckpt-export-tokenizer",
                               label="Tokenizer (only when the checkpoint's recorded one is not available)")
        base_files = gr.Radio(choices=list(BASE_FILES), value=BASE_FILES[0], elem_id="ckpt-export-base-files",
                              label="Base model files (S2Mel, BigVGAN, ...)",
                              info="copy: the folder works when moved; link: symbolic links to the base model's")
        strength = gr.Slider(0.0, 1.0, value=1.0, step=0.05, label="S2Mel adapter strength (S2Mel run checkpoints)",
                             elem_id="ckpt-export-s2mel-strength", info="0: the base s2mel.pth, 1: all of the run")
    run = gr.Button("Export", variant="primary", elem_id="ckpt-export-run")
    panel = tool_panel(shared, EXPORT_JOB, "ckpt-export", "Export")
    result = gr.HTML(elem_id="ckpt-export-result")
    table = gr.Dataframe(value=empty_frame(EXPORT_COLUMNS), interactive=False, label="Files written",
                         elem_id="ckpt-export-files")
    wire_job(ctx, panel, run, [checkpoint, out_dir, dtype, safetensors, config, tokenizer, base_files, strength],
             lambda *values: export_argv(ctx.python, *values[:-2], ctx.workspace, EXPORT_JOB.report_path(ctx),
                                         base_files=values[-2], s2mel_strength=values[-1]),
             [result, table], export_view_of)
    project = [ctx.project_state] if ctx.project_state is not None else [gr.State(None)]
    checkpoint.change(lambda path, name: export_fields_for(ctx, path, name), inputs=[checkpoint, *project],
                      outputs=[out_dir, config], show_progress="hidden")


def export_fields_for(ctx: StudioContext, checkpoint: str | None, project_name: str | None) -> tuple[Any, Any]:
    """(export folder, config) for a picked checkpoint: a project run's goes to the project's exports folder, and
    every run's non-GPT config sections come from the config it trained with (gr.skip() where neither is known)."""
    config = run_config(checkpoint) or gr.skip()
    if not project_name:
        return gr.skip(), config
    # another checkpoint's folder would be stale: empty is the export's own default
    return project_export_dir(checkpoint, ctx.project(project_name)), config


def build(ctx: StudioContext) -> Any:
    """Lay out the Checkpoints tab (called by the shell inside ``with gr.Tab("Checkpoints")``); returns how it
    follows the project when opened."""
    checkpoint, output_dir, shared = _list_section(ctx)
    _verify_section(ctx, checkpoint, shared)
    _inspect_section(ctx, checkpoint, shared)
    _repair_section(ctx, checkpoint, shared)
    _export_section(ctx, checkpoint, shared)
    return _project_run_on_open(ctx, output_dir)
