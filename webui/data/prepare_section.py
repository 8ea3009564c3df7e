"""The Data tab's preparation section, for any generation: a form laid out from the generation's facts, whose
command runs as a supervised job.

A generation gives a ``PairedPrepareForm`` subclass (its model files, its command's module and flags) and the
rows of ``Field``s it shows; ``build_section`` lays those out between the shared source and options rows and
wires Start / Stop / the polling timer (``job_controls``, also used by the IndexTTS-1.5 preprocessing). The job
runs under the studio's supervisor in ``<workspace>/jobs/<job>/`` (run.json, console.log, progress from its
tqdm bar, Stop = SIGINT: finished batches are kept and a rerun resumes).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import gradio as gr

from webui.form_inputs import InputProblem, existing_file, resolve_path
from webui.jobs.job_view import JobView, job_view
from webui.jobs.launcher import module_command
from webui.plots import badge_html, message_html

if TYPE_CHECKING:
    from trainer.project import Project
    from webui.context import StudioContext

DEVICES = ("auto", "cpu", "cuda")
LOG_TAIL_BYTES = 16 * 1024
POLL_S = 1.0
NO_LANGUAGE = "any"
DEFAULT_W2V_BERT = "facebook/w2v-bert-2.0"
_MODEL_ID = re.compile(r"^[A-Za-z0-9][\w.\-]*/[\w.\-]+$")  # owner/name, not ./x or ../x

FileFact = tuple[str, str, str]  # (flag, form field, what the refusal calls it)


def w2v_bert_argument(value: str, workspace: Path) -> str:
    """The ``--w2v-bert`` value: an existing folder, or a model id like facebook/w2v-bert-2.0."""
    text = value.strip() or DEFAULT_W2V_BERT
    folder = resolve_path(text, workspace, "w2v-BERT")
    if folder is not None and folder.is_dir():
        return str(folder)
    if _MODEL_ID.match(text):
        return text  # a model id (downloaded by transformers if it is not cached)
    raise InputProblem(f"w2v-BERT folder not found: {folder} (give a local folder or a model id like "
                       f"{DEFAULT_W2V_BERT})")


@dataclass(frozen=True)
class PairedPrepareForm:
    """The fields every paired preparation has (strings as typed); ``argv`` checks them and builds the command.

    A generation's subclass adds its own fields and sets ``MODULE``, ``REQUIRED_FILES`` and ``OPTIONAL_FILES``
    (``(flag, field, what)``: a required file must exist, an optional one is passed only when given).
    """

    MODULE: ClassVar[str]
    REQUIRED_FILES: ClassVar[tuple[FileFact, ...]]
    OPTIONAL_FILES: ClassVar[tuple[FileFact, ...]]

    input: str
    out_dir: str
    config: str
    gpt: str
    codec: str
    w2v_bert: str
    w2v_stats: str
    tokenizer: str
    language: str | None
    speaker: str
    pairs_per_target: float | None
    seed: float | None
    device: str
    batch_seconds: float | None
    processes: float | None = dataclasses.field(default=1, kw_only=True)  # >1: under torchrun, one per GPU

    def argv(self, python: str, workspace: Path) -> list[str]:
        """``python -m <MODULE> ...`` (with more than one process: torchrun around it, ``module_command``);
        raises InputProblem (one line) for a bad field."""
        source = resolve_path(self.input, workspace, "input")
        if source is None:
            raise InputProblem("give the input: a JSONL list, a metadata.csv or a folder of audio + .txt")
        if not source.exists():
            raise InputProblem(f"input not found: {source}")
        target = resolve_path(self.out_dir, workspace, "output folder")
        if target is None:
            raise InputProblem("give an output folder")
        argv = [python, "-m", self.MODULE, "--input", str(source), "--out-dir", str(target)]
        for flag, name, what in self.REQUIRED_FILES:
            argv += [flag, str(existing_file(getattr(self, name), workspace, what))]
        argv += ["--w2v-bert", w2v_bert_argument(self.w2v_bert, workspace)]
        for flag, name, what in self.OPTIONAL_FILES:
            path = existing_file(getattr(self, name), workspace, what, required=False)
            if path is not None:
                argv += [flag, str(path)]
        argv += self.generation_args()
        if self.speaker.strip():
            argv += ["--speaker", self.speaker.strip()]
        pairs = int(self.pairs_per_target or 0)
        if pairs < 1:
            raise InputProblem("pairs per target must be at least 1")
        if self.device not in DEVICES:
            raise InputProblem(f"device must be one of {', '.join(DEVICES)}")
        if not self.batch_seconds or self.batch_seconds <= 0:
            raise InputProblem("batch seconds must be above 0")
        processes = self.processes if self.processes is not None else 1
        if processes != int(processes) or processes < 1:
            raise InputProblem(f"processes / GPUs must be a whole number of at least 1, got {processes:g}")
        argv += ["--pairs-per-target", str(pairs), "--seed", str(int(self.seed or 0)), "--device", self.device,
                 "--batch-seconds", f"{float(self.batch_seconds):g}"]
        return module_command(int(processes), self.MODULE, argv[3:], python)

    def generation_args(self) -> list[str]:
        """The generation's own flags (default: the language when one is picked)."""
        return ["--language", self.language] if self.language and self.language != NO_LANGUAGE else []


