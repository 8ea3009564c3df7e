"""The Checkpoints tab's tools over ``python -m trainer.checkpoints VERB ... --json``: verify, inspect, repair and
export, each a job whose report becomes a table."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from webui.checkpoints.rows import CHECKPOINTS_CLI
from webui.form_inputs import InputProblem, existing_file, resolve_path
from webui.jobs.report_jobs import JobResult, ReportJob, stdout_report_argv
from webui.plots import (
    badge_html,
    empty_frame,
    format_bytes,
    key_value_frame,
    message_html,
    records_frame,
)

if TYPE_CHECKING:
    pass


VERIFY_COLUMNS = ["component", "status", "detail"]


EXPORT_COLUMNS = ["file", "size"]


REPAIR_COLUMNS = ["what", "detail"]


DTYPES = ("fp32", "fp16", "bf16")


BASE_FILES = ("copy", "link")  # how an export holds the base model's other files (copy first: the default)


VERIFY_JOB = ReportJob("checkpoint_verify", report_exits=(0, 1, 2))  # 1 PARTIAL, 2 INVALID: verdicts


INSPECT_JOB = ReportJob("checkpoint_inspect")


REPAIR_JOB = ReportJob("checkpoint_repair")


EXPORT_JOB = ReportJob("checkpoint_export")


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
                tokenizer: str, workspace: Path | str, report: Path, base_files: str = BASE_FILES[0],
                s2mel_strength: float | None = 1.0) -> list[str]:
    """``trainer.checkpoints export PATH --out DIR ... --base-files copy|link`` (its printed lines go to REPORT); an
    S2Mel run's checkpoint: ``export-s2mel PATH --out DIR --model-dir FOLDER --strength S``."""
    from trainer.s2mel.strength import check_strength
    from webui.testing.listen_models import trains_s2mel

    path = existing_file(checkpoint, workspace, "checkpoint")
    try:
        strength = check_strength(1.0 if s2mel_strength is None else s2mel_strength, "S2Mel adapter strength")
    except ValueError as exc:
        raise InputProblem(str(exc)) from None
    if trains_s2mel(path.parent):
        return _s2mel_export_argv(python, path, out_dir, config, workspace, report, strength)
    if strength != 1.0:
        raise InputProblem(f"the S2Mel adapter strength applies to S2Mel run checkpoints; {path.name} is a GPT's: "
                           "leave it at 1")
    if dtype not in DTYPES:
        raise InputProblem(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    if base_files not in BASE_FILES:
        raise InputProblem(f"base model files must be one of {', '.join(BASE_FILES)}, got {base_files!r}")
    target = resolve_path(out_dir, workspace) or Path(default_export_dir(str(path), workspace))
    args = ["export", str(path), "--out", str(target), "--dtype", dtype, "--base-files", base_files]
    if safetensors:
        args.append("--safetensors")
    for flag, text, what in (("--config", config, "config"), ("--tokenizer", tokenizer, "tokenizer")):
        found = existing_file(text, workspace, what, required=False)
        if found is not None:
            args += [flag, str(found)]
    return stdout_report_argv(python, report, CHECKPOINTS_CLI, *args)


def _s2mel_export_argv(python: str, path: Path, out_dir: str, config: str, workspace: Path | str, report: Path,
                       strength: float) -> list[str]:
    """An S2Mel run's export: the download folder it trained from (its train_config.yaml's --model-dir, else the
    folder of the config field), the stock s2mel.pth at ``strength``."""
    import yaml

    try:
        recorded = yaml.safe_load((path.parent / "train_config.yaml").read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError):
        recorded = {}
    folder = str(recorded.get("model_dir") or "") if isinstance(recorded, dict) else ""
    found = existing_file(config, workspace, "config", required=False)
    model_dir = resolve_path(folder, workspace) if folder else (found.parent if found is not None else None)
    if model_dir is None or not (model_dir / "s2mel.pth").is_file():
        raise InputProblem(f"{path.name} is an S2Mel run's checkpoint: give the config.yaml of the download folder "
                           "it trained from (the one with its s2mel.pth)")
    target = resolve_path(out_dir, workspace) or Path(default_export_dir(str(path), workspace))
    return stdout_report_argv(python, report, CHECKPOINTS_CLI, "export-s2mel", str(path), "--out", str(target),
                              "--model-dir", str(model_dir), "--strength", f"{strength:g}")


def export_view_of(result: JobResult | None) -> tuple[str, pd.DataFrame]:
    """The export folder's files (with sizes) and the export's notes."""
    if result is None or result.report_text is None:
        return ("" if result is None else message_html(result.error)), empty_frame(EXPORT_COLUMNS)
    argv = list(result.argv)
    out = Path(argv[argv.index("--out", argv.index(CHECKPOINTS_CLI)) + 1])
    files = sorted(out.iterdir()) if out.is_dir() else []
    rows = [{"file": str(f) + (" -> " + str(f.resolve()) if f.is_symlink() else ""),
             "size": format_bytes(f.stat().st_size) if f.is_file() else "folder"} for f in files]
    notes = [line.strip()[len("note:"):].strip() for line in result.report_text.splitlines()
             if line.strip().startswith("note:")]
    rows += [{"file": f"note: {note}", "size": ""} for note in notes]
    return badge_html("EXPORTED", str(out), "ok"), records_frame(rows, EXPORT_COLUMNS)
