"""The Data tab: recordings -> proofread clips (``webui.data.ingest_panel``), check manifests, split a manifest into
train/val, and prepare audio (IndexTTS-1.5: codes manifest; IndexTTS2: features and a paired manifest,
``webui.data.prepare_v2_section``; IndexTTS-2.5: codes, CAM++ / emotion vectors and a 2.5 paired manifest,
``webui.data.prepare_v25_section``; both laid out and run by ``webui.data.prepare_section``).

Every generation's training format is checked and split: IndexTTS-1.5 codes manifests, IndexTTS2 and IndexTTS-2.5
paired manifests (for the paired ones the check also finds batch-padded ``target_code_len`` values, and "Write
corrected manifests" writes a fixed copy beside each original). A manifest path may end in ``::am`` to set its language.

The data check reads every line (and every .npy it names), so it runs as a supervised job
(``python -m data_tools.check_data ... --json``, see ``webui.jobs.report_jobs``) with progress, log and Stop,
and the tab shows the JSON report it writes. Preprocessing runs for minutes to hours and touches the
DVAE, so it is a supervised subprocess too (``python -m data_tools.preprocess``). The split streams one
manifest and runs in-process. Callbacks are plain functions (plain values in, plain values out);
``build(ctx)`` only lays out and wires them, section by section.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gradio as gr
import pandas as pd

from data_tools.text import registered_languages
from webui.data import prepare_v2_section, prepare_v25_section
from webui.data.ingest_panel import build_ingest
from webui.data.prepare_section import job_controls, poll_job, stop_job, view_of
from webui.dataclass_json import from_json
from webui.form_inputs import InputProblem, existing_file, resolve_path, split_paths
from webui.jobs.job_panel import job_panel, wire_job
from webui.jobs.job_view import JobView
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
PREPROCESS_JOB = "preprocess"
CHECK_JOB = ReportJob("data_check", report_exits=(0, 1))  # exit 1: the check found problems (a verdict)


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


# -- split ------------------------------------------------------------------------------------------------

SPLIT_COLUMNS = ["side", "entries", "file"]


@dataclass
class SplitView:
    message: str
    table: pd.DataFrame = field(default_factory=lambda: empty_frame(SPLIT_COLUMNS))
    train_path: str = ""
    val_path: str = ""


def split_action(manifest: str, out_dir: str, val_fraction: float | None, seed: float | None,
                 held_out_speakers: float | None, workspace: Path | str) -> SplitView:
    """Split one manifest into train.jsonl / val.jsonl (deterministic by seed, speaker-aware, leak-free)."""
    from data_tools.split import SplitError, split_manifest

    try:
        source = existing_file(manifest, workspace, "manifest")
        target = resolve_path(out_dir, workspace)
        if target is None:
            raise InputProblem("give an output folder for train.jsonl and val.jsonl")
        fraction = float(val_fraction if val_fraction is not None else 0.05)
        if not 0.0 <= fraction < 1.0:
            raise InputProblem(f"val share must be at least 0 and below 1, got {fraction}")
        result = split_manifest(source, target, val_fraction=fraction, seed=int(seed or 0),
                                held_out_speakers=int(held_out_speakers or 0))
    except (InputProblem, SplitError, OSError) as exc:
        return SplitView(message=message_html(str(exc)))
    rows = [{"side": "train", "entries": result.train_count, "file": str(result.train_path)},
            {"side": "val", "entries": result.val_count, "file": str(result.val_path)}]
    if result.held_out:
        rows.append({"side": "held-out speakers (val only)", "entries": len(result.held_out),
                     "file": ", ".join(result.held_out)})
    rows += [{"side": "note", "entries": "", "file": note} for note in result.notes]
    detail = (f"{result.train_count} train / {result.val_count} val entries in {result.groups} leak-free groups, "
              f"val from {result.val_speakers} speaker(s)")
    return SplitView(message=badge_html("SPLIT", detail, "warn" if result.notes else "ok"),
                     table=records_frame(rows, SPLIT_COLUMNS), train_path=str(result.train_path),
                     val_path=str(result.val_path))


# -- preprocessing (a supervised subprocess) --------------------------------------------------------------

DEVICES = ("cpu", "cuda")


def preprocess_argv(python: str, input_path: Path, out_dir: Path, config: Path, dvae: Path | None, workers: int,
                    min_duration: float, max_duration: float | None, language: str | None, speaker: str,
                    device: str) -> list[str]:
    """The exact command the Start button runs (``python -m data_tools.preprocess ...``)."""
    argv = [python, "-m", "data_tools.preprocess", "--input", str(input_path), "--out-dir", str(out_dir),
            "--config", str(config), "--workers", str(workers), "--min-duration", f"{min_duration:g}",
            "--device", device]
    if dvae is not None:
        argv += ["--dvae", str(dvae)]
    if max_duration:
        argv += ["--max-duration", f"{max_duration:g}"]
    if language:
        argv += ["--language", language]
    if speaker.strip():
        argv += ["--speaker", speaker.strip()]
    return argv


def start_preprocess(ctx: StudioContext, input_text: str, out_dir: str, config: str, dvae: str,
                     workers: float | None, min_duration: float | None, max_duration: float | None,
                     language: str | None, speaker: str, device: str) -> tuple[str, JobView]:
    """Validate the form, then launch preprocessing under the supervisor: (message, job view)."""
    from webui.jobs.supervisor import RunAlreadyActive

    workspace = ctx.workspace
    try:
        input_path = resolve_path(input_text, workspace)
        if input_path is None:
            raise InputProblem("give the input: a JSONL list, a metadata.csv or a folder of audio + .txt")
        if not input_path.exists():
            raise InputProblem(f"input not found: {input_path}")
        target = resolve_path(out_dir, workspace)
        if target is None:
            raise InputProblem("give an output folder")
        config_path = existing_file(config, workspace, "config")
        dvae_path = existing_file(dvae, workspace, "DVAE checkpoint", required=False)
        if device not in DEVICES:
            raise InputProblem(f"device must be one of {', '.join(DEVICES)}")
        argv = preprocess_argv(ctx.python, input_path, target, config_path, dvae_path, max(1, int(workers or 1)),
                               float(min_duration or 0.0), float(max_duration) if max_duration else None,
                               None if not language or language == NO_LANGUAGE else language, speaker or "",
                               device)
        supervisor = ctx.run_background(PREPROCESS_JOB, argv)
    except (InputProblem, RunAlreadyActive, RuntimeError, OSError) as exc:
        return message_html(str(exc)), poll_preprocess(ctx)
    return badge_html("STARTED", f"preprocessing into {target}", "info"), view_of(supervisor)


def poll_preprocess(ctx: StudioContext) -> JobView:
    """The preprocessing job as it stands (also after a page reload or a UI restart)."""
    return poll_job(ctx, PREPROCESS_JOB)


def stop_preprocess(ctx: StudioContext) -> JobView:
    """Graceful stop (SIGINT: the tool saves what it finished; a rerun resumes), escalating if ignored."""
    return stop_job(ctx, PREPROCESS_JOB)


# -- layout -----------------------------------------------------------------------------------------------


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
    """The checker's train, val, tokenizer and config fields for the project's prepared data (None: it has none)."""
    if project is None:
        return None
    from trainer.project import defaults_for

    handed = defaults_for(project, "check")
    if not handed["train_manifest"]:
        return None
    return {"train": "\n".join(handed["train_manifest"]), "val": "\n".join(handed["val_manifest"]),
            "tokenizer": handed["tokenizer"], "config": handed["config"]}


def project_preprocess_values(project: Project | None) -> dict[str, str] | None:
    """The IndexTTS-1.5 preprocessing's input, output and config for an IndexTTS-1.5 project (None: another
    generation's project, or none)."""
    if project is None:
        return None
    from networks.generation_rule import ID_15
    from trainer.project import defaults_for

    if project.generation != ID_15:
        return None
    handed = defaults_for(project, "prepare")
    return {"input": handed["input"], "out_dir": handed["out_dir"], "config": handed["config"]}


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