# -- the job ----------------------------------------------------------------------------------------------


def view_of(supervisor: Any) -> JobView:
    """What a job's supervisor shows now: status, progress and the log's tail."""
    return job_view(supervisor.poll(), supervisor.log_tail(LOG_TAIL_BYTES))


def start_job(ctx: StudioContext, job: str, form: Any, generation: str,
              project: Project | None = None) -> tuple[str, JobView]:
    """Check ``form`` (anything with ``argv(python, workspace)``) and launch its command as ``job``; a
    preparation into ``project``'s prepared folder is noted as the project's prepare step (completed when its
    report is written)."""
    from webui.jobs.supervisor import RunAlreadyActive

    try:
        argv = form.argv(ctx.python, Path(ctx.workspace))
        supervisor = ctx.run_background(job, argv)
    except (InputProblem, RunAlreadyActive, RuntimeError, OSError) as exc:
        return message_html(str(exc)), poll_job(ctx, job)
    out_dir = argv[argv.index("--out-dir") + 1]
    note_preparation(project, argv[argv.index("--input") + 1], out_dir)
    return badge_html("STARTED", f"preparing {generation} data into {out_dir}", "info"), view_of(supervisor)


def note_preparation(project: Project | None, source: str, out_dir: str) -> bool:
    """Note a preparation into the project's prepared folder as its prepare step (True when noted)."""
    from trainer.project import ProjectError, begin_step

    if project is None or Path(out_dir).resolve() != project.dir("prepared").resolve():
        return False
    try:
        begin_step(project, "prepare", [source], out_dir)
    except (ProjectError, OSError):
        return False
    return True


def project_changes(project: Project, extra: Callable[[Project], dict[str, str]] | None = None) -> dict[str, str]:
    """The fields a project of the form's generation fills: its saved manifest as the input ("" before one is
    saved: never the demo's audio), its prepared folder as the output, its model folder's files (a local
    w2v-BERT over the Hub id) where it has them. A demo project keeps the demo's audio as the input until it
    has a saved manifest (the demo opens as it always did)."""
    from trainer.project import defaults_for
    from webui.context import is_demo_project

    handed = defaults_for(project, "prepare")
    changes = {"out_dir": handed["out_dir"]}
    if handed["input"] or not is_demo_project(project.name):
        changes["input"] = handed["input"]
    for key in ("config", "w2v_bert", "tokenizer"):
        if handed[key]:
            changes[key] = handed[key]
    if extra is not None:
        changes.update({key: value for key, value in extra(project).items() if value})
    return changes


# The fields a project of another generation empties in a form: its data is not that form's to prepare.
DATA_FIELDS = ("input", "out_dir")


def project_form(form: PairedPrepareForm, project: Project | None, generation_id: str,
                 extra: Callable[[Project], dict[str, str]] | None = None) -> PairedPrepareForm:
    """``form`` filled from the project when it fine-tunes this generation (``project_changes``); the fields
    the project has nothing for keep ``form``'s values."""
    if project is None or project.generation != generation_id:
        return form
    return dataclasses.replace(form, **project_changes(project, extra))


def poll_job(ctx: StudioContext, job: str) -> JobView:
    """A preparation job (any generation's) as it stands (also after a page reload or a UI restart)."""
    return view_of(ctx.supervisor(ctx.job_dir(job)))


