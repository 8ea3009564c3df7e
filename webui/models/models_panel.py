"""The Models tab: what each generation (and each suggested speech model) needs from the Hugging Face Hub,
what this workspace already holds, a download job, and publishing an export.

Downloads and uploads run as supervised jobs (``python -m trainer.models download|publish ... --json``, see
``webui.jobs.report_jobs``): progress comes from the CLI's byte bar, Stop leaves the partial files that the next
run continues, and a reload finds the job again. A token typed here reaches the job as ``HF_TOKEN`` in its
environment, never in its command line (which run.json records and the System tab shows). The table reads
only the catalogue and the workspace (no network), so the tab opens at once, offline too.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gradio as gr
import pandas as pd

from trainer.models.__main__ import catalogue_rows, human_size
from trainer.models.catalog import all_sets
from trainer.models.record import DownloadedModel, downloaded_model_dirs
from webui.form_inputs import InputProblem, resolve_path
from webui.jobs.job_panel import job_panel, report_view, wire_job
from webui.jobs.report_jobs import JobResult, ReportJob
from webui.plots import empty_frame, format_bytes, message_html, records_frame

if TYPE_CHECKING:
    from webui.context import StudioContext

MODELS_CLI = "trainer.models"
NEEDS_COLUMNS = ["set", "repository", "size", "licence", "present", "files", "folder"]
FILE_COLUMNS = ["file", "repository", "size", "digest", "action"]
DOWNLOAD_JOB = ReportJob("models_download")
PUBLISH_JOB = ReportJob("models_publish")


def set_choices() -> list[tuple[str, str]]:
    """(label, set name) of every set of the catalogue, for the download dropdown."""
    return [(f"{entry.title} ({entry.kind})" if entry.kind != "generation" else entry.title, entry.name)
            for entry in all_sets()]


def needs_frame(workspace: Path) -> pd.DataFrame:
    """One row per Hub repository of every set: files, rough size, licence, and how many files are present."""
    rows = []
    for row in catalogue_rows(workspace):
        licence = row["licence"] + ("" if row["licence_verified"] else " (unverified)")
        size = ("about " + human_size(row["size"])) if row["size"] else "on the Hub"
        rows.append({"set": row["set"], "repository": row["repo_id"], "files": ", ".join(row["files"]),
                     "size": size, "licence": licence, "present": f"{row['present']}/{row['needed']}",
                     "folder": row["folder"]})
    return records_frame(rows, NEEDS_COLUMNS)


def downloaded_note(workspace: Path) -> str:
    found = downloaded_model_dirs(workspace)
    if not found:
        return "Nothing downloaded into this workspace yet."
    return "Downloaded: " + "; ".join(f"{m.title} `{m.path}`{_state(m)}" for m in found)


def _state(model: DownloadedModel) -> str:
    if model.damage is not None:
        return f" (damaged, not offered for training: {model.damage})"
    return "" if model.complete else " (incomplete)"


def download_argv(python: str, set_name: str, offline: bool, workspace: Path, report: Path) -> list[str]:
    names = {entry.name for entry in all_sets()}
    if set_name not in names:
        raise InputProblem(f"choose what to download (one of {', '.join(sorted(names))})")
    argv = [python, "-m", MODELS_CLI, "download", set_name, "--workspace", str(workspace), "--json", str(report)]
    return argv + (["--offline"] if offline else [])


def token_env(token: str | None) -> dict[str, str] | None:
    """The job's environment with the typed token as HF_TOKEN (None: the studio's own, with its login)."""
    token = (token or "").strip()
    return {**os.environ, "HF_TOKEN": token} if token else None


def publish_argv(python: str, export_dir: str, repo: str, public: bool, workspace: Path, report: Path) -> list[str]:
    folder = resolve_path(export_dir, workspace, "export folder")
    if folder is None:
        raise InputProblem("no export folder given (Checkpoints tab: Export)")
    if not folder.is_dir():
        raise InputProblem(f"export folder not found: {folder}")
    if not (repo or "").strip():
        raise InputProblem("no repository given: owner/name, e.g. my-name/indextts2-amharic")
    argv = [python, "-m", MODELS_CLI, "publish", str(folder), "--repo", repo.strip(), "--json", str(report)]
    return argv + (["--public"] if public else [])


def export_folders(workspace: Path) -> list[str]:
    """Export folders (a model card in each) of the workspace's exports/ and of every project's exports folder,
    newest first."""
    roots = [Path(workspace) / "exports", *_project_export_roots(Path(workspace))]
    found = {p for root in roots if root.is_dir() for p in root.iterdir()
             if p.is_dir() and (p / "MODEL_CARD.md").is_file()}
    return [str(p) for p in sorted(found, key=lambda p: p.stat().st_mtime, reverse=True)]


def _project_export_roots(workspace: Path) -> list[Path]:
    from trainer.project import ProjectError, load_project, project_names

    roots = []
    for name in project_names(workspace):
        try:
            roots.append(load_project(workspace, name).dir("exports"))
        except (ProjectError, OSError):
            continue
    return roots


def download_view_of(result: JobResult | None, workspace: Path) -> tuple[str, pd.DataFrame, pd.DataFrame, str]:
    """(verdict line, the files of the job's report, the refreshed needs table, the downloaded note)."""
    if result is None:
        return "", empty_frame(FILE_COLUMNS), needs_frame(workspace), downloaded_note(workspace)
    if result.report_text is None:
        return (message_html(result.error), empty_frame(FILE_COLUMNS), needs_frame(workspace),
                downloaded_note(workspace))
    try:
        report = result.report_json()
    except ValueError as exc:
        return message_html(str(exc)), empty_frame(FILE_COLUMNS), needs_frame(workspace), downloaded_note(workspace)
    rows, lines = [], []
    for download in report.get("downloads") or []:
        fetched = sum(1 for row in download["files"] if row["action"] == "downloaded")
        lines.append(f"{download['folder']}: {len(download['files'])} files, {fetched} downloaded"
                     + (" (offline check)" if download.get("offline") else ""))
        rows += [{"file": row["local"], "repository": row.get("repo_id", ""), "size": format_bytes(row["size"]),
                  "digest": row.get("digest") or "", "action": row["action"]} for row in download["files"]]
    return (message_html("; ".join(lines), "ok"), records_frame(rows, FILE_COLUMNS), needs_frame(workspace),
            downloaded_note(workspace))


def publish_view_of(result: JobResult | None) -> str:
    def shown(report: dict) -> str:
        text = (f"{len(report['files'])} files uploaded to {report['url']} "
                f"({'private' if report['private'] else 'public'})" + (f"; {report['note']}" if report["note"] else ""))
        return message_html(text, "ok")

    return report_view(result, shown)


def build(ctx: StudioContext) -> Any:
    """Lay out the tab; returns how to refresh the table when the tab is opened."""
    gr.Markdown("### Base models from the Hugging Face Hub\nEach generation's files land in "
                "`models/<folder>` of this workspace, in upstream's layout (the folder is a `--model-dir`); every "
                "file is checked against the Hub's checksum and recorded with its licence in `hub_download.json`. "
                "An interrupted download continues where it stopped. Read each licence before use.")
    needs = gr.Dataframe(value=needs_frame(ctx.workspace), interactive=False, wrap=True, elem_id="models-needs",
                         label="What each set needs, and what is here")
    present = gr.Markdown(downloaded_note(ctx.workspace), elem_id="models-present")
    with gr.Row(equal_height=True):
        choices = set_choices()
        choice = gr.Dropdown(choices=choices, value=choices[0][1], label="Download", scale=3,
                             elem_id="models-set")
        token = gr.Textbox(type="password", label="Hub token (gated models; empty: HF_TOKEN or your login)",
                           scale=3, elem_id="models-token")
        offline = gr.Checkbox(value=False, label="Offline: only check the folder", scale=1, elem_id="models-offline")
    start = gr.Button("Download", variant="primary", elem_id="models-download")
    panel = job_panel(DOWNLOAD_JOB, "models-download")
    verdict = gr.HTML(elem_id="models-download-result")
    files = gr.Dataframe(value=empty_frame(FILE_COLUMNS), interactive=False, label="Files",
                         elem_id="models-files")
    wire_job(ctx, panel, start, [choice, offline, token],
             lambda name, off, _token: download_argv(ctx.python, name, off, ctx.workspace,
                                                     DOWNLOAD_JOB.report_path(ctx)),
             [verdict, files, needs, present], lambda result: download_view_of(result, ctx.workspace),
             make_env=lambda _name, _off, typed: token_env(typed))

    gr.Markdown("### Publish an export\nUploads an export folder (model card, licence notice, config, weights) "
                "to a Hub model repository you name; the repository is created **private** unless you tick public.")
    with gr.Row(equal_height=True):
        exported = export_folders(ctx.workspace)
        export_dir = gr.Dropdown(choices=exported, value=exported[0] if exported else None, allow_custom_value=True,
                                 scale=4, label="Export folder (newest first)", elem_id="models-export-dir")
        repo = gr.Textbox(label="Repository (owner/name)", scale=3, elem_id="models-repo")
        public = gr.Checkbox(value=False, label="Public", scale=1, elem_id="models-public")
    publish = gr.Button("Publish", elem_id="models-publish")
    publish_panel = job_panel(PUBLISH_JOB, "models-publish")
    published = gr.HTML(elem_id="models-publish-result")
    wire_job(ctx, publish_panel, publish, [export_dir, repo, public, token],
             lambda folder, name, pub, _token: publish_argv(ctx.python, folder, name, pub, ctx.workspace,
                                                            PUBLISH_JOB.report_path(ctx)),
             [published], lambda result: [publish_view_of(result)],
             make_env=lambda _folder, _name, _pub, typed: token_env(typed))

    def refresh(current: str | None) -> tuple[pd.DataFrame, str, Any]:
        exported = export_folders(ctx.workspace)  # an export made since: the newest, unless one is picked
        return needs_frame(ctx.workspace), downloaded_note(ctx.workspace), gr.update(
            choices=exported, value=current or (exported[0] if exported else None))

    def on_select(tab: gr.Tab) -> None:
        tab.select(refresh, inputs=export_dir, outputs=[needs, present, export_dir], show_progress="hidden",
                   queue=False)

    return on_select
