"""The Checkpoints tab: list, verify, inspect, repair and export checkpoints, over the checkpoint toolkit.

Every rule (what a verdict means, how repair and export lay out files) lives in ``trainer.checkpoints``;
this module only turns its results into tables. The list comes first from each file's metadata (no
tensor data: milliseconds for a 7 GB file; it names the model version), then a supervised job verifies
every file and fills in the verdicts. Verify, inspect, repair and export load whole checkpoints, so each
runs as a job too (``python -m trainer.checkpoints VERB ... --json``, see ``webui.report_jobs``): a
multi-GB file never blocks the page. Callbacks are plain functions; ``build(ctx)`` wires them.
"""

from __future__ import annotations

import datetime as _dt
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gradio as gr
import pandas as pd

from webui.checkpoints_project import (
    downloaded_speech_model,
    newest_project_run,
    project_export_dir,
    run_config,
    run_of_project,
)
from webui.form_inputs import InputProblem, existing_file, resolve_path
from webui.job_panel import job_panel, wire_job
from webui.model_version import model_name as generation_name
from webui.plots import (
    badge_html,
    empty_frame,
    format_bytes,
    format_number,
    key_value_frame,
    message_html,
    records_frame,
)
from webui.report_jobs import JobResult, ReportJob, stdout_report_argv

if TYPE_CHECKING:
    from webui.context import StudioContext

LIST_COLUMNS = ["file", "kind", "model", "step", "epoch", "val loss", "CER", "WER", "SIM", "verdict", "size",
                "modified"]
VERIFY_COLUMNS = ["component", "status", "detail"]
EXPORT_COLUMNS = ["file", "size"]
REPAIR_COLUMNS = ["what", "detail"]
DTYPES = ("fp32", "fp16", "bf16")
CHECKPOINT_SUFFIXES = (".pth", ".pt")
CHECKPOINTS_CLI = "trainer.checkpoints"
PENDING = "verifying…"
NOT_VERIFIED = "not verified: List checkpoints verifies every file"

LIST_JOB = ReportJob("checkpoint_list")
VERIFY_JOB = ReportJob("checkpoint_verify", report_exits=(0, 1, 2))  # 1 PARTIAL, 2 INVALID: verdicts
INSPECT_JOB = ReportJob("checkpoint_inspect")
REPAIR_JOB = ReportJob("checkpoint_repair")
EXPORT_JOB = ReportJob("checkpoint_export")
EVALUATE_JOB = ReportJob("checkpoint_evaluate")  # python -m trainer.evaluate RUN: what has no scores yet
BEST_JOB = ReportJob("checkpoint_best")  # python -m trainer.evaluate RUN --only-best: re-point best.pth
SAMPLES_JOB = ReportJob("checkpoint_samples")  # python -m trainer.owed_samples RUN: the samples a stop left
EVALUATE_CLI = "trainer.evaluate"
BEST_BY_CHOICES = [("validation loss (lowest)", "val_loss"), ("CER (lowest)", "cer"),
                   ("speaker similarity (highest)", "sim")]
BASE_FILE = "base model"


def find_output_dirs(workspace: Path, max_dirs: int = 200) -> list[str]:
    """Folders of the workspace that hold checkpoints: runs/* (two levels) and checkpoints/, newest first."""
    workspace = Path(workspace)
    candidates: set[Path] = set()
    for pattern in ("runs/*", "runs/*/*", "checkpoints", "v2/runs/*", "v2/checkpoints", "v25/runs/*", "v25/checkpoints",
                    "projects/*/runs/*"):
        for path in workspace.glob(pattern):
            if path.is_dir() and any(child.suffix in CHECKPOINT_SUFFIXES for child in path.iterdir()):
                candidates.add(path)
    for runs in (workspace / "runs", workspace / "v2" / "runs", workspace / "v25" / "runs",
                 *workspace.glob("projects/*/runs")):  # an output dir without checkpoints yet
        if runs.is_dir():
            candidates.update(p for p in runs.iterdir() if p.is_dir())

    def newest(path: Path) -> float:
        try:
            return path.stat().st_mtime
        except OSError:
            return 0.0

    ordered = sorted(candidates, key=newest, reverse=True)[:max_dirs]
    return [str(path) for path in ordered]


def _modified(mtime: Any) -> str:
    if mtime is None:
        return ""
    try:
        return _dt.datetime.fromtimestamp(float(mtime)).strftime("%Y-%m-%d %H:%M:%S")
    except (TypeError, ValueError, OSError):
        return str(mtime)