def _check_section(ctx: StudioContext, languages: list[str], project: Project | None) -> CheckForm:
    gr.Markdown("### Check manifests\nRuns as its own process (a million-line manifest never blocks the page).")
    form = _check_form(ctx, languages, project)
    panel = job_panel(CHECK_JOB, "data-check")
    results = _check_results()

    def make_argv(*values: Any) -> list[str]:
        return check_argv(ctx.python, *values, ctx.workspace, CHECK_JOB.report_path(ctx))

    wire_job(ctx, panel, form.run, form.inputs, make_argv, results, lambda r: check_outputs(check_view_of(r)))
    return form


def _split_section(ctx: StudioContext, train: gr.Textbox, val: gr.Textbox) -> None:
    gr.Markdown("### Split a manifest into train and val")
    with gr.Row():
        source = gr.Textbox(value="", label="Manifest to split (v1.5 codes or IndexTTS2 paired)", scale=3,
                            elem_id="data-split-manifest", placeholder="e.g. data/prepared/manifest.jsonl")
        out = gr.Textbox(value=str(ctx.paths.data_dir / "split"), label="Output folder (train.jsonl, val.jsonl)",
                         scale=3, elem_id="data-split-out")
    with gr.Row():
        fraction = gr.Number(value=0.05, minimum=0, maximum=0.99, step=0.01, label="Val share",
                             elem_id="data-split-fraction")
        seed = gr.Number(value=0, precision=0, label="Seed (same seed, same split)", elem_id="data-split-seed")
        held_out = gr.Number(value=0, precision=0, minimum=0, label="Whole speakers held out for val",
                             elem_id="data-split-held-out")
    with gr.Row():
        run = gr.Button("Split", variant="primary", elem_id="data-split-run")
        use = gr.Button("Use the split in the checker", elem_id="data-split-use")
    result = gr.HTML(elem_id="data-split-result")
    table = gr.Dataframe(value=empty_frame(SPLIT_COLUMNS), interactive=False, wrap=True, label="Split",
                         elem_id="data-split-table")
    files = gr.State(("", ""))

    def on_split(manifest: str, folder: str, share: float, seed_value: float, held: float):
        view = split_action(manifest, folder, share, seed_value, held, ctx.workspace)
        return view.message, view.table, (view.train_path, view.val_path)

    def on_use(split_files: tuple[str, str]):
        train_path, val_path = split_files or ("", "")
        return (train_path, val_path) if train_path else (gr.skip(), gr.skip())

    run.click(on_split, inputs=[source, out, fraction, seed, held_out], outputs=[result, table, files])
    use.click(on_use, inputs=files, outputs=[train, val])


