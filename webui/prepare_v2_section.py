"""The Data tab's IndexTTS2 preparation: audio + transcripts -> features and a paired manifest, as a job.

``python -m data_tools.prepare_v2`` runs under the studio's supervisor in ``<workspace>/jobs/prepare_v2/``
(run.json, console.log, progress from its tqdm bar, Stop = SIGINT: finished batches are kept and a rerun
resumes). The form starts filled with the demo workspace's IndexTTS2 files when they are there. Callbacks are
plain functions; ``build_section`` lays them out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gradio as gr

from webui.form_inputs import InputProblem, existing_file, resolve_path
from webui.job_view import JobView, job_view
from webui.plots import badge_html, message_html

if TYPE_CHECKING:
    from webui.context import StudioContext

PREPARE_V2_JOB = "prepare_v2"
DEVICES = ("auto", "cpu", "cuda")
LOG_TAIL_BYTES = 16 * 1024
POLL_S = 1.0
NO_LANGUAGE = "any"
DEFAULT_W2V_BERT = "facebook/w2v-bert-2.0"
_MODEL_ID = re.compile(r"^[A-Za-z0-9][\w.\-]*/[\w.\-]+$")  # owner/name, not ./x or ../x


@dataclass(frozen=True)
class PrepareV2Form:
    """The form's values (strings as typed); ``argv`` checks them and builds the exact command."""

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

    def argv(self, python: str, workspace: Path) -> list[str]:
        """``python -m data_tools.prepare_v2 ...``; raises InputProblem (one line) for a bad field."""
        source = resolve_path(self.input, workspace, "input")
        if source is None:
            raise InputProblem("give the input: a JSONL list, a metadata.csv or a folder of audio + .txt")
        if not source.exists():
            raise InputProblem(f"input not found: {source}")
        target = resolve_path(self.out_dir, workspace, "output folder")
        if target is None:
            raise InputProblem("give an output folder")
        config = existing_file(self.config, workspace, "config")
        codec = existing_file(self.codec, workspace, "semantic codec")
        argv = [python, "-m", "data_tools.prepare_v2", "--input", str(source), "--out-dir", str(target),
                "--config", str(config), "--codec", str(codec), "--w2v-bert", self._w2v_bert(workspace)]
        for flag, value, what in (("--gpt", self.gpt, "base GPT"), ("--w2v-stats", self.w2v_stats, "w2v-BERT stats"),
                                  ("--tokenizer", self.tokenizer, "tokenizer")):
            path = existing_file(value, workspace, what, required=False)
            if path is not None:
                argv += [flag, str(path)]
        if self.language and self.language != NO_LANGUAGE:
            argv += ["--language", self.language]
        if self.speaker.strip():
            argv += ["--speaker", self.speaker.strip()]
        pairs = int(self.pairs_per_target or 0)
        if pairs < 1:
            raise InputProblem("pairs per target must be at least 1")
        if self.device not in DEVICES:
            raise InputProblem(f"device must be one of {', '.join(DEVICES)}")
        if not self.batch_seconds or self.batch_seconds <= 0:
            raise InputProblem("batch seconds must be above 0")
        return [*argv, "--pairs-per-target", str(pairs), "--seed", str(int(self.seed or 0)), "--device",
                self.device, "--batch-seconds", f"{float(self.batch_seconds):g}"]

    def _w2v_bert(self, workspace: Path) -> str:
        return w2v_bert_argument(self.w2v_bert, workspace)


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


def default_form(workspace: Path) -> PrepareV2Form:
    """The demo's IndexTTS2 files when the workspace has them, else empty fields and the real w2v-BERT id."""
    from trainer.demo_v2 import DemoV2Paths

    demo = DemoV2Paths.under(workspace)
    if demo.kit.exists() and demo.config.is_file():
        return PrepareV2Form(input=str(demo.audio), out_dir=str(demo.root / "data" / "prepared"),
                             config=str(demo.config), gpt="", codec=str(demo.kit.codec),
                             w2v_bert=str(demo.kit.w2v_bert), w2v_stats="", tokenizer=str(demo.extended_tokenizer),
                             language="am", speaker="", pairs_per_target=2, seed=2025, device="auto",
                             batch_seconds=240)
    return PrepareV2Form(input="", out_dir=str(Path(workspace) / "data" / "prepared_v2"), config="", gpt="",
                         codec="", w2v_bert=DEFAULT_W2V_BERT, w2v_stats="", tokenizer="", language="am", speaker="",
                         pairs_per_target=2, seed=2025, device="auto", batch_seconds=240)


def _view(supervisor: Any) -> JobView:
    return job_view(supervisor.poll(), supervisor.log_tail(LOG_TAIL_BYTES))


def start_prepare_v2(ctx: StudioContext, form: PrepareV2Form) -> tuple[str, JobView]:
    """Validate the form, then launch the preparation under the supervisor: (message, job view)."""
    return start_job(ctx, PREPARE_V2_JOB, form, "IndexTTS2")


def start_job(ctx: StudioContext, job: str, form: Any, generation: str) -> tuple[str, JobView]:
    """Check ``form`` (anything with ``argv(python, workspace)``) and launch its command as ``job``."""
    from webui.supervisor import RunAlreadyActive

    try:
        argv = form.argv(ctx.python, Path(ctx.workspace))
        supervisor = ctx.run_background(job, argv)
    except (InputProblem, RunAlreadyActive, RuntimeError, OSError) as exc:
        return message_html(str(exc)), poll_job(ctx, job)
    return badge_html("STARTED", f"preparing {generation} data into {argv[argv.index('--out-dir') + 1]}", "info"), \
        _view(supervisor)


