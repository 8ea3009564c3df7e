"""The Checkpoints tab's scores: Evaluate (the checkpoints without scores, and the base model), the number
``best.pth`` follows, and the samples a stop left owed; each a job over ``python -m trainer.evaluate`` or
``python -m trainer.owed_samples``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import gradio as gr

from webui.checkpoints.checkpoints_project import (
    downloaded_speech_model,
)
from webui.checkpoints.rows import NOT_VERIFIED, ListView, list_view, output_folder
from webui.form_inputs import InputProblem
from webui.jobs.job_panel import SharedPanel, report_view, tool_panel, wire_job
from webui.jobs.report_jobs import JobResult, ReportJob, stdout_report_argv
from webui.plots import (
    badge_html,
    message_html,
)

if TYPE_CHECKING:
    from webui.context import StudioContext


EVALUATE_JOB = ReportJob("checkpoint_evaluate")  # python -m trainer.evaluate RUN: what has no scores yet


BEST_JOB = ReportJob("checkpoint_best")  # python -m trainer.evaluate RUN --only-best: re-point best.pth


SAMPLES_JOB = ReportJob("checkpoint_samples")  # python -m trainer.owed_samples RUN: the samples a stop left


EVALUATE_CLI = "trainer.evaluate"


BEST_BY_CHOICES = [("validation loss (lowest)", "val_loss"), ("CER (lowest)", "cer"),
                   ("speaker similarity (highest)", "sim")]


def owed_samples_argv(python: str, output_dir: str, workspace: Path | str, report: Path) -> list[str]:
    """``python -m trainer.owed_samples RUN --json``: speak the samples a stop left, as the run would have."""
    folder = output_folder(output_dir, workspace)
    return stdout_report_argv(python, report, "trainer.owed_samples", str(folder), "--json")


def owed_samples_message_of(result: JobResult | None) -> str:
    def shown(report: dict) -> str:
        made, failed = list(report["made"]), dict(report["failed"])
        if failed:
            return message_html("; ".join(failed.values()))
        text = (f"samples of step {', '.join(str(step) for step in made)} made (the Training tab's players and "
                "samples/ have them)") if made else "no samples were owed"
        return badge_html("SAMPLES", text, "ok")

    return report_view(result, shown)


# -- evaluate and best.pth ----------------------------------------------------------------------------------
def run_defaults(output_dir: str, workspace: Path | str) -> tuple[str, str, str]:
    """(the number best.pth follows, the run's --eval-asr, its --eval-speaker-model): what the form starts from;
    where the run names no recogniser or speaker model, the workspace's downloaded one."""
    from trainer.evaluate import run_options
    from trainer.evaluation.best import followed
    from trainer.evaluation.errors import EvaluationError

    try:
        folder = output_folder(output_dir, workspace)
        opts = run_options(folder)
    except (InputProblem, EvaluationError):
        return "val_loss", downloaded_speech_model(workspace, "asr"), downloaded_speech_model(workspace, "speaker")
    # a run trained without evaluation: the recogniser and speaker model the Models tab downloaded, not a typed path
    return (followed(folder)[0], str(opts.get("eval_asr") or "") or downloaded_speech_model(workspace, "asr"),
            str(opts.get("eval_speaker_model") or "") or downloaded_speech_model(workspace, "speaker"))


def best_html(output_dir: str, workspace: Path | str) -> str:
    """What best.pth follows (and why that number), and which checkpoint it is now."""
    from trainer.checkpoints.store import BEST
    from trainer.evaluation.best import current_best_file, followed

    try:
        folder = output_folder(output_dir, workspace)
    except InputProblem:
        return ""
    best_by, source = followed(folder)
    label = next(text for text, value in BEST_BY_CHOICES if value == best_by)
    current = current_best_file(folder)
    now = (f"now {current.name}" if current is not None else
           "best.pth is not one of the listed step files" if (folder / BEST).is_file() else "no best.pth yet")
    return (f'<div id="ckpt-best-by" data-best-by="{best_by}">best.pth follows <b>{label}</b> ({source}); '
            f"{now}</div>")


def evaluate_argv(python: str, output_dir: str, best_by: str, asr: str, speaker: str, workspace: Path | str,
                  report: Path) -> list[str]:
    """``python -m trainer.evaluate RUN --eval-base --best-by B --json REPORT``: the same CLI the trainer's
    evaluation at saves runs. It measures the model_step files without scores of their bytes (a stop's, or a
    run trained without evaluation) and, once per evaluation set, the base model; the rest come from the run's
    train_config.yaml."""
    folder = output_folder(output_dir, workspace)
    args = [python, "-m", EVALUATE_CLI, str(folder), "--eval-base", "--json", str(report)]
    if best_by:
        args += ["--best-by", _best_by(best_by)]
    for flag, text in (("--eval-asr", asr), ("--eval-speaker-model", speaker)):
        if (text or "").strip():
            args += [flag, text.strip()]
    return args


def best_argv(python: str, output_dir: str, best_by: str, workspace: Path | str, report: Path) -> list[str]:
    """``python -m trainer.evaluate RUN --only-best --best-by B``: best.pth follows B from now on (no model loads)."""
    folder = output_folder(output_dir, workspace)
    return [python, "-m", EVALUATE_CLI, str(folder), "--only-best", "--best-by", _best_by(best_by), "--json",
            str(report)]


def _best_by(value: str) -> str:
    if value not in {choice for _label, choice in BEST_BY_CHOICES}:
        raise InputProblem(f"best.pth can follow val_loss, cer or sim, not {value!r}")
    return value


def unscored_html(view: ListView) -> str:
    """How many step checkpoints Evaluate would measure, and which saves' samples a stop left unmade."""
    if not view.paths:
        return ""
    text = ("every step checkpoint has scores" if not view.unscored else
            f"{view.unscored} step checkpoint{'s' if view.unscored != 1 else ''} without scores: Evaluate measures "
            "them")
    if view.samples_owed:
        steps = ", ".join(str(step) for step in view.samples_owed)
        text += (f"; the samples of step {steps} were not made (a stop): *Speak owed samples* makes them as the "
                 "run would have")
    return message_html(text, "info")


def evaluate_message_of(result: JobResult | None) -> str:
    """The Evaluate job's outcome in one line (its report: the results it wrote)."""
    def shown(measured: Any) -> str:
        results = [r for r in measured if isinstance(r, dict)] if isinstance(measured, list) else []
        count = sum(1 for r in results if r.get("model") != "base")
        base = " and the base model" if any(r.get("model") == "base" for r in results) else ""
        if not count and not base:
            return badge_html("EVALUATED", "nothing new: every checkpoint already had scores", "ok")
        return badge_html("EVALUATED", f"{count} checkpoint{'s' if count != 1 else ''}{base} measured", "ok")

    return report_view(result, shown)


def best_message_of(result: JobResult | None) -> str:
    return report_view(result, lambda report: badge_html("BEST", str(report["reason"]),
                                                         "ok" if report.get("step") is not None else "info"))


def evaluate_section(ctx: StudioContext, output_dir: gr.Dropdown, list_outputs: list[Any],
                      shown: Any, shared: SharedPanel) -> None:
    """Evaluate (score what has no scores yet, and the base once) and the number best.pth follows."""
    workspace = ctx.workspace
    best_init, asr_init, speaker_init = run_defaults(str(output_dir.value or ""), workspace)
    gr.Markdown("#### Scores: evaluate and pick the best")
    best_line = gr.HTML(best_html(str(output_dir.value or ""), workspace), elem_id="ckpt-best-line")
    unscored = gr.HTML(elem_id="ckpt-unscored")
    with gr.Row(equal_height=True):
        best_by = gr.Radio(choices=BEST_BY_CHOICES, value=best_init, label="best.pth follows", scale=3,
                           elem_id="ckpt-best-by-choice",
                           info="CER and SIM come from Evaluate; a new best must beat the old one beyond the noise")
        apply_best = gr.Button("Make best.pth follow it", scale=1, elem_id="ckpt-best-apply")
    with gr.Row():
        asr = gr.Textbox(value=asr_init, label="Speech recogniser (--eval-asr; empty: the run's)", scale=2,
                         elem_id="ckpt-eval-asr")
        speaker = gr.Textbox(value=speaker_init, label="Speaker model (--eval-speaker-model; empty: the run's)",
                             scale=2, elem_id="ckpt-eval-speaker")
        run = gr.Button("Evaluate", variant="primary", scale=1, elem_id="ckpt-evaluate-run")
    panel = tool_panel(shared, EVALUATE_JOB, "ckpt-evaluate", "Evaluate")
    evaluated = gr.HTML(elem_id="ckpt-evaluate-result")
    best_panel = tool_panel(shared, BEST_JOB, "ckpt-best", "best.pth")
    repointed = gr.HTML(elem_id="ckpt-best-result")
    speak_owed = gr.Button("Speak owed samples", size="sm", elem_id="ckpt-owed-samples-run")
    samples_panel = tool_panel(shared, SAMPLES_JOB, "ckpt-owed-samples", "Owed samples")
    spoken = gr.HTML(elem_id="ckpt-owed-samples-result")

    def folder_of(result: JobResult) -> str:
        argv = list(result.argv)
        return argv[argv.index(EVALUATE_CLI) + 1] if EVALUATE_CLI in argv[:-1] else ""

    def refreshed(folder: str) -> list[Any]:
        view = list_view(folder, workspace, None, NOT_VERIFIED)
        return [*shown(view), best_html(folder, workspace), unscored_html(view)]

    def after(message_of: Any) -> Any:
        def render(result: JobResult | None) -> list[Any]:
            if result is None:
                return [gr.skip()] * (len(list_outputs) + 2) + [""]
            return [*refreshed(folder_of(result)), message_of(result)]
        return render

    def on_folder(folder: str) -> list[Any]:
        best, asr_value, speaker_value = run_defaults(folder, workspace)
        view = list_view(folder, workspace, None, NOT_VERIFIED)
        return [best_html(folder, workspace), unscored_html(view), best, asr_value, speaker_value]

    outputs = [*list_outputs, best_line, unscored]
    wire_job(ctx, panel, run, [output_dir, best_by, asr, speaker],
             lambda *values: evaluate_argv(ctx.python, *values, workspace, EVALUATE_JOB.report_path(ctx)),
             [*outputs, evaluated], after(evaluate_message_of))
    wire_job(ctx, best_panel, apply_best, [output_dir, best_by],
             lambda *values: best_argv(ctx.python, *values, workspace, BEST_JOB.report_path(ctx)),
             [*outputs, repointed], after(best_message_of))
    wire_job(ctx, samples_panel, speak_owed, [output_dir],
             lambda folder: owed_samples_argv(ctx.python, folder, workspace, SAMPLES_JOB.report_path(ctx)),
             [unscored, spoken],
             lambda result: ([gr.skip(), ""] if result is None else
                             [unscored_html(list_view(str(result.argv[-2]), workspace, None, NOT_VERIFIED)),
                              owed_samples_message_of(result)]))
    output_dir.change(on_folder, inputs=output_dir, outputs=[best_line, unscored, best_by, asr, speaker])