# -- model version from the metadata (no tensor data read) ----------------------------------------------------
_versions: dict[tuple[int, int, int, int], str] = {}
_versions_lock = threading.Lock()


def model_name(path: Path | str) -> str:
    """'IndexTTS2' / 'IndexTTS-1.5' from the checkpoint's metadata, '?' when it cannot be read (cached per file)."""
    from trainer.checkpoints import CheckpointError
    from trainer.checkpoints.metadata import read_metadata

    path = Path(path)
    try:
        stat = path.stat()
    except OSError:
        return "?"
    key = (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)
    with _versions_lock:
        if key not in _versions:
            try:
                version = read_metadata(path).model_version
            except CheckpointError:
                version = None
            if len(_versions) > 1024:
                _versions.clear()
            _versions[key] = generation_name(version, "?")
        return _versions[key]


# -- list ---------------------------------------------------------------------------------------------------
@dataclass
class ListView:
    message: str = ""
    table: pd.DataFrame = field(default_factory=lambda: empty_frame(LIST_COLUMNS))
    paths: list[str] = field(default_factory=list)  # checkpoint paths in table order, for the picker
    row_paths: list[str] = field(default_factory=list)  # each table row's file ('' for the base row), for clicks
    unscored: int = 0  # model_step files without scores of their own bytes (what Evaluate measures)
    samples_owed: list[int] = field(default_factory=list)  # saves whose samples a stop left unmade


def _output_folder(output_dir: str, workspace: Path | str) -> Path:
    folder = resolve_path(output_dir, workspace)
    if folder is None:
        raise InputProblem("choose an output directory")
    if not folder.is_dir():
        raise InputProblem(f"output directory not found: {folder}")
    return folder


def list_view(output_dir: str, workspace: Path | str, verdicts: dict[str, str] | None = None,
              unverified: str = PENDING) -> ListView:
    """The output directory's checkpoints (newest first) from their metadata, with ``verdicts`` by path
    (None: none yet, each row says ``unverified``)."""
    from trainer.checkpoints.listing import list_checkpoints
    from trainer.evaluation.results import results_by_step

    try:
        folder = _output_folder(output_dir, workspace)
        summaries = list_checkpoints(folder, verify=False)
        scores = results_by_step(folder)  # checkpoint evaluation: model_step<N>.eval.json beside the files
    except (InputProblem, OSError) as exc:
        return ListView(message=message_html(str(exc)))
    rows = []
    unscored = 0
    for summary in summaries:
        result = scores.get(summary.step, {}) if summary.step is not None else {}
        if result and result.get("identity") != _identity(summary.path):
            result = {}  # the scores of another file of that step (an abandoned timeline)
        unscored += int(not result and Path(summary.path).name.startswith("model_step"))
        rows.append({
            **_score_cells(result),
            "file": Path(summary.path).name, "kind": summary.kind, "model": model_name(summary.path),
            "step": summary.step, "epoch": summary.epoch, "val loss": format_number(summary.val_loss),
            "verdict": unverified if verdicts is None else verdicts.get(str(summary.path), "?"),
            "size": format_bytes(summary.size_bytes), "modified": _modified(summary.mtime),
        })
    if not rows:
        return ListView(message=message_html(f"no checkpoints in {folder}", "info"))
    detail = str(folder) if verdicts is not None else f"{folder} ({unverified})"
    paths = [str(s.path) for s in summaries]
    above = [row for row in (base_row(folder), floor_row(folder)) if row is not None]
    rows[:0] = above
    return ListView(message=badge_html(f"{len(summaries)} checkpoint{'s' if len(summaries) != 1 else ''}", detail,
                                       "info"),
                    table=records_frame(rows, LIST_COLUMNS), paths=paths,
                    row_paths=[""] * len(above) + paths, unscored=unscored,
                    samples_owed=samples_owed(folder))


def samples_owed(folder: Path) -> list[int]:
    """The saves whose samples a stop left unmade and nothing made since (``trainer.owed_samples``'s rule)."""
    from trainer.owed_samples import owed_steps

    return owed_steps(folder)


def owed_samples_argv(python: str, output_dir: str, workspace: Path | str, report: Path) -> list[str]:
    """``python -m trainer.owed_samples RUN --json``: speak the samples a stop left, as the run would have."""
    folder = _output_folder(output_dir, workspace)
    return stdout_report_argv(python, report, "trainer.owed_samples", str(folder), "--json")


