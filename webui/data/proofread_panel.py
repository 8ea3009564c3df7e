"""Proofreading an ingest folder in the Data tab: the clips worst first, a page at a time, a player and an editor.

Every change goes through ``data_tools.ingest.store.IngestStore`` and is on disk (``edits.json``) before the
callback returns, so edits survive a page reload, a studio restart and a rerun of the ingest. Save writes a
new ``manifests/manifest_<time>.jsonl`` (never over an earlier one): the input of audio preprocessing for
IndexTTS-1.5 and IndexTTS2 alike. A store is opened afresh for each callback: the folder on disk is the state
(the CLI may edit it at the same time), and the store imports no torch, so this runs in the page's process.

Callbacks are plain functions (plain values in, plain values out); ``build_proofread`` lays out and wires them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gradio as gr
import pandas as pd

from webui.form_inputs import InputProblem, resolve_path
from webui.plots import badge_html, empty_frame, message_html, records_frame
from webui.testing.listen import audio_bytes

ALL = "all"
TABLE_COLUMNS = ["status", "confidence", "gates", "seconds", "transcript", "speaker", "id"]
ID_COLUMN = TABLE_COLUMNS.index("id")
PAGE_SIZES = (10, 20, 50, 100)
DEFAULT_PAGE_SIZE = 20


def status_choices() -> list[str]:
    from data_tools.ingest.store import STATUSES

    return [ALL, *STATUSES]


def open_store(folder: str | None, workspace: Path | str):
    """The store of the typed ingest folder; InputProblem (one line) when there is none yet."""
    from data_tools.ingest.store import IngestStore, StoreError

    path = resolve_path(folder, workspace, "ingest folder")
    if path is None:
        raise InputProblem("give the ingest folder (where the clips were written)")
    try:
        return IngestStore(path)
    except StoreError as exc:
        raise InputProblem(str(exc)) from None


def _confidence(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}"


def _status(clip: dict[str, Any]) -> str:
    return clip["status"] + (" (edited)" if clip["edited"] else "")


def clips_frame(clips: list[dict[str, Any]]) -> pd.DataFrame:
    rows = [{"status": _status(c), "confidence": _confidence(c["confidence"]),
             "gates": "; ".join(c["reasons"]), "seconds": f"{c['seconds']:.2f}", "transcript": c["text"],
             "speaker": c["speaker"], "id": c["id"]} for c in clips]
    return records_frame(rows, TABLE_COLUMNS)


@dataclass
class PageView:
    """One page of the table, and what the line above it says."""

    message: str = ""
    table: pd.DataFrame = field(default_factory=lambda: empty_frame(TABLE_COLUMNS))
    label: str = ""
    page: int = 0
    ids: list[str] = field(default_factory=list)


def page_view(folder: str | None, page: float | None, status: str | None, page_size: float | None,
              workspace: Path | str) -> PageView:
    """The clips worst first (rejected, then the least sure transcripts), one page; never raises."""
    from data_tools.ingest.store import StoreError

    try:
        store = open_store(folder, workspace)
        shown = store.list_clips(int(page or 0), int(page_size or DEFAULT_PAGE_SIZE),
                                 None if not status or status == ALL else status)
    except (InputProblem, StoreError) as exc:
        return PageView(message=message_html(str(exc)))
    counts = ", ".join(f"{n} {name}" for name, n in store.counts().items() if n)
    label = f"page {shown.page + 1} of {shown.pages} · {shown.total} clip(s) shown · {counts or 'no clips'}"
    speakers = store.speakers()
    if len(speakers) > 1:
        label += " · speakers: " + ", ".join(f"{name} {n}" for name, n in list(speakers.items())[:8])
    return PageView(table=clips_frame(shown.clips), label=label, page=shown.page,
                    ids=[clip["id"] for clip in shown.clips])


@dataclass
class ClipView:
    """The selected clip: its id, audio for the player, transcript for the editor, and its details."""

    clip_id: str | None = None
    audio: bytes | None = None
    text: str = ""
    details: str = ""


def _details(clip: dict[str, Any]) -> str:
    parts = [f"{clip['seconds']:.2f} s", f"speaker {clip['speaker']}", f"from {clip['source']}"]
    if clip["given_text"]:
        parts.append(f"{clip['given_kind'] or 'given'} text: {clip['given_text']}")
    if clip["asr_text"] is not None:
        parts.append(f"ASR ({_confidence(clip['confidence'])}): {clip['asr_text'] or '(nothing heard)'}")
    if clip["reasons"]:
        parts.append("gates: " + "; ".join(clip["reasons"]))
    tone = {"deleted": "error", "rejected": "warn", "restored": "info"}.get(clip["status"], "ok")
    return badge_html(_status(clip).upper(), f"{clip['id']} · " + " · ".join(parts), tone)


def clip_view(store: Any, clip_id: str) -> ClipView:
    clip = store.clip(clip_id)
    return ClipView(clip_id=clip_id, audio=audio_bytes(Path(clip["audio"])), text=clip["text"],
                    details=_details(clip))


def picked_id(ids: list[str] | None, index: Any, row_value: Any) -> str | None:
    """The clip a table click picked: the row's id column, else its position in the page shown."""
    if isinstance(row_value, (list, tuple)) and len(row_value) > ID_COLUMN and row_value[ID_COLUMN]:
        return str(row_value[ID_COLUMN])
    row = index[0] if isinstance(index, (list, tuple)) else index
    return ids[row] if ids and isinstance(row, int) and 0 <= row < len(ids) else None


