"""The Data tab: check manifests, split a manifest into train/val, and prepare audio into a codes manifest.

The checker and the split run in-process through their library functions (they stream and take seconds
on a few hundred thousand lines); preprocessing runs for minutes to hours and touches the DVAE, so it is
a supervised subprocess (``python -m data_tools.preprocess``) with its own log and progress bar.
Callbacks are plain functions (plain values in, plain values out); ``build(ctx)`` only wires them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gradio as gr
import pandas as pd

from data_tools.text import registered_languages
from webui.job_view import JobView
from webui.plots import (
    InputProblem,
    badge_html,
    empty_frame,
    existing_file,
    histogram_from_counts,
    message_html,
    records_frame,
    split_paths,
)

if TYPE_CHECKING:
    from data_tools.check_report import DataReport, NumberSummary, SplitStats
    from webui.context import StudioContext

NO_LANGUAGE = "any"
PROBLEM_COLUMNS = ["severity", "code", "file:line", "message"]
SCRIPT_COLUMNS = ["split", "script", "letters", "share %", "lines (main script)"]
SPEAKER_COLUMNS = ["split", "speaker", "utterances", "hours", "share %"]
UNKNOWN_COLUMNS = ["split", "character", "codepoint", "count", "first at"]
HISTOGRAM_COLUMNS = ["bin", "count"]
SKIP_DIRS = {".git", ".venv", "venv", "node_modules", "__pycache__", "logs", ".cache"}
MAX_MANIFESTS = 500
PREPROCESS_JOB = "preprocess"


def language_choices() -> list[str]:
    return [NO_LANGUAGE, *registered_languages()]


def find_manifests(root: Path | str, max_files: int = MAX_MANIFESTS, max_depth: int = 5) -> list[str]:
    """``*.jsonl`` files under the workspace (bounded walk, hidden and tool folders skipped), sorted."""
    root = Path(root)
    found: list[str] = []
    if not root.is_dir():
        return found
    base_depth = len(root.parts)
    for folder, dirs, files in os.walk(root):
        depth = len(Path(folder).parts) - base_depth
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith(".") and depth < max_depth)
        for name in sorted(files):
            if name.endswith(".jsonl") and name != "metrics.jsonl":
                found.append(str(Path(folder) / name))
                if len(found) >= max_files:
                    return sorted(found)
    return sorted(found)


def add_manifest(current: str, picked: str | None) -> str:
    """Append a picked manifest to a one-path-per-line text box (no duplicates)."""
    paths = split_paths(current)
    if picked and picked not in paths:
        paths.append(picked)
    return "\n".join(paths)


# -- the checker ------------------------------------------------------------------------------------------


@dataclass
class CheckView:
    """Everything the data check section shows."""

    verdict: str = ""
    summary: str = ""
    problems: pd.DataFrame = field(default_factory=lambda: empty_frame(PROBLEM_COLUMNS))
    scripts: pd.DataFrame = field(default_factory=lambda: empty_frame(SCRIPT_COLUMNS))
    speakers: pd.DataFrame = field(default_factory=lambda: empty_frame(SPEAKER_COLUMNS))
    unknown_chars: pd.DataFrame = field(default_factory=lambda: empty_frame(UNKNOWN_COLUMNS))
    durations: pd.DataFrame = field(default_factory=lambda: empty_frame(HISTOGRAM_COLUMNS))
    text_lengths: pd.DataFrame = field(default_factory=lambda: empty_frame(HISTOGRAM_COLUMNS))
    report_path: str | None = None


def _splits(report: DataReport) -> list[SplitStats]:
    return [report.train] + ([report.val] if report.val is not None else [])


def problems_frame(report: DataReport) -> pd.DataFrame:
    rows = [{"severity": p.severity, "code": p.code, "file:line": p.where, "message": p.message}
            for p in [*report.errors, *report.warnings]]
    return records_frame(rows, PROBLEM_COLUMNS)


def scripts_frame(report: DataReport) -> pd.DataFrame:
    rows = []
    for split in _splits(report):
        for script, letters in split.script_letters.items():
            if not letters:
                continue
            rows.append({"split": split.name, "script": script, "letters": int(letters),
                         "share %": round(100.0 * float(split.script_shares.get(script, 0.0)), 2),
                         "lines (main script)": int(split.lines_by_script.get(script, 0))})
        if split.lines_by_script.get("none"):
            rows.append({"split": split.name, "script": "none (no letters)", "letters": 0, "share %": 0.0,
                         "lines (main script)": int(split.lines_by_script["none"])})
    return records_frame(rows, SCRIPT_COLUMNS)


def speakers_frame(report: DataReport) -> pd.DataFrame:
    rows = [{"split": split.name, "speaker": s.speaker, "utterances": s.utterances, "hours": round(s.hours, 4),
             "share %": round(100.0 * s.share, 2)}
            for split in _splits(report) for s in split.speakers]
    return records_frame(rows, SPEAKER_COLUMNS)


def unknown_chars_frame(report: DataReport) -> pd.DataFrame:
    rows = [{"split": split.name, "character": u.char, "codepoint": u.codepoint, "count": u.count,
             "first at": u.first_where}
            for split in _splits(report) for u in split.unknown_chars]
    return records_frame(rows, UNKNOWN_COLUMNS)


def summary_histogram(summary: NumberSummary | None, unit: str) -> pd.DataFrame:
    if summary is None or summary.histogram is None:
        return empty_frame(HISTOGRAM_COLUMNS)
    return histogram_from_counts(summary.histogram.edges, summary.histogram.counts, unit=unit)


def verdict_line(report: DataReport) -> str:
    from data_tools.check_report import report_count

    errors, warnings = report_count(report, "error"), report_count(report, "warning")
    parts = [f"{errors} error{'s' if errors != 1 else ''}", f"{warnings} warning{'s' if warnings != 1 else ''}"]
    for split in _splits(report):
        parts.append(f"{split.name}: {split.entries} entries, {split.hours:.2f} h")
    parts.append(f"checked in {report.elapsed_s:.1f} s")
    return badge_html(report.verdict.upper(), " · ".join(parts))


def view_of_report(report: DataReport, report_path: Path | None = None) -> CheckView:
    return CheckView(
        verdict=verdict_line(report),
        summary=report.summary_text(),
        problems=problems_frame(report),
        scripts=scripts_frame(report),
        speakers=speakers_frame(report),
        unknown_chars=unknown_chars_frame(report),
        durations=summary_histogram(report.train.durations_s, "s"),
        text_lengths=summary_histogram(report.train.text_chars, "chars"),
        report_path=str(report_path) if report_path else None,
    )


def check_data(train: str, val: str, tokenizer: str, config: str, language: str | None,
               check_files: bool, workspace: Path | str, report_dir: Path | str | None = None,
               progress: Callable[[int, int], None] | None = None) -> CheckView:
    """Run the data checker on the typed manifests; bad input gives a one-line message, never a traceback."""
    from data_tools.check_data import check_manifests

    try:
        train_paths = [existing_file(p, workspace, "manifest") for p in split_paths(train)]
        if not train_paths:
            raise InputProblem("give at least one training manifest")
        val_paths = [existing_file(p, workspace, "validation manifest") for p in split_paths(val)]
        tokenizer_path = existing_file(tokenizer, workspace, "tokenizer", required=False)
        config_path = existing_file(config, workspace, "config", required=False)
        report = check_manifests(
            train_paths, val_paths, tokenizer=tokenizer_path, config=config_path,
            language=None if not language or language == NO_LANGUAGE else language,
            check_files=bool(check_files), progress=progress,
        )
    except (InputProblem, OSError, ValueError, RuntimeError) as exc:
        return CheckView(verdict=message_html(str(exc).splitlines()[0] if str(exc) else type(exc).__name__))
    report_path = None
    if report_dir is not None:
        report_path = Path(report_dir) / "data_check_report.json"
        _write_report(report, report_path)
    return view_of_report(report, report_path)


def _write_report(report: DataReport, path: Path) -> None:
    from data_tools.fileio import atomic_write_text

    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(report.to_json(), ensure_ascii=False, indent=2, default=str) + "\n")


# -- helpers used by build ----------------------------------------------------------------------------------


def _job_outputs(view: JobView) -> tuple[Any, ...]:
    return view.status, view.progress, view.log


def build(ctx: StudioContext) -> None:
    """Lay out the Data tab (called by the shell inside ``with gr.Tab("Data")``)."""
    workspace = ctx.workspace
    paths = ctx.paths
    languages = language_choices()
    report_dir = ctx.job_dir("data_check")

    gr.Markdown("### Check manifests")
    with gr.Row():
        train = gr.Textbox(value=str(paths.train_manifest), lines=2, scale=3,
                           label="Training manifests (one per line)", elem_id="data-train-manifests")
        val = gr.Textbox(value=str(paths.val_manifest), lines=2, scale=3,
                         label="Validation manifests (optional, one per line)", elem_id="data-val-manifests")
    with gr.Row(equal_height=True):
        picker = gr.Dropdown(choices=find_manifests(workspace), value=None, allow_custom_value=True, scale=4,
                             label="Manifests found in the workspace", elem_id="data-manifest-picker")
        add_train = gr.Button("Add to training", scale=1, elem_id="data-add-train")
        add_val = gr.Button("Add to validation", scale=1, elem_id="data-add-val")
        rescan = gr.Button("Rescan", scale=1, elem_id="data-rescan")
    with gr.Row():
        tokenizer = gr.Textbox(value=str(paths.tokenizer), label="Tokenizer (optional: token lengths, unknowns)",
                               elem_id="data-check-tokenizer")
        config = gr.Textbox(value=str(paths.config), label="Config (optional: length and code limits)",
                            elem_id="data-check-config")
        language = gr.Dropdown(choices=languages, value="am" if "am" in languages else NO_LANGUAGE,
                               label="Expected language", elem_id="data-check-language", scale=0, min_width=140)
        check_files = gr.Checkbox(value=True, label="Check .npy / audio files", elem_id="data-check-files",
                                  scale=0, min_width=160)
    check_button = gr.Button("Check data", variant="primary", elem_id="data-check-run")
    verdict = gr.HTML(elem_id="data-check-verdict")
    problems = gr.Dataframe(value=empty_frame(PROBLEM_COLUMNS), interactive=False, wrap=True, max_height=360,
                            label="Problems (errors first)", elem_id="data-check-problems")
    with gr.Row():
        durations = gr.BarPlot(value=None, x="bin", y="count", sort=None,
                               title="Durations (train)", x_label_angle=-45, height=260,
                               elem_id="data-check-durations")
        text_lengths = gr.BarPlot(value=None, x="bin", y="count", sort=None,
                                  title="Text lengths in characters (train)", x_label_angle=-45, height=260,
                                  elem_id="data-check-text-lengths")
    with gr.Row():
        scripts_plot = gr.BarPlot(value=None, x="script", y="letters", color="split",
                                  title="Letters by script", height=240, elem_id="data-check-scripts-plot")
        speakers_plot = gr.BarPlot(value=None, x="speaker", y="hours", color="split",
                                   sort="-y", title="Hours per speaker", x_label_angle=-45, height=240,
                                   elem_id="data-check-speakers-plot")
    with gr.Row():
        scripts = gr.Dataframe(value=empty_frame(SCRIPT_COLUMNS), interactive=False, label="Scripts",
                               elem_id="data-check-scripts")
        speakers = gr.Dataframe(value=empty_frame(SPEAKER_COLUMNS), interactive=False, max_height=300,
                                label="Speakers", elem_id="data-check-speakers")
    unknown_chars = gr.Dataframe(value=empty_frame(UNKNOWN_COLUMNS), interactive=False,
                                 label="Characters the tokenizer cannot encode", elem_id="data-check-unknown")
    with gr.Accordion("Full summary and JSON report", open=False):
        summary = gr.Textbox(lines=12, interactive=False, show_label=False, elem_id="data-check-summary")
        report_file = gr.File(label="data_check_report.json", interactive=False, elem_id="data-check-json")

    def on_check(train_text: str, val_text: str, tok: str, cfg: str, lang: str, files: bool,
                 progress: gr.Progress = gr.Progress()):  # noqa: B008 (Gradio's documented idiom)
        def report_progress(done: int, total: int) -> None:
            progress(done / total if total else 0.0, desc="checking")

        view = check_data(train_text, val_text, tok, cfg, lang, files, workspace, report_dir, report_progress)
        speakers_top = view.speakers.nlargest(40, "hours") if len(view.speakers) else view.speakers
        return (view.verdict, view.problems, view.durations, view.text_lengths, view.scripts, speakers_top,
                view.scripts, view.speakers, view.unknown_chars, view.summary, view.report_path)

    add_train.click(add_manifest, inputs=[train, picker], outputs=train)
    add_val.click(add_manifest, inputs=[val, picker], outputs=val)
    rescan.click(lambda: gr.Dropdown(choices=find_manifests(workspace)), outputs=picker)
    check_button.click(on_check, inputs=[train, val, tokenizer, config, language, check_files],
                       outputs=[verdict, problems, durations, text_lengths, scripts_plot, speakers_plot, scripts,
                                speakers, unknown_chars, summary, report_file])
