"""The Data tab's IndexTTS-2.5 preparation: audio + transcripts -> 25 Hz codes, CAM++ / emotion vectors, text
ids and a 2.5 paired manifest, as a job.

``python -m data_tools.prepare_v25`` runs under the studio's supervisor in ``<workspace>/jobs/prepare_v25/``,
with the job machinery of the IndexTTS2 section (``webui.prepare_v2_section``: progress from the tqdm bar,
Stop = SIGINT, a rerun resumes). The files default to a 2.5 download folder's, beside its config.yaml.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gradio as gr

from webui.form_inputs import InputProblem, existing_file, resolve_path
from webui.job_view import JobView
from webui.prepare_v2_section import (
    DEFAULT_W2V_BERT,
    DEVICES,
    NO_LANGUAGE,
    POLL_S,
    poll_job,
    start_job,
    stop_job,
    w2v_bert_argument,
)

if TYPE_CHECKING:
    from webui.context import StudioContext

PREPARE_V25_JOB = "prepare_v25"
TEXT_SCHEMES = ("merges", "bytes", "translit")


@dataclass(frozen=True)
class PrepareV25Form:
    """The form's values (strings as typed); ``argv`` checks them and builds the exact command."""

    input: str
    out_dir: str
    config: str
    gpt: str
    codec: str
    campplus: str
    w2v_bert: str
    w2v_stats: str
    tokenizer: str
    text_scheme: str
    language: str | None
    speaker: str
    pairs_per_target: float | None
    seed: float | None
    device: str
    batch_seconds: float | None

    def argv(self, python: str, workspace: Path) -> list[str]:
        """``python -m data_tools.prepare_v25 ...``; raises InputProblem (one line) for a bad field."""
        source = resolve_path(self.input, workspace, "input")
        if source is None:
            raise InputProblem("give the input: a JSONL list, a metadata.csv or a folder of audio + .txt")
        if not source.exists():
            raise InputProblem(f"input not found: {source}")
        target = resolve_path(self.out_dir, workspace, "output folder")
        if target is None:
            raise InputProblem("give an output folder")
        config = existing_file(self.config, workspace, "IndexTTS-2.5 config")
        argv = [python, "-m", "data_tools.prepare_v25", "--input", str(source), "--out-dir", str(target),
                "--config", str(config), "--w2v-bert", w2v_bert_argument(self.w2v_bert, workspace)]
        for flag, value, what in (("--gpt", self.gpt, "base GPT"), ("--codec", self.codec, "2.5 codec"),
                                  ("--campplus", self.campplus, "CAM++ weights"),
                                  ("--w2v-stats", self.w2v_stats, "w2v-BERT stats"),
                                  ("--tokenizer", self.tokenizer, "2.5 text table")):
            path = existing_file(value, workspace, what, required=False)
            if path is not None:
                argv += [flag, str(path)]
        if self.text_scheme not in TEXT_SCHEMES:
            raise InputProblem(f"text scheme must be one of {', '.join(TEXT_SCHEMES)}")
        if not self.language or self.language == NO_LANGUAGE:
            raise InputProblem("IndexTTS-2.5 needs the language (it sets the text prefix and the language row)")
        argv += ["--text-scheme", self.text_scheme, "--language", self.language]
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


def default_form(workspace: Path) -> PrepareV25Form:
    """Empty model fields (a 2.5 download folder's config names the rest), the real w2v-BERT id."""
    return PrepareV25Form(input="", out_dir=str(Path(workspace) / "data" / "prepared_v25"), config="", gpt="",
                          codec="", campplus="", w2v_bert=DEFAULT_W2V_BERT, w2v_stats="", tokenizer="",
                          text_scheme="merges", language="am", speaker="", pairs_per_target=2, seed=2025,
                          device="auto", batch_seconds=240)


def start_prepare_v25(ctx: StudioContext, form: PrepareV25Form) -> tuple[str, JobView]:
    """Validate the form, then launch the preparation under the supervisor: (message, job view)."""
    return start_job(ctx, PREPARE_V25_JOB, form, "IndexTTS-2.5")


def poll_prepare_v25(ctx: StudioContext) -> JobView:
    return poll_job(ctx, PREPARE_V25_JOB)


def stop_prepare_v25(ctx: StudioContext) -> JobView:
    return stop_job(ctx, PREPARE_V25_JOB)


