"""What the Training tab's form starts with: the last training run's options when it trains on the project's data,
else the project's data and model under a preset; what a preset or a newly prepared project changes in it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gradio as gr

from webui.context import StudioContext
from webui.jobs.supervisor import RunStatus
from webui.training import training_form as tf
from webui.training.run_start import TRAIN_LABEL


def workspace_files(ctx: StudioContext, output_dir: Path | None = None) -> tf.WorkspaceFiles:
    paths = ctx.paths
    return tf.WorkspaceFiles(train_manifest=paths.train_manifest, val_manifest=paths.val_manifest,
                             tokenizer=paths.tokenizer, config=paths.config,
                             base_checkpoint=paths.base_checkpoint,
                             output_dir=output_dir or paths.default_output_dir,
                             vocoder=paths.vocoder if paths.vocoder.is_file() else None)


def latest_training_run(ctx: StudioContext) -> RunStatus | None:
    """The running training run of this workspace, else the most recently started one."""
    runs = [s for s in ctx.registry.statuses() if s.label == TRAIN_LABEL]
    runs.sort(key=lambda s: (s.running, float(s.record.get("started_at_epoch") or 0.0)))
    return runs[-1] if runs else None


# The project's data and model files: what the form takes from the voice project (the presets never change them).
PROJECT_KEYS = ("train_manifest", "val_manifest", "config", "base_checkpoint", "tokenizer", "output_dir",
                "sample_model_dir")


def project_values(ctx: StudioContext, name: str | None) -> tuple[dict[str, Any], str | None]:
    """(the project's training data and model files by option name, its generation id); ({}, None) without one.
    A demo project answers no data: its generation's demo preset is its data (and its runs/demo folder)."""
    project = ctx.project(name)
    if project is None:
        return {}, None
    from webui.context import is_demo_project

    if is_demo_project(project.name):
        return {}, project.generation
    from trainer.project import defaults_for

    found = defaults_for(project, "train")
    data = {key: found[key] for key in PROJECT_KEYS if found.get(key)}
    # the project's data is its own on both sides (none before it is prepared): never the demo's or another's
    data["train_manifest"] = list(found.get("train_manifest") or [])
    data["val_manifest"] = list(found.get("val_manifest") or [])
    return data, project.generation


def preset_values(ctx: StudioContext, name: str, project_name: str | None,
                  current: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """(the form after preset ``name``, the message): a preset sets hyper-parameters; a project's data and model
    stay the project's."""
    data, _ = project_values(ctx, project_name)
    values = {**tf.apply_preset(name, current, preset_files(ctx, name)), **data}
    return values, f"preset **{name}** applied" + (" (the project's data and model are kept)" if data else "")


def project_refill(ctx: StudioContext, project_name: str | None,
                   current: dict[str, Any] | None) -> tuple[dict[str, Any] | None, Any]:
    """(the form with the project's data and model, the message) when the project's prepared data is not what
    the form trains on (it was prepared since the form was filled); (None, skip) when there is nothing to change,
    so a form the user is working on (or a run's own folder) is left alone."""
    data, _ = project_values(ctx, project_name)
    # nothing prepared yet: nothing to take, and the form (or the run it shows) stays as it is
    if not data.get("train_manifest") or current is None or _run_of_project(current, data):
        return None, gr.skip()
    return {**current, **data}, f"filled from project **{project_name}**: its prepared data and model"


def _run_of_project(values: dict[str, Any], data: dict[str, Any]) -> bool:
    """Whether a run's options train on the project's data (so reopening the page shows that run again)."""
    return "train_manifest" not in data or values.get("train_manifest") == data["train_manifest"]


def initial_values(ctx: StudioContext, project_name: str | None = None, picked: bool = False) -> dict[str, Any]:
    """The form's first values (``initial_form``)."""
    return initial_form(ctx, project_name, picked)[0]


def initial_form(ctx: StudioContext, project_name: str | None = None,
                 picked: bool = False) -> tuple[dict[str, Any], str | None]:
    """(the form's first values, the preset they come from): the last training run's options (so a reload or restart
    shows it again; no preset) when it trains on the project's data, else the project's data and model under the
    demo preset of its generation. A demo project (or none) opens on the last run or the tiny demo; ``picked`` (the
    project was just chosen) switches to its generation's demo."""
    data, generation = project_values(ctx, project_name)
    run = latest_training_run(ctx)
    if run is not None and not (picked and not data):
        values = tf.values_from_trainer_argv(run.argv)
        if values is not None and _run_of_project(values, data):
            return values, None
    preset = tf.DEMO_PRESET
    if generation is not None and (data or picked):  # its generation's preset (the registry entry names it)
        from generations.registry import by_id

        preset = by_id(generation).form.demo_preset or tf.DEMO_PRESET
    return {**tf.apply_preset(preset, {}, preset_files(ctx, preset)), **data}, preset


def preset_files(ctx: StudioContext, name: str) -> tf.WorkspaceFiles:
    """The files a preset fills in: a generation's demo preset, its demo's (its registry entry says); else the
    workspace's own files."""
    return tf.demo_preset_files(ctx.workspace, name) or workspace_files(ctx)
