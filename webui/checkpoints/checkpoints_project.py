"""What the Checkpoints tab takes from the session's voice project and from the workspace, so nothing the studio
knows has to be typed: the project's newest run (picked when the tab opens on a folder of no project run), the
export folder of a project checkpoint (``<project>/exports/<run>_<checkpoint>``, where the project's export step
looks), the config its run trained with, and the speech models the Models tab downloaded (Evaluate's recogniser
and speaker model when the run names none).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from trainer.project import Project


def downloaded_speech_model(workspace: Path | str, kind: str) -> str:
    """The first complete ``kind`` ("asr" | "speaker") model folder the Models tab downloaded ("" : none)."""
    from trainer.models.record import downloaded_model_dirs

    found = [model.path for model in downloaded_model_dirs(Path(workspace), kind) if model.complete]
    return str(found[0]) if found else ""


def run_of_project(folder: str | Path | None, project: Project | None) -> bool:
    """Whether ``folder`` is one of the project's run folders."""
    if project is None or not folder:
        return False
    from trainer.project.handoff import project_runs

    return Path(folder).resolve() in {run.resolve() for run in project_runs(project)}


def newest_project_run(project: Project | None) -> str:
    """The project's newest run folder ("" : none yet)."""
    if project is None:
        return ""
    from trainer.project import defaults_for

    return str(defaults_for(project, "checkpoints")["run"] or "")


def project_export_dir(checkpoint: str | Path | None, project: Project | None) -> str:
    """``<project exports>/<run>_<checkpoint stem>`` for a checkpoint of one of the project's runs (``_2``, ``_3``...
    when an earlier export holds that folder); "" for any other checkpoint (the export's own default applies)."""
    if not checkpoint or not run_of_project(Path(checkpoint).parent, project):
        return ""
    assert project is not None
    path = Path(checkpoint)
    target = project.dir("exports") / f"{path.parent.name}_{path.stem}"
    number = 2
    while target.exists() and any(target.iterdir()):
        target = target.with_name(f"{path.parent.name}_{path.stem}_{number}")
        number += 1
    return str(target)


def run_config(checkpoint: str | Path | None) -> str:
    """The config.yaml the checkpoint's run trained with ("" : unknown): export's non-GPT sections come from it."""
    if not checkpoint:
        return ""
    from trainer.evaluate import run_options
    from trainer.evaluation.errors import EvaluationError

    folder = Path(checkpoint).parent
    if not (folder / "train_config.yaml").is_file():
        return ""
    try:
        config = str(run_options(folder).get("config") or "")
    except EvaluationError:
        return ""
    return config if config and Path(config).is_file() else ""