def poll_prepare_v2(ctx: StudioContext) -> JobView:
    """The job as it stands (also after a page reload or a UI restart)."""
    return poll_job(ctx, PREPARE_V2_JOB)


def stop_prepare_v2(ctx: StudioContext) -> JobView:
    """Graceful stop (SIGINT: finished batches are kept, a rerun resumes), escalating if ignored."""
    return stop_job(ctx, PREPARE_V2_JOB)


def poll_job(ctx: StudioContext, job: str) -> JobView:
    """A preparation job (any generation's) as it stands."""
    return _view(ctx.supervisor(ctx.job_dir(job)))


def stop_job(ctx: StudioContext, job: str) -> JobView:
    """Graceful stop of a preparation job (SIGINT: finished batches are kept), escalating if ignored."""
    supervisor = ctx.supervisor(ctx.job_dir(job))
    try:
        supervisor.stop(grace_s=20.0, term_s=10.0, kill_s=10.0)
    except RuntimeError as exc:
        return JobView(status=message_html(str(exc)), progress="", log=supervisor.log_tail(LOG_TAIL_BYTES),
                       running=True)
    return _view(supervisor)


def build_section(ctx: StudioContext, languages: list[str]) -> None:
    gr.Markdown("### Prepare audio for IndexTTS2: w2v-BERT features, semantic codes, conditioning and pairs\n"
                "Writes `text_ids/`, `codes/`, `condition/`, `emo_vec/`, `utterances.jsonl` and `pairs.jsonl` "
                "(the community layout) into the output folder. Runs as its own process on the GPU when there "
                "is one; a rerun skips what is already done.")
    d = default_form(Path(ctx.workspace))
    with gr.Row():
        source = gr.Textbox(value=d.input, scale=3, elem_id="prep2-input",
                            label="IndexTTS2 preparation input: a JSONL list, a metadata.csv (LJSpeech) or a folder of audio + .txt")
        out = gr.Textbox(value=d.out_dir, scale=2, label="IndexTTS2 output folder", elem_id="prep2-out")
    with gr.Row():
        config = gr.Textbox(value=d.config, label="IndexTTS2 config.yaml", elem_id="prep2-config")
        gpt = gr.Textbox(value=d.gpt, label="IndexTTS2 base gpt.pth (empty: the config's gpt_checkpoint)", elem_id="prep2-gpt")
        codec = gr.Textbox(value=d.codec, label="IndexTTS2 semantic codec (model.safetensors or .pth)", elem_id="prep2-codec")
    with gr.Row():
        w2v = gr.Textbox(value=d.w2v_bert, label="IndexTTS2 w2v-BERT 2.0: a local folder or a model id", elem_id="prep2-w2v")
        stats = gr.Textbox(value=d.w2v_stats, label="IndexTTS2 w2v-BERT stats (empty: the config's w2v_stat)",
                           elem_id="prep2-stats")
        tokenizer = gr.Textbox(value=d.tokenizer, label="IndexTTS2 tokenizer (empty: the config's bpe_model)",
                               elem_id="prep2-tokenizer")
    with gr.Row():
        language = gr.Dropdown(choices=languages, value=d.language if d.language in languages else NO_LANGUAGE,
                               label="IndexTTS2 language", elem_id="prep2-language")
        speaker = gr.Textbox(value="", label="IndexTTS2 speaker (for entries naming none)", elem_id="prep2-speaker")
        pairs = gr.Number(value=d.pairs_per_target, precision=0, minimum=1, label="IndexTTS2 pairs per target",
                          elem_id="prep2-pairs")
        seed = gr.Number(value=d.seed, precision=0, label="IndexTTS2 seed", elem_id="prep2-seed")
        device = gr.Radio(choices=list(DEVICES), value=d.device, label="IndexTTS2 device", elem_id="prep2-device")
        batch = gr.Number(value=d.batch_seconds, minimum=1, label="IndexTTS2 batch seconds (items x longest)",
                          elem_id="prep2-batch-seconds")
    with gr.Row():
        start = gr.Button("Prepare for IndexTTS2", variant="primary", elem_id="prep2-start")
        stop = gr.Button("Stop", variant="stop", elem_id="prep2-stop")
    message = gr.HTML(elem_id="prep2-message")
    status = gr.HTML(value=lambda: poll_prepare_v2(ctx).status, elem_id="prep2-status")
    progress = gr.HTML(value=lambda: poll_prepare_v2(ctx).progress, elem_id="prep2-progress")
    log = gr.Textbox(value=lambda: poll_prepare_v2(ctx).log, lines=10, max_lines=20, interactive=False,
                     autoscroll=True, label="IndexTTS2 preparation log", elem_id="prep2-log")
    timer = gr.Timer(POLL_S, active=True)
    fields = [source, out, config, gpt, codec, w2v, stats, tokenizer, language, speaker, pairs, seed, device, batch]

    def outputs_of(view: JobView) -> tuple[str, str, str]:
        return view.status, view.progress, view.log

    def on_start(*values: Any):
        text, view = start_prepare_v2(ctx, PrepareV2Form(*values))
        return (text, *outputs_of(view), gr.Timer(active=True))

    def on_stop():
        view = stop_prepare_v2(ctx)
        return (*outputs_of(view), gr.Timer(active=view.running))

    def on_tick():
        view = poll_prepare_v2(ctx)
        return (*outputs_of(view), gr.Timer(active=view.running))

    shown = [status, progress, log]
    start.click(on_start, inputs=fields, outputs=[message, *shown, timer])
    stop.click(on_stop, outputs=[*shown, timer])
    timer.tick(on_tick, outputs=[*shown, timer], show_progress="hidden")
