"""The Checkpoints tab: list, verify, inspect and export checkpoints, over the checkpoint toolkit.

Every rule (what a verdict means, how export lays out files) lives in ``trainer.checkpoints``; this
module only turns its results into tables. Callbacks are plain functions, ``build(ctx)`` wires them.
Loading a checkpoint happens on the CPU (``map_location="cpu"`` in the library), never on CUDA.
"""

from __future__ import annotations

import datetime as _dt
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gradio as gr
import pandas as pd

from webui.plots import (
    InputProblem,
    badge_html,
    empty_frame,
    existing_file,
    format_bytes,
    format_number,
    key_value_frame,
    message_html,
    records_frame,
    resolve_path,
)

if TYPE_CHECKING:
    from webui.context import StudioContext

LIST_COLUMNS = ["file", "kind", "step", "epoch", "val loss", "verdict", "size", "modified"]
VERIFY_COLUMNS = ["component", "status", "detail"]
EXPORT_COLUMNS = ["file", "size"]
DTYPES = ("fp32", "fp16", "bf16")
CHECKPOINT_SUFFIXES = (".pth", ".pt")


def find_output_dirs(workspace: Path, max_dirs: int = 200) -> list[str]:
    """Folders of the workspace that hold checkpoints: runs/* (two levels) and checkpoints/, newest first."""
    workspace = Path(workspace)
    candidates: set[Path] = set()
    for pattern in ("runs/*", "runs/*/*", "checkpoints"):
        for path in workspace.glob(pattern):
            if path.is_dir() and any(child.suffix in CHECKPOINT_SUFFIXES for child in path.iterdir()):
                candidates.add(path)
    runs = workspace / "runs"
    if runs.is_dir():  # an output dir without checkpoints yet is still worth listing
        candidates.update(p for p in runs.iterdir() if p.is_dir())

    def newest(path: Path) -> float:
        try:
            return path.stat().st_mtime
        except OSError:
            return 0.0

    ordered = sorted(candidates, key=newest, reverse=True)[:max_dirs]
    return [str(path) for path in ordered]


def _modified(mtime: Any) -> str:
    if mtime is None:
        return ""
    try:
        return _dt.datetime.fromtimestamp(float(mtime)).strftime("%Y-%m-%d %H:%M:%S")
    except (TypeError, ValueError, OSError):
        return str(mtime)


@dataclass
class ListView:
    message: str = ""
    table: pd.DataFrame = field(default_factory=lambda: empty_frame(LIST_COLUMNS))
    paths: list[str] = field(default_factory=list)  # checkpoint paths in table order, for the picker


def list_view(output_dir: str, workspace: Path | str) -> ListView:
    """The output directory's checkpoints as a table (newest first), and their paths for the picker."""
    from trainer.checkpoints import CheckpointError
    from trainer.checkpoints.listing import list_checkpoints

    folder = resolve_path(output_dir, workspace)
    if folder is None:
        return ListView(message=message_html("choose an output directory"))
    if not folder.is_dir():
        return ListView(message=message_html(f"output directory not found: {folder}"))
    try:
        summaries = list_checkpoints(folder)
    except (CheckpointError, OSError) as exc:
        return ListView(message=message_html(str(exc)))
    rows = []
    paths: list[str] = []
    for summary in summaries:
        paths.append(str(summary.path))
        rows.append({
            "file": Path(summary.path).name,
            "kind": summary.kind,
            "step": summary.step,
            "epoch": summary.epoch,
            "val loss": format_number(summary.val_loss),
            "verdict": summary.verdict + (f" ({summary.reason})" if summary.reason else ""),
            "size": format_bytes(summary.size_bytes),
            "modified": _modified(summary.mtime),
        })
    table = records_frame(rows, LIST_COLUMNS)
    if not rows:
        message = message_html(f"no checkpoints in {folder}", "info")
    else:
        message = badge_html(f"{len(rows)} checkpoint{'s' if len(rows) != 1 else ''}", str(folder), "info")
    return ListView(message=message, table=table, paths=paths)


@dataclass
class VerifyView:
    verdict: str = ""
    table: pd.DataFrame = field(default_factory=lambda: empty_frame(VERIFY_COLUMNS))