def stop_job(ctx: StudioContext, job: str) -> JobView:
    """Graceful stop of a preparation job (SIGINT: finished batches are kept), escalating if ignored."""
    supervisor = ctx.supervisor(ctx.job_dir(job))
    try:
        supervisor.stop(grace_s=20.0, term_s=10.0, kill_s=10.0)
    except RuntimeError as exc:
        return JobView(status=message_html(str(exc)), progress="", log=supervisor.log_tail(LOG_TAIL_BYTES),
                       running=True)
    return view_of(supervisor)


def job_controls(ctx: StudioContext, job: str, prefix: str, start_label: str, log_label: str,
                 fields: Sequence[Any], start: Callable[..., tuple[str, JobView]]) -> None:
    """Start / Stop, the message, status, progress and log of ``job``, and the timer that polls it while it runs.

    ``start(*values)`` gets the ``fields``' values; element ids are ``<prefix>-start``, ``<prefix>-status``...
    """
    with gr.Row():
        start_button = gr.Button(start_label, variant="primary", elem_id=f"{prefix}-start")
        stop_button = gr.Button("Stop", variant="stop", elem_id=f"{prefix}-stop")
    message = gr.HTML(elem_id=f"{prefix}-message")
    # Callable values are computed on every page load, so a reload shows the job as it is now.
    status = gr.HTML(value=lambda: poll_job(ctx, job).status, elem_id=f"{prefix}-status")
    progress = gr.HTML(value=lambda: poll_job(ctx, job).progress, elem_id=f"{prefix}-progress")
    log = gr.Textbox(value=lambda: poll_job(ctx, job).log, lines=10, max_lines=20, interactive=False,
                     autoscroll=True, label=log_label, elem_id=f"{prefix}-log")
    timer = gr.Timer(POLL_S, active=True)

    def shown_of(view: JobView) -> tuple[str, str, str, gr.Timer]:
        return view.status, view.progress, view.log, gr.Timer(active=view.running)

    def on_start(*values: Any):
        text, view = start(*values)
        return (text, *shown_of(view)[:3], gr.Timer(active=True))

    shown = [status, progress, log, timer]
    turns = f"job-turns:{job}"  # Start and the ticks take turns: a late tick must not switch the timer off
    start_button.click(on_start, inputs=list(fields), outputs=[message, *shown], concurrency_id=turns,
                       concurrency_limit=1)
    stop_button.click(lambda: shown_of(stop_job(ctx, job))[:3], outputs=shown[:3])  # the next tick stops the timer
    timer.tick(lambda: shown_of(poll_job(ctx, job)), outputs=shown, show_progress="hidden", concurrency_id=turns,
               concurrency_limit=1)


# -- the layout -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Field:
    """One input of a preparation form: its form field, its label (after the generation's name), its element
    id (after the section's prefix) and its kind: text, count (whole, from 1), whole, amount (from 1), choice
    (a radio of ``choices``) or language (the studio's languages)."""

    name: str
    label: str
    elem: str
    kind: str = "text"
    choices: tuple[str, ...] = ()
    scale: int | None = None

    def component(self, value: Any, label: str, elem_id: str, languages: list[str]) -> Any:
        if self.kind == "text":
            return gr.Textbox(value=value, label=label, elem_id=elem_id, scale=self.scale)
        if self.kind == "count":
            return gr.Number(value=value, precision=0, minimum=1, label=label, elem_id=elem_id)
        if self.kind == "whole":
            return gr.Number(value=value, precision=0, label=label, elem_id=elem_id)
        if self.kind == "amount":
            return gr.Number(value=value, minimum=1, label=label, elem_id=elem_id)
        if self.kind == "choice":
            return gr.Radio(choices=list(self.choices), value=value, label=label, elem_id=elem_id)
        if self.kind == "language":
            return gr.Dropdown(choices=languages, value=value if value in languages else NO_LANGUAGE, label=label,
                               elem_id=elem_id)
        raise ValueError(f"unknown field kind {self.kind!r}")


