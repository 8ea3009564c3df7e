"""The Checkpoints tab: list, verify, inspect, repair and export checkpoints, over the checkpoint toolkit.

Every rule (what a verdict means, how repair and export lay out files) lives in ``trainer.checkpoints``;
this module only turns its results into tables. The list comes first from each file's metadata (no
tensor data: milliseconds for a 7 GB file; it names the model version), then a supervised job verifies
every file and fills in the verdicts. Verify, inspect, repair and export load whole checkpoints, so each
runs as a job too (``python -m trainer.checkpoints VERB ... --json``, see ``webui.report_jobs``): a
multi-GB file never blocks the page. Callbacks are plain functions; ``build(ctx)`` wires them.
"""

from __future__ import annotations

import datetime as _dt
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gradio as gr
import pandas as pd

from webui.form_inputs import InputProblem, existing_file, resolve_path
from webui.job_panel import job_panel, wire_job
from webui.model_version import model_name as generation_name
from webui.plots import (
    badge_html,
    empty_frame,
    format_bytes,
    format_number,
    key_value_frame,
    message_html,
    records_frame,
)
from webui.report_jobs import JobResult, ReportJob, stdout_report_argv

if TYPE_CHECKING:
    from webui.context import StudioContext

LIST_COLUMNS = ["file", "kind", "model", "step", "epoch", "val loss", "CER", "WER", "SIM", "verdict", "size",
                "modified"]
VERIFY_COLUMNS = ["component", "status", "detail"]
EXPORT_COLUMNS = ["file", "size"]
REPAIR_COLUMNS = ["what", "detail"]
DTYPES = ("fp32", "fp16", "bf16")
CHECKPOINT_SUFFIXES = (".pth", ".pt")
CHECKPOINTS_CLI = "trainer.checkpoints"
PENDING = "verifying…"
NOT_VERIFIED = "not verified: List checkpoints verifies every file"

LIST_JOB = ReportJob("checkpoint_list")
VERIFY_JOB = ReportJob("checkpoint_verify", report_exits=(0, 1, 2))  # 1 PARTIAL, 2 INVALID: verdicts
INSPECT_JOB = ReportJob("checkpoint_inspect")
REPAIR_JOB = ReportJob("checkpoint_repair")
EXPORT_JOB = ReportJob("checkpoint_export")


def find_output_dirs(workspace: Path, max_dirs: int = 200) -> list[str]:
    """Folders of the workspace that hold checkpoints: runs/* (two levels) and checkpoints/, newest first."""
    workspace = Path(workspace)
    candidates: set[Path] = set()
    for pattern in ("runs/*", "runs/*/*", "checkpoints", "v2/runs/*", "v2/checkpoints"):
        for path in workspace.glob(pattern):
            if path.is_dir() and any(child.suffix in CHECKPOINT_SUFFIXES for child in path.iterdir()):
                candidates.add(path)
    for runs in (workspace / "runs", workspace / "v2" / "runs"):  # an output dir without checkpoints yet
        if runs.is_dir():
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


# -- model version from the metadata (no tensor data read) ----------------------------------------------------
_versions: dict[tuple[int, int, int, int], str] = {}
_versions_lock = threading.Lock()


def model_name(path: Path | str) -> str:
    """'IndexTTS2' / 'IndexTTS-1.5' from the checkpoint's metadata, '?' when it cannot be read (cached per file)."""
    from trainer.checkpoints import CheckpointError
    from trainer.checkpoints.metadata import read_metadata

    path = Path(path)
    try:
        stat = path.stat()
    except OSError:
        return "?"
    key = (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)
    with _versions_lock:
        if key not in _versions:
            try:
                version = read_metadata(path).model_version
            except CheckpointError:
                version = None
            if len(_versions) > 1024:
                _versions.clear()
            _versions[key] = generation_name(version, "?")
        return _versions[key]


# -- list ---------------------------------------------------------------------------------------------------
@dataclass
class ListView:
    message: str = ""
    table: pd.DataFrame = field(default_factory=lambda: empty_frame(LIST_COLUMNS))
    paths: list[str] = field(default_factory=list)  # checkpoint paths in table order, for the picker


def _output_folder(output_dir: str, workspace: Path | str) -> Path:
    folder = resolve_path(output_dir, workspace)
    if folder is None:
        raise InputProblem("choose an output directory")
    if not folder.is_dir():
        raise InputProblem(f"output directory not found: {folder}")
    return folder


