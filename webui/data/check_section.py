"""The Data tab's manifest check: the form (filled from the voice project's prepared data), the supervised
``python -m data_tools.check_data ... --json`` job, and its report as a verdict, tables and histograms."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gradio as gr
import pandas as pd

from webui.dataclass_json import from_json
from webui.form_inputs import InputProblem, existing_file, split_paths
from webui.jobs.job_panel import job_panel, wire_job
from webui.jobs.report_jobs import JobResult, ReportJob
from webui.plots import (
    badge_html,
    empty_frame,
    histogram_from_counts,
    message_html,
    records_frame,
)

if TYPE_CHECKING:
    from data_tools.check_report import DataReport, NumberSummary, SplitStats
    from trainer.project import Project
    from webui.context import StudioContext


NO_LANGUAGE = "any"


PROBLEM_COLUMNS = ["severity", "code", "file:line", "message"]


SCRIPT_COLUMNS = ["split", "script", "letters", "share %", "lines (main script)"]


SPEAKER_COLUMNS = ["split", "speaker", "utterances", "hours", "share %"]


UNKNOWN_COLUMNS = ["split", "character", "codepoint", "count", "first at"]


HISTOGRAM_COLUMNS = ["bin", "count"]


SKIP_DIRS = {".git", ".venv", "venv", "node_modules", "__pycache__", "logs", ".cache"}


MAX_MANIFESTS = 500


CHECK_JOB = ReportJob("data_check", report_exits=(0, 1))  # exit 1: the check found problems (a verdict)


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
    code_len_fixes: list[dict] = field(default_factory=list)  # v2: padded target_code_len, for the fix button


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
        code_len_fixes=list(report.code_len_fixes),
    )


def _manifest_arg(text: str, workspace: Path | str, what: str) -> str:
    """A typed manifest (``path`` or ``path::lang``), checked to exist; keeps the language suffix."""
    from data_tools.manifest import parse_manifest_spec

    spec = parse_manifest_spec(text)
    path = existing_file(str(spec.path), workspace, what)
    return f"{path}::{spec.language}" if spec.language else str(path)


def fix_code_len_action(fixes: list[dict] | None) -> str:
    """Write corrected paired manifests (``<name>.codelen_fixed.jsonl``) beside the checked ones."""
    from data_tools.check_data import write_code_len_fixes

    if not fixes:
        return message_html("nothing to correct: the last check found no batch-padded target_code_len")
    try:
        written = write_code_len_fixes(fixes)
    except (OSError, ValueError) as exc:
        return message_html(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
    files = ", ".join(str(path) for path in written)
    return badge_html("WRITTEN", f"{len(fixes)} target_code_len values corrected in {files} (originals unchanged)",
                      "ok")


def check_argv(python: str, train: str, val: str, tokenizer: str, config: str, language: str | None,
               check_files: bool, workspace: Path | str, report: Path) -> list[str]:
    """The data checker's command for the typed form (``python -m data_tools.check_data ... --json REPORT``).

    Raises InputProblem (one line) for a missing manifest, tokenizer or config: nothing starts then.
    """
    train_paths = [_manifest_arg(p, workspace, "manifest") for p in split_paths(train)]
    if not train_paths:
        raise InputProblem("give at least one training manifest")
    val_paths = [_manifest_arg(p, workspace, "validation manifest") for p in split_paths(val)]
    tokenizer_path = existing_file(tokenizer, workspace, "tokenizer", required=False)
    config_path = existing_file(config, workspace, "config", required=False)
    argv = [python, "-m", "data_tools.check_data"]
    for path in train_paths:
        argv += ["--manifest", path]
    for path in val_paths:
        argv += ["--val-manifest", path]
    if tokenizer_path is not None:
        argv += ["--tokenizer", str(tokenizer_path)]
    if config_path is not None:
        argv += ["--config", str(config_path)]
    if language and language != NO_LANGUAGE:
        argv += ["--language", language]
    if not check_files:
        argv.append("--no-file-checks")
    return [*argv, "--json", str(report)]


def data_report_from_json(data: Any) -> DataReport:
    """The checker's DataReport from its ``--json`` file (raises ValueError with a one-line reason)."""
    from data_tools.check_report import DataReport

    return from_json(DataReport, data)