SOURCE_ROW = (
    Field("input", "preparation input: a JSONL list, a metadata.csv (LJSpeech) or a folder of audio + .txt",
          "input", scale=3),
    Field("out_dir", "output folder", "out", scale=2),
)
OPTIONS_ROW = (
    Field("language", "language", "language", "language"),
    Field("speaker", "speaker (for entries naming none)", "speaker"),
    Field("pairs_per_target", "pairs per target", "pairs", "count"),
    Field("seed", "seed", "seed", "whole"),
    Field("device", "device", "device", "choice", DEVICES),
    Field("batch_seconds", "batch seconds (items x longest)", "batch-seconds", "amount"),
    Field("processes", "processes / GPUs (more than 1: torchrun, one per GPU)", "processes", "count"),
)
# The options' values a form opens with, every generation alike.
DEFAULT_OPTIONS = {"language": "am", "speaker": "", "pairs_per_target": 2, "seed": 2025, "device": "auto",
                   "batch_seconds": 240, "processes": 1}
# The model fields every paired generation shows (its config, its base GPT and the w2v-BERT features).
CONFIG_FIELD = Field("config", "config.yaml", "config")
GPT_FIELD = Field("gpt", "base gpt.pth (empty: the config's gpt_checkpoint)", "gpt")
W2V_BERT_FIELD = Field("w2v_bert", "w2v-BERT 2.0: a local folder or a model id", "w2v")
W2V_STATS_FIELD = Field("w2v_stats", "w2v-BERT stats (empty: the config's w2v_stat)", "stats")


@dataclass(frozen=True)
class PrepareSection:
    """A generation's preparation section: what it is called, its job, its form and the model rows it shows."""

    generation: str  # "IndexTTS2": the start of every label
    prefix: str  # element ids: "prep2" -> prep2-input, prep2-start...
    job: str
    heading: str  # Markdown
    model_rows: tuple[tuple[Field, ...], ...]
    default_form: Callable[..., PairedPrepareForm]  # (workspace, project=None): the form a page opens with
    generation_id: str = ""  # the registry id: a project of this generation fills the form
    project_extra: Callable[[Project], dict[str, str]] | None = None  # its own files of a project's model folder

    def start(self, ctx: StudioContext, form: PairedPrepareForm,
              project: Project | None = None) -> tuple[str, JobView]:
        """Validate the form, then launch the preparation under the supervisor: (message, job view)."""
        return start_job(ctx, self.job, form, self.generation, project)

    def poll(self, ctx: StudioContext) -> JobView:
        return poll_job(ctx, self.job)

    def stop(self, ctx: StudioContext) -> JobView:
        return stop_job(ctx, self.job)

    def project_values(self, ctx: StudioContext, name: str | None, names: Sequence[str]) -> list[Any]:
        """The fields' values for the session's project ``name``: the project's files where it is of this
        generation, empty data fields where it is a user's project of another one (the demo's or another
        project's data would be prepared by mistake), gr.skip() for the rest (the form keeps what is typed)."""
        from webui.context import is_demo_project

        project = ctx.project(name)
        if project is None:
            return [gr.skip()] * len(names)
        if project.generation == self.generation_id:
            changes = project_changes(project, self.project_extra)
        else:
            changes = {} if is_demo_project(project.name) else dict.fromkeys(DATA_FIELDS, "")
        return [changes.get(field_name, gr.skip()) for field_name in names]

    def build(self, ctx: StudioContext, languages: list[str]) -> dict[str, Any]:
        """Lay the section out (inside the Data tab) and wire it; its fields by form field name."""
        gr.Markdown(self.heading)
        state = ctx.project_state
        form = self.default_form(Path(ctx.workspace), ctx.project(state.value if state is not None else None))
        names: list[str] = []
        fields: list[Any] = []
        for row in (SOURCE_ROW, *self.model_rows, OPTIONS_ROW):
            with gr.Row():
                for fact in row:
                    names.append(fact.name)
                    fields.append(fact.component(getattr(form, fact.name), f"{self.generation} {fact.label}",
                                                 f"{self.prefix}-{fact.elem}", languages))

        def start(*values: Any) -> tuple[str, JobView]:
            project = ctx.project(values[-1]) if state is not None else None
            typed = values[:-1] if state is not None else values
            return self.start(ctx, dataclasses.replace(form, **dict(zip(names, typed, strict=True))), project)

        from webui.project import follow

        follow.follow(ctx, lambda stamp: self.project_values(ctx, follow.stamp_name(stamp), names), fields)

        job_controls(ctx, self.job, self.prefix, f"Prepare for {self.generation}",
                     f"{self.generation} preparation log", [*fields, *([state] if state is not None else [])], start)
        return dict(zip(names, fields, strict=True))
