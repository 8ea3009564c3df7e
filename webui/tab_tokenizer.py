"""The Tokenizer tab: train, extend and verify tokenizers, and see a sentence tokenized base vs extended.

The callbacks are plain functions (plain values in, plain values out) so tests call them directly;
``build(ctx)`` only lays out components and wires them. Training, extending and verifying call the
tokenizer library (``data_tools.tokenizer``) in-process: SentencePiece work takes seconds and never
touches CUDA.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

import gradio as gr
import pandas as pd

from data_tools.text import registered_languages
from data_tools.text_tokenizer import TextTokenizer, TokenizerError
from webui.plots import (
    InputProblem,
    badge_html,
    empty_frame,
    existing_file,
    message_html,
    split_paths,
)

if TYPE_CHECKING:
    from webui.context import StudioContext

AUTO_LANGUAGE = "auto"
SAMPLE_TEXT = "ሰላም ለዓለም። ይህ የአማርኛ ምሳሌ ነው፣ 2025 ዓ.ም."
SAMPLE_COLUMNS = ["tokenizer", "vocab size", "tokens", "new ids", "share new %", "unknown", "normalized text"]
NEW, BASE, UNKNOWN = "new", "base", "unknown"
PIECE_COLORS = {NEW: "#2e86de", BASE: "#95a5a6", UNKNOWN: "#c0392b"}


def language_choices() -> list[str]:
    return [AUTO_LANGUAGE, *registered_languages()]


def _language(value: str | None) -> str | None:
    return None if not value or value == AUTO_LANGUAGE else value


@lru_cache(maxsize=16)
def _load_tokenizer(path: str, mtime_ns: int, size: int) -> TextTokenizer:
    return TextTokenizer(path)


def load_tokenizer(path: Path) -> TextTokenizer:
    """A TextTokenizer, cached while the file is unchanged (the sample box re-tokenizes on every edit)."""
    stat = path.stat()
    return _load_tokenizer(str(path), stat.st_mtime_ns, stat.st_size)


# -- sample text: base vs extended -------------------------------------------------------------------


@dataclass
class Tokenization:
    """One tokenizer's view of the sample: pieces labelled base/new/unknown, ids, counts."""

    name: str
    vocab_size: int
    normalized: str
    pieces: list[str]
    ids: list[int]
    labels: list[str]

    @property
    def new_count(self) -> int:
        return sum(1 for label in self.labels if label == NEW)

    @property
    def unknown_count(self) -> int:
        return sum(1 for label in self.labels if label == UNKNOWN)

    @property
    def share_new(self) -> float:
        return 100.0 * self.new_count / len(self.ids) if self.ids else 0.0

    def highlighted(self) -> list[tuple[str, str | None]]:
        """(piece, label) pairs for gr.HighlightedText; the ids are shown next to it."""
        return [(piece, label) for piece, label in zip(self.pieces, self.labels)]

    def ids_text(self) -> str:
        return " ".join(str(i) for i in self.ids)

    def summary_row(self) -> dict[str, object]:
        return {
            "tokenizer": self.name,
            "vocab size": self.vocab_size,
            "tokens": len(self.ids),
            "new ids": self.new_count,
            "share new %": round(self.share_new, 1),
            "unknown": self.unknown_count,
            "normalized text": self.normalized,
        }


def tokenize_sample(tokenizer: TextTokenizer, text: str, name: str, base_vocab_size: int | None,
                    language: str | None = None) -> Tokenization:
    """Tokenize ``text``; ids at or above ``base_vocab_size`` count as new (None: nothing is new)."""
    normalized = tokenizer.normalize(text, language)
    ids = tokenizer.encode_normalized(normalized)
    pieces = [tokenizer.sp.IdToPiece(i) for i in ids]
    labels: list[str] = []
    for token_id in ids:
        if token_id == tokenizer.unk_id:
            labels.append(UNKNOWN)
        elif base_vocab_size is not None and token_id >= base_vocab_size:
            labels.append(NEW)
        else:
            labels.append(BASE)
    return Tokenization(name=name, vocab_size=tokenizer.vocab_size, normalized=normalized, pieces=pieces,
                        ids=ids, labels=labels)


