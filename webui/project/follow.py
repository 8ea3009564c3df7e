"""Every form follows the session's project: one stamp per browser session, one refresh that every form takes.

``ctx.project_state`` holds the session's project name; ``ctx.project_stamp`` holds a ``ProjectStamp`` (as a
plain dict): the name, what the project's file records (when each step was recorded, its tokenizer) and why it
was set. The stamp is set

- when the page loads (``opening_name``: the project last picked or created in the studio, read now, so a project
  created after the app started is the one a reload opens on),
- when another project is picked (and the pick is remembered for the next page),
- when a step finished: a studio timer and every tab opening look at the project (a preparation's report that
  appeared completes its step; a tab opening also takes in what its folders show) and set a new stamp only when
  a record changed.

A form subscribes with ``follow(ctx, fn, outputs, inputs)``: ``fn(stamp, *inputs)`` runs on every new stamp and
fills the form from the project with the hand-off functions (``trainer.project.handoff``), the same ones the
"Fill the forms from the project" button uses.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gradio as gr

if TYPE_CHECKING:
    from trainer.project import Project
    from webui.context import StudioContext

LAST_PICKED_FILE = ".last-picked"  # in the workspace's projects/ folder: the project a new page opens on
STEP_POLL_S = 2.0
# Why a stamp was set: the page loaded, another project was picked, or a step of the project finished.
PROJECT_TURN = "project-view"  # the queue slot of every event that sets the session's project or shows it
LOAD, PICK, STEP = "load", "pick", "step"


def remember_pick(workspace: Path | str, name: str | None) -> None:
    """Note ``name`` as the project the next page opens on (a write that fails is only a lost preference)."""
    from data_tools.fileio import atomic_write_text
    from trainer.project import ProjectError, check_name
    from trainer.project.layout import projects_root

    try:
        check_name(str(name or ""))
        root = projects_root(workspace)
        if (root / str(name)).is_dir():
            atomic_write_text(root / LAST_PICKED_FILE, f"{name}\n")
    except (ProjectError, OSError):
        pass


def last_picked(workspace: Path | str) -> str | None:
    """The project last picked or created in the studio, when it still exists."""
    from trainer.project import project_names
    from trainer.project.layout import projects_root

    try:
        name = (projects_root(workspace) / LAST_PICKED_FILE).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return name if name in project_names(workspace) else None


def opening_name(ctx: StudioContext) -> str | None:
    """The project a page opens on, read when it loads: the one last picked or created, else the studio's
    default (the project file changed last, else the demo's)."""
    return last_picked(ctx.workspace) or ctx.default_project_name()


def _records(project: Project | None) -> list[Any]:
    if project is None:
        return []
    steps = sorted((step, float(record.get("at", 0))) for step, record in project.steps.items()
                   if isinstance(record, dict))
    return [[step, at] for step, at in steps] + [["tokenizer", project.tokenizer]]


def stamp_of(ctx: StudioContext, name: str | None, cause: str) -> dict[str, Any]:
    """The stamp of project ``name`` as its folders show it now (``ctx.project`` takes them in)."""
    return {"project": name, "records": _records(ctx.project(name)), "cause": cause}


def _pending_done(project: Project) -> bool:
    from trainer.project.steps import pending_finished

    return pending_finished(project)


def newer_stamp(ctx: StudioContext, name: str | None, current: dict[str, Any] | None,
                observe: bool = True) -> Any:
    """A STEP stamp when the project's records differ from ``current``'s, else gr.skip() (nothing changed, so no
    form is refilled). ``observe``: take in what the folders show (a tab opening); else only read the file and
    complete a studio step whose report appeared (the timer: cheap)."""
    if not isinstance(current, dict) or current.get("project") != name or not name:
        return gr.skip()
    if observe:
        project = ctx.project(name)
    else:
        from trainer.project import ProjectError, load_project, refresh

        try:
            project = load_project(ctx.workspace, str(name))
            if _pending_done(project):
                project = refresh(project)
        except (ProjectError, OSError):
            return gr.skip()
    records = _records(project)
    return gr.skip() if records == current.get("records") else {"project": name, "records": records, "cause": STEP}


def follow(ctx: StudioContext, fn: Callable[..., Any], outputs: Sequence[Any], inputs: Sequence[Any] = (),
           concurrency_id: str | None = None) -> None:
    """Run ``fn(stamp, *inputs)`` whenever the session's project stamp changes (the page loaded, a project was
    picked, a step finished); its outputs fill ``outputs``. Nothing when the tab is built alone.

    One run at a time, the newest stamp last: the queue runs up to four calls of one function at once, so a slow
    fill from the page's load could land after the fill for the project picked next and show the old project.
    ``concurrency_id``: share the turn with the other events that write the same outputs."""
    if ctx.project_stamp is None:
        return
    ctx.project_stamp.change(fn, inputs=[ctx.project_stamp, *inputs], outputs=list(outputs), show_progress="hidden",
                             concurrency_limit=1, concurrency_id=concurrency_id, trigger_mode="always_last")


def stamp_name(stamp: Any) -> str | None:
    return stamp.get("project") if isinstance(stamp, dict) else None


def stamp_cause(stamp: Any) -> str:
    return str(stamp.get("cause")) if isinstance(stamp, dict) else LOAD


def wire_studio(ctx: StudioContext, studio: gr.Blocks, tabs: Sequence[gr.Tab]) -> None:
    """The page's load, every tab's opening and the step timer set the session's project stamp."""
    state, stamp = ctx.project_state, ctx.project_stamp
    if state is None or stamp is None:
        return

    def on_load(current: Any) -> tuple[Any, Any]:
        if isinstance(current, dict):  # a project was picked or created before the load answered: it stays
            return gr.skip(), gr.skip()
        name = opening_name(ctx)
        return name, stamp_of(ctx, name, LOAD)

    # In the Project tab's turn: a load that answers late cannot switch the session back from a project created
    # meanwhile (seen on a busy page: the import that followed showed nothing, its project no longer the session's).
    studio.load(on_load, inputs=stamp, outputs=[state, stamp], show_progress="hidden",
                concurrency_id=PROJECT_TURN, concurrency_limit=1)
    for tab in tabs:
        tab.select(lambda name, current: newer_stamp(ctx, name, current), inputs=[state, stamp], outputs=stamp,
                   show_progress="hidden")
    timer = gr.Timer(STEP_POLL_S)
    timer.tick(lambda name, current: newer_stamp(ctx, name, current, observe=False), inputs=[state, stamp],
               outputs=stamp, show_progress="hidden", queue=False)


def picked(ctx: StudioContext, name: str | None, current: Any) -> tuple[Any, Any]:
    """(the session's project, its stamp) for a project picked (or created) in the Project tab, remembered as
    the one the next page opens on; (skip, skip) when it is the session's project already (the page loading
    sets the picker too)."""
    if stamp_name(current) == name and isinstance(current, dict):
        return gr.skip(), gr.skip()
    if name:
        remember_pick(ctx.workspace, name)
    return name, stamp_of(ctx, name, PICK)