def list_view(output_dir: str, workspace: Path | str, verdicts: dict[str, str] | None = None,
              unverified: str = PENDING) -> ListView:
    """The output directory's checkpoints (newest first) from their metadata, with ``verdicts`` by path
    (None: none yet, each row says ``unverified``)."""
    from trainer.checkpoints.listing import list_checkpoints
    from trainer.evaluation.results import results_by_step, score_text

    try:
        folder = _output_folder(output_dir, workspace)
        summaries = list_checkpoints(folder, verify=False)
        scores = results_by_step(folder)  # checkpoint evaluation: model_step<N>.eval.json beside the files
    except (InputProblem, OSError) as exc:
        return ListView(message=message_html(str(exc)))
    rows = []
    for summary in summaries:
        result = scores.get(summary.step, {}) if summary.step is not None else {}
        if result and result.get("identity") != _identity(summary.path):
            result = {}  # the scores of another file of that step (an abandoned timeline)
        rows.append({
            "CER": score_text(result.get("cer")) if result else "", "WER": score_text(result.get("wer")) if result else "",
            "SIM": score_text(result.get("sim")) if result else "",
            "file": Path(summary.path).name, "kind": summary.kind, "model": model_name(summary.path),
            "step": summary.step, "epoch": summary.epoch, "val loss": format_number(summary.val_loss),
            "verdict": unverified if verdicts is None else verdicts.get(str(summary.path), "?"),
            "size": format_bytes(summary.size_bytes), "modified": _modified(summary.mtime),
        })
    if not rows:
        return ListView(message=message_html(f"no checkpoints in {folder}", "info"))
    detail = str(folder) if verdicts is not None else f"{folder} ({unverified})"
    return ListView(message=badge_html(f"{len(rows)} checkpoint{'s' if len(rows) != 1 else ''}", detail, "info"),
                    table=records_frame(rows, LIST_COLUMNS), paths=[str(s.path) for s in summaries])


def _identity(path: Path) -> str | None:
    from trainer.evaluation.results import checkpoint_identity

    try:
        return checkpoint_identity(path)
    except OSError:
        return None


def list_argv(python: str, output_dir: str, workspace: Path | str, report: Path) -> list[str]:
    """Verify every checkpoint of the folder: ``trainer.checkpoints list DIR --json`` (stdout to REPORT)."""
    folder = _output_folder(output_dir, workspace)
    return stdout_report_argv(python, report, CHECKPOINTS_CLI, "list", str(folder), "--json")


def list_view_of(result: JobResult | None, workspace: Path | str) -> ListView:
    """The list with every file's verdict, from the list job's report."""
    if result is None:
        return ListView()
    argv = list(result.argv)
    folder = argv[argv.index("list") + 1] if "list" in argv[:-1] else ""
    try:
        entries = result.report_json()
        verdicts = {str(e["path"]): str(e["verdict"]) + (f" ({e['reason']})" if e.get("reason") else "")
                    for e in entries}
    except (ValueError, KeyError, TypeError) as exc:
        view = list_view(folder, workspace, {})
        view.message = message_html(f"could not verify the checkpoints: {exc}")
        return view
    return list_view(folder, workspace, verdicts)


# -- verify -------------------------------------------------------------------------------------------------
@dataclass
class VerifyView:
    verdict: str = ""
    table: pd.DataFrame = field(default_factory=lambda: empty_frame(VERIFY_COLUMNS))


def verify_argv(python: str, checkpoint: str, tokenizer: str, config: str, workspace: Path | str,
                report: Path) -> list[str]:
    path = existing_file(checkpoint, workspace, "checkpoint")
    args = ["verify", str(path), "--json"]
    for flag, text, what in (("--tokenizer", tokenizer, "tokenizer"), ("--config", config, "config")):
        found = existing_file(text, workspace, what, required=False)
        if found is not None:
            args += [flag, str(found)]
    return stdout_report_argv(python, report, CHECKPOINTS_CLI, *args)


