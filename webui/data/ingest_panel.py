"""Recordings -> clips in the Data tab: ingest as a supervised job, then proofreading (``webui.data.proofread_panel``).

The job is ``python -m data_tools.ingest run ... --json`` under the studio's supervisor (``webui.jobs.report_jobs``):
it imports the recordings, slices them (silero voice activity, or their subtitles' cues), transcribes the clips
when an ASR model is given, and applies the quality gates. It keeps going if the browser closes; a rerun into
the same folder continues where it stopped and keeps the proofreading edits. Its JSON summary is the job's
report; when the job ends, the proofreading table below shows the folder. Nothing here imports torch.

The base model (a dropdown of the workspace's model folders, the demo's first) bounds the slicer: its longest
clip comes from the model's limits (``data_tools.model_limits``), and a clip that still does not fit (a long
subtitle cue, a text over the model's text tokens) is flagged at import, where it is proofread.

The suggested Amharic ASR models come from ``data_tools.asr.SUGGESTED_AMHARIC_MODELS`` (licences included);
none is bundled: a Hub id is downloaded by transformers when the job starts, a local folder is used as it is.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gradio as gr

from generations.registry import DEMO_CHECKPOINTS, demo_paths
from webui.data.proofread_panel import ALL, DEFAULT_PAGE_SIZE, build_proofread, page_values, page_view
from webui.form_inputs import InputProblem, existing_file, resolve_path
from webui.jobs.job_panel import job_panel, report_view, wire_job
from webui.jobs.report_jobs import JobResult, ReportJob, stdout_report_argv
from webui.plots import badge_html
from webui.project import follow

if TYPE_CHECKING:
    from webui.context import StudioContext

INGEST_JOB = ReportJob("ingest")
DEVICES = ("auto", "cpu", "cuda")
NO_MODEL = "none (no transcription)"
NO_BASE_MODEL = "none (no model limits)"
NO_LANGUAGE = "any"
_HUB_ID = re.compile(r"^[\w.\-]+/[\w.\-]+$")
_LANG_CODE = re.compile(r"^[A-Za-z]{2,8}([_-][A-Za-z0-9]{1,8})*$")


def suggested_models() -> list[Any]:
    from data_tools.asr import SUGGESTED_AMHARIC_MODELS

    return list(SUGGESTED_AMHARIC_MODELS)


def suggestions_markdown() -> str:
    """The suggested Amharic ASR models as a table: id, MMS language, licence, what it is."""
    lines = ["| model | MMS target_lang | licence | licence checked on the model card | notes |", "|---|---|---|---|---|"]
    for model in suggested_models():
        checked = "yes" if model.verified else "no"
        lines.append(f"| `{model.model}` | {model.target_lang or '-'} | {model.licence} | {checked} | {model.note} |")
    return ("Suggested Amharic speech recognisers (CTC). None is bundled: a model id is downloaded from the "
            "Hugging Face Hub when the job starts; check the licence on its model card before use.\n\n"
            + "\n".join(lines))


def downloaded_asr_models(workspace: Path | str | None) -> list[Any]:
    """ASR model folders the Models tab downloaded into the workspace (complete ones only)."""
    if workspace is None:
        return []
    from trainer.models.record import downloaded_model_dirs

    return [found for found in downloaded_model_dirs(Path(workspace), "asr") if found.complete]


def model_choices(workspace: Path | str | None = None) -> list[str]:
    """No model, the workspace's downloaded ASR folders (their paths: nothing is fetched again), the suggestions."""
    downloaded = [str(found.path) for found in downloaded_asr_models(workspace)]
    return [NO_MODEL, *downloaded, *(model.model for model in suggested_models())]


def pick_model(choice: str | None, workspace: Path | str | None = None) -> tuple[str, str]:
    """A choice picked from the list -> (model field, target language field)."""
    for found in downloaded_asr_models(workspace):
        if str(found.path) == choice:
            lang = next((m.target_lang for m in suggested_models() if m.model == found.set_name), None)
            return str(found.path), lang or ""
    for model in suggested_models():
        if model.model == choice:
            return model.model, model.target_lang or ""
    return "", ""


