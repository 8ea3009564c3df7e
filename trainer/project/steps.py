"""The steps of a voice project, what each produced and from what, and the state each is in.

Steps, in order: recordings, proofread (the saved manifest), prepare, train, listen & pick, export. A step's
record holds its outputs and inputs (path -> content digest, ``trainer.project.digests``), counts, when and by
whom (studio, cli, observed). A step is:

- ``to do``: no record, or an output of its record is gone;
- ``out of date``: a recorded input changed since (its digest differs now), an earlier step was recorded after it
  (it produced something new since), or an earlier step is out of date itself;
- ``done`` otherwise.

Records come from the studio (a preparation it starts is noted as pending and completed when its report is
written), from the CLI (``python -m trainer.project record``), and from what ``refresh`` finds in the project's
folders (a recording added, a manifest saved by the proofreading table, a run trained into the project's runs,
a listening test, an export), so a step run from a shell shows in the studio.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from trainer.evaluation.eval_set import eval_dir
from trainer.evaluation.listening import CHOICES_FILE
from trainer.evaluation.results import RESULT_SUFFIX
from trainer.project.digests import MISSING, OUTSIDE, count_files, digest_of
from trainer.project.layout import Project, ProjectError, now

STEPS = ("recordings", "proofread", "prepare", "train", "listen", "export")
TITLES = {"recordings": "Recordings", "proofread": "Proofread (saved manifest)", "prepare": "Prepare",
          "train": "Train", "listen": "Listen & pick", "export": "Export"}
DONE, TO_DO, OUT_OF_DATE = "done", "to do", "out of date"
PREPARE_REPORTS = (("prepare_report.json", "pairs_manifest"), ("preprocess_report.json", "manifest"))


@dataclass(frozen=True)
class StepState:
    step: str
    title: str
    state: str  # DONE | TO_DO | OUT_OF_DATE
    note: str  # why (one line), or what it produced
    when: str  # ISO time of the record ("" : none)
    outputs: tuple[str, ...]  # absolute paths


def check_step(step: str) -> str:
    if step not in STEPS:
        raise ProjectError(f"no step {step!r} (one of {', '.join(STEPS)})")
    return step


def _digests(project: Project, paths: Iterable[Path | str]) -> dict[str, str]:
    """path -> digest; a path the project may not read (``Project.readable``) is never opened: OUTSIDE."""
    absolute = [Project.resolve(str(p), project.workspace) for p in paths]
    return {project.portable(p): digest_of(p) if project.readable(p) else OUTSIDE for p in absolute}


def record_step(project: Project, step: str, outputs: Iterable[Path | str], inputs: Iterable[Path | str] = (),
                counts: dict[str, int] | None = None, note: str = "", source: str = "studio",
                at: float | None = None, input_digests: dict[str, str] | None = None) -> dict[str, Any]:
    """Record what ``step`` produced (every output must exist) and from what (``inputs`` as they are now, and
    ``input_digests`` as they were when the step started); the project file is saved."""
    check_step(step)
    produced = _digests(project, outputs)
    if not produced:
        raise ProjectError(f"step {step}: give at least one output")
    missing = [path for path, digest in produced.items() if digest == MISSING]
    if missing:
        raise ProjectError(f"step {step}: output not found: {', '.join(missing)}")
    outside = [path for path in produced if not project.in_workspace(project.absolute(path))]
    if outside:
        raise ProjectError(f"step {step}: output outside the workspace: {', '.join(outside)} (a step's outputs are "
                           "the project's own)")
    stamp, when = now()
    record = {"at": stamp if at is None else at, "when": when, "outputs": produced,
              "inputs": {**(input_digests or {}), **_digests(project, inputs)}, "counts": dict(counts or {}),
              "note": note, "source": source}
    project.change(steps={step: record}, pending={step: None})
    return record


def begin_step(project: Project, step: str, inputs: Iterable[Path | str], out_dir: Path | str) -> None:
    """Note a step started by the studio (its inputs' digests as they are now); ``refresh`` completes it when
    the step's report appears in ``out_dir``."""
    stamp, when = now()
    project.change(pending={check_step(step): {"at": stamp, "when": when, "inputs": _digests(project, inputs),
                                               "out_dir": project.portable(out_dir)}})


# ----- what the project's folders show ---------------------------------------------------------------------


def _mtime(path: Path) -> float:
    try:
        if path.is_dir():
            return max([path.stat().st_mtime, *(p.stat().st_mtime for p in path.rglob("*") if p.is_file())])
        return path.stat().st_mtime
    except (OSError, ValueError):
        return 0.0


def _observe(project: Project, step: str, outputs: list[Path], inputs: Iterable[Path | str] = (),
             counts: dict[str, int] | None = None, note: str = "",
             input_digests: dict[str, str] | None = None) -> bool:
    """Record what a folder shows when it differs from the record and is newer than it; True when recorded."""
    outputs = [path for path in outputs if path.exists() and project.in_workspace(path)]  # no link out
    if not outputs:
        return False
    record = project.steps.get(step)
    current = _digests(project, outputs)
    written = max(_mtime(path) for path in outputs)
    if record is not None and (record.get("outputs") == current or written < float(record.get("at", 0))):
        return False
    record_step(project, step, outputs, inputs, counts, note, source="observed", at=written,
                input_digests=input_digests)
    return True


def _newest(paths: Iterable[Path]) -> Path | None:
    found = [p for p in paths if p.exists()]
    return max(found, key=lambda p: (_mtime(p), str(p))) if found else None


def run_dirs(runs: Path) -> list[Path]:
    if not runs.is_dir():
        return []
    return [p for p in [*runs.glob("*"), *runs.glob("*/*")] if p.is_dir() and (p / "train_config.yaml").is_file()]


def _train_manifests(run: Path) -> list[Path]:
    from data_tools.manifest import parse_manifest_spec

    try:
        options = yaml.safe_load((run / "train_config.yaml").read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError):
        return []
    found: list[Path] = []
    for key in ("train_manifest", "val_manifest"):
        value = options.get(key) if isinstance(options, dict) else None
        for spec in value if isinstance(value, list) else [value] if value else []:
            found.append(parse_manifest_spec(str(spec)).path)
    return found


def _lines(path: Path) -> int:
    try:
        return sum(1 for line in path.read_text(encoding="utf-8").splitlines() if line.strip())
    except (OSError, UnicodeDecodeError):
        return 0


def _prepare_report(folder: Path) -> tuple[Path, Path | None, dict[str, int]] | None:
    """(report, the manifest training reads, counts) of a preparation's output folder."""
    for name, key in PREPARE_REPORTS:
        report = folder / name
        try:
            data = json.loads(report.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            continue
        manifest = Path(data[key]) if isinstance(data, dict) and data.get(key) else None
        counts = {k: int(data[k]) for k in ("utterances", "pairs", "entries") if isinstance(data.get(k), int)}
        counts["left out"] = len(data.get("skipped") or [])
        return report, manifest, counts
    return None


def _observe_prepare(project: Project) -> None:
    pending = project.pending.get("prepare")
    folder = project.absolute(pending["out_dir"]) if pending else project.dir("prepared")
    found = _prepare_report(folder)
    if found is None:
        return
    report, manifest, counts = found
    if manifest is None or not manifest.is_file() or not project.in_workspace(manifest):
        return
    if pending is not None and _mtime(report) >= float(pending["at"]):
        record_step(project, "prepare", [manifest], (), counts, source="studio", at=_mtime(report),
                    input_digests=dict(pending["inputs"]))
    elif pending is None:
        _observe(project, "prepare", [manifest], (), counts,
                 note="inputs unknown (prepared outside the studio: record them with python -m trainer.project record)")


def _evaluation_files(run: Path) -> list[Path]:
    """What evaluating and listening to a run wrote: every checkpoint's scores, the listening test's choices."""
    folder = eval_dir(run)
    return sorted([*run.glob(f"*{RESULT_SUFFIX}"), *(p for p in (folder / CHOICES_FILE,) if p.is_file())])


def _newest_evaluation(runs: list[Path]) -> list[Path]:
    """The evaluation files of the run evaluated or listened to last ([] when none was)."""
    found = [files for files in map(_evaluation_files, runs) if files]
    return max(found, key=lambda files: max(_mtime(p) for p in files)) if found else []


def pending_finished(project: Project) -> bool:
    """Whether a step the studio started has written its report since (``refresh`` would complete it)."""
    pending = project.pending.get("prepare")
    if not pending:
        return False
    folder = project.absolute(pending["out_dir"])
    return any(_mtime(folder / name) >= float(pending.get("at", 0)) for name, _ in PREPARE_REPORTS
               if (folder / name).is_file())


def refresh(project: Project) -> Project:
    """Record what the project's folders show now (see the module docstring); the project is returned."""
    recordings = project.dir("recordings")
    if recordings.is_dir() and count_files(recordings):
        _observe(project, "recordings", [recordings], counts={"files": count_files(recordings)})
    manifests = project.dir("manifests")
    saved = _newest(manifests.glob("manifest_*.jsonl")) if manifests.is_dir() else None
    if saved is not None:
        ingest = project.dir("ingest")
        _observe(project, "proofread", [saved], [p for p in (ingest / "clips.jsonl", ingest / "edits.json")
                                                 if p.is_file()], {"clips": _lines(saved)})
    _observe_prepare(project)
    runs = run_dirs(project.dir("runs"))
    run = _newest([r / "latest.pth" for r in runs])
    if run is not None:
        checkpoints = len(list(run.parent.glob("*.pth")))
        _observe(project, "train", [run], _train_manifests(run.parent), {"checkpoints": checkpoints})
    evaluated = _newest_evaluation(runs)
    if evaluated:
        listened = [p for p in evaluated if p.name == CHOICES_FILE]
        counts = {"checkpoints scored": sum(p.name.endswith(RESULT_SUFFIX) for p in evaluated)}
        if listened:
            counts["choices"] = _lines(listened[0])
        _observe(project, "listen", evaluated, counts=counts,
                 input_digests=dict((project.steps.get("train") or {}).get("outputs") or {}))
    exports = project.dir("exports")
    if exports.is_dir() and count_files(exports):
        before = project.steps.get("listen") or project.steps.get("train") or {}
        _observe(project, "export", [exports], counts={"files": count_files(exports)},
                 input_digests=dict(before.get("outputs") or {}))
    return project


# ----- states ----------------------------------------------------------------------------------------------


def _changed_inputs(project: Project, record: dict[str, Any]) -> list[str]:
    return [path for path, digest in (record.get("inputs") or {}).items()
            if digest != OUTSIDE and project.readable(project.absolute(path))
            and digest_of(project.absolute(path)) != digest]


def step_states(project: Project) -> list[StepState]:
    """Every step's state, in order (no refresh: call ``refresh`` first to take in what the folders show)."""
    states: list[StepState] = []
    for index, step in enumerate(STEPS):
        record = project.steps.get(step)
        title = TITLES[step]
        if record is None:
            pending = project.pending.get(step)
            note = f"started {pending['when']}, not finished yet" if pending else "not done yet"
            states.append(StepState(step, title, TO_DO, note, "", ()))
            continue
        outputs = tuple(str(project.absolute(path)) for path in record.get("outputs") or {})
        when = str(record.get("when", ""))
        gone = [path for path in outputs if not Path(path).exists()]
        changed = _changed_inputs(project, record)
        newer = [s for s in STEPS[:index] if s in project.steps
                 and float(project.steps[s].get("at", 0)) > float(record.get("at", 0))]
        stale = [s.step for s in states if s.state == OUT_OF_DATE]
        if gone:
            state, note = TO_DO, f"its output is gone: {gone[0]}"
        elif changed:
            state, note = OUT_OF_DATE, f"changed since: {changed[0]}"
        elif newer:
            state, note = OUT_OF_DATE, f"{TITLES[newer[-1]]} produced something new since"
        elif stale:
            state, note = OUT_OF_DATE, f"{TITLES[stale[-1]]} is out of date"
        else:
            state, note = DONE, _produced(record)
        states.append(StepState(step, title, state, note, when, outputs))
    return states


def _produced(record: dict[str, Any]) -> str:
    counts = ", ".join(f"{value} {key}" for key, value in (record.get("counts") or {}).items())
    note = str(record.get("note") or "")
    return "; ".join(part for part in (counts, note) if part) or "done"


def next_step(states: list[StepState]) -> StepState | None:
    """The first step that is not done (None: every step is)."""
    return next((state for state in states if state.state != DONE), None)


def outputs_of(project: Project, step: str) -> list[Path]:
    """The recorded outputs of a step (absolute paths; [] when it has no record)."""
    record = project.steps.get(check_step(step)) or {}
    return [project.absolute(path) for path in record.get("outputs") or {}]