def verify_view_of(result: JobResult | None) -> VerifyView:
    """Verdict badge and component table from ``verify --json`` (optionally against a tokenizer and config)."""
    if result is None:
        return VerifyView()
    try:
        report = result.report_json()
        rows = [{"component": c["name"], "status": c["status"], "detail": c.get("detail", "")}
                for c in report["components"]]
        verdict_word = str(report["verdict"])
    except (ValueError, KeyError, TypeError) as exc:
        return VerifyView(verdict=message_html(str(exc)))
    rows += [{"component": "lost on resume", "status": "", "detail": cost} for cost in report.get("lost") or []]
    compatibility = report.get("compatibility") or None
    errors = list((compatibility or {}).get("errors") or [])
    if compatibility is not None:
        rows += [{"component": "compatibility", "status": "wrong", "detail": e} for e in errors]
        rows += [{"component": "compatibility", "status": "warning", "detail": w}
                 for w in compatibility.get("warnings") or []]
        if not errors:
            rows.append({"component": "compatibility", "status": "ok", "detail": "fits the given tokenizer/config"})
    detail = report.get("reason") or f"{report.get('kind')} checkpoint"
    usable = report.get("usable_as") or []
    if usable and "usable as" not in detail:
        detail += f" · usable as {', '.join(usable)}"
    verdict = badge_html(verdict_word, detail)
    if errors:
        first = errors[0] if len(errors[0]) <= 240 else errors[0][:240] + "…"
        more = f" (+{len(errors) - 1} more in the table)" if len(errors) > 1 else ""
        verdict += badge_html("INCOMPATIBLE", first + more, "error")
    return VerifyView(verdict=verdict, table=records_frame(rows, VERIFY_COLUMNS))


# -- inspect ------------------------------------------------------------------------------------------------
# The facts shown first, in this order; everything else inspect_checkpoint reports follows.
KEY_FACTS = ("kind", "step", "epoch", "position", "last_losses", "last_val_loss", "best_val_loss", "saved_at",
             "modified", "file_bytes", "format_version", "model", "optimizer", "scheduler_step", "grad_scaler",
             "rng", "sampler", "tokenizer", "base_vocab_size", "versions")


def inspect_argv(python: str, checkpoint: str, workspace: Path | str, report: Path) -> list[str]:
    path = existing_file(checkpoint, workspace, "checkpoint")
    return stdout_report_argv(python, report, CHECKPOINTS_CLI, "inspect", str(path), "--json")


def inspect_view_of(result: JobResult | None) -> tuple[str, pd.DataFrame]:
    """Key facts of one checkpoint as a two-column table (message, table), from ``inspect --json``."""
    empty = empty_frame(["field", "value"])
    if result is None:
        return "", empty
    try:
        facts = result.report_json()
        if not isinstance(facts, dict):
            raise ValueError("the inspection report is not a mapping")
    except ValueError as exc:
        return message_html(str(exc)), empty
    ordered = {key: facts[key] for key in KEY_FACTS if key in facts}
    if isinstance(ordered.get("file_bytes"), int):
        ordered["file_bytes"] = f"{format_bytes(ordered['file_bytes'])} ({ordered['file_bytes']:,} bytes)"
    ordered.update({key: value for key, value in facts.items() if key not in ordered and key != "path"})
    name = Path(str(facts.get("path", ""))).name
    detail = f"{name}: {facts.get('kind')} checkpoint, step {facts.get('step')}, epoch {facts.get('epoch')}"
    return badge_html("INSPECTED", detail, "info"), key_value_frame(ordered)


# -- repair -------------------------------------------------------------------------------------------------
def default_repair_path(checkpoint: Path) -> Path:
    """``<stem>_repaired.pth`` beside the original (``_repaired_2``... when taken): repair never overwrites."""
    candidate = checkpoint.with_name(f"{checkpoint.stem}_repaired{checkpoint.suffix}")
    number = 2
    while candidate.exists():
        candidate = checkpoint.with_name(f"{checkpoint.stem}_repaired_{number}{checkpoint.suffix}")
        number += 1
    return candidate


def repair_argv(python: str, checkpoint: str, out_name: str, config: str, tokenizer: str,
                base_vocab_size: float | None, workspace: Path | str, report: Path) -> list[str]:
    """``trainer.checkpoints repair PATH --out NEW --json``; the new file goes beside the original by default."""
    path = existing_file(checkpoint, workspace, "checkpoint")
    assert path is not None
    name = (out_name or "").strip()
    out = default_repair_path(path) if not name else (Path(name) if "/" in name else path.with_name(name))
    out = out if out.is_absolute() else Path(workspace) / out
    if out.exists():
        raise InputProblem(f"{out} already exists: repair never overwrites a file; choose a new name")
    args = ["repair", str(path), "--out", str(out), "--json"]
    for flag, text, what in (("--config", config, "config"), ("--tokenizer", tokenizer, "tokenizer")):
        found = existing_file(text, workspace, what, required=False)
        if found is not None:
            args += [flag, str(found)]
    if base_vocab_size:
        args += ["--base-vocab-size", str(int(base_vocab_size))]
    return stdout_report_argv(python, report, CHECKPOINTS_CLI, *args)