def verify_view(checkpoint: str, tokenizer: str, config: str, workspace: Path | str) -> VerifyView:
    """Verify one checkpoint (optionally against a tokenizer and config): verdict badge and component table."""
    from trainer.checkpoints import CheckpointError
    from trainer.checkpoints.verify import verify_checkpoint

    try:
        path = existing_file(checkpoint, workspace, "checkpoint")
        tokenizer_path = existing_file(tokenizer, workspace, "tokenizer", required=False)
        config_path = existing_file(config, workspace, "config", required=False)
        report = verify_checkpoint(path, tokenizer=tokenizer_path, config=config_path)
    except (InputProblem, CheckpointError, OSError, ValueError) as exc:
        return VerifyView(verdict=message_html(str(exc)))
    rows = [{"component": c.name, "status": c.status, "detail": c.detail} for c in report.components]
    rows += [{"component": "lost on resume", "status": "", "detail": cost} for cost in report.lost]
    compatibility = report.compatibility
    if compatibility is not None:
        rows += [{"component": "compatibility", "status": "wrong", "detail": e} for e in compatibility.errors]
        rows += [{"component": "compatibility", "status": "warning", "detail": w} for w in compatibility.warnings]
        if compatibility.ok:
            rows.append({"component": "compatibility", "status": "ok",
                         "detail": "fits the given tokenizer/config"})
    detail = report.reason or f"{report.kind} checkpoint"
    if report.usable_as and "usable as" not in detail:
        detail += f" · usable as {', '.join(report.usable_as)}"
    verdict = badge_html(report.verdict, detail)
    if compatibility is not None and not compatibility.ok:
        errors = compatibility.errors
        first = errors[0] if len(errors[0]) <= 240 else errors[0][:240] + "…"
        more = f" (+{len(errors) - 1} more in the table)" if len(errors) > 1 else ""
        verdict += badge_html("INCOMPATIBLE", first + more, "error")
    return VerifyView(verdict=verdict, table=records_frame(rows, VERIFY_COLUMNS))


# The facts shown first, in this order; everything else inspect_checkpoint reports follows.
KEY_FACTS = ("kind", "step", "epoch", "position", "last_losses", "last_val_loss", "best_val_loss", "saved_at",
             "modified", "file_bytes", "format_version", "model", "optimizer", "scheduler_step", "grad_scaler",
             "rng", "sampler", "tokenizer", "base_vocab_size", "versions")


def inspect_view(checkpoint: str, workspace: Path | str) -> tuple[str, pd.DataFrame]:
    """Key facts of one checkpoint as a two-column table (message, table)."""
    from trainer.checkpoints import CheckpointError
    from trainer.checkpoints.inspect import inspect_checkpoint

    try:
        path = existing_file(checkpoint, workspace, "checkpoint")
        facts = inspect_checkpoint(path)
    except (InputProblem, CheckpointError, OSError) as exc:
        return message_html(str(exc)), empty_frame(["field", "value"])
    ordered = {key: facts[key] for key in KEY_FACTS if key in facts}
    if isinstance(ordered.get("file_bytes"), int):
        ordered["file_bytes"] = f"{format_bytes(ordered['file_bytes'])} ({ordered['file_bytes']:,} bytes)"
    ordered.update({key: value for key, value in facts.items() if key not in ordered and key != "path"})
    detail = f"{path.name}: {facts.get('kind')} checkpoint, step {facts.get('step')}, epoch {facts.get('epoch')}"
    return badge_html("INSPECTED", detail, "info"), key_value_frame(ordered)


def default_export_dir(checkpoint: str, workspace: Path | str) -> str:
    """exports/<run>_<file stem>_<time> under the workspace (never inside the run's output dir)."""
    path = resolve_path(checkpoint, workspace)
    if path is None:
        return ""
    stamp = time.strftime("%Y%m%d_%H%M%S")
    return str(Path(workspace) / "exports" / f"{path.parent.name}_{path.stem}_{stamp}")


