"""The studio's Gradio app: one tab per module under webui/, in a fixed order.

A tab module exposes ``build(ctx: StudioContext) -> None`` and is called inside its ``gr.Tab``. A module
that does not exist yet is left out; one that fails to import or build shows its error in its tab
instead of taking the whole studio down.
"""

from __future__ import annotations

import importlib
import logging
import traceback

import gradio as gr

from webui.context import StudioContext

log = logging.getLogger(__name__)

TABS: tuple[tuple[str, str, str], ...] = (
    # (title, module, elem_id of the tab)
    ("Data", "webui.tab_data", "tab-data"),
    ("Tokenizer", "webui.tab_tokenizer", "tab-tokenizer"),
    ("Training", "webui.tab_training", "tab-training"),
    ("Checkpoints", "webui.tab_checkpoints", "tab-checkpoints"),
    ("System", "webui.tab_system", "tab-system"),
)

CSS = """
#training-log textarea, #job-log textarea { font-family: ui-monospace, monospace; font-size: 12px; }
.status-ok { color: #15803d; font-weight: 600; }
.status-bad { color: #b91c1c; font-weight: 600; }
"""


def _load_tab_module(module_name: str):
    """The tab module, or None when it does not exist (yet)."""
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name == module_name:
            return None
        raise


def build_studio(ctx: StudioContext, title: str = "IndexTTS Fine-tuning Studio") -> gr.Blocks:
    with gr.Blocks(title=title, analytics_enabled=False) as studio:
        gr.Markdown(f"## {title}\nWorkspace: `{ctx.workspace}`", elem_id="studio-header")
        with gr.Tabs(elem_id="studio-tabs"):
            for tab_title, module_name, elem_id in TABS:
                try:
                    module = _load_tab_module(module_name)
                except Exception:  # a broken tab must not take the studio down
                    module, error = None, traceback.format_exc()
                    log.error("tab %s failed to import:\n%s", tab_title, error)
                    with gr.Tab(tab_title, elem_id=elem_id):
                        gr.Markdown(f"**This tab failed to load.**\n\n```\n{error}\n```")
                    continue
                if module is None:
                    log.info("tab %s skipped: %s is not there yet", tab_title, module_name)
                    continue
                with gr.Tab(tab_title, elem_id=elem_id):
                    try:
                        module.build(ctx)
                    except Exception:
                        error = traceback.format_exc()
                        log.error("tab %s failed to build:\n%s", tab_title, error)
                        gr.Markdown(f"**This tab failed to build.**\n\n```\n{error}\n```")
    return studio