def select_clip(folder: str | None, clip_id: str | None, workspace: Path | str) -> tuple[str, ClipView]:
    """(message, the clip) for a picked row; a vanished folder or clip is the one-line message."""
    from data_tools.ingest.store import StoreError

    if not clip_id:
        return "", ClipView()
    try:
        return "", clip_view(open_store(folder, workspace), clip_id)
    except (InputProblem, StoreError) as exc:
        return message_html(str(exc)), ClipView()


def change_clip(action: str, folder: str | None, clip_id: str | None, text: str | None,
                workspace: Path | str) -> tuple[str, ClipView]:
    """Apply ``action`` ("text", "speaker": ``text`` is the label, "delete" or "restore") to the selected clip:
    (message, the clip after it)."""
    from data_tools.ingest.store import StoreError

    if not clip_id:
        return message_html("pick a clip in the table first"), ClipView()
    try:
        store = open_store(folder, workspace)
        if action == "text":
            clip = store.set_text(clip_id, text or "")  # the store re-runs the clip's gates on the new text
            verdict = "; ".join(clip["reasons"]) if clip["reasons"] else "passes the gates"
            done = f"transcript of {clip_id} saved: {clip['status']} ({verdict})"
        elif action == "speaker":
            clip = store.set_speaker(clip_id, text or "")
            done = f"{clip_id} is now speaker {clip['speaker']}"
        elif action in ("delete", "restore"):
            clip = getattr(store, action)(clip_id)
            done = f"{clip_id} {'deleted (left out of manifests)' if action == 'delete' else 'restored'}"
        else:
            raise ValueError(f"unknown action {action!r}")
    except (InputProblem, StoreError) as exc:
        return message_html(str(exc)), select_clip(folder, clip_id, workspace)[1]
    return badge_html("SAVED", done, "ok"), clip_view(store, clip["id"])


def pending_note(clip_id: str | None, typed: str | None, stored: str | None) -> str:
    """A note while the editor holds a transcript that differs from the stored one (Apply saves it)."""
    if not clip_id or " ".join((typed or "").split()) == " ".join((stored or "").split()):
        return ""
    return badge_html("NOT APPLIED", "the transcript differs from the saved one: Apply edit saves it", "warn")


def save_manifest(folder: str | None, workspace: Path | str, speaker: str | None = None) -> tuple[str, str]:
    """Write a new manifest of the kept clips (``speaker``'s only, when given): (message, its path or '')."""
    from data_tools.ingest.store import StoreError

    only = " ".join((speaker or "").split()) or None
    try:
        store = open_store(folder, workspace)
        kept = len(store.manifest_rows(only))
        if not kept:
            raise InputProblem("no clip to save: every clip is deleted, rejected or without a transcript")
        path = store.save_manifest(only)
    except (InputProblem, StoreError) as exc:
        return message_html(str(exc)), ""
    whose = f" of speaker {only}" if only else ""
    names = " and ".join(preparing_generations(store.folder, workspace))
    return badge_html("MANIFEST SAVED", f"{kept} clip(s){whose} in {path}: the input of audio preparation "
                                        f"({names})", "ok"), str(path)


