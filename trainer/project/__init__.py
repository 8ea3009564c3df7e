"""Voice projects: one named project per voice fixes every folder of the pipeline and records each step.

``layout`` (the project file and its folders), ``steps`` (records and states), ``handoff`` (what a step hands to
the next form), ``cli`` (``python -m trainer.project create|show|record``).
"""

from __future__ import annotations

from pathlib import Path

from trainer.project.handoff import defaults_for, model_files, project_runs, saved_manifest
from trainer.project.layout import (
    FOLDERS,
    Project,
    ProjectError,
    ProjectListing,
    check_name,
    create_project,
    generation_of_model_dir,
    load_project,
    project_listing,
    project_names,
)
from trainer.project.steps import (
    DONE,
    OUT_OF_DATE,
    STEPS,
    TO_DO,
    StepState,
    begin_step,
    next_step,
    record_step,
    refresh,
    step_states,
)

__all__ = [
    "DONE",
    "FOLDERS",
    "OUT_OF_DATE",
    "STEPS",
    "TO_DO",
    "Project",
    "ProjectError",
    "ProjectListing",
    "StepState",
    "begin_step",
    "check_name",
    "create_project",
    "defaults_for",
    "generation_of_model_dir",
    "load_project",
    "model_files",
    "next_step",
    "open_project",
    "project_listing",
    "project_names",
    "project_runs",
    "record_step",
    "refresh",
    "saved_manifest",
    "step_states",
]


def open_project(workspace: Path | str, name: str) -> Project:
    """The project, with what its folders show taken in (``refresh``)."""
    return refresh(load_project(workspace, name))