def _preprocess_form(ctx: StudioContext, languages: list[str], project: Project | None) -> list[Any]:
    """The preprocessing fields, in start_preprocess() order."""
    paths = ctx.paths
    handed = project_preprocess_values(project) or {"input": "", "out_dir": str(paths.data_dir / "prepared"),
                                                    "config": str(paths.config)}
    with gr.Row():
        source = gr.Textbox(value=handed["input"], scale=3, elem_id="data-prep-input",
                            label="IndexTTS-1.5 preparation input: a JSONL list, a metadata.csv (LJSpeech) or a folder of audio + .txt")
        out = gr.Textbox(value=handed["out_dir"], scale=2, label="Output folder",
                         elem_id="data-prep-out")
    with gr.Row():
        config = gr.Textbox(value=handed["config"], label="Config (vqvae and gpt sections)",
                            elem_id="data-prep-config")
        dvae = gr.Textbox(value="", label="DVAE checkpoint (empty: the config's dvae_checkpoint)",
                          elem_id="data-prep-dvae")
    with gr.Row():
        workers = gr.Number(value=max(1, (os.cpu_count() or 2) - 1), precision=0, minimum=1, label="Workers",
                            elem_id="data-prep-workers")
        min_duration = gr.Number(value=0.5, minimum=0, label="Min duration (s)", elem_id="data-prep-min-duration")
        max_duration = gr.Number(value=0, minimum=0, label="Max duration (s; 0: what the model fits)",
                                 elem_id="data-prep-max-duration")
        language = gr.Dropdown(choices=languages, value="am" if "am" in languages else NO_LANGUAGE,
                               label="Language", elem_id="data-prep-language")
        speaker = gr.Textbox(value="", label="Speaker (for entries naming none)", elem_id="data-prep-speaker")
        device = gr.Radio(choices=list(DEVICES), value="cpu", label="DVAE device", elem_id="data-prep-device")
    return [source, out, config, dvae, workers, min_duration, max_duration, language, speaker, device]


