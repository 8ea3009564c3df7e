"""The samples view the Training tab embeds: the wavs spoken at the latest save, and earlier saves on demand.

The trainer writes ``<output-dir>/samples/step_<N>/NN_<name>.wav`` at each save and a ``sample`` event in
``metrics.jsonl`` (``trainer.samples``); this view reads those events (``webui.training.sample_saves.SampleEvents``) and
shows up to ``MAX_PLAYERS`` players with their step. A step picker goes back through earlier saves;
"latest" follows the newest save as the run goes on. Files that are gone are skipped with a note.

Use (inside a tab's layout)::

    panel = samples_view.build("train-samples")
    panel.wire(output_dir_textbox, timer)  # refresh on load, a new output dir, a step pick, each timer tick

``panel.update(output_dir, step, shown)`` is the plain function behind it (tests call it directly).
"""

from __future__ import annotations

import html
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gradio as gr

from webui.testing.listen import ListenError, audio_bytes, typed_path
from webui.training.sample_saves import Gallery, SampleEvents, samples_gallery

MAX_PLAYERS = 6
LATEST = "latest"

_readers: dict[Path, SampleEvents] = {}
_readers_lock = threading.Lock()


def reader_for(output_dir: Path) -> SampleEvents:
    """One incremental reader per output directory for the whole UI process."""
    key = output_dir.resolve()
    with _readers_lock:
        reader = _readers.get(key)
        if reader is None:
            reader = _readers[key] = SampleEvents(key)
        return reader


def gallery_for(output_dir: str | Path | None, step: str | int | None = LATEST) -> Gallery:
    """The gallery of ``output_dir`` at ``step`` ("latest" or None: the newest save)."""
    text = str(output_dir or "").strip()
    if not text:
        return Gallery([], None, note="no output directory")
    try:
        folder = typed_path(text, "output directory")
    except ListenError as exc:
        return Gallery([], None, note=str(exc))
    if not folder.is_dir():
        return Gallery([], None, note=f"no samples yet: {folder} does not exist")
    wanted = None if step in (None, "", LATEST) else int(step)
    return samples_gallery(reader_for(folder).refresh(), wanted)


def step_choices(gallery: Gallery) -> list[tuple[str, str]]:
    latest = f"latest (step {gallery.steps[0]})" if gallery.steps else LATEST
    return [(latest, LATEST)] + [(f"step {step}", str(step)) for step in gallery.steps]


def note_html(gallery: Gallery, hidden: int) -> str:
    note = gallery.note + (f"; {hidden} more not shown (see the step folder)" if hidden else "")
    return f'<div class="studio-samples-note" data-step="{gallery.step or ""}">{html.escape(note)}</div>'


@dataclass
class SamplesPanel:
    step: gr.Dropdown
    note: gr.HTML
    players: list[gr.Audio]
    refresh: gr.Button
    shown: gr.State  # what the players hold now, so a refresh with nothing new sends no audio

    @property
    def outputs(self) -> list[Any]:
        return [self.step, self.note, *self.players, self.shown]

    def update(self, output_dir: str | None, step: str | None, shown: Any) -> tuple[Any, ...]:
        """Values for ``outputs``: the step picker, the note, each player, and the new ``shown`` key."""
        gallery = gallery_for(output_dir, step)
        keep = step if step not in (None, "") and (step == LATEST or (gallery.step is not None
                                                                       and str(gallery.step) == str(step))) else LATEST
        picker = gr.Dropdown(choices=step_choices(gallery), value=keep)
        players = gallery.players[:MAX_PLAYERS]
        key = [str(output_dir or ""), gallery.step, [str(path) for _, path in players]]
        if key == shown:
            audio = [gr.skip()] * len(self.players)
        else:
            audio = [gr.Audio(value=audio_bytes(path), label=label, visible=True) for label, path in players]
            audio += [gr.Audio(value=None, label="", visible=False)] * (len(self.players) - len(players))
        return (picker, note_html(gallery, len(gallery.players) - len(players)), *audio, key)

    def wire(self, output_dir: Any, timer: gr.Timer | None = None) -> None:
        """Refresh on page load, a new output directory (back to the latest save), the button, a step pick,
        and (quietly) on every tick of ``timer``."""
        inputs = [output_dir, self.step, self.shown]
        gr.on(triggers=None, fn=lambda folder: self.update(folder, LATEST, None), inputs=output_dir,
              outputs=self.outputs, show_progress="hidden")
        self.refresh.click(self.update, inputs=inputs, outputs=self.outputs)
        self.step.input(self.update, inputs=inputs, outputs=self.outputs)
        if timer is not None:
            timer.tick(self.update, inputs=inputs, outputs=self.outputs, show_progress="hidden")


def build(elem_prefix: str = "samples", label: str = "Samples at each save") -> SamplesPanel:
    """Lay out the panel (call inside a Blocks context); wire it with ``panel.wire(...)``."""
    with gr.Group(elem_id=elem_prefix):
        gr.Markdown(f"**{label}** (what the model says at each checkpoint save; pick a step to go back)")
        with gr.Row(equal_height=True):
            step = gr.Dropdown(choices=[(LATEST, LATEST)], value=LATEST, label="Save", scale=3,
                               elem_id=f"{elem_prefix}-step")
            refresh = gr.Button("Refresh samples", scale=1, elem_id=f"{elem_prefix}-refresh")
        note = gr.HTML(elem_id=f"{elem_prefix}-note")
        with gr.Row():
            players = [gr.Audio(value=None, interactive=False, visible=False, buttons=["download"],
                                elem_id=f"{elem_prefix}-player-{index}") for index in range(MAX_PLAYERS)]
    return SamplesPanel(step=step, note=note, players=players, refresh=refresh, shown=gr.State(None))
