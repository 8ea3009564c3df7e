"""The Project tab, where the studio opens: pick or create a voice project, see its path as steps.

A project (``trainer.project``) fixes every folder of the pipeline and fine-tunes one base model folder. The
step view lists recordings, proofread, prepare, train, listen & pick and export with their state (done, to do,
out of date because an earlier step changed) and one button to the tab of the next step. The project picked
here is the browser session's (``ctx.project_state``): the other tabs fill their forms from it.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gradio as gr

from generations.registry import DEMO_CHECKPOINTS, demo_paths, name_of
from trainer.project import (
    DONE,
    OUT_OF_DATE,
    ProjectError,
    StepState,
    create_project,
    generation_of_model_dir,
    next_step,
    open_project,
    project_listing,
    project_names,
    step_states,
)
from webui.context import StudioContext
from webui.plots import badge_html, message_html
from webui.project import follow

# The studio tab (its id in webui.studio.TABS) where each step is done.
STEP_TABS = {"recordings": "tab-data", "proofread": "tab-data", "prepare": "tab-data", "train": "tab-training",
             "listen": "tab-listen", "export": "tab-checkpoints"}
TAB_TITLES = {"tab-data": "Data", "tab-training": "Training", "tab-listen": "Listen", "tab-checkpoints": "Checkpoints"}
STATE_TONES = {DONE: "ok", OUT_OF_DATE: "warn"}
NO_PROJECT = "no project yet: create one below (give it a name and pick its base model)"
DAMAGED_LABEL_CHARS = 160  # the picker's label of a damaged project: its name and the start of its error


def project_choices(workspace: Path | str) -> list[tuple[str, str]]:
    """(label, name) of the workspace's projects for the picker; a damaged one is listed with its error (picking it
    shows the whole line), so one bad project.json never hides the others nor stops the tab."""
    choices = []
    for entry in project_listing(workspace):
        label = entry.name if not entry.error else f"{entry.name} (damaged: {entry.error})"
        choices.append((label if len(label) <= DAMAGED_LABEL_CHARS else label[:DAMAGED_LABEL_CHARS] + "...",
                        entry.name))
    return choices


def model_dir_choices(workspace: Path | str) -> list[tuple[str, str]]:
    """(label, folder) of the base model folders a project can fine-tune: the demo's, then the downloaded ones."""
    from trainer.models.record import downloaded_model_dirs

    workspace = Path(workspace).resolve()
    folders = demo_paths(workspace, DEMO_CHECKPOINTS)
    folders += [found.path for found in downloaded_model_dirs(workspace, kind="generation") if found.complete]
    choices: dict[Path, tuple[str, str]] = {}
    for folder in folders:
        if not (folder / "config.yaml").is_file() or folder.resolve() in choices:
            continue
        try:
            generation = generation_of_model_dir(folder).name
        except ProjectError:
            continue
        shown = folder.relative_to(workspace).as_posix() if folder.is_relative_to(workspace) else str(folder)
        choices[folder.resolve()] = (f"{shown} ({generation})", str(folder))
    return list(choices.values())


@dataclass(frozen=True)
class ProjectView:
    summary: str  # HTML: the project, its generation and base model
    steps: str  # HTML: the step table
    next_label: str  # the next-step button's label
    next_tab: str | None  # the tab id the button opens (None: nothing left, or no project)


def steps_html(states: list[StepState]) -> str:
    """The step table; each row carries data-step and data-state for scripts and tests."""
    rows = []
    for number, state in enumerate(states, 1):
        badge = badge_html(state.state.upper(), "", STATE_TONES.get(state.state, "info"))
        rows.append(f'<tr data-step="{state.step}" data-state="{html.escape(state.state)}"><td>{number}</td>'
                    f"<td>{html.escape(state.title)}</td><td>{badge}</td><td>{html.escape(state.note)}</td>"
                    f"<td>{html.escape(state.when)}</td></tr>")
    head = "<tr><th>#</th><th>Step</th><th>State</th><th>What it made, or why</th><th>When</th></tr>"
    return f'<table class="project-steps">{head}{"".join(rows)}</table>'


def project_view(workspace: Path | str, name: str | None) -> ProjectView:
    """What the tab shows for project ``name`` (its folders looked at now)."""
    if not name:
        return ProjectView(message_html(NO_PROJECT, "info"), "", "Next step", None)
    try:
        project = open_project(workspace, name)
    except (ProjectError, OSError) as exc:
        return ProjectView(message_html(" ".join(str(exc).split())), "", "Next step", None)
    states = step_states(project)
    upcoming = next_step(states)
    summary = (f"<p data-project=\"{html.escape(project.name)}\" data-generation=\"{project.generation}\">"
               f"<b>{html.escape(project.name)}</b>: fine-tunes {html.escape(name_of(project.generation))} from "
               f"<code>{html.escape(project.where(project.model_path))}</code>; its folder: "
               f"<code>{html.escape(str(project.folder))}</code></p>")
    if upcoming is None:
        return ProjectView(summary, steps_html(states), "Every step is done", None)
    tab = STEP_TABS[upcoming.step]
    return ProjectView(summary, steps_html(states), f"Next: {upcoming.title} → {TAB_TITLES[tab]} tab", tab)


