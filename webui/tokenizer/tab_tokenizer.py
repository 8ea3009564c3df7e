"""The Tokenizer tab: train, extend and verify tokenizers, and see a sentence tokenized base vs extended.

The sample box tokenizes one sentence in-process (two small models, cached). Training, extending and
verifying read whole corpora and manifests, so each runs as a supervised job
(``python -m data_tools.tokenizer train|extend|verify``, see ``webui.jobs.report_jobs``) with progress, log
and Stop; the tab shows the JSON report it writes. The argv builders and report readers are plain
functions tests call directly; ``build(ctx)`` only lays out and wires them, section by section.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gradio as gr
import pandas as pd

from data_tools.text import registered_languages
from data_tools.text_tokenizer import TextTokenizer, TokenizerError
from webui.dataclass_json import from_json
from webui.form_inputs import InputProblem, existing_file, split_paths, user_path
from webui.jobs.job_panel import job_panel, result_message, wire_job
from webui.jobs.report_jobs import JobResult, ReportJob
from webui.plots import (
    badge_html,
    empty_frame,
    message_html,
)
from webui.tokenizer.project_fill import follow_project
from webui.tokenizer.tokenizer_v25_panel import build_panel as build_v25_panel

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
TRAIN_JOB = ReportJob("tokenizer_train", writes_report=False)
EXTEND_JOB = ReportJob("tokenizer_extend")
VERIFY_JOB = ReportJob("tokenizer_verify", report_exits=(0, 1))  # exit 1: a hard check failed (a verdict)
TOKENIZER_CLI = "data_tools.tokenizer"


@dataclass
class ActionView:
    """The result of a train/extend job: a badge line and the model path written ('' if none)."""

    message: str
    model_path: str = ""


def train_argv(python: str, corpus: str, out_name: str, vocab_size: float | int | None, model_type: str,
               language: str | None, workspace: Path | str) -> list[str]:
    """``python -m data_tools.tokenizer train ...`` for the form; InputProblem (one line) for bad input."""
    inputs = [existing_file(p, workspace, "corpus file") for p in split_paths(corpus)]
    if not inputs:
        raise InputProblem("give at least one corpus file (text, one line each, or a .jsonl manifest)")
    prefix = _model_prefix(out_name, workspace)
    size = _positive_int(vocab_size, "vocab size")
    if model_type not in MODEL_TYPES:
        raise InputProblem(f"model type must be one of {', '.join(MODEL_TYPES)}")
    argv = [python, "-m", TOKENIZER_CLI, "train"]
    for path in inputs:
        argv += ["--input", str(path)]
    argv += ["--out", str(prefix), "--vocab-size", str(size), "--model-type", model_type]
    lang = _language(language)
    return argv + (["--language", lang] if lang else [])


def train_view_of(result: JobResult | None) -> ActionView:
    """A finished train job names the model it wrote (``--out PREFIX`` -> ``PREFIX.model``)."""
    if result is None:
        return ActionView(message="")
    argv = list(result.argv)
    if result.exit_code != 0 or "--out" not in argv[:-1]:
        return ActionView(message=result_message(result, "tokenizer training"))
    model = Path(argv[argv.index("--out") + 1] + ".model")
    if not model.is_file():
        return ActionView(message=message_html(f"the training finished but {model} is missing"))
    return ActionView(message=badge_html("TRAINED", str(model), "ok"), model_path=str(model))


def _model_prefix(out_name: str, workspace: Path | str) -> Path:
    """The output prefix (``.model`` stripped); a bare name goes to the workspace's tokenizers/."""
    name = (out_name or "").strip()
    if not name:
        raise InputProblem("give an output name for the tokenizer")
    if name.endswith(".model"):
        name = name[: -len(".model")]
    path = user_path(name, "output name")
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


def extend_argv(python: str, base: str, new: str, out_name: str, target_size: float | int | None,
                workspace: Path | str, report: Path) -> list[str]:
    """``python -m data_tools.tokenizer extend ... --json REPORT``: the new model's pieces appended to the base."""
    base_path = existing_file(base, workspace, "base tokenizer")
    new_path = existing_file(new, workspace, "new-language tokenizer")
    assert base_path is not None and new_path is not None
    out_path = _model_prefix(out_name, workspace).with_suffix(".model")
    if out_path.resolve() in (base_path.resolve(), new_path.resolve()):
        raise InputProblem(f"the extended tokenizer must be a new file, not {out_path}")
    argv = [python, "-m", TOKENIZER_CLI, "extend", "--base", str(base_path), "--new", str(new_path),
            "--out", str(out_path)]
    if target_size not in (None, "", 0):
        argv += ["--target-size", str(_positive_int(target_size, "target size"))]
    return [*argv, "--json", str(report)]