def preparing_generations(folder: Path, workspace: Path | str) -> list[str]:
    """The names (the registry's) of the generations whose preparation takes a manifest of ingest ``folder``:
    those of the projects that import into it, else every registered generation."""
    from generations.registry import generation_names
    from trainer.project import ProjectError, load_project, project_names

    names = generation_names()
    found: set[str] = set()
    for name in project_names(workspace):
        try:
            project = load_project(workspace, name)
        except (ProjectError, OSError):
            continue
        if project.dir("ingest").resolve() == Path(folder).resolve():
            found.add(project.generation)
    return [label for ident, label in names.items() if ident in found] or list(names.values())


# -- layout -----------------------------------------------------------------------------------------------


@dataclass
class ProofreadPanel:
    folder: gr.Textbox
    status: gr.Dropdown
    page_size: gr.Dropdown
    page: gr.State
    ids: gr.State
    label: gr.HTML
    table: gr.Dataframe
    message: gr.HTML
    manifest: gr.Textbox | None = None  # the last manifest saved (laid out below the editor)

    @property
    def page_outputs(self) -> list[Any]:
        return [self.message, self.table, self.label, self.page, self.ids]

    @property
    def paging(self) -> list[Any]:
        """What show_page() reads, in its order."""
        return [self.page, self.page_size, self.status, self.folder]


def page_values(view: PageView) -> list[Any]:
    """A PageView in ProofreadPanel.page_outputs order."""
    return [view.message, view.table, view.label, view.page, view.ids]


@dataclass
class ClipEditor:
    selected: gr.State  # the clip id
    audio: gr.Audio
    text: gr.Textbox
    details: gr.HTML
    loaded: gr.State  # the clip's transcript as stored: the editor differs from it until Apply
    pending: gr.HTML
    apply: gr.Button
    delete: gr.Button
    restore: gr.Button
    speaker: gr.Textbox | None = None  # a new speaker label for the selected clip
    relabel: gr.Button | None = None

    @property
    def outputs(self) -> list[Any]:
        return [self.selected, self.audio, self.text, self.details, self.loaded, self.pending]


def clip_values(view: ClipView) -> list[Any]:
    """A ClipView in ClipEditor.outputs order. The editor then holds the stored text: nothing is pending (its
    .change does not fire when the text stays the same, so the note is cleared here)."""
    return [view.clip_id, view.audio, view.text, view.details, view.text, ""]


def _table(ctx: Any, folder: gr.Textbox) -> ProofreadPanel:
    default_folder = folder.value

    def first() -> PageView:  # the first page of the folder field's default, at each page load
        return page_view(default_folder, 0, ALL, DEFAULT_PAGE_SIZE, ctx.workspace)

    with gr.Row(equal_height=True):
        status = gr.Dropdown(choices=status_choices(), value=ALL, label="Show", scale=1, min_width=120,
                             elem_id="proof-status")
        page_size = gr.Dropdown(choices=list(PAGE_SIZES), value=DEFAULT_PAGE_SIZE, label="Per page", scale=1,
                                min_width=100, elem_id="proof-page-size")
        prev = gr.Button("◀ Prev", scale=0, min_width=90, elem_id="proof-prev")
        # Callable values are computed on each page load: a reload shows the folder as it is on disk now.
        label = gr.HTML(value=lambda: first().label, elem_id="proof-page-label")
        nxt = gr.Button("Next ▶", scale=0, min_width=90, elem_id="proof-next")
        refresh = gr.Button("Refresh", scale=0, min_width=90, elem_id="proof-refresh")
    table = gr.Dataframe(value=lambda: first().table, interactive=False, wrap=True, max_height=900,
                         column_widths=["11%", "9%", "20%", "7%", "31%", "8%", "14%"],
                         label="Clips (click a row)", elem_id="proof-table")
    message = gr.HTML(elem_id="proof-message")
    panel = ProofreadPanel(folder, status, page_size, gr.State(0), gr.State(lambda: first().ids), label, table,
                           message)

    def show_page(where: str, shown: int, size: int, filter_: str, path: str) -> list[Any]:
        target = {"prev": shown - 1, "next": shown + 1}.get(where, shown if where == "same" else 0)
        return page_values(page_view(path, max(0, target), filter_, size, ctx.workspace))

    for button, where in ((prev, "prev"), (nxt, "next"), (refresh, "same")):
        button.click(lambda *values, where=where: show_page(where, *values), inputs=panel.paging,
                     outputs=panel.page_outputs)
    for control in (status, page_size):
        control.change(lambda *values: show_page("first", *values), inputs=panel.paging, outputs=panel.page_outputs)
    return panel