def asr_model_arg(text: str | None, workspace: Path | str) -> str | None:
    """The model field: a local folder (relative to the workspace, or absolute) or a Hub id; None when empty."""
    typed = (text or "").strip().strip("'\"").strip()
    if not typed:
        return None
    path = resolve_path(typed, workspace, "ASR model")
    if path is not None and path.exists():
        if not path.is_dir():
            raise InputProblem(f"ASR model: {path} is a file; give the model's folder (config.json beside the weights)")
        return str(path)
    if typed.startswith(("/", "~", ".")) or "\\" in typed or not _HUB_ID.match(typed):
        raise InputProblem(f"ASR model: no folder {path} and not a model id like 'facebook/mms-1b-all'")
    return typed


def base_model_choices(workspace: Path | str) -> list[str]:
    """The workspace's model folders (the demo's, then the Models tab's downloads), then none."""
    root = Path(workspace)
    demo = demo_paths(root, DEMO_CHECKPOINTS)  # each generation's demo model
    downloaded = [found.path for found in _downloaded_generations(root)]
    folders = [str(path) for path in [*demo, *downloaded] if (path / "config.yaml").is_file()]
    return [*dict.fromkeys(folders), NO_BASE_MODEL]


def _downloaded_generations(workspace: Path) -> list[Any]:
    from trainer.models.record import downloaded_model_dirs

    return [found for found in downloaded_model_dirs(workspace, "generation") if found.complete]


def base_model_args(text: str | None, workspace: Path | str) -> list[str]:
    """The base model field: a model folder (``--model-dir``) or a config.yaml (``--config``); [] for none."""
    typed = (text or "").strip()
    if not typed or typed == NO_BASE_MODEL:
        return []
    path = resolve_path(typed, workspace, "base model")
    if path is not None and path.is_dir():
        if not (path / "config.yaml").is_file():
            raise InputProblem(f"base model: no config.yaml in {path}")
        return ["--model-dir", str(path)]
    config = existing_file(typed, workspace, "config")
    return ["--config", str(config)]


def link_lines(text: str | None) -> list[str]:
    """The links field: one link a line (or separated by spaces); each must be http(s)."""
    links = (text or "").split()
    bad = [link for link in links if not link.startswith(("http://", "https://"))]
    if bad:
        raise InputProblem(f"links: {bad[0]!r} is not an http(s) link (one link a line)")
    return links


def extra_args(workspace: Path | str, links: str = "", licence: str = "", separate: str = "",
               speaker_model: str = "", speaker_threshold: float | None = None, long_clips: bool = False,
               max_inner_pause: float | None = None, loudness_scope: str = "clip") -> list[str]:
    """The options beyond the basic form: links, separation, speaker labels, long clips, dataset loudness."""
    args: list[str] = []
    for link in link_lines(links):
        args += ["--url", link]
    if links and (licence or "").strip():
        args += ["--licence", licence.strip()]
    for flag, typed, what in (("--separate", separate, "separation model"),
                              ("--speaker-model", speaker_model, "speaker model")):
        typed = (typed or "").strip()
        if typed:
            path = resolve_path(typed, workspace, what)
            args += [flag, str(path) if path is not None and path.exists() else typed]
    if (speaker_model or "").strip() and speaker_threshold is not None:
        if not 0 < float(speaker_threshold) < 1:
            raise InputProblem(f"speaker threshold {speaker_threshold}: between 0 and 1")
        args += ["--speaker-threshold", f"{float(speaker_threshold):g}"]
    if long_clips:
        args.append("--long-clips")
    if max_inner_pause:
        args += ["--max-inner-pause", f"{float(max_inner_pause):g}"]
    if loudness_scope == "dataset":
        args += ["--loudness-scope", "dataset"]
    return args