def extend_view_of(result: JobResult | None) -> tuple[ActionView, pd.DataFrame]:
    """The extension's report as a table (base pieces, appended, final size, what was skipped)."""
    from data_tools.tokenizer.extend import ExtendReport

    if result is None:
        return ActionView(message=""), empty_frame(EXTEND_COLUMNS)
    try:
        report = from_json(ExtendReport, result.report_json())
    except ValueError as exc:
        return ActionView(message=message_html(str(exc))), empty_frame(EXTEND_COLUMNS)
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
    return (ActionView(message=badge_html("EXTENDED", detail, tone), model_path=report.out),
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


def _samples_file(file_text: str, typed: str, workspace: Path | str, what: str, target: Path) -> Path | None:
    """One samples file for the CLI: the one given, or ``target`` holding the lines of several plus typed ones."""
    from data_tools.fileio import atomic_write_text
    from data_tools.tokenizer.verify import read_samples

    files = [existing_file(p, workspace, what) for p in split_paths(file_text)]
    typed_lines = [line for line in (typed or "").splitlines() if line.strip()]
    if len(files) == 1 and not typed_lines:
        return files[0]
    if not files and not typed_lines:
        return None
    lines: list[str] = []
    try:
        for path in files:
            assert path is not None
            lines.extend(read_samples(path, MAX_SAMPLES))
    except (OSError, ValueError) as exc:
        raise InputProblem(f"cannot read the {what}: {exc}") from None
    lines = [" ".join(line.split()) for line in [*lines, *typed_lines]][:MAX_SAMPLES]
    atomic_write_text(target, "\n".join(lines) + "\n")
    return target


def verify_argv(python: str, extended: str, base: str, samples_new_file: str, samples_base_file: str,
                samples_base_typed: str, manifest: str, config: str, language: str | None,
                workspace: Path | str, report: Path) -> list[str]:
    """``python -m data_tools.tokenizer verify ... --json REPORT``; typed sample lines go to a file beside it."""
    extended_path = existing_file(extended, workspace, "extended tokenizer")
    base_path = existing_file(base, workspace, "base tokenizer")
    folder = report.parent
    new = _samples_file(samples_new_file, "", workspace, "new-language samples file", folder / "samples_new.txt")
    old = _samples_file(samples_base_file, samples_base_typed, workspace, "base-language samples file",
                        folder / "samples_base.txt")
    manifest_path = existing_file(manifest, workspace, "manifest", required=False)
    config_path = existing_file(config, workspace, "config", required=False)
    argv = [python, "-m", TOKENIZER_CLI, "verify", "--tokenizer", str(extended_path), "--base", str(base_path),
            "--max-samples", str(MAX_SAMPLES)]
    for flag, value in (("--samples-new", new), ("--samples-base", old), ("--manifest", manifest_path),
                        ("--config", config_path), ("--language", _language(language))):
        if value:
            argv += [flag, str(value)]
    return [*argv, "--json", str(report)]


def verify_view_of(result: JobResult | None) -> VerifyView:
    """Verdict badge and a table of every check (pass/fail/warn/skipped) from the verify job's report."""
    if result is None:
        return VerifyView(verdict="")
    try:
        report = result.report_json()
        checks = [c for c in report["checks"] if isinstance(c, dict)]
        rows = [{"check": c["name"], "status": c["status"], "hard": "hard" if c.get("hard") else "soft",
                 "detail": c.get("message", "")} for c in checks]
    except (ValueError, KeyError, TypeError) as exc:
        return VerifyView(verdict=message_html(f"cannot read the verification report: {exc}"))
    hard = [c for c in checks if c.get("hard")]
    ran = sum(1 for c in hard if c["status"] != "skipped")
    if report.get("ok"):
        verdict = badge_html("PASSED", f"{ran} hard checks passed, {len(hard) - ran} skipped", "ok")
    else:
        verdict = badge_html("FAILED", "failed: " + ", ".join(map(str, report.get("failed") or [])), "error")
    return VerifyView(verdict=verdict, table=pd.DataFrame(rows, columns=VERIFY_COLUMNS))


# -- layout -----------------------------------------------------------------------------------------------


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
    build_v25_panel()
    follow_project(ctx, fields)