def owed_samples_message_of(result: JobResult | None) -> str:
    if result is None:
        return ""
    try:
        report = result.report_json()
        made, failed = list(report["made"]), dict(report["failed"])
    except (ValueError, KeyError, TypeError) as exc:
        return message_html(str(exc))
    if failed:
        return message_html("; ".join(failed.values()))
    text = (f"samples of step {', '.join(str(step) for step in made)} made (the Training tab's players and "
            "samples/ have them)") if made else "no samples were owed"
    return badge_html("SAMPLES", text, "ok")


def _score_cells(result: dict[str, Any]) -> dict[str, str]:
    """CER and WER in percent, SIM as a cosine, each with its 95 % interval ('' when not measured)."""
    from trainer.evaluation.results import score_cell

    return {name: score_cell(result, name.lower()) if result else "" for name in ("CER", "WER", "SIM")}


def base_row(folder: Path) -> dict[str, Any] | None:
    """The base model's scores on the run's evaluation set (measured once, cached in eval/base.eval.json), as the
    table's first row: the line every checkpoint is judged against. None before it was measured."""
    from trainer.evaluation.results import base_result_path, read_result

    result = read_result(base_result_path(folder))
    if result is None:
        return None
    name = str(result.get("checkpoint") or "")
    return {**_score_cells(result), "file": BASE_FILE + (f" ({name})" if name else ""), "kind": "base",
            "model": _base_model_name(folder), "step": 0, "epoch": None, "val loss": "", "verdict": "",
            "size": "", "modified": _modified(result.get("time"))}


FLOOR_FILE = "real speech (the recogniser's floor)"


def floor_row(folder: Path) -> dict[str, Any] | None:
    """The recogniser's CER and WER on the real recordings of the evaluation sentences (measured once per set):
    what a good checkpoint approaches for a new language, not zero. None before it was measured."""
    from trainer.evaluation.eval_set import eval_dir
    from trainer.evaluation.floor import read_floor

    result = read_floor(eval_dir(folder))
    if result is None:
        return None
    cells = _score_cells(result)
    return {**cells, "SIM": "", "file": FLOOR_FILE, "kind": "floor", "model": "", "step": None, "epoch": None,
            "val loss": "", "verdict": "", "size": "", "modified": _modified(result.get("time"))}


def _base_model_name(folder: Path) -> str:
    from trainer.evaluation.errors import EvaluationError

    try:
        from trainer.evaluate import run_options

        base = str(run_options(folder).get("base_checkpoint") or "")
    except EvaluationError:
        return ""
    return model_name(base) if base and Path(base).is_file() else ""


def _identity(path: Path) -> str | None:
    from trainer.evaluation.results import checkpoint_identity

    try:
        return checkpoint_identity(path)
    except OSError:
        return None


def list_argv(python: str, output_dir: str, workspace: Path | str, report: Path) -> list[str]:
    """Verify every checkpoint of the folder: ``trainer.checkpoints list DIR --json`` (stdout to REPORT)."""
    folder = _output_folder(output_dir, workspace)
    return stdout_report_argv(python, report, CHECKPOINTS_CLI, "list", str(folder), "--json")


def list_view_of(result: JobResult | None, workspace: Path | str) -> ListView:
    """The list with every file's verdict, from the list job's report."""
    if result is None:
        return ListView()
    argv = list(result.argv)
    folder = argv[argv.index("list") + 1] if "list" in argv[:-1] else ""
    try:
        entries = result.report_json()
        verdicts = {str(e["path"]): str(e["verdict"]) + (f" ({e['reason']})" if e.get("reason") else "")
                    for e in entries}
    except (ValueError, KeyError, TypeError) as exc:
        view = list_view(folder, workspace, {})
        view.message = message_html(f"could not verify the checkpoints: {exc}")
        return view
    return list_view(folder, workspace, verdicts)


# -- verify -------------------------------------------------------------------------------------------------
@dataclass
class VerifyView:
    verdict: str = ""
    table: pd.DataFrame = field(default_factory=lambda: empty_frame(VERIFY_COLUMNS))


def verify_argv(python: str, checkpoint: str, tokenizer: str, config: str, workspace: Path | str,
                report: Path) -> list[str]:
    path = existing_file(checkpoint, workspace, "checkpoint")
    args = ["verify", str(path), "--json"]
    for flag, text, what in (("--tokenizer", tokenizer, "tokenizer"), ("--config", config, "config")):
        found = existing_file(text, workspace, what, required=False)
        if found is not None:
            args += [flag, str(found)]
    return stdout_report_argv(python, report, CHECKPOINTS_CLI, *args)