def check_view_of(result: JobResult | None) -> CheckView:
    """What the check section shows for a data-check job: nothing yet, its report, or why there is none."""
    if result is None:
        return CheckView()
    try:
        report = data_report_from_json(result.report_json())
    except ValueError as exc:
        return CheckView(verdict=message_html(str(exc)))
    report_path = _report_arg(result.argv)
    return view_of_report(report, Path(report_path) if report_path else None)


def _report_arg(argv: tuple[str, ...] | list[str]) -> str | None:
    argv = list(argv)
    return argv[argv.index("--json") + 1] if "--json" in argv[:-1] else None


def check_outputs(view: CheckView) -> list[Any]:
    """The check section's outputs in the order build() wires them."""
    speakers_top = view.speakers.nlargest(40, "hours") if len(view.speakers) else view.speakers
    return [view.verdict, view.problems, view.durations, view.text_lengths, view.scripts, speakers_top,
            view.scripts, view.speakers, view.unknown_chars, view.summary, view.report_path, view.code_len_fixes]


@dataclass
class CheckForm:
    train: gr.Textbox
    val: gr.Textbox
    tokenizer: gr.Textbox
    config: gr.Textbox
    language: gr.Dropdown
    check_files: gr.Checkbox
    run: gr.Button

    @property
    def inputs(self) -> list[Any]:
        return [self.train, self.val, self.tokenizer, self.config, self.language, self.check_files]


def _manifest_picker(workspace: Path, form_train: gr.Textbox, form_val: gr.Textbox) -> None:
    with gr.Row(equal_height=True):
        picker = gr.Dropdown(choices=find_manifests(workspace), value=None, allow_custom_value=True, scale=4,
                             label="Manifests found in the workspace", elem_id="data-manifest-picker")
        add_train = gr.Button("Add to training", scale=1, elem_id="data-add-train")
        add_val = gr.Button("Add to validation", scale=1, elem_id="data-add-val")
        rescan = gr.Button("Rescan", scale=1, elem_id="data-rescan")
    add_train.click(add_manifest, inputs=[form_train, picker], outputs=form_train)
    add_val.click(add_manifest, inputs=[form_val, picker], outputs=form_val)
    rescan.click(lambda: gr.Dropdown(choices=find_manifests(workspace)), outputs=picker)


def project_check_values(project: Project | None) -> dict[str, str] | None:
    """The checker's train, val, tokenizer and config fields for the project's prepared data (empty manifests
    before it has any: never the demo's or another project's data); None without a project."""
    if project is None:
        return None
    from trainer.project import defaults_for

    handed = defaults_for(project, "check")
    return {"train": "\n".join(handed["train_manifest"]), "val": "\n".join(handed["val_manifest"]),
            "tokenizer": handed["tokenizer"], "config": handed["config"]}