def _editor() -> ClipEditor:
    with gr.Row():
        with gr.Column(scale=2):
            details = gr.HTML(elem_id="proof-details")
            audio = gr.Audio(value=None, interactive=False, label="Clip", buttons=["download"], elem_id="proof-audio")
        with gr.Column(scale=3):
            text = gr.Textbox(value="", lines=2, max_lines=6, label="Transcript (edit, then Apply)",
                              elem_id="proof-text")
            pending = gr.HTML(elem_id="proof-pending")
            with gr.Row():
                apply = gr.Button("Apply edit", variant="primary", elem_id="proof-apply")
                delete = gr.Button("Delete clip", variant="stop", elem_id="proof-delete")
                restore = gr.Button("Restore clip", elem_id="proof-restore")
            with gr.Row(equal_height=True):
                speaker = gr.Textbox(value="", scale=3, label="Speaker label of this clip (e.g. spk2)",
                                     elem_id="proof-speaker")
                relabel = gr.Button("Set speaker", scale=1, elem_id="proof-set-speaker")
    return ClipEditor(gr.State(None), audio, text, details, gr.State(""), pending, apply, delete, restore,
                      speaker, relabel)


def _wire_editor(ctx: Any, panel: ProofreadPanel, editor: ClipEditor) -> None:
    workspace = ctx.workspace

    def on_select(path: str, listed: list[str], event: gr.SelectData) -> list[Any]:
        note, view = select_clip(path, picked_id(listed, event.index, event.row_value), workspace)
        return [note, *clip_values(view)]

    def on_change(action: str):
        def handler(path: str, clip_id: str | None, typed: str, shown: int, size: int, filter_: str) -> list[Any]:
            note, view = change_clip(action, path, clip_id, typed, workspace)
            listing = page_view(path, shown, filter_, size, workspace)
            return [note, *clip_values(view), *page_values(listing)[1:]]
        return handler

    panel.table.select(on_select, inputs=[panel.folder, panel.ids], outputs=[panel.message, *editor.outputs])
    changing = [panel.folder, editor.selected, editor.text, panel.page, panel.page_size, panel.status]
    for button, action in ((editor.apply, "text"), (editor.delete, "delete"), (editor.restore, "restore")):
        button.click(on_change(action), inputs=changing, outputs=[*panel.page_outputs[:1], *editor.outputs,
                                                                 *panel.page_outputs[1:]])
    if editor.relabel is not None and editor.speaker is not None:
        relabeling = [panel.folder, editor.selected, editor.speaker, panel.page, panel.page_size, panel.status]
        editor.relabel.click(on_change("speaker"), inputs=relabeling,
                             outputs=[*panel.page_outputs[:1], *editor.outputs, *panel.page_outputs[1:]])
    # .change, not .input: Gradio's Textbox sends .input only on key presses, and a paste must be seen too.
    editor.text.change(pending_note, inputs=[editor.selected, editor.text, editor.loaded], outputs=editor.pending,
                       show_progress="hidden")


def build_proofread(ctx: Any, folder: gr.Textbox) -> ProofreadPanel:
    """The proofreading table, player and editor for the ingest folder typed in ``folder``."""
    gr.Markdown("#### Proofread\nWorst first: clips the gates rejected, then the least sure transcripts. Click a "
                "row to hear it and correct its transcript (type or paste Amharic). Every change is saved at once; "
                "**Save manifest** writes a new manifest of the kept clips.")
    panel = _table(ctx, folder)
    editor = _editor()
    _wire_editor(ctx, panel, editor)
    with gr.Row(equal_height=True):
        save = gr.Button("Save manifest", variant="primary", scale=1, elem_id="proof-save")
        only = gr.Textbox(value="", scale=1, label="Keep one speaker only (empty: all)", elem_id="proof-only-speaker")
        panel.manifest = gr.Textbox(value="", interactive=False, scale=4, label="Last manifest saved",
                                    elem_id="proof-manifest")
    save.click(lambda path, who: save_manifest(path, ctx.workspace, who), inputs=[folder, only],
               outputs=[panel.message, panel.manifest])
    return panel