def ingest_argv(python: str, input_text: str, out_dir: str, language: str | None, speaker: str,
                asr_model: str, asr_language: str, device: str, config: str, tokenizer: str,
                workspace: Path | str, report: Path, extras: list[str] | None = None) -> list[str]:
    """The job's command (``python -m webui.jobs.stdout_report --out REPORT -- data_tools.ingest run ... --json``);
    ``extras`` from ``extra_args``. With links, the recordings folder may be left empty or missing.

    Raises InputProblem (one line) for a missing input, a bad model field or a bad language code.
    """
    extras = extras or []
    source = resolve_path(input_text, workspace, "recordings")
    if source is None and "--url" not in extras:
        raise InputProblem("give the recordings: a folder (with .srt/.vtt or .txt beside them) or a metadata.csv")
    if source is not None and not source.exists():
        if "--url" not in extras:
            raise InputProblem(f"recordings not found: {source}")
        source = None
    target = resolve_path(out_dir, workspace, "ingest folder")
    if target is None:
        raise InputProblem("give the ingest folder (clips, edits and manifests go there)")
    if target.exists() and not target.is_dir():
        raise InputProblem(f"ingest folder is a file: {target}")
    args = ["run", *(["--input", str(source)] if source is not None else []), "--out-dir", str(target)]
    if language and language != NO_LANGUAGE:
        args += ["--language", language]
    if (speaker or "").strip():
        args += ["--speaker", speaker.strip()]
    model = asr_model_arg(asr_model, workspace)
    if model is not None:
        args += ["--asr-model", model, "--device", device if device in DEVICES else "auto"]
        lang = (asr_language or "").strip()
        if lang:
            if not _LANG_CODE.match(lang):
                raise InputProblem(f"ASR target language: {lang!r} is not a language code like 'amh'")
            args += ["--asr-language", lang]
    model_args = base_model_args(config, workspace)
    tokenizer_path = existing_file(tokenizer, workspace, "tokenizer", required=False)
    if tokenizer_path is not None and not model_args:
        raise InputProblem("the tokenizer is used with a config (its GPT's text length limit): give both")
    args += model_args
    if tokenizer_path is not None:
        args += ["--tokenizer", str(tokenizer_path)]
    return stdout_report_argv(python, report, "data_tools.ingest", *args, *extras, "--json")


def out_dir_of(argv: tuple[str, ...] | list[str]) -> str | None:
    argv = list(argv)
    return argv[argv.index("--out-dir") + 1] if "--out-dir" in argv[:-1] else None


def summary_html(result: JobResult | None) -> str:
    """The job's verdict: how many clips, how many the gates rejected, the problems; or why there is none."""
    return report_view(result, _summary_of, no_report="the ingest left no summary")


def _summary_of(summary: dict) -> str:
    clips, rejected = int(summary["clips"]), int(summary["rejected"])
    problems = [str(p) for p in summary.get("problems", [])]
    model = f"cut for the {summary['model']}; " if summary.get("model") else ""
    too_long = int(summary.get("too_long", 0) or 0)
    flagged = f", {too_long} too long for the model (flagged: proofread them)" if too_long else ""
    detail = (f"{model}{clips} clip(s) from {summary.get('sources', 0)} recording(s) ({float(summary.get('hours', 0)):.2f} h; "
              f"{summary.get('sources_done_before', 0)} done before), {rejected} rejected by the gates{flagged}, "
              f"{summary.get('transcribed', 0)} transcribed, {summary.get('left_out_fragments', 0)} short "
              f"fragment(s) left out, {len(problems)} problem(s) in {summary.get('out_dir', '')}")
    shown = badge_html("SLICED", detail, "warn" if problems else "ok")
    if problems:
        items = "".join(f"<li>{html.escape(problem)}</li>" for problem in problems[:20])
        shown += f"<ul class='ingest-problems'>{items}</ul>"
    return shown


# -- layout -----------------------------------------------------------------------------------------------


@dataclass
class IngestSection:
    folder: gr.Textbox  # the ingest folder, shared by the job and the proofreading table
    manifest: gr.Textbox  # the last manifest saved ('' before)
    use_manifest: gr.Button  # "prepare it": the tab wires it to the preprocessing input