def verify_view_of(result: JobResult | None) -> VerifyView:
    """Verdict badge and component table from ``verify --json`` (optionally against a tokenizer and config)."""
    if result is None:
        return VerifyView()
    try:
        report = result.report_json()
        rows = [{"component": c["name"], "status": c["status"], "detail": c.get("detail", "")}
                for c in report["components"]]
        verdict_word = str(report["verdict"])
    except (ValueError, KeyError, TypeError) as exc:
        return VerifyView(verdict=message_html(str(exc)))
    rows += [{"component": "lost on resume", "status": "", "detail": cost} for cost in report.get("lost") or []]
    compatibility = report.get("compatibility") or None
    errors = list((compatibility or {}).get("errors") or [])
    if compatibility is not None:
        rows += [{"component": "compatibility", "status": "wrong", "detail": e} for e in errors]
        rows += [{"component": "compatibility", "status": "warning", "detail": w}
                 for w in compatibility.get("warnings") or []]
        if not errors:
            rows.append({"component": "compatibility", "status": "ok", "detail": "fits the given tokenizer/config"})
    detail = report.get("reason") or f"{report.get('kind')} checkpoint"
    usable = report.get("usable_as") or []
    if usable and "usable as" not in detail:
        detail += f" · usable as {', '.join(usable)}"
    verdict = badge_html(verdict_word, detail)
    if errors:
        first = errors[0] if len(errors[0]) <= 240 else errors[0][:240] + "…"
        more = f" (+{len(errors) - 1} more in the table)" if len(errors) > 1 else ""
        verdict += badge_html("INCOMPATIBLE", first + more, "error")
    return VerifyView(verdict=verdict, table=records_frame(rows, VERIFY_COLUMNS))


# -- inspect ------------------------------------------------------------------------------------------------
# The facts shown first, in this order; everything else inspect_checkpoint reports follows.
KEY_FACTS = ("kind", "step", "epoch", "position", "last_losses", "last_val_loss", "best_val_loss", "saved_at",
             "modified", "file_bytes", "format_version", "model", "optimizer", "scheduler_step", "grad_scaler",
             "rng", "sampler", "tokenizer", "base_vocab_size", "versions")


def inspect_argv(python: str, checkpoint: str, workspace: Path | str, report: Path) -> list[str]:
    path = existing_file(checkpoint, workspace, "checkpoint")
    return stdout_report_argv(python, report, CHECKPOINTS_CLI, "inspect", str(path), "--json")


def inspect_view_of(result: JobResult | None) -> tuple[str, pd.DataFrame]:
    """Key facts of one checkpoint as a two-column table (message, table), from ``inspect --json``."""
    empty = empty_frame(["field", "value"])
    if result is None:
        return "", empty
    try:
        facts = result.report_json()
        if not isinstance(facts, dict):
            raise ValueError("the inspection report is not a mapping")
    except ValueError as exc:
        return message_html(str(exc)), empty
    ordered = {key: facts[key] for key in KEY_FACTS if key in facts}
    if isinstance(ordered.get("file_bytes"), int):
        ordered["file_bytes"] = f"{format_bytes(ordered['file_bytes'])} ({ordered['file_bytes']:,} bytes)"
    ordered.update({key: value for key, value in facts.items() if key not in ordered and key != "path"})
    name = Path(str(facts.get("path", ""))).name
    detail = f"{name}: {facts.get('kind')} checkpoint, step {facts.get('step')}, epoch {facts.get('epoch')}"
    return badge_html("INSPECTED", detail, "info"), key_value_frame(ordered)


# -- repair -------------------------------------------------------------------------------------------------
def default_repair_path(checkpoint: Path) -> Path:
    """``<stem>_repaired.pth`` beside the original (``_repaired_2``... when taken): repair never overwrites."""
    candidate = checkpoint.with_name(f"{checkpoint.stem}_repaired{checkpoint.suffix}")
    number = 2
    while candidate.exists():
        candidate = checkpoint.with_name(f"{checkpoint.stem}_repaired_{number}{checkpoint.suffix}")
        number += 1
    return candidate


