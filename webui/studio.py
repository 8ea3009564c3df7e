"""The studio's Gradio app: one tab per module under webui/, in a fixed order.

A tab module exposes ``build(ctx: StudioContext) -> None`` and is called inside its ``gr.Tab``. Every tab
is part of the studio: one that fails to import or build stops the app with one line naming it (a
studio that silently lacks a tab would pass for a working one).
"""

from __future__ import annotations

import importlib
import traceback
from pathlib import Path

import gradio as gr

from webui.context import StudioContext
from webui.project import follow

TABS: tuple[tuple[str, str, str], ...] = (
    # (title, module, elem_id of the tab, also its id for gr.Tabs(selected=...))
    ("Project", "webui.project.tab_project", "tab-project"),
    ("Data", "webui.data.tab_data", "tab-data"),
    ("Tokenizer", "webui.tokenizer.tab_tokenizer", "tab-tokenizer"),
    ("Training", "webui.training.tab_training", "tab-training"),
    ("Checkpoints", "webui.checkpoints.tab_checkpoints", "tab-checkpoints"),
    ("Test", "webui.testing.tab_testing", "tab-test"),
    ("Listen", "webui.listen.tab_listen", "tab-listen"),
    ("Models", "webui.models.models_panel", "tab-models"),
    ("System", "webui.system.tab_system", "tab-system"),
)

CSS = """
#training-log textarea, #job-log textarea { font-family: ui-monospace, monospace; font-size: 12px; }
.status-ok { color: #15803d; font-weight: 600; }
.status-bad { color: #b91c1c; font-weight: 600; }
"""
_REPO = Path(__file__).resolve().parents[1]


class TabError(RuntimeError):
    """A tab could not be imported or built; the message is one line naming the tab and where it broke."""


def _where(exc: BaseException) -> str:
    """file:line of the deepest frame of this checkout in the exception's traceback ('' if none)."""
    where = ""
    for frame in traceback.extract_tb(exc.__traceback__):
        path = Path(frame.filename)
        if path.is_relative_to(_REPO) and ".venv" not in path.parts:
            where = f"{path.relative_to(_REPO)}:{frame.lineno}"
    return where


def _tab_error(title: str, module_name: str, what: str, exc: BaseException) -> TabError:
    message = " ".join(f"{type(exc).__name__}: {exc}".split())
    where = _where(exc)
    return TabError(f"the {title} tab ({module_name}) failed to {what}: {message}" + (f" ({where})" if where else ""))


def build_studio(ctx: StudioContext, title: str = "IndexTTS Fine-tuning Studio",
                 tabs: tuple[tuple[str, str, str], ...] | None = None) -> gr.Blocks:
    """The whole studio (``tabs``: default TABS); raises TabError naming the first tab that cannot be imported
    or built."""
    with gr.Blocks(title=title, analytics_enabled=False) as studio:
        gr.Markdown(f"## {title}\nWorkspace: `{ctx.workspace}`", elem_id="studio-header")
        # per browser session; the page's load sets both (follow.wire_studio), so a reload opens on the project
        # picked last, read then
        ctx.project_state = gr.State(follow.opening_name(ctx))
        ctx.project_stamp = gr.State(None)
        built: list[gr.Tab] = []
        with gr.Tabs(elem_id="studio-tabs") as studio_tabs:
            ctx.tabs = studio_tabs
            for tab_title, module_name, elem_id in TABS if tabs is None else tabs:
                try:
                    module = importlib.import_module(module_name)
                except Exception as exc:
                    raise _tab_error(tab_title, module_name, "import", exc) from exc
                with gr.Tab(tab_title, elem_id=elem_id, id=elem_id) as tab:
                    try:
                        on_select = module.build(ctx)
                    except Exception as exc:
                        raise _tab_error(tab_title, module_name, "build", exc) from exc
                if on_select is not None:  # a tab showing live state refreshes the moment it is opened
                    on_select(tab)
                built.append(tab)
        follow.wire_studio(ctx, studio, built)
    return studio