def build_section(ctx: StudioContext, languages: list[str]) -> None:
    gr.Markdown("### Prepare audio for IndexTTS-2.5: 25 Hz codes, CAM++ and emotion vectors, text ids and pairs\n"
                "Writes `text_ids/`, `codes/`, `spk_vec/`, `emo_vec/`, `utterances.jsonl` and `pairs.jsonl` (the "
                "2.5 paired manifest the trainer reads) into the output folder. Empty model fields: the files of "
                "the 2.5 download folder the config.yaml is in. A rerun skips what is already done.")
    d = default_form(Path(ctx.workspace))
    with gr.Row():
        source = gr.Textbox(value=d.input, scale=3, elem_id="prep25-input",
                            label="IndexTTS-2.5 preparation input: a JSONL list, a metadata.csv (LJSpeech) or a folder of audio + .txt")
        out = gr.Textbox(value=d.out_dir, scale=2, label="IndexTTS-2.5 output folder", elem_id="prep25-out")
    with gr.Row():
        config = gr.Textbox(value=d.config, label="IndexTTS-2.5 config.yaml", elem_id="prep25-config")
        gpt = gr.Textbox(value=d.gpt, label="IndexTTS-2.5 base gpt.pth (empty: the config's gpt_checkpoint)", elem_id="prep25-gpt")
        codec = gr.Textbox(value=d.codec, label="IndexTTS-2.5 codec (empty: codec.pth beside the config)",
                           elem_id="prep25-codec")
        campplus = gr.Textbox(value=d.campplus, label="IndexTTS-2.5 CAM++ (empty: campplus_cn_common.bin beside the config)",
                              elem_id="prep25-campplus")
    with gr.Row():
        w2v = gr.Textbox(value=d.w2v_bert, label="IndexTTS-2.5 w2v-BERT 2.0: a local folder or a model id", elem_id="prep25-w2v")
        stats = gr.Textbox(value=d.w2v_stats, label="IndexTTS-2.5 w2v-BERT stats (empty: the config's w2v_stat)",
                           elem_id="prep25-stats")
        tokenizer = gr.Textbox(value=d.tokenizer, label="IndexTTS-2.5 text table (empty: beside the config, else the studio's)",
                               elem_id="prep25-tokenizer")
        scheme = gr.Radio(choices=list(TEXT_SCHEMES), value=d.text_scheme, label="IndexTTS-2.5 text scheme (as training's)",
                          elem_id="prep25-scheme")
    with gr.Row():
        language = gr.Dropdown(choices=languages, value=d.language if d.language in languages else NO_LANGUAGE,
                               label="IndexTTS-2.5 language", elem_id="prep25-language")
        speaker = gr.Textbox(value="", label="IndexTTS-2.5 speaker (for entries naming none)", elem_id="prep25-speaker")
        pairs = gr.Number(value=d.pairs_per_target, precision=0, minimum=1, label="IndexTTS-2.5 pairs per target",
                          elem_id="prep25-pairs")
        seed = gr.Number(value=d.seed, precision=0, label="IndexTTS-2.5 seed", elem_id="prep25-seed")
        device = gr.Radio(choices=list(DEVICES), value=d.device, label="IndexTTS-2.5 device", elem_id="prep25-device")
        batch = gr.Number(value=d.batch_seconds, minimum=1, label="IndexTTS-2.5 batch seconds (items x longest)",
                          elem_id="prep25-batch-seconds")
    with gr.Row():
        start = gr.Button("Prepare for IndexTTS-2.5", variant="primary", elem_id="prep25-start")
        stop = gr.Button("Stop", variant="stop", elem_id="prep25-stop")
    message = gr.HTML(elem_id="prep25-message")
    status = gr.HTML(value=lambda: poll_prepare_v25(ctx).status, elem_id="prep25-status")
    progress = gr.HTML(value=lambda: poll_prepare_v25(ctx).progress, elem_id="prep25-progress")
    log = gr.Textbox(value=lambda: poll_prepare_v25(ctx).log, lines=10, max_lines=20, interactive=False,
                     autoscroll=True, label="IndexTTS-2.5 preparation log", elem_id="prep25-log")
    timer = gr.Timer(POLL_S, active=True)
    fields = [source, out, config, gpt, codec, campplus, w2v, stats, tokenizer, scheme, language, speaker, pairs,
              seed, device, batch]

    def outputs_of(view: JobView) -> tuple[str, str, str]:
        return view.status, view.progress, view.log

    def on_start(*values: Any):
        text, view = start_prepare_v25(ctx, PrepareV25Form(*values))
        return (text, *outputs_of(view), gr.Timer(active=True))

    def on_stop():
        view = stop_prepare_v25(ctx)
        return (*outputs_of(view), gr.Timer(active=view.running))

    def on_tick():
        view = poll_prepare_v25(ctx)
        return (*outputs_of(view), gr.Timer(active=view.running))

    shown = [status, progress, log]
    start.click(on_start, inputs=fields, outputs=[message, *shown, timer])
    stop.click(on_stop, outputs=[*shown, timer])
    timer.tick(on_tick, outputs=[*shown, timer], show_progress="hidden")
