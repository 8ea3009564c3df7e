"""The Checkpoints tab's table: a run folder's checkpoints from their metadata (no tensor data read), with the
base model's and the recogniser's floor rows and each checkpoint's scores; the list job that verifies them."""

from __future__ import annotations

import datetime as _dt
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from generations.registry import DEMO_CHECKPOINTS, DEMO_RUNS, demo_folders, demo_paths
from webui.form_inputs import InputProblem, resolve_path
from webui.jobs.report_jobs import JobResult, ReportJob, stdout_report_argv
from webui.model_version import model_name as generation_name
from webui.plots import (
    badge_html,
    empty_frame,
    format_bytes,
    format_number,
    message_html,
    records_frame,
)

if TYPE_CHECKING:
    pass


LIST_COLUMNS = ["file", "kind", "model", "step", "epoch", "val loss", "CER", "WER", "SIM", "health", "verdict",
                "size", "modified"]


CHECKPOINT_SUFFIXES = (".pth", ".pt")


CHECKPOINTS_CLI = "trainer.checkpoints"


PENDING = "verifying…"


NOT_VERIFIED = "not verified: List checkpoints verifies every file"


LIST_JOB = ReportJob("checkpoint_list")


BASE_FILE = "base model"
PROJECT_RUNS = "projects/*/runs"  # each voice project's runs/


def find_output_dirs(workspace: Path, max_dirs: int = 200) -> list[str]:
    """Folders of the workspace that hold checkpoints: runs/* (two levels) and checkpoints/, newest first."""
    workspace = Path(workspace)
    candidates: set[Path] = set()
    patterns = [*(f"{runs}/{level}" for runs in demo_folders(DEMO_RUNS) for level in ("*", "*/*")),
                *demo_folders(DEMO_CHECKPOINTS), f"{PROJECT_RUNS}/*"]
    for pattern in patterns:
        for path in workspace.glob(pattern):
            if path.is_dir() and any(child.suffix in CHECKPOINT_SUFFIXES for child in path.iterdir()):
                candidates.add(path)
    for runs in (*demo_paths(workspace, DEMO_RUNS), *workspace.glob(PROJECT_RUNS)):  # an output dir without checkpoints yet
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


def output_folder(output_dir: str, workspace: Path | str) -> Path:
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
        folder = output_folder(output_dir, workspace)
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


def _score_cells(result: dict[str, Any]) -> dict[str, str]:
    """CER and WER in percent, SIM as a cosine, each with its 95 % interval, and the checkpoint's health ("ok" or
    what is wrong, ``trainer.evaluation.health``); '' when not measured."""
    from trainer.evaluation.health import health_cell
    from trainer.evaluation.results import score_cell

    cells = {name: score_cell(result, name.lower()) if result else "" for name in ("CER", "WER", "SIM")}
    return {**cells, "health": health_cell(result) if result and result.get("model") == "checkpoint" else ""}


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
    folder = output_folder(output_dir, workspace)
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
