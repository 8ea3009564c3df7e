"""The Tokenizer tab: train, extend and verify tokenizers, and see a sentence tokenized base vs extended.

The sample box tokenizes one sentence in-process (``webui.tokenizer.sample_compare``). Training, extending
and verifying read whole corpora and manifests, so each runs as a supervised job
(``python -m data_tools.tokenizer train|extend|verify``, see ``webui.jobs.report_jobs``) with progress, log
and Stop; the tab shows the JSON report it writes. The argv builders and report readers
(``webui.tokenizer.tokenizer_jobs``) are plain functions tests call directly; ``build(ctx)`` only lays out
and wires them, section by section. A generation's own panel (its registry entry's ``ui.tokenizer_panel``,
e.g. IndexTTS-2.5's text schemes) follows the shared sections.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import gradio as gr

from generations.registry import oldest_first
from webui.form_inputs import InputProblem
from webui.jobs.job_panel import job_panel, wire_job
from webui.jobs.report_jobs import JobResult
from webui.plots import empty_frame
from webui.tokenizer.project_fill import follow_project
from webui.tokenizer.sample_compare import (
    AUTO_LANGUAGE,
    PIECE_COLORS,
    SAMPLE_TEXT,
    compare_tokenization,
    language_choices,
)
from webui.tokenizer.tokenizer_jobs import (
    BASE_SAMPLE_TEXT,
    EXTEND_COLUMNS,
    EXTEND_JOB,
    MODEL_TYPES,
    TRAIN_JOB,
    VERIFY_COLUMNS,
    VERIFY_JOB,
    extend_argv,
    extend_view_of,
    train_argv,
    train_view_of,
    verify_argv,
    verify_view_of,
)

if TYPE_CHECKING:
    from webui.context import StudioContext


def _sample_section(ctx: StudioContext, languages: list[str], fields: dict[str, Any]) -> None:
    paths, workspace = ctx.paths, ctx.workspace
    gr.Markdown("### How a sentence tokenizes: base vs extended")
    with gr.Row():
        base = gr.Textbox(value=str(paths.base_tokenizer), label="Base tokenizer (sample)",
                          elem_id="tok-sample-base-path")
        extended = gr.Textbox(value=str(paths.tokenizer), label="Extended tokenizer (sample)",
                              elem_id="tok-sample-extended-path")
        language = gr.Dropdown(choices=languages, value=AUTO_LANGUAGE, label="Front-end language (sample)",
                               elem_id="tok-sample-language", scale=0, min_width=140)
    fields.update(sample_base=base, sample_extended=extended)
    initial = compare_tokenization(SAMPLE_TEXT, str(paths.base_tokenizer), str(paths.tokenizer), AUTO_LANGUAGE,
                                   workspace)
    text = gr.Textbox(value=SAMPLE_TEXT, label="Sample text to tokenize", lines=2, elem_id="tok-sample-text")
    message = gr.HTML(value=initial.message, elem_id="tok-sample-message")
    table = gr.Dataframe(value=initial.summary, interactive=False, wrap=True, label="Token counts",
                         elem_id="tok-sample-table")
    with gr.Row():
        with gr.Column():
            base_pieces = gr.HighlightedText(value=initial.base_pieces, label="Base: pieces", show_legend=True,
                                             color_map=PIECE_COLORS, elem_id="tok-sample-base-pieces")
            base_ids = gr.Textbox(value=initial.base_ids, label="Base: ids", lines=2, interactive=False,
                                  elem_id="tok-sample-base-ids")
        with gr.Column():
            extended_pieces = gr.HighlightedText(value=initial.extended_pieces, show_legend=True,
                                                 label="Extended: pieces (new = id >= base size)",
                                                 color_map=PIECE_COLORS, elem_id="tok-sample-extended-pieces")
            extended_ids = gr.Textbox(value=initial.extended_ids, label="Extended: ids", lines=2, interactive=False,
                                      elem_id="tok-sample-extended-ids")

    def on_sample(sentence: str, base_path: str, extended_path: str, lang: str):
        view = compare_tokenization(sentence, base_path, extended_path, lang, workspace)
        return (view.message, view.summary, view.base_pieces, view.base_ids, view.extended_pieces,
                view.extended_ids)

    gr.on([text.submit, text.change, base.submit, extended.submit, language.change], on_sample,
          inputs=[text, base, extended, language],
          outputs=[message, table, base_pieces, base_ids, extended_pieces, extended_ids],
          trigger_mode="always_last", show_progress="hidden")


def _train_section(ctx: StudioContext, languages: list[str], fields: dict[str, Any]) -> gr.Textbox:
    """Train a new-language model; returns the box its result path goes to (the extend section's input)."""
    gr.Markdown("### Train a tokenizer on new-language text")
    with gr.Row():
        corpus = gr.Textbox(value=str(ctx.paths.train_manifest), lines=2, scale=3, elem_id="tok-train-corpus",
                            label="Corpus: text files (one line each) or .jsonl manifests, one per line")
        out = gr.Textbox(value="amharic_new", label="Output name (tokenizers/<name>.model) or path",
                         elem_id="tok-train-out")
    fields.update(train_corpus=corpus)
    with gr.Row():
        size = gr.Number(value=800, precision=0, minimum=8, label="Vocab size", elem_id="tok-train-size")
        model_type = gr.Radio(choices=list(MODEL_TYPES), value="bpe", label="Model type", elem_id="tok-train-type")
        language = gr.Dropdown(choices=languages, value="am" if "am" in languages else AUTO_LANGUAGE,
                               label="Front-end language (training)", elem_id="tok-train-language")
    run = gr.Button("Train", variant="primary", elem_id="tok-train-run")
    panel = job_panel(TRAIN_JOB, "tok-train")
    result = gr.HTML(elem_id="tok-train-result")
    trained = gr.Textbox(visible=False)

    def render(job: JobResult | None) -> list[Any]:
        view = train_view_of(job)
        return [view.message, view.model_path or gr.skip()]

    wire_job(ctx, panel, run, [corpus, out, size, model_type, language],
             lambda *values: train_argv(ctx.python, *values, ctx.workspace), [result, trained], render)
    return trained


def _extend_section(ctx: StudioContext, trained: gr.Textbox, fields: dict[str, Any]) -> gr.Textbox:
    """Extend the base model; returns the box its result path goes to (the verify section's input)."""
    gr.Markdown("### Extend the base tokenizer (base ids never move)")
    with gr.Row():
        base = gr.Textbox(value=str(ctx.paths.base_tokenizer), label="Base tokenizer to extend", elem_id="tok-extend-base")
        new = gr.Textbox(value="", label="New-language tokenizer (filled by Train)", elem_id="tok-extend-new")
        out = gr.Textbox(value="amharic_extended_new", label="Output name or path", elem_id="tok-extend-out")
        target = gr.Number(value=0, precision=0, minimum=0, label="Target size in pieces (0: all new pieces)",
                           elem_id="tok-extend-target")
    fields.update(extend_base=base)
    trained.change(lambda path: path, inputs=trained, outputs=new)
    run = gr.Button("Extend", variant="primary", elem_id="tok-extend-run")
    panel = job_panel(EXTEND_JOB, "tok-extend")
    result = gr.HTML(elem_id="tok-extend-result")
    table = gr.Dataframe(value=empty_frame(EXTEND_COLUMNS), interactive=False, label="Extension",
                         elem_id="tok-extend-table")
    extended = gr.Textbox(visible=False)

    def render(job: JobResult | None) -> list[Any]:
        view, frame = extend_view_of(job)
        return [view.message, frame, view.model_path or gr.skip()]

    wire_job(ctx, panel, run, [base, new, out, target],
             lambda *values: extend_argv(ctx.python, *values, ctx.workspace, EXTEND_JOB.report_path(ctx)),
             [result, table, extended], render)
    return extended


def _verify_section(ctx: StudioContext, languages: list[str], extended_out: gr.Textbox,
                    fields: dict[str, Any]) -> None:
    paths = ctx.paths
    gr.Markdown("### Verify an extended tokenizer")
    with gr.Row():
        extended = gr.Textbox(value=str(paths.tokenizer), label="Extended tokenizer to verify", elem_id="tok-verify-tokenizer")
        base = gr.Textbox(value=str(paths.base_tokenizer), label="Base tokenizer it extends", elem_id="tok-verify-base")
        language = gr.Dropdown(choices=languages, value=AUTO_LANGUAGE, label="New-language front-end",
                               elem_id="tok-verify-language", scale=0, min_width=140)
    extended_out.change(lambda path: path, inputs=extended_out, outputs=extended)
    with gr.Row():
        new = gr.Textbox(value=str(paths.val_manifest), label="New-language samples (text or .jsonl)",
                         elem_id="tok-verify-samples-new")
        base_file = gr.Textbox(value="", label="Base-language samples file (optional)",
                               elem_id="tok-verify-samples-base-file")
    base_typed = gr.Textbox(value=BASE_SAMPLE_TEXT, lines=3, label="Base-language sample lines",
                            elem_id="tok-verify-samples-base")
    with gr.Row():
        manifest = gr.Textbox(value=str(paths.train_manifest), elem_id="tok-verify-manifest",
                              label="Manifest to check against max_text_tokens (optional)")
        config = gr.Textbox(value=str(paths.config), label="Config (gives max_text_tokens)",
                            elem_id="tok-verify-config")
    fields.update(verify_extended=extended, verify_base=base, verify_samples=new, verify_manifest=manifest,
                  verify_config=config)
    run = gr.Button("Verify", variant="primary", elem_id="tok-verify-run")
    panel = job_panel(VERIFY_JOB, "tok-verify")
    verdict = gr.HTML(elem_id="tok-verify-verdict")
    table = gr.Dataframe(value=empty_frame(VERIFY_COLUMNS), interactive=False, wrap=True, label="Checks",
                         elem_id="tok-verify-table")

    def make_argv(*values: Any) -> list[str]:
        if VERIFY_JOB.supervisor(ctx).poll().running:  # its sample files are about to be rewritten
            raise InputProblem("a verification is running: wait for it or stop it first")
        return verify_argv(ctx.python, *values, ctx.workspace, VERIFY_JOB.report_path(ctx))

    def render(job: JobResult | None) -> list[Any]:
        view = verify_view_of(job)
        return [view.verdict, view.table]

    wire_job(ctx, panel, run, [extended, base, new, base_file, base_typed, manifest, config, language], make_argv,
             [verdict, table], render)


def build(ctx: StudioContext) -> None:
    """Lay out the Tokenizer tab (called by the shell inside ``with gr.Tab("Tokenizer")``)."""
    languages = language_choices()
    fields: dict[str, Any] = {}  # the boxes that take the project's files (webui.tokenizer.project_fill)
    _sample_section(ctx, languages, fields)
    trained = _train_section(ctx, languages, fields)
    extended = _extend_section(ctx, trained, fields)
    _verify_section(ctx, languages, extended, fields)
    for entry in oldest_first():  # each generation's own panel, oldest first
        if entry.ui is not None and entry.ui.tokenizer_panel is not None:
            entry.ui.tokenizer_panel()
    follow_project(ctx, fields)