@dataclass
class SampleView:
    """What the sample section shows; ``message`` is an error line (empty when all went well)."""

    message: str = ""
    summary: pd.DataFrame = field(default_factory=lambda: empty_frame(SAMPLE_COLUMNS))
    base_pieces: list[tuple[str, str | None]] = field(default_factory=list)
    base_ids: str = ""
    extended_pieces: list[tuple[str, str | None]] = field(default_factory=list)
    extended_ids: str = ""


def compare_tokenization(text: str, base_path: str, extended_path: str, language: str | None,
                         workspace: Path | str) -> SampleView:
    """The sample sentence under the base and the extended tokenizer, side by side."""
    if not (text or "").strip():
        return SampleView(message=message_html("type a sentence to see how it tokenizes", "info"))
    try:
        base_file = existing_file(base_path, workspace, "base tokenizer", required=False)
        extended_file = existing_file(extended_path, workspace, "extended tokenizer", required=False)
        if base_file is None and extended_file is None:
            raise InputProblem("give a base or an extended tokenizer")
        base = load_tokenizer(base_file) if base_file else None
        extended = load_tokenizer(extended_file) if extended_file else None
    except (InputProblem, TokenizerError, OSError) as exc:
        return SampleView(message=message_html(str(exc)))
    lang = _language(language)
    base_size = base.vocab_size if base is not None else None
    view = SampleView()
    rows = []
    if base is not None:
        result = tokenize_sample(base, text, "base", None, lang)
        view.base_pieces, view.base_ids = result.highlighted(), result.ids_text()
        rows.append(result.summary_row())
    if extended is not None:
        result = tokenize_sample(extended, text, "extended", base_size, lang)
        view.extended_pieces, view.extended_ids = result.highlighted(), result.ids_text()
        rows.append(result.summary_row())
    view.summary = pd.DataFrame(rows, columns=SAMPLE_COLUMNS)
    if base is None:
        view.message = badge_html("NOTE", "no base tokenizer: new ids cannot be told apart", "info")
    return view


# -- train ----------------------------------------------------------------------------------------------

MODEL_TYPES = ("bpe", "unigram")


@dataclass
class ActionView:
    """The result of a train/extend action: a badge line, the log lines, and the model path written."""

    message: str
    log: str = ""
    model_path: str = ""


def train_action(corpus: str, out_name: str, vocab_size: float | int | None, model_type: str,
                 language: str | None, workspace: Path | str) -> ActionView:
    """Train a SentencePiece model on text files / manifests through the front-end (in-process, seconds)."""
    from data_tools.tokenizer.spm_model import TokenizerToolError
    from data_tools.tokenizer.train import train_tokenizer

    log: list[str] = []
    try:
        inputs = [existing_file(p, workspace, "corpus file") for p in split_paths(corpus)]
        if not inputs:
            raise InputProblem("give at least one corpus file (text, one line each, or a .jsonl manifest)")
        prefix = _model_prefix(out_name, workspace)
        size = _positive_int(vocab_size, "vocab size")
        if model_type not in MODEL_TYPES:
            raise InputProblem(f"model type must be one of {', '.join(MODEL_TYPES)}")
        model = train_tokenizer(inputs, prefix, size, model_type, _language(language), log=log.append)
    except (InputProblem, TokenizerToolError, OSError) as exc:
        return ActionView(message=message_html(str(exc)), log="\n".join(log))
    return ActionView(message=badge_html("TRAINED", str(model), "ok"), log="\n".join(log), model_path=str(model))


def _model_prefix(out_name: str, workspace: Path | str) -> Path:
    """The output prefix (``.model`` stripped); a bare name goes to the workspace's tokenizers/."""
    name = (out_name or "").strip()
    if not name:
        raise InputProblem("give an output name for the tokenizer")
    if name.endswith(".model"):
        name = name[: -len(".model")]
    path = Path(name).expanduser()
    if not path.is_absolute():
        path = Path(workspace) / ("tokenizers" if len(path.parts) == 1 else "") / path
    return path


def _positive_int(value: float | int | str | None, what: str) -> int:
    try:
        number = int(float(value)) if value not in (None, "") else 0
    except (TypeError, ValueError):
        raise InputProblem(f"{what} must be a whole number, got {value!r}") from None
    if number <= 0:
        raise InputProblem(f"{what} must be positive, got {number}")
    return number


# -- extend ---------------------------------------------------------------------------------------------

EXTEND_COLUMNS = ["what", "value"]


