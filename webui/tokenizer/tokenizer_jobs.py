"""The Tokenizer tab's jobs: argv for ``python -m data_tools.tokenizer train|extend|verify`` from the form (an
``InputProblem`` line for bad input), and the views of their results and JSON reports. Plain functions tests call
directly; ``webui.tokenizer.tab_tokenizer`` lays them out.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from webui.dataclass_json import from_json
from webui.form_inputs import InputProblem, existing_file, split_paths, user_path
from webui.jobs.job_panel import result_message
from webui.jobs.report_jobs import JobResult, ReportJob
from webui.plots import badge_html, empty_frame, message_html
from webui.tokenizer.sample_compare import chosen_language

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
    lang = chosen_language(language)
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
    path = user_path(name.removesuffix(".model"), "output name")
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
                        ("--config", config_path), ("--language", chosen_language(language))):
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