def repair_argv(python: str, checkpoint: str, out_name: str, config: str, tokenizer: str,
                base_vocab_size: float | None, workspace: Path | str, report: Path) -> list[str]:
    """``trainer.checkpoints repair PATH --out NEW --json``; the new file goes beside the original by default."""
    path = existing_file(checkpoint, workspace, "checkpoint")
    assert path is not None
    name = (out_name or "").strip()
    out = default_repair_path(path) if not name else (Path(name) if "/" in name else path.with_name(name))
    out = out if out.is_absolute() else Path(workspace) / out
    if out.exists():
        raise InputProblem(f"{out} already exists: repair never overwrites a file; choose a new name")
    args = ["repair", str(path), "--out", str(out), "--json"]
    for flag, text, what in (("--config", config, "config"), ("--tokenizer", tokenizer, "tokenizer")):
        found = existing_file(text, workspace, what, required=False)
        if found is not None:
            args += [flag, str(found)]
    if base_vocab_size:
        args += ["--base-vocab-size", str(int(base_vocab_size))]
    return stdout_report_argv(python, report, CHECKPOINTS_CLI, *args)


def repair_view_of(result: JobResult | None) -> tuple[str, pd.DataFrame]:
    """What the repair carried over, what it supplied and what is lost, one row each, and the new file's verdict."""
    if result is None:
        return "", empty_frame(REPAIR_COLUMNS)
    try:
        report = result.report_json()
        rows = [{"what": label, "detail": line} for key, label in (("kept", "kept"), ("filled", "supplied"),
                                                                   ("costs", "lost"))
                for line in report.get(key) or []]
        out, verdict = str(report["out"]), str(report.get("verdict") or "?")
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        return message_html(str(exc)), empty_frame(REPAIR_COLUMNS)
    rows.append({"what": "new file", "detail": f"{out}: {verdict}"})
    detail = f"{report.get('source_kind')} checkpoint -> {out} ({verdict}; the original is unchanged)"
    return badge_html("REPAIRED", detail, "ok" if verdict == "COMPLETE" else "warn"), records_frame(rows, REPAIR_COLUMNS)


# -- export -------------------------------------------------------------------------------------------------
def default_export_dir(checkpoint: str, workspace: Path | str) -> str:
    """exports/<run>_<file stem>_<time> under the workspace (never inside the run's output dir)."""
    path = resolve_path(checkpoint, workspace)
    if path is None:
        return ""
    stamp = time.strftime("%Y%m%d_%H%M%S")
    return str(Path(workspace) / "exports" / f"{path.parent.name}_{path.stem}_{stamp}")