def extend_action(base: str, new: str, out_name: str, target_size: float | int | None,
                  workspace: Path | str) -> tuple[ActionView, pd.DataFrame]:
    """Append the new-language model's pieces to the base model (base ids unchanged); report as a table."""
    from data_tools.tokenizer import TokenizerToolError, extend_tokenizer

    log: list[str] = []
    try:
        base_path = existing_file(base, workspace, "base tokenizer")
        new_path = existing_file(new, workspace, "new-language tokenizer")
        out_path = _model_prefix(out_name, workspace).with_suffix(".model")
        if out_path.resolve() in (base_path.resolve(), new_path.resolve()):
            raise InputProblem(f"the extended tokenizer must be a new file, not {out_path}")
        target = _positive_int(target_size, "target size") if target_size not in (None, "", 0) else None
        report = extend_tokenizer(base_path, new_path, out_path, target_size=target, log=log.append)
    except (InputProblem, TokenizerToolError, OSError) as exc:
        return ActionView(message=message_html(str(exc)), log="\n".join(log)), empty_frame(EXTEND_COLUMNS)
    rows = [
        ("base pieces (ids unchanged)", report.base_size),
        ("appended pieces", report.appended),
        ("  single characters", report.appended_characters),
        ("  longer pieces", report.appended_multi_char),
        ("final size", report.final_size),
        ("skipped: already in the base", report.skipped_existing),
        ("skipped: only base characters", report.skipped_base_characters),
        ("dropped as unreachable", len(report.dropped_unreachable)),
    ]
    if report.target_size is not None:
        rows.append(("target size", f"{report.target_size} ({'reached' if report.target_reached else 'NOT reached'})"))
    if report.completed_scripts:
        rows.append(("completed scripts", ", ".join(report.completed_scripts)))
    tone = "ok" if report.target_reached else "warn"
    detail = f"{report.base_size} + {report.appended} = {report.final_size} pieces -> {report.out}"
    lines = log or report.summary_lines()  # the library logs its summary itself
    return (ActionView(message=badge_html("EXTENDED", detail, tone), log="\n".join(lines), model_path=report.out),
            pd.DataFrame([(k, str(v)) for k, v in rows], columns=EXTEND_COLUMNS))


# -- verify ---------------------------------------------------------------------------------------------

VERIFY_COLUMNS = ["check", "status", "hard", "detail"]
MAX_SAMPLES = 5000
BASE_SAMPLE_TEXT = (
    "The quick brown fox jumps over the lazy dog.\n"
    "Please call Stella and ask her to bring these things with her from the store.\n"
    "It was twenty five minutes past nine when the train finally arrived."
)


@dataclass
class VerifyView:
    verdict: str
    table: pd.DataFrame = field(default_factory=lambda: empty_frame(VERIFY_COLUMNS))


def _sample_lines(file_text: str, typed: str, workspace: Path | str, what: str) -> list[str]:
    from data_tools.tokenizer.verify import read_samples

    lines: list[str] = []
    for path_text in split_paths(file_text):
        path = existing_file(path_text, workspace, what)
        lines.extend(read_samples(path, MAX_SAMPLES))
    lines.extend(line for line in (typed or "").splitlines() if line.strip())
    return lines[:MAX_SAMPLES]


def verify_view(extended: str, base: str, samples_new_file: str, samples_base_file: str, samples_base_typed: str,
                manifest: str, config: str, language: str | None, workspace: Path | str) -> VerifyView:
    """Run the tokenizer verification; verdict badge and a table of every check (pass/fail/warn/skipped)."""
    from data_tools.config import ConfigError, load_config
    from data_tools.tokenizer import TokenizerToolError
    from data_tools.tokenizer.verify import verify_tokenizer

    try:
        extended_path = existing_file(extended, workspace, "extended tokenizer")
        base_path = existing_file(base, workspace, "base tokenizer", required=False)
        new_lines = _sample_lines(samples_new_file, "", workspace, "new-language samples file")
        base_lines = _sample_lines(samples_base_file, samples_base_typed, workspace, "base-language samples file")
        manifest_path = existing_file(manifest, workspace, "manifest", required=False)
        config_path = existing_file(config, workspace, "config", required=False)
        max_text_tokens = int(load_config(config_path)["gpt"]["max_text_tokens"]) if config_path else None
        lang = _language(language)
        report = verify_tokenizer(extended_path, base_path, new_lines, base_lines, manifest_path, max_text_tokens,
                                  language=lang)
    except (InputProblem, TokenizerToolError, ConfigError, OSError) as exc:
        return VerifyView(verdict=message_html(str(exc)))
    rows = [{"check": c.name, "status": c.status, "hard": "hard" if c.hard else "soft", "detail": c.message}
            for c in report.checks]
    hard = [c for c in report.checks if c.hard]
    ran = sum(1 for c in hard if c.status != "skipped")
    skipped = len(hard) - ran
    if report.ok:
        verdict = badge_html("PASSED", f"{ran} hard checks passed, {skipped} skipped", "ok")
    else:
        verdict = badge_html("FAILED", "failed: " + ", ".join(report.failed_checks), "error")
    return VerifyView(verdict=verdict, table=pd.DataFrame(rows, columns=VERIFY_COLUMNS))


