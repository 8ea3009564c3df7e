"""Exports in the Test and Listen tabs' model lists, and the pick that follows a project's newest model.

An export (``python -m trainer.checkpoints export``) is a complete inference folder: its ``gpt.pth`` beside its
``config.yaml``, tokenizer and the base model's other files. It is offered by its ``gpt.pth`` (the picker resolves it
as any checkpoint whose config sits beside it: ``webui.testing.listen_models``, which lists them). Exports are found in the
workspace's ``exports/`` and in every project's exports folder, newest first.

``newest_of_project`` is what a tab's pick follows: the newer of the project's newest export and its newest run's
latest checkpoint, so that a run or an export made since the pick moves the pick to it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from trainer.project import Project

EXPORTS = "exports"
EXPORT_WEIGHTS = "gpt.pth"
EXPORT_CONFIG = "config.yaml"


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def is_export(folder: Path) -> bool:
    return (folder / EXPORT_WEIGHTS).is_file() and (folder / EXPORT_CONFIG).is_file()


def _project_export_roots(workspace: Path) -> list[Path]:
    from trainer.project import ProjectError, load_project, project_names

    roots = []
    for name in project_names(workspace):
        try:
            roots.append(load_project(workspace, name).dir(EXPORTS))
        except (ProjectError, OSError):
            continue
    return roots


def export_dirs(workspace: Path | str, roots: list[Path] | None = None) -> list[Path]:
    """Export folders under ``roots`` (default: the workspace's exports/ and every project's), newest first."""
    workspace = Path(workspace)
    roots = roots if roots is not None else [workspace / EXPORTS, *_project_export_roots(workspace)]
    found: dict[Path, Path] = {}
    for root in roots:
        if root.is_dir():
            for folder in root.iterdir():
                if folder.is_dir() and is_export(folder):
                    found.setdefault(folder.resolve(), folder)
    return sorted(found.values(), key=lambda p: (-_mtime(p / EXPORT_WEIGHTS), str(p)))


def newest_of_project(project: Project) -> Path | None:
    """The project's newest model to speak with: its newest export's gpt.pth or its newest run's latest checkpoint,
    whichever was written last (None: neither yet)."""
    from trainer.project import defaults_for

    candidates = [folder / EXPORT_WEIGHTS for folder in export_dirs(project.folder, [project.dir(EXPORTS)])[:1]]
    latest = defaults_for(project, "test")["checkpoint"]
    if latest:
        candidates.append(Path(latest))
    candidates = [path for path in candidates if path.is_file()]
    return max(candidates, key=_mtime) if candidates else None