def _preprocess_section(ctx: StudioContext, languages: list[str], project: Project | None) -> list[Any]:
    gr.Markdown("### Prepare audio: audio + transcripts -> DVAE codes and a codes manifest\n"
                "Runs as its own process: it keeps going if you close the browser, and a rerun skips what "
                "is already done.")
    fields = _preprocess_form(ctx, languages, project)
    state = [ctx.project_state] if ctx.project_state is not None else []

    def start(*values: Any) -> tuple[str, JobView]:
        from webui.data.prepare_section import note_preparation

        typed = values[:len(fields)]
        message, view = start_preprocess(ctx, *typed)
        if state and "STARTED" in message:
            target = resolve_path(typed[1], ctx.workspace)
            note_preparation(ctx.project(values[-1]), str(resolve_path(typed[0], ctx.workspace)), str(target))
        return message, view

    job_controls(ctx, PREPROCESS_JOB, "data-prep", "Start preprocessing", "Preprocessing log", [*fields, *state],
                 start)
    return fields


def _project_handoff(ctx: StudioContext, refill: Any, check: CheckForm, preprocess: list[Any],
                     paired: list[dict[str, Any]]) -> None:
    """A new project picked in the session (or the button) refills the checker with its prepared data and the
    IndexTTS-1.5 preprocessing with its saved manifest; the paired sections follow by themselves."""
    if ctx.project_state is None:
        return
    outputs = [check.train, check.val, check.tokenizer, check.config, *preprocess[:3]]

    def values(name: str | None) -> list[Any]:
        project = ctx.project(name)
        checked, prepared = project_check_values(project), project_preprocess_values(project)
        shown = [checked[key] for key in ("train", "val", "tokenizer", "config")] if checked else [gr.skip()] * 4
        return shown + ([prepared[key] or gr.skip() for key in ("input", "out_dir", "config")] if prepared
                        else [gr.skip()] * 3)

    refill.click(values, inputs=ctx.project_state, outputs=outputs)
    ctx.project_state.change(values, inputs=ctx.project_state, outputs=outputs)
    for section, fields in zip((prepare_v2_section.SECTION, prepare_v25_section.SECTION), paired, strict=True):
        names = list(fields)
        refill.click(lambda name, s=section, n=names: s.project_values(ctx, name, n), inputs=ctx.project_state,
                     outputs=list(fields.values()))


def build(ctx: StudioContext) -> None:
    """Lay out the Data tab (called by the shell inside ``with gr.Tab("Data")``)."""
    languages = language_choices()
    project = ctx.project(ctx.project_state.value) if ctx.project_state is not None else None
    refill = None
    if ctx.project_state is not None:
        refill = gr.Button("Fill the forms from the project (its saved manifest, its prepared data)", size="sm",
                           elem_id="data-project-fill")
    with gr.Accordion("Recordings → clips: slice, transcribe, proofread", open=False, elem_id="data-ingest"):
        ingest = build_ingest(ctx, languages)
    form = _check_section(ctx, languages, project)
    _split_section(ctx, form.train, form.val)
    preprocess = _preprocess_section(ctx, languages, project)
    paired = [section.build(ctx, languages) for section in (prepare_v2_section.SECTION, prepare_v25_section.SECTION)]
    inputs = [preprocess[0], *(fields["input"] for fields in paired)]
    # the saved manifest is the input of every generation's preparation: the one prepared is the user's choice
    ingest.use_manifest.click(lambda path: [path or gr.skip()] * len(inputs), inputs=ingest.manifest, outputs=inputs)
    _project_handoff(ctx, refill, form, preprocess, paired)