def repair_view_of(result: JobResult | None) -> tuple[str, pd.DataFrame]:
    """What the repair carried over, what it supplied and what is lost, one row each, and the new file's verdict."""
    if result is None:
        return "", empty_frame(REPAIR_COLUMNS)
    try:
        report = result.report_json()
        rows = [{"what": label, "detail": line} for key, label in (("kept", "kept"), ("filled", "supplied"),
                                                                   ("costs", "lost"))
                for line in report.get(key) or []]
        out, verdict = str(report["out"]), str(report.get("verdict") or "?")
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        return message_html(str(exc)), empty_frame(REPAIR_COLUMNS)
    rows.append({"what": "new file", "detail": f"{out}: {verdict}"})
    detail = f"{report.get('source_kind')} checkpoint -> {out} ({verdict}; the original is unchanged)"
    return badge_html("REPAIRED", detail, "ok" if verdict == "COMPLETE" else "warn"), records_frame(rows, REPAIR_COLUMNS)


# -- export -------------------------------------------------------------------------------------------------
def default_export_dir(checkpoint: str, workspace: Path | str) -> str:
    """exports/<run>_<file stem>_<time> under the workspace (never inside the run's output dir)."""
    path = resolve_path(checkpoint, workspace)
    if path is None:
        return ""
    stamp = time.strftime("%Y%m%d_%H%M%S")
    return str(Path(workspace) / "exports" / f"{path.parent.name}_{path.stem}_{stamp}")