def _check_form(ctx: StudioContext, languages: list[str], project: Project | None) -> CheckForm:
    paths = ctx.paths
    handed = project_check_values(project) or {"train": str(paths.train_manifest), "val": str(paths.val_manifest),
                                               "tokenizer": str(paths.tokenizer), "config": str(paths.config)}
    with gr.Row():
        train = gr.Textbox(value=handed["train"], lines=2, scale=3,
                           label="Training manifests (one per line; v1.5 codes or IndexTTS2 paired; path::am sets "
                                 "the language)", elem_id="data-train-manifests")
        val = gr.Textbox(value=handed["val"], lines=2, scale=3,
                         label="Validation manifests (optional, one per line)", elem_id="data-val-manifests")
    _manifest_picker(ctx.workspace, train, val)
    with gr.Row():
        tokenizer = gr.Textbox(value=handed["tokenizer"], label="Tokenizer (optional: token lengths, unknowns)",
                               elem_id="data-check-tokenizer")
        config = gr.Textbox(value=handed["config"], label="Config (optional: length and code limits)",
                            elem_id="data-check-config")
        language = gr.Dropdown(choices=languages, value="am" if "am" in languages else NO_LANGUAGE,
                               label="Expected language", elem_id="data-check-language", scale=0, min_width=140)
        check_files = gr.Checkbox(value=True, label="Check .npy / audio files", elem_id="data-check-files",
                                  scale=0, min_width=160)
    run = gr.Button("Check data", variant="primary", elem_id="data-check-run")
    return CheckForm(train, val, tokenizer, config, language, check_files, run)


def _check_results() -> list[Any]:
    """The check's result components, in check_outputs() order."""
    verdict = gr.HTML(elem_id="data-check-verdict")
    problems = gr.Dataframe(value=empty_frame(PROBLEM_COLUMNS), interactive=False, wrap=True, max_height=360,
                            label="Problems (errors first)", elem_id="data-check-problems")
    with gr.Row():
        durations = gr.BarPlot(value=None, x="bin", y="count", sort=None, title="Durations (train)",
                               x_label_angle=-45, height=260, elem_id="data-check-durations")
        text_lengths = gr.BarPlot(value=None, x="bin", y="count", sort=None, title="Text lengths in characters "
                                  "(train)", x_label_angle=-45, height=260, elem_id="data-check-text-lengths")
    with gr.Row():
        scripts_plot = gr.BarPlot(value=None, x="script", y="letters", color="split", title="Letters by script",
                                  height=240, elem_id="data-check-scripts-plot")
        speakers_plot = gr.BarPlot(value=None, x="speaker", y="hours", color="split", sort="-y",
                                   title="Hours per speaker", x_label_angle=-45, height=240,
                                   elem_id="data-check-speakers-plot")
    with gr.Row():
        scripts = gr.Dataframe(value=empty_frame(SCRIPT_COLUMNS), interactive=False, label="Scripts",
                               elem_id="data-check-scripts")
        speakers = gr.Dataframe(value=empty_frame(SPEAKER_COLUMNS), interactive=False, max_height=300,
                                label="Speakers", elem_id="data-check-speakers")
    unknown_chars = gr.Dataframe(value=empty_frame(UNKNOWN_COLUMNS), interactive=False,
                                 label="Characters the tokenizer cannot encode", elem_id="data-check-unknown")
    fix_button = gr.Button("Write corrected manifests (padded target_code_len)", elem_id="data-fix-code-len")
    fix_result = gr.HTML(elem_id="data-fix-result")
    fixes_state = gr.State([])
    fix_button.click(fix_code_len_action, inputs=fixes_state, outputs=fix_result)
    with gr.Accordion("Full summary and JSON report", open=False):
        summary = gr.Textbox(lines=12, interactive=False, show_label=False, elem_id="data-check-summary")
        report_file = gr.File(label="data_check_report.json", interactive=False, elem_id="data-check-json")
    return [verdict, problems, durations, text_lengths, scripts_plot, speakers_plot, scripts, speakers,
            unknown_chars, summary, report_file, fixes_state]


def check_section(ctx: StudioContext, languages: list[str], project: Project | None) -> CheckForm:
    gr.Markdown("### Check manifests\nRuns as its own process (a million-line manifest never blocks the page).")
    form = _check_form(ctx, languages, project)
    panel = job_panel(CHECK_JOB, "data-check")
    results = _check_results()

    def make_argv(*values: Any) -> list[str]:
        return check_argv(ctx.python, *values, ctx.workspace, CHECK_JOB.report_path(ctx))

    wire_job(ctx, panel, form.run, form.inputs, make_argv, results, lambda r: check_outputs(check_view_of(r)))
    return form