def create_action(workspace: Path | str, name: str, model_dir: str | None) -> tuple[str, str | None]:
    """Create a project: (message, its name; None when refused)."""
    if not (model_dir or "").strip():
        return message_html("pick the base model folder the project fine-tunes"), None
    try:
        project = create_project(workspace, name, model_dir.strip())
    except ProjectError as exc:
        return message_html(" ".join(str(exc).split())), None
    return badge_html("CREATED", f"project {project.name} ({project.generation_name}) in {project.folder}", "ok"), \
        project.name


# Every event that writes the picker or the project's view takes its turn in order: a slow fill from the page's
# load must not land after a project created or picked next, set the picker back and switch the project.
TURNS: dict[str, Any] = {"concurrency_id": follow.PROJECT_TURN, "concurrency_limit": 1}


def _view_outputs(workspace: Path, name: str | None) -> tuple[str, str, Any]:
    view = project_view(workspace, name)
    return view.summary, view.steps, gr.Button(value=view.next_label, interactive=view.next_tab is not None)


def _next_tab(workspace: Path, chosen: str | None) -> Any:
    tab = project_view(workspace, chosen).next_tab
    return gr.Tabs(selected=tab) if tab is not None else gr.skip()


def _picker(ctx: StudioContext, initial: str | None) -> tuple[Any, Any, Any, Any, Any]:
    names = project_names(ctx.workspace)
    with gr.Row(equal_height=True):
        picker = gr.Dropdown(choices=project_choices(ctx.workspace), value=initial if initial in names else None,
                             scale=4, label="Project", elem_id="project-pick", info="the voice you are making; every tab follows it")
        refresh = gr.Button("Refresh", scale=1, elem_id="project-refresh")
    choices = model_dir_choices(ctx.workspace)
    with gr.Accordion("New project", open=not names, elem_id="project-new"), gr.Row(equal_height=True):
        name = gr.Textbox(value="", scale=2, label="Name (a folder name: letters, digits, '.', '_', '-')",
                          elem_id="project-new-name")
        model = gr.Dropdown(choices=choices, value=choices[0][1] if choices else None, allow_custom_value=True,
                            scale=3, label="Base model folder (its generation follows from it)",
                            elem_id="project-new-model")
        create = gr.Button("Create project", variant="primary", scale=1, elem_id="project-create")
    return picker, refresh, name, model, create


def build(ctx: StudioContext) -> Any:
    """Lay out the Project tab (the first tab: the studio opens on it)."""
    workspace, state = ctx.workspace, ctx.project_state
    initial = state.value if state is not None else ctx.default_project_name()
    gr.Markdown("### Your voice project\nOne project per voice: it keeps its recordings, proofread clips, prepared "
                "data, runs and exports together, and remembers what each step made. Pick one (the demo has one per "
                "model) or create yours, then follow the steps.")
    picker, refresh, name, model, create = _picker(ctx, initial)
    message = gr.HTML(elem_id="project-message")
    first = project_view(workspace, initial)
    # A page's load shows the project it opens on (webui.project.follow); a tab built alone looks at it then.
    following = state is not None and ctx.project_stamp is not None
    summary = gr.HTML(value=first.summary if following else lambda: project_view(workspace, initial).summary,
                      elem_id="project-summary")
    steps = gr.HTML(value=first.steps if following else lambda: project_view(workspace, initial).steps,
                    elem_id="project-steps")
    next_button = gr.Button(first.next_label, variant="primary", interactive=first.next_tab is not None,
                            elem_id="project-next")
    shown = [summary, steps, next_button]

    if following:
        def picked(chosen: str | None, current: Any) -> tuple[Any, ...]:
            return (*follow.picked(ctx, chosen, current), *_view_outputs(workspace, chosen))

        picker.change(picked, inputs=[picker, ctx.project_stamp], outputs=[state, ctx.project_stamp, *shown],
                      **TURNS)

        def followed(stamp: Any) -> tuple[Any, ...]:  # the page loaded (the list read now), or a step finished
            chosen = follow.stamp_name(stamp)
            names = project_names(workspace)
            return (gr.Dropdown(choices=names, value=chosen if chosen in names else None),
                    *_view_outputs(workspace, chosen))

        follow.follow(ctx, followed, [picker, *shown], concurrency_id=TURNS["concurrency_id"])
    else:
        picker.change(lambda chosen: _view_outputs(workspace, chosen), inputs=picker, outputs=shown, **TURNS)

    def created(typed: str, folder: str | None) -> tuple[Any, Any]:
        text, made = create_action(workspace, typed, folder)
        if made is None:
            return text, gr.skip()
        return text, gr.Dropdown(choices=project_choices(workspace), value=made)

    create.click(created, inputs=[name, model], outputs=[message, picker], **TURNS)
    refresh.click(lambda chosen: (gr.Dropdown(choices=project_choices(workspace), value=chosen),
                                  *_view_outputs(workspace, chosen)), inputs=picker, outputs=[picker, *shown],
                  **TURNS)
    if ctx.tabs is not None:
        next_button.click(lambda chosen: _next_tab(workspace, chosen), inputs=picker, outputs=ctx.tabs)

    def on_select(tab: gr.Tab) -> None:  # back from another tab: the states as the folders are now
        tab.select(lambda chosen: _view_outputs(workspace, chosen), inputs=picker, outputs=shown,
                   show_progress="hidden", **TURNS)

    return on_select