def export_view(checkpoint: str, out_dir: str, dtype: str, safetensors: bool, config: str, tokenizer: str,
                workspace: Path | str) -> tuple[str, pd.DataFrame]:
    """Export an inference bundle (gpt.pth, config.yaml, bpe.model); the result line and the files written."""
    from data_tools.config import ConfigError
    from trainer.checkpoints import CheckpointError
    from trainer.checkpoints.export import export_checkpoint

    try:
        path = existing_file(checkpoint, workspace, "checkpoint")
        if dtype not in DTYPES:
            raise InputProblem(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
        config_path = existing_file(config, workspace, "config", required=False)
        tokenizer_path = existing_file(tokenizer, workspace, "tokenizer", required=False)
        target = resolve_path(out_dir, workspace) or Path(default_export_dir(str(path), workspace))
        report = export_checkpoint(path, target, dtype=dtype, safetensors=bool(safetensors), config=config_path,
                                   tokenizer=tokenizer_path)
    except (InputProblem, CheckpointError, ConfigError, OSError) as exc:
        return message_html(str(exc)), empty_frame(EXPORT_COLUMNS)
    rows = [{"file": str(f), "size": format_bytes(f.stat().st_size if f.exists() else None)} for f in report.files]
    rows += [{"file": f"note: {note}", "size": ""} for note in report.notes]
    return badge_html("EXPORTED", str(report.out_dir), "ok"), records_frame(rows, EXPORT_COLUMNS)


# -- layout -----------------------------------------------------------------------------------------------


def build(ctx: StudioContext) -> None:
    """Lay out the Checkpoints tab (called by the shell inside ``with gr.Tab("Checkpoints")``)."""
    workspace = ctx.workspace
    dirs = find_output_dirs(workspace)
    default_dir = str(ctx.paths.default_output_dir) if str(ctx.paths.default_output_dir) in dirs else (
        dirs[0] if dirs else str(ctx.paths.default_output_dir))

    gr.Markdown("### Checkpoints of an output directory")
    with gr.Row():
        output_dir = gr.Dropdown(choices=dirs, value=default_dir, allow_custom_value=True, scale=5,
                                 label="Output directory", elem_id="ckpt-output-dir",
                                 info="a training run's --output-dir (folders under the workspace's runs/)")
        refresh = gr.Button("Refresh folders", scale=1, elem_id="ckpt-refresh-dirs")
        list_button = gr.Button("List checkpoints", variant="primary", scale=1, elem_id="ckpt-list-run")
    list_message = gr.HTML(elem_id="ckpt-list-message")
    list_table = gr.Dataframe(value=empty_frame(LIST_COLUMNS), interactive=False, wrap=True,
                              label="Checkpoints (newest first; click a row to pick it)", elem_id="ckpt-list-table")
    paths_state = gr.State([])
    checkpoint = gr.Dropdown(choices=[], value=None, allow_custom_value=True, label="Checkpoint",
                             elem_id="ckpt-path", info="pick from the list or type a path")

    gr.Markdown("### Verify")
    with gr.Row():
        tokenizer = gr.Textbox(value=str(ctx.paths.tokenizer), label="Tokenizer to check against (optional)",
                               elem_id="ckpt-verify-tokenizer")
        config = gr.Textbox(value=str(ctx.paths.config), label="Config to check against (optional)",
                            elem_id="ckpt-verify-config")
    verify_button = gr.Button("Verify", variant="primary", elem_id="ckpt-verify-run")
    verify_verdict = gr.HTML(elem_id="ckpt-verify-verdict")
    verify_table = gr.Dataframe(value=empty_frame(VERIFY_COLUMNS), interactive=False, wrap=True,
                                label="Components", elem_id="ckpt-verify-table")

    gr.Markdown("### Inspect")
    inspect_button = gr.Button("Inspect", elem_id="ckpt-inspect-run")
    inspect_message = gr.HTML(elem_id="ckpt-inspect-message")
    inspect_table = gr.Dataframe(value=empty_frame(["field", "value"]), interactive=False, wrap=True,
                                 label="Key facts", elem_id="ckpt-inspect-table")

    gr.Markdown("### Export for IndexTTS inference")
    with gr.Row(equal_height=True):
        export_dir = gr.Textbox(label="Export folder (empty: workspace/exports/<run>_<checkpoint>_<time>)",
                                scale=4, elem_id="ckpt-export-dir")
        dtype = gr.Radio(choices=list(DTYPES), value="fp32", label="Weights dtype", scale=2,
                         elem_id="ckpt-export-dtype")
        safetensors = gr.Checkbox(value=False, label="Also write gpt.safetensors", scale=1,
                                  elem_id="ckpt-export-safetensors")
    with gr.Row():
        export_config = gr.Textbox(value=str(ctx.paths.config), elem_id="ckpt-export-config",
                                   label="Config for the non-GPT sections of config.yaml (dataset, vqvae, ...)")
        export_tokenizer = gr.Textbox(value="", elem_id="ckpt-export-tokenizer",
                                      label="Tokenizer (only when the checkpoint's recorded one is not available)")
    export_button = gr.Button("Export", variant="primary", elem_id="ckpt-export-run")
    export_result = gr.HTML(elem_id="ckpt-export-result")
    export_table = gr.Dataframe(value=empty_frame(EXPORT_COLUMNS), interactive=False, label="Files written",
                                elem_id="ckpt-export-files")

    def on_refresh(current: str):
        choices = find_output_dirs(workspace)
        return gr.Dropdown(choices=choices, value=current or (choices[0] if choices else None))

    def on_list(folder: str):
        view = list_view(folder, workspace)
        picked = view.paths[0] if view.paths else None
        return view.message, view.table, gr.Dropdown(choices=view.paths, value=picked), view.paths

    def on_pick_row(paths: list[str], event: gr.SelectData):
        row = event.index[0] if isinstance(event.index, (list, tuple)) else event.index
        if isinstance(row, int) and 0 <= row < len(paths):
            return gr.Dropdown(value=paths[row])
        return gr.Dropdown()

    def on_verify(path: str, tok: str, cfg: str):
        view = verify_view(path, tok, cfg, workspace)
        return view.verdict, view.table

    refresh.click(on_refresh, inputs=output_dir, outputs=output_dir)
    list_outputs = [list_message, list_table, checkpoint, paths_state]
    list_button.click(on_list, inputs=output_dir, outputs=list_outputs)
    output_dir.change(on_list, inputs=output_dir, outputs=list_outputs)
    list_table.select(on_pick_row, inputs=paths_state, outputs=checkpoint)
    verify_button.click(on_verify, inputs=[checkpoint, tokenizer, config], outputs=[verify_verdict, verify_table])
    inspect_button.click(lambda path: inspect_view(path, workspace), inputs=checkpoint,
                         outputs=[inspect_message, inspect_table])
    export_button.click(lambda *values: export_view(*values, workspace),
                        inputs=[checkpoint, export_dir, dtype, safetensors, export_config, export_tokenizer],
                        outputs=[export_result, export_table])