def export_argv(python: str, checkpoint: str, out_dir: str, dtype: str, safetensors: bool, config: str,
                tokenizer: str, workspace: Path | str, report: Path) -> list[str]:
    """``trainer.checkpoints export PATH --out DIR ...`` (its printed lines go to REPORT)."""
    path = existing_file(checkpoint, workspace, "checkpoint")
    if dtype not in DTYPES:
        raise InputProblem(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    target = resolve_path(out_dir, workspace) or Path(default_export_dir(str(path), workspace))
    args = ["export", str(path), "--out", str(target), "--dtype", dtype]
    if safetensors:
        args.append("--safetensors")
    for flag, text, what in (("--config", config, "config"), ("--tokenizer", tokenizer, "tokenizer")):
        found = existing_file(text, workspace, what, required=False)
        if found is not None:
            args += [flag, str(found)]
    return stdout_report_argv(python, report, CHECKPOINTS_CLI, *args)


def export_view_of(result: JobResult | None) -> tuple[str, pd.DataFrame]:
    """The export folder's files (with sizes) and the export's notes."""
    if result is None or result.report_text is None:
        return ("" if result is None else message_html(result.error)), empty_frame(EXPORT_COLUMNS)
    argv = list(result.argv)
    out = Path(argv[argv.index("--out", argv.index(CHECKPOINTS_CLI)) + 1])
    files = sorted(p for p in out.iterdir() if p.is_file()) if out.is_dir() else []
    rows = [{"file": str(f), "size": format_bytes(f.stat().st_size)} for f in files]
    notes = [line.strip()[len("note:"):].strip() for line in result.report_text.splitlines()
             if line.strip().startswith("note:")]
    rows += [{"file": f"note: {note}", "size": ""} for note in notes]
    return badge_html("EXPORTED", str(out), "ok"), records_frame(rows, EXPORT_COLUMNS)


# -- evaluate and best.pth ----------------------------------------------------------------------------------
def run_defaults(output_dir: str, workspace: Path | str) -> tuple[str, str, str]:
    """(the number best.pth follows, the run's --eval-asr, its --eval-speaker-model): what the form starts from;
    where the run names no recogniser or speaker model, the workspace's downloaded one."""
    from trainer.evaluate import run_options
    from trainer.evaluation.best import followed
    from trainer.evaluation.errors import EvaluationError

    try:
        folder = _output_folder(output_dir, workspace)
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
        folder = _output_folder(output_dir, workspace)
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
    folder = _output_folder(output_dir, workspace)
    args = [python, "-m", EVALUATE_CLI, str(folder), "--eval-base", "--json", str(report)]
    if best_by:
        args += ["--best-by", _best_by(best_by)]
    for flag, text in (("--eval-asr", asr), ("--eval-speaker-model", speaker)):
        if (text or "").strip():
            args += [flag, text.strip()]
    return args


def best_argv(python: str, output_dir: str, best_by: str, workspace: Path | str, report: Path) -> list[str]:
    """``python -m trainer.evaluate RUN --only-best --best-by B``: best.pth follows B from now on (no model loads)."""
    folder = _output_folder(output_dir, workspace)
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
    if result is None:
        return ""
    try:
        measured = result.report_json()
    except ValueError as exc:
        return message_html(str(exc))
    results = [r for r in measured if isinstance(r, dict)] if isinstance(measured, list) else []
    count = sum(1 for r in results if r.get("model") != "base")
    base = " and the base model" if any(r.get("model") == "base" for r in results) else ""
    if not count and not base:
        return badge_html("EVALUATED", "nothing new: every checkpoint already had scores", "ok")
    return badge_html("EVALUATED", f"{count} checkpoint{'s' if count != 1 else ''}{base} measured", "ok")


def best_message_of(result: JobResult | None) -> str:
    if result is None:
        return ""
    try:
        report = result.report_json()
        return badge_html("BEST", str(report["reason"]), "ok" if report.get("step") is not None else "info")
    except (ValueError, KeyError, TypeError) as exc:
        return message_html(str(exc))


def _evaluate_section(ctx: StudioContext, output_dir: gr.Dropdown, list_outputs: list[Any],
                      shown: Any) -> None:
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
    panel = job_panel(EVALUATE_JOB, "ckpt-evaluate")
    evaluated = gr.HTML(elem_id="ckpt-evaluate-result")
    best_panel = job_panel(BEST_JOB, "ckpt-best")
    repointed = gr.HTML(elem_id="ckpt-best-result")
    speak_owed = gr.Button("Speak owed samples", size="sm", elem_id="ckpt-owed-samples-run")
    samples_panel = job_panel(SAMPLES_JOB, "ckpt-owed-samples")
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



# -- layout -------------------------------------------------------------------------------------------------
def _list_section(ctx: StudioContext) -> tuple[gr.Dropdown, gr.Dropdown]:
    """The output folder, its checkpoints and the picker; returns (the picker, the folder): the other sections'
    inputs."""
    workspace = ctx.workspace
    dirs = find_output_dirs(workspace)
    default = str(ctx.paths.default_output_dir)
    gr.Markdown("### Checkpoints of an output directory")
    with gr.Row():
        output_dir = gr.Dropdown(choices=dirs, value=default if default in dirs else (dirs[0] if dirs else default),
                                 allow_custom_value=True, scale=5, label="Output directory",
                                 elem_id="ckpt-output-dir",
                                 info="a training run's --output-dir (folders under the workspace's runs/)")
        refresh = gr.Button("Refresh folders", scale=1, elem_id="ckpt-refresh-dirs")
        run = gr.Button("List checkpoints", variant="primary", scale=1, elem_id="ckpt-list-run")
    panel = job_panel(LIST_JOB, "ckpt-list")
    message = gr.HTML(elem_id="ckpt-list-message")
    table = gr.Dataframe(value=empty_frame(LIST_COLUMNS), interactive=False, wrap=True, elem_id="ckpt-list-table",
                         label="Checkpoints (newest first; click a row to pick it)")
    paths = gr.State([])
    checkpoint = gr.Dropdown(choices=[], value=None, allow_custom_value=True, label="Checkpoint",
                             elem_id="ckpt-path", info="pick from the list or type a path")

    def shown(view: ListView) -> list[Any]:
        picked = view.paths[0] if view.paths else None
        return [view.message, view.table, gr.Dropdown(choices=view.paths, value=picked), view.row_paths]

    def on_pick_row(listed: list[str], event: gr.SelectData):
        row = event.index[0] if isinstance(event.index, (list, tuple)) else event.index
        picked = listed[row] if isinstance(row, int) and 0 <= row < len(listed) else ""
        return gr.Dropdown(value=picked) if picked else gr.Dropdown()  # the base row picks nothing

    def on_refresh(current: str):
        choices = find_output_dirs(workspace)
        return gr.Dropdown(choices=choices, value=current or (choices[0] if choices else None))

    wire_job(ctx, panel, run, [output_dir],
             lambda folder: list_argv(ctx.python, folder, workspace, LIST_JOB.report_path(ctx)),
             [message, table, checkpoint, paths], lambda result: shown(list_view_of(result, workspace)),
             preview=lambda folder: shown(list_view(folder, workspace)))
    output_dir.change(lambda folder: shown(list_view(folder, workspace, None, NOT_VERIFIED)), inputs=output_dir,
                      outputs=[message, table, checkpoint, paths])
    refresh.click(on_refresh, inputs=output_dir, outputs=output_dir)
    table.select(on_pick_row, inputs=paths, outputs=checkpoint)
    if ctx.project_state is not None:  # the project's newest run, when the page opens and when another is picked
        def project_run(name: str | None) -> Any:
            project = ctx.project(name)
            if project is None:
                return gr.skip()
            from trainer.project import defaults_for

            found = defaults_for(project, "checkpoints")
            if not found["run"]:
                return gr.skip()
            return gr.Dropdown(choices=sorted(set(find_output_dirs(workspace)) | set(found["runs"])),
                               value=found["run"])

        ctx.project_state.change(project_run, inputs=ctx.project_state, outputs=output_dir)
        gr.on(triggers=None, fn=project_run, inputs=ctx.project_state, outputs=output_dir)
    _evaluate_section(ctx, output_dir, [message, table, checkpoint, paths], shown)
    return checkpoint, output_dir


def _project_run_on_open(ctx: StudioContext, output_dir: gr.Dropdown) -> Any:
    """How the tab follows the project when it is opened: a folder that is none of the project's runs gives way to
    its newest run (trained since the page opened); a run of the project the user picked stays."""
    def opened(name: str | None, current: str | None) -> Any:
        project = ctx.project(name)
        newest = newest_project_run(project)
        if not newest or run_of_project(current, project):
            return gr.skip()
        return gr.Dropdown(choices=sorted({*find_output_dirs(ctx.workspace), newest}), value=newest)

    def on_select(tab: gr.Tab) -> None:
        if ctx.project_state is not None:
            tab.select(opened, inputs=[ctx.project_state, output_dir], outputs=output_dir, show_progress="hidden")

    return on_select


def _verify_section(ctx: StudioContext, checkpoint: gr.Dropdown) -> None:
    gr.Markdown("### Verify")
    with gr.Row():
        tokenizer = gr.Textbox(value=str(ctx.paths.tokenizer), label="Tokenizer to check against (optional)",
                               elem_id="ckpt-verify-tokenizer")
        config = gr.Textbox(value=str(ctx.paths.config), label="Config to check against (optional)",
                            elem_id="ckpt-verify-config")
    run = gr.Button("Verify", variant="primary", elem_id="ckpt-verify-run")
    panel = job_panel(VERIFY_JOB, "ckpt-verify")
    verdict = gr.HTML(elem_id="ckpt-verify-verdict")
    table = gr.Dataframe(value=empty_frame(VERIFY_COLUMNS), interactive=False, wrap=True, label="Components",
                         elem_id="ckpt-verify-table")

    def render(result: JobResult | None) -> list[Any]:
        view = verify_view_of(result)
        return [view.verdict, view.table]

    wire_job(ctx, panel, run, [checkpoint, tokenizer, config],
             lambda *values: verify_argv(ctx.python, *values, ctx.workspace, VERIFY_JOB.report_path(ctx)),
             [verdict, table], render)


def _inspect_section(ctx: StudioContext, checkpoint: gr.Dropdown) -> None:
    gr.Markdown("### Inspect")
    run = gr.Button("Inspect", elem_id="ckpt-inspect-run")
    panel = job_panel(INSPECT_JOB, "ckpt-inspect")
    message = gr.HTML(elem_id="ckpt-inspect-message")
    table = gr.Dataframe(value=empty_frame(["field", "value"]), interactive=False, wrap=True, label="Key facts",
                         elem_id="ckpt-inspect-table")
    wire_job(ctx, panel, run, [checkpoint],
             lambda path: inspect_argv(ctx.python, path, ctx.workspace, INSPECT_JOB.report_path(ctx)),
             [message, table], inspect_view_of)


def _repair_section(ctx: StudioContext, checkpoint: gr.Dropdown) -> None:
    gr.Markdown("### Repair a community or older checkpoint\nWrites the current format to a NEW file beside the "
                "original (the original is never changed) and says what carried over and what could not.")
    with gr.Row():
        out_name = gr.Textbox(value="", label="New file name (empty: <name>_repaired.pth beside the original)",
                              elem_id="ckpt-repair-out")
        config = gr.Textbox(value=str(ctx.paths.config), elem_id="ckpt-repair-config",
                            label="Config the run started from (community checkpoints do not record it)")
        tokenizer = gr.Textbox(value="", label="Tokenizer the run used (optional: records its hash)",
                               elem_id="ckpt-repair-tokenizer")
        base_vocab = gr.Number(value=0, precision=0, minimum=0, label="Base vocabulary size (0: from the config)",
                               elem_id="ckpt-repair-base-vocab")
    run = gr.Button("Repair into a new file", variant="primary", elem_id="ckpt-repair-run")
    panel = job_panel(REPAIR_JOB, "ckpt-repair")
    message = gr.HTML(elem_id="ckpt-repair-result")
    table = gr.Dataframe(value=empty_frame(REPAIR_COLUMNS), interactive=False, wrap=True,
                         label="What the repair carried over, supplied, and could not", elem_id="ckpt-repair-table")
    wire_job(ctx, panel, run, [checkpoint, out_name, config, tokenizer, base_vocab],
             lambda *values: repair_argv(ctx.python, *values, ctx.workspace, REPAIR_JOB.report_path(ctx)),
             [message, table], repair_view_of)


def _export_section(ctx: StudioContext, checkpoint: gr.Dropdown) -> None:
    gr.Markdown("### Export for IndexTTS inference")
    with gr.Row(equal_height=True):
        out_dir = gr.Textbox(label="Export folder (a project's run: its exports/<run>_<checkpoint>; "
                             "empty: workspace/exports/<run>_<checkpoint>_<time>)", scale=4,
                             elem_id="ckpt-export-dir")
        dtype = gr.Radio(choices=list(DTYPES), value="fp32", label="Weights dtype", scale=2,
                         elem_id="ckpt-export-dtype")
        safetensors = gr.Checkbox(value=False, label="Also write gpt.safetensors", scale=1,
                                  elem_id="ckpt-export-safetensors")
    with gr.Row():
        config = gr.Textbox(value=str(ctx.paths.config), elem_id="ckpt-export-config",
                            label="Config for the non-GPT sections of config.yaml (dataset, vqvae, ...)")
        tokenizer = gr.Textbox(value="", elem_id="ckpt-export-tokenizer",
                               label="Tokenizer (only when the checkpoint's recorded one is not available)")
    run = gr.Button("Export", variant="primary", elem_id="ckpt-export-run")
    panel = job_panel(EXPORT_JOB, "ckpt-export")
    result = gr.HTML(elem_id="ckpt-export-result")
    table = gr.Dataframe(value=empty_frame(EXPORT_COLUMNS), interactive=False, label="Files written",
                         elem_id="ckpt-export-files")
    wire_job(ctx, panel, run, [checkpoint, out_dir, dtype, safetensors, config, tokenizer],
             lambda *values: export_argv(ctx.python, *values, ctx.workspace, EXPORT_JOB.report_path(ctx)),
             [result, table], export_view_of)
    project = [ctx.project_state] if ctx.project_state is not None else [gr.State(None)]
    checkpoint.change(lambda path, name: export_fields_for(ctx, path, name), inputs=[checkpoint, *project],
                      outputs=[out_dir, config], show_progress="hidden")


def export_fields_for(ctx: StudioContext, checkpoint: str | None, project_name: str | None) -> tuple[Any, Any]:
    """(export folder, config) for a picked checkpoint: a project run's goes to the project's exports folder, and
    every run's non-GPT config sections come from the config it trained with (gr.skip() where neither is known)."""
    config = run_config(checkpoint) or gr.skip()
    if not project_name:
        return gr.skip(), config
    # another checkpoint's folder would be stale: empty is the export's own default
    return project_export_dir(checkpoint, ctx.project(project_name)), config


def build(ctx: StudioContext) -> Any:
    """Lay out the Checkpoints tab (called by the shell inside ``with gr.Tab("Checkpoints")``); returns how it
    follows the project when opened."""
    checkpoint, output_dir = _list_section(ctx)
    _verify_section(ctx, checkpoint)
    _inspect_section(ctx, checkpoint)
    _repair_section(ctx, checkpoint)
    _export_section(ctx, checkpoint)
    return _project_run_on_open(ctx, output_dir)