def export_argv(python: str, checkpoint: str, out_dir: str, dtype: str, safetensors: bool, config: str,
                tokenizer: str, workspace: Path | str, report: Path) -> list[str]:
    """``trainer.checkpoints export PATH --out DIR ...`` (its printed lines go to REPORT)."""
    path = existing_file(checkpoint, workspace, "checkpoint")
    if dtype not in DTYPES:
        raise InputProblem(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    target = resolve_path(out_dir, workspace) or Path(default_export_dir(str(path), workspace))
    args = ["export", str(path), "--out", str(target), "--dtype", dtype]
    if safetensors:
        args.append("--safetensors")
    for flag, text, what in (("--config", config, "config"), ("--tokenizer", tokenizer, "tokenizer")):
        found = existing_file(text, workspace, what, required=False)
        if found is not None:
            args += [flag, str(found)]
    return stdout_report_argv(python, report, CHECKPOINTS_CLI, *args)


def export_view_of(result: JobResult | None) -> tuple[str, pd.DataFrame]:
    """The export folder's files (with sizes) and the export's notes."""
    if result is None or result.report_text is None:
        return ("" if result is None else message_html(result.error)), empty_frame(EXPORT_COLUMNS)
    argv = list(result.argv)
    out = Path(argv[argv.index("--out", argv.index(CHECKPOINTS_CLI)) + 1])
    files = sorted(p for p in out.iterdir() if p.is_file()) if out.is_dir() else []
    rows = [{"file": str(f), "size": format_bytes(f.stat().st_size)} for f in files]
    notes = [line.strip()[len("note:"):].strip() for line in result.report_text.splitlines()
             if line.strip().startswith("note:")]
    rows += [{"file": f"note: {note}", "size": ""} for note in notes]
    return badge_html("EXPORTED", str(out), "ok"), records_frame(rows, EXPORT_COLUMNS)


# -- layout -------------------------------------------------------------------------------------------------
def _list_section(ctx: StudioContext) -> gr.Dropdown:
    """The output folder, its checkpoints and the picker; returns the picker (the other sections' input)."""
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
    panel = job_panel(LIST_JOB, "ckpt-list")
    message = gr.HTML(elem_id="ckpt-list-message")
    table = gr.Dataframe(value=empty_frame(LIST_COLUMNS), interactive=False, wrap=True, elem_id="ckpt-list-table",
                         label="Checkpoints (newest first; click a row to pick it)")
    paths = gr.State([])
    checkpoint = gr.Dropdown(choices=[], value=None, allow_custom_value=True, label="Checkpoint",
                             elem_id="ckpt-path", info="pick from the list or type a path")

    def shown(view: ListView) -> list[Any]:
        picked = view.paths[0] if view.paths else None
        return [view.message, view.table, gr.Dropdown(choices=view.paths, value=picked), view.paths]

    def on_pick_row(listed: list[str], event: gr.SelectData):
        row = event.index[0] if isinstance(event.index, (list, tuple)) else event.index
        return gr.Dropdown(value=listed[row]) if isinstance(row, int) and 0 <= row < len(listed) else gr.Dropdown()

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
    return checkpoint


def _verify_section(ctx: StudioContext, checkpoint: gr.Dropdown) -> None:
    gr.Markdown("### Verify")
    with gr.Row():
        tokenizer = gr.Textbox(value=str(ctx.paths.tokenizer), label="Tokenizer to check against (optional)",
                               elem_id="ckpt-verify-tokenizer")
        config = gr.Textbox(value=str(ctx.paths.config), label="Config to check against (optional)",
                            elem_id="ckpt-verify-config")
    run = gr.Button("Verify", variant="primary", elem_id="ckpt-verify-run")
    panel = job_panel(VERIFY_JOB, "ckpt-verify")
    verdict = gr.HTML(elem_id="ckpt-verify-verdict")
    table = gr.Dataframe(value=empty_frame(VERIFY_COLUMNS), interactive=False, wrap=True, label="Components",
                         elem_id="ckpt-verify-table")

    def render(result: JobResult | None) -> list[Any]:
        view = verify_view_of(result)
        return [view.verdict, view.table]

    wire_job(ctx, panel, run, [checkpoint, tokenizer, config],
             lambda *values: verify_argv(ctx.python, *values, ctx.workspace, VERIFY_JOB.report_path(ctx)),
             [verdict, table], render)


def _inspect_section(ctx: StudioContext, checkpoint: gr.Dropdown) -> None:
    gr.Markdown("### Inspect")
    run = gr.Button("Inspect", elem_id="ckpt-inspect-run")
    panel = job_panel(INSPECT_JOB, "ckpt-inspect")
    message = gr.HTML(elem_id="ckpt-inspect-message")
    table = gr.Dataframe(value=empty_frame(["field", "value"]), interactive=False, wrap=True, label="Key facts",
                         elem_id="ckpt-inspect-table")
    wire_job(ctx, panel, run, [checkpoint],
             lambda path: inspect_argv(ctx.python, path, ctx.workspace, INSPECT_JOB.report_path(ctx)),
             [message, table], inspect_view_of)


def _repair_section(ctx: StudioContext, checkpoint: gr.Dropdown) -> None:
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
    panel = job_panel(REPAIR_JOB, "ckpt-repair")
    message = gr.HTML(elem_id="ckpt-repair-result")
    table = gr.Dataframe(value=empty_frame(REPAIR_COLUMNS), interactive=False, wrap=True,
                         label="What the repair carried over, supplied, and could not", elem_id="ckpt-repair-table")
    wire_job(ctx, panel, run, [checkpoint, out_name, config, tokenizer, base_vocab],
             lambda *values: repair_argv(ctx.python, *values, ctx.workspace, REPAIR_JOB.report_path(ctx)),
             [message, table], repair_view_of)


def _export_section(ctx: StudioContext, checkpoint: gr.Dropdown) -> None:
    gr.Markdown("### Export for IndexTTS inference")
    with gr.Row(equal_height=True):
        out_dir = gr.Textbox(label="Export folder (empty: workspace/exports/<run>_<checkpoint>_<time>)", scale=4,
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
    run = gr.Button("Export", variant="primary", elem_id="ckpt-export-run")
    panel = job_panel(EXPORT_JOB, "ckpt-export")
    result = gr.HTML(elem_id="ckpt-export-result")
    table = gr.Dataframe(value=empty_frame(EXPORT_COLUMNS), interactive=False, label="Files written",
                         elem_id="ckpt-export-files")
    wire_job(ctx, panel, run, [checkpoint, out_dir, dtype, safetensors, config, tokenizer],
             lambda *values: export_argv(ctx.python, *values, ctx.workspace, EXPORT_JOB.report_path(ctx)),
             [result, table], export_view_of)


def build(ctx: StudioContext) -> None:
    """Lay out the Checkpoints tab (called by the shell inside ``with gr.Tab("Checkpoints")``)."""
    checkpoint = _list_section(ctx)
    _verify_section(ctx, checkpoint)
    _inspect_section(ctx, checkpoint)
    _repair_section(ctx, checkpoint)
    _export_section(ctx, checkpoint)