def _asr_fields(workspace: Path) -> list[Any]:
    with gr.Accordion("Transcription (optional): an ASR model for clips without a transcript", open=False):
        gr.Markdown(suggestions_markdown(), elem_id="ingest-asr-suggestions")
        with gr.Row():
            pick = gr.Dropdown(choices=model_choices(workspace), value=NO_MODEL, scale=2,
                               label="Suggested or downloaded model (the Models tab downloads them)",
                               elem_id="ingest-asr-pick")
            model = gr.Textbox(value="", scale=3, label="ASR model: a local folder or a Hub model id (empty: none)",
                               placeholder="e.g. facebook/mms-1b-all or models/my-ctc-model",
                               elem_id="ingest-asr-model")
            target = gr.Textbox(value="", scale=1, label="MMS target_lang (e.g. amh)", elem_id="ingest-asr-lang")
            device = gr.Radio(choices=list(DEVICES), value="auto", label="Device", scale=1,
                              elem_id="ingest-asr-device")
    pick.change(lambda choice: pick_model(choice, workspace), inputs=pick, outputs=[model, target])
    # A download finished in the Models tab while this page was open shows up the next time the list opens.
    pick.focus(lambda: gr.Dropdown(choices=model_choices(workspace)), outputs=pick)
    return [model, target, device]


EXTRA_FIELDS = ("links", "licence", "separate", "speaker_model", "speaker_threshold", "long_clips",
                "max_inner_pause", "loudness_scope")


def _source_fields() -> list[Any]:
    """Links, voice separation, speaker labels, prosody clips: the components in ``EXTRA_FIELDS`` order."""
    with gr.Accordion("Links, music, several speakers, long clips (optional)", open=False):
        with gr.Row():
            links = gr.Textbox(value="", lines=2, scale=3, elem_id="ingest-links",
                               label="Links: video pages, media links or playlists, one a line (fetched with yt-dlp, "
                                     "audio only, subtitles in the language)")
            licence = gr.Textbox(value="", scale=1, label="Their licence (kept with the clips)",
                                 elem_id="ingest-licence")
        with gr.Row():
            separate = gr.Textbox(value="", scale=2, elem_id="ingest-separate",
                                  label="Separate the voice from music first: a demucs model file, folder or name "
                                        "(e.g. htdemucs; empty: no separation)")
            speaker_model = gr.Textbox(value="", scale=2, elem_id="ingest-speaker-model",
                                       label="Tell speakers apart: CAM++ weights or an x-vector model (empty: no)")
            threshold = gr.Slider(0.05, 0.95, value=0.3, step=0.05, scale=1, elem_id="ingest-speaker-threshold",
                                  label="Same-speaker similarity (higher: more speakers)")
        with gr.Row():
            long_clips = gr.Checkbox(value=False, label="Long clips for prosody (10-15 s, cut at sentence ends)",
                                     elem_id="ingest-long-clips")
            inner = gr.Number(value=None, label="Cap pauses inside a clip at (s, e.g. 0.4; empty: no cap)",
                              elem_id="ingest-inner-pause")
            scope = gr.Radio(choices=["clip", "dataset"], value="clip", elem_id="ingest-loudness-scope",
                             label="Loudness: each clip, or the whole dataset with one gain")
    return [links, licence, separate, speaker_model, threshold, long_clips, inner, scope]