# -- layout -----------------------------------------------------------------------------------------------


def build(ctx: StudioContext) -> None:
    """Lay out the Tokenizer tab (called by the shell inside ``with gr.Tab("Tokenizer")``)."""
    workspace = ctx.workspace
    paths = ctx.paths
    languages = language_choices()

    gr.Markdown("### How a sentence tokenizes: base vs extended")
    with gr.Row():
        sample_base = gr.Textbox(value=str(paths.base_tokenizer), label="Base tokenizer", elem_id="tok-sample-base-path")
        sample_extended = gr.Textbox(value=str(paths.tokenizer), label="Extended tokenizer",
                                     elem_id="tok-sample-extended-path")
        sample_language = gr.Dropdown(choices=languages, value=AUTO_LANGUAGE, label="Front-end language",
                                      elem_id="tok-sample-language", scale=0, min_width=140)
    initial = compare_tokenization(SAMPLE_TEXT, str(paths.base_tokenizer), str(paths.tokenizer), AUTO_LANGUAGE,
                                   workspace)
    sample_text = gr.Textbox(value=SAMPLE_TEXT, label="Sample text", lines=2, elem_id="tok-sample-text")
    sample_message = gr.HTML(value=initial.message, elem_id="tok-sample-message")
    sample_table = gr.Dataframe(value=initial.summary, interactive=False, wrap=True,
                                label="Token counts", elem_id="tok-sample-table")
    with gr.Row():
        with gr.Column():
            base_pieces = gr.HighlightedText(value=initial.base_pieces, label="Base: pieces", color_map=PIECE_COLORS, show_legend=True,
                                             elem_id="tok-sample-base-pieces")
            base_ids = gr.Textbox(value=initial.base_ids, label="Base: ids", lines=2, interactive=False, elem_id="tok-sample-base-ids")
        with gr.Column():
            extended_pieces = gr.HighlightedText(value=initial.extended_pieces, label="Extended: pieces (new = id >= base size)",
                                                 color_map=PIECE_COLORS, show_legend=True,
                                                 elem_id="tok-sample-extended-pieces")
            extended_ids = gr.Textbox(value=initial.extended_ids, label="Extended: ids", lines=2, interactive=False,
                                      elem_id="tok-sample-extended-ids")

    gr.Markdown("### Train a tokenizer on new-language text")
    with gr.Row():
        train_corpus = gr.Textbox(value=str(paths.train_manifest), lines=2, scale=3,
                                  label="Corpus: text files (one line each) or .jsonl manifests, one per line",
                                  elem_id="tok-train-corpus")
        train_out = gr.Textbox(value="amharic_new", label="Output name (tokenizers/<name>.model) or path",
                               elem_id="tok-train-out")
    with gr.Row():
        train_size = gr.Number(value=800, precision=0, minimum=8, label="Vocab size", elem_id="tok-train-size")
        train_type = gr.Radio(choices=list(MODEL_TYPES), value="bpe", label="Model type", elem_id="tok-train-type")
        train_language = gr.Dropdown(choices=languages, value="am" if "am" in languages else AUTO_LANGUAGE,
                                     label="Front-end language", elem_id="tok-train-language")
    train_button = gr.Button("Train", variant="primary", elem_id="tok-train-run")
    train_result = gr.HTML(elem_id="tok-train-result")
    train_log = gr.Textbox(label="Log", lines=3, interactive=False, elem_id="tok-train-log")

    gr.Markdown("### Extend the base tokenizer (base ids never move)")
    with gr.Row():
        extend_base = gr.Textbox(value=str(paths.base_tokenizer), label="Base tokenizer", elem_id="tok-extend-base")
        extend_new = gr.Textbox(value="", label="New-language tokenizer (filled by Train)", elem_id="tok-extend-new")
        extend_out = gr.Textbox(value="amharic_extended_new", label="Output name or path", elem_id="tok-extend-out")
        extend_target = gr.Number(value=0, precision=0, minimum=0, label="Target size in pieces (0: all new pieces)",
                                  elem_id="tok-extend-target")
    extend_button = gr.Button("Extend", variant="primary", elem_id="tok-extend-run")
    extend_result = gr.HTML(elem_id="tok-extend-result")
    extend_table = gr.Dataframe(value=empty_frame(EXTEND_COLUMNS), interactive=False, label="Extension",
                                elem_id="tok-extend-table")
    extend_log = gr.Textbox(label="Log", lines=3, interactive=False, elem_id="tok-extend-log")

    gr.Markdown("### Verify an extended tokenizer")
    with gr.Row():
        verify_extended = gr.Textbox(value=str(paths.tokenizer), label="Extended tokenizer",
                                     elem_id="tok-verify-tokenizer")
        verify_base = gr.Textbox(value=str(paths.base_tokenizer), label="Base tokenizer", elem_id="tok-verify-base")
        verify_language = gr.Dropdown(choices=languages, value=AUTO_LANGUAGE, label="New-language front-end",
                                      elem_id="tok-verify-language", scale=0, min_width=140)
    with gr.Row():
        verify_new = gr.Textbox(value=str(paths.val_manifest), label="New-language samples (text or .jsonl)",
                                elem_id="tok-verify-samples-new")
        verify_base_file = gr.Textbox(value="", label="Base-language samples file (optional)",
                                      elem_id="tok-verify-samples-base-file")
    verify_base_typed = gr.Textbox(value=BASE_SAMPLE_TEXT, lines=3, label="Base-language sample lines",
                                   elem_id="tok-verify-samples-base")
    with gr.Row():
        verify_manifest = gr.Textbox(value=str(paths.train_manifest),
                                     label="Manifest to check against max_text_tokens (optional)",
                                     elem_id="tok-verify-manifest")
        verify_config = gr.Textbox(value=str(paths.config), label="Config (gives max_text_tokens)",
                                   elem_id="tok-verify-config")
    verify_button = gr.Button("Verify", variant="primary", elem_id="tok-verify-run")
    verify_verdict = gr.HTML(elem_id="tok-verify-verdict")
    verify_table = gr.Dataframe(value=empty_frame(VERIFY_COLUMNS), interactive=False, wrap=True,
                                label="Checks", elem_id="tok-verify-table")

    def on_sample(text: str, base: str, extended: str, language: str):
        view = compare_tokenization(text, base, extended, language, workspace)
        return (view.message, view.summary, view.base_pieces, view.base_ids, view.extended_pieces,
                view.extended_ids)

    def on_train(corpus: str, out: str, size: float, model_type: str, language: str):
        view = train_action(corpus, out, size, model_type, language, workspace)
        return view.message, view.log, view.model_path or gr.skip()

    def on_extend(base: str, new: str, out: str, target: float | None):
        view, table = extend_action(base, new, out, target, workspace)
        return view.message, table, view.log, view.model_path or gr.skip()

    def on_verify(*values: str):
        view = verify_view(*values, workspace)
        return view.verdict, view.table

    sample_inputs = [sample_text, sample_base, sample_extended, sample_language]
    sample_outputs = [sample_message, sample_table, base_pieces, base_ids, extended_pieces, extended_ids]
    gr.on([sample_text.submit, sample_text.change, sample_base.submit, sample_extended.submit,
           sample_language.change], on_sample, inputs=sample_inputs, outputs=sample_outputs,
          trigger_mode="always_last", show_progress="hidden")
    train_button.click(on_train, inputs=[train_corpus, train_out, train_size, train_type, train_language],
                       outputs=[train_result, train_log, extend_new])
    extend_button.click(on_extend, inputs=[extend_base, extend_new, extend_out, extend_target],
                        outputs=[extend_result, extend_table, extend_log, verify_extended])
    verify_button.click(on_verify, inputs=[verify_extended, verify_base, verify_new, verify_base_file,
                                           verify_base_typed, verify_manifest, verify_config, verify_language],
                        outputs=[verify_verdict, verify_table])
