"""The Data tab: recordings -> proofread clips (``webui.data.ingest_panel``), check manifests, split a manifest into
train/val, and prepare audio (IndexTTS-1.5: codes manifest; every other generation whose registry entry gives
a ``ui.prepare_section``, oldest first: its own section from its folder,
``generations/<name>/ui/prepare_section.py``, laid out and run by ``webui.data.prepare_section``).

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
from generations.registry import oldest_first
from webui.data.check_section import NO_LANGUAGE, CheckForm, check_section, project_check_values
from webui.data.ingest_panel import build_ingest
from webui.data.prepare_section import PrepareSection, job_controls, poll_job, stop_job, view_of
from webui.form_inputs import InputProblem, existing_file, resolve_path
from webui.jobs.job_view import JobView
from webui.plots import (
    badge_html,
    empty_frame,
    message_html,
    records_frame,
)

if TYPE_CHECKING:
    from trainer.project import Project
    from webui.context import StudioContext


PREPROCESS_JOB = "preprocess"
PREPROCESS_COMMAND = "data_tools.preprocess"  # the preparation this form runs (an entry's ``prepare``)


def language_choices() -> list[str]:
    return [NO_LANGUAGE, *registered_languages()]


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


DEVICES = ("cpu", "cuda")


def preprocess_argv(python: str, input_path: Path, out_dir: Path, config: Path, dvae: Path | None, workers: int,
                    min_duration: float, max_duration: float | None, language: str | None, speaker: str,
                    device: str) -> list[str]:
    """The exact command the Start button runs (``python -m data_tools.preprocess ...``)."""
    argv = [python, "-m", PREPROCESS_COMMAND, "--input", str(input_path), "--out-dir", str(out_dir),
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


def project_preprocess_values(project: Project | None) -> dict[str, str] | None:
    """The IndexTTS-1.5 preprocessing's input, output and config for an IndexTTS-1.5 project; empty input and
    output for a user's project of another generation (its data is not this form's); None otherwise (a demo
    project of another generation, or none: the form keeps its values)."""
    if project is None:
        return None
    from generations.registry import GENERATIONS
    from trainer.project import defaults_for
    from webui.context import is_demo_project

    prepared_here = any(entry.id == project.generation and entry.prepare == PREPROCESS_COMMAND for entry in GENERATIONS)
    if not prepared_here:
        return None if is_demo_project(project.name) else {"input": "", "out_dir": "", "config": ""}
    handed = defaults_for(project, "prepare")
    return {"input": handed["input"], "out_dir": handed["out_dir"], "config": handed["config"]}


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
                               label="Language of the clips", elem_id="data-prep-language")
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


def data_form_values(ctx: StudioContext, name: str | None) -> list[Any]:
    """The checker's train, val, tokenizer and config and the IndexTTS-1.5 preprocessing's input, output and
    config for project ``name`` (gr.skip() where it gives nothing: no project)."""
    project = ctx.project(name)
    checked, prepared = project_check_values(project), project_preprocess_values(project)
    shown = [checked[key] for key in ("train", "val", "tokenizer", "config")] if checked else [gr.skip()] * 4
    if prepared is None:
        return shown + [gr.skip()] * 3
    return [*shown, prepared["input"], prepared["out_dir"], prepared["config"] or gr.skip()]


def prepare_sections() -> list[PrepareSection]:
    """Each generation's own preparation section, oldest generation first (its registry entry's ``ui`` facet)."""
    return [entry.ui.prepare_section() for entry in oldest_first()
            if entry.ui is not None and entry.ui.prepare_section is not None]


def _project_handoff(ctx: StudioContext, refill: Any, check: CheckForm, preprocess: list[Any],
                     sections: list[PrepareSection], paired: list[dict[str, Any]]) -> None:
    """The session's project (the page loaded, another picked, a step finished: ``webui.project.follow``) and
    the button fill the checker with its prepared data and every preparation with its saved manifest and
    model files."""
    if ctx.project_state is None:
        return
    from webui.project import follow

    outputs = [check.train, check.val, check.tokenizer, check.config, *preprocess[:3]]
    refill.click(lambda name: data_form_values(ctx, name), inputs=ctx.project_state, outputs=outputs)
    follow.follow(ctx, lambda stamp: data_form_values(ctx, follow.stamp_name(stamp)), outputs)
    for section, fields in zip(sections, paired, strict=True):
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
    form = check_section(ctx, languages, project)
    _split_section(ctx, form.train, form.val)
    preprocess = _preprocess_section(ctx, languages, project)
    sections = prepare_sections()
    paired = [section.build(ctx, languages) for section in sections]
    inputs = [preprocess[0], *(fields["input"] for fields in paired)]
    # the saved manifest is the input of every generation's preparation: the one prepared is the user's choice
    ingest.use_manifest.click(lambda path: [path or gr.skip()] * len(inputs), inputs=ingest.manifest, outputs=inputs)
    _project_handoff(ctx, refill, form, preprocess, sections, paired)