def build_ingest(ctx: StudioContext, languages: list[str]) -> IngestSection:
    """The ingest form, its job panel and the proofreading panel (called inside the tab's accordion)."""
    workspace = ctx.workspace
    gr.Markdown("Import long recordings, cut them into clips (at pauses, or at their subtitles' cues), transcribe "
                "them (optional), and let quality gates mark the doubtful ones. Runs as its own process; a rerun "
                "continues where it stopped and keeps your edits.")
    with gr.Row():
        source = gr.Textbox(value=str(workspace / "recordings"), scale=3, elem_id="ingest-input",
                            label="Recordings: a folder (.srt/.vtt or .txt beside a file are used) or a metadata.csv")
        folder = gr.Textbox(value=str(workspace / "ingest"), scale=3, elem_id="ingest-out",
                            label="Ingest folder (clips, edits, manifests)")
    with gr.Row():
        language = gr.Dropdown(choices=languages, value="am" if "am" in languages else NO_LANGUAGE,
                               label="Language of the recordings", scale=1, elem_id="ingest-language")
        speaker = gr.Textbox(value="", scale=2, label="Speaker (empty: the first folder level names it)",
                             elem_id="ingest-speaker")
        models = base_model_choices(workspace)
        config = gr.Dropdown(choices=models, value=models[0], allow_custom_value=True, scale=2,
                             label="Base model: clips are cut to what it takes (a folder or config.yaml)",
                             elem_id="ingest-config")
        tokenizer = gr.Textbox(value="", scale=2, label="Tokenizer counting text tokens (empty: the model's own)",
                               elem_id="ingest-tokenizer")
    model, target, device = _asr_fields(workspace)
    more = _source_fields()
    start = gr.Button("Import and slice", variant="primary", elem_id="ingest-start")
    panel = job_panel(INGEST_JOB, "ingest")
    summary = gr.HTML(elem_id="ingest-summary")
    proofread = build_proofread(ctx, folder)
    with gr.Row():
        use_manifest = gr.Button("Prepare the saved manifest (fills the preprocessing input below)", size="sm",
                                 elem_id="proof-use-manifest")

    def make_argv(*values: Any) -> list[str]:
        basic, chosen = values[:9], dict(zip(EXTRA_FIELDS, values[9:], strict=True))
        return ingest_argv(ctx.python, *basic, workspace, INGEST_JOB.report_path(ctx),
                           extra_args(workspace, **chosen))

    def render(result: JobResult | None, project_name: str | None = None) -> list[Any]:
        skip = gr.skip()
        if result is None:  # a job just started: keep the table as it is
            return ["", skip, *[skip] * len(proofread.page_outputs)]
        shown = out_dir_of(result.argv)
        if shown is not None and not _of_project(ctx, shown, project_name):
            return ["", skip, *[skip] * len(proofread.page_outputs)]  # another project's import: the form keeps ours
        if shown is None:
            return [summary_html(result), skip, *[skip] * len(proofread.page_outputs)]
        view = page_view(shown, 0, ALL, DEFAULT_PAGE_SIZE, workspace)
        return [summary_html(result), shown, *page_values(view)]

    inputs = [source, folder, language, speaker, model, target, device, config, tokenizer, *more]
    wire_job(ctx, panel, start, inputs, make_argv, [summary, folder, *proofread.page_outputs], render,
             render_inputs=[ctx.project_state] if ctx.project_state is not None else ())
    if ctx.project_state is not None:
        _follow_project(ctx, source, folder, config)
    return IngestSection(folder=folder, manifest=proofread.manifest, use_manifest=use_manifest)


def _of_project(ctx: StudioContext, out_dir: str, project_name: str | None) -> bool:
    """Whether an import's ingest folder may fill the form of a page on ``project_name``: not when it is another
    project's (a page opening on a new project would show the last project's clips), else yes."""
    from trainer.project.layout import projects_root

    project = ctx.opening_project(project_name)
    folder = Path(out_dir).resolve()
    return project is None or not folder.is_relative_to(projects_root(ctx.workspace)) \
        or folder.is_relative_to(project.folder.resolve())


def _follow_project(ctx: StudioContext, source: gr.Textbox, folder: gr.Textbox, config: gr.Dropdown) -> None:
    """The project's recordings, ingest folder and base model fill the form (when the page opens and when
    another project is picked), so clips are cut to what the project's model takes."""
    def values(name: str | None, picked: bool = True) -> list[Any]:
        project = ctx.project(name) if picked else ctx.opening_project(name)  # a demo opens as it always did
        if project is None:
            return [gr.skip()] * 3
        model = str(project.model_path)
        choices = base_model_choices(ctx.workspace)
        return [str(project.dir("recordings")), str(project.dir("ingest")),
                gr.Dropdown(choices=choices if model in choices else [*choices, model], value=model)]

    def followed(stamp: Any) -> list[Any]:  # the page loaded or a project was picked (a step changes none of these)
        cause = follow.stamp_cause(stamp)
        return [gr.skip()] * 3 if cause == follow.STEP else values(follow.stamp_name(stamp), cause == follow.PICK)

    follow.follow(ctx, followed, [source, folder, config])
