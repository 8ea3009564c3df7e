"""How the Training tab shows the fields that differ from their preset or default (issue 40).

A changed field's small text ends with "• changed from preset: X" (or "default"), and the closed section that holds
it opens and counts its changed fields in its title. A fill only opens sections, never closes one, and opens a
section only when it gains a changed field, so a section the reader closed stays closed while they edit elsewhere.
The rule itself is ``webui.training.field_marks``; this module turns it into Gradio updates.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gradio as gr

from webui.model_version import config_version
from webui.training import field_marks as fm
from webui.training import training_form as tf

FIELD_NAMES: tuple[str, ...] = tuple(o.name for o in tf.FIELD_OPTIONS)
_MARKED = frozenset(o.name for o in fm.MARKED_OPTIONS)
SHOWN_KEY, COUNTS_KEY = "marks", "counts"


def marked_info(option: tf.Option, version: str | None, mark_text: str | None) -> str:
    """A field's small text (``training_form.field_info``) with its mark after it, when it has one."""
    info = tf.field_info(option, version)
    return f"{info}  {mark_text}" if mark_text and tf.applies(option, version) else info


def marks_of(values: dict[str, Any], preset: str | None, version: str | None) -> dict[str, str]:
    """Field name -> mark text for the changed fields that the model of generation ``version`` uses (a field the
    form hides for it is not counted)."""
    options = {o.name: o for o in fm.MARKED_OPTIONS}
    return {name: mark.text(options[name]) for name, mark in fm.changed_fields(values, preset).items()
            if tf.applies(options[name], version)}


def mark_state(marks: dict[str, str]) -> dict[str, Any]:
    """The marks and each section's count, kept per session: a fill opens a section whose count grew, and the model
    badge's refresh keeps the marks in the small text it rewrites."""
    return {SHOWN_KEY: dict(marks), COUNTS_KEY: fm.section_counts(marks)}


def initial_view(values: dict[str, Any], preset: str | None) -> dict[str, Any]:
    """The mark state of a form built with ``values`` (what the components start with)."""
    return mark_state(marks_of(values, preset, config_version(str(values.get("config") or "")).version))


def mark_updates(values: dict[str, Any] | None, preset: str | None, shown: Any,
                 opens: bool = True) -> list[Any]:
    """[a field update per FIELD_OPTIONS, a section update per ``field_marks.SECTIONS``, the new mark state]: every
    marked field's small text and every section's title, written whole each time (the page may not hold what an
    earlier refresh sent: see ``wire``); with ``opens``, a section that gains a changed field (by ``shown``, the
    state before) opens. ``values`` None (a field holds something the form cannot read): nothing changes."""
    if values is None:
        return [gr.skip()] * (len(FIELD_NAMES) + len(fm.SECTIONS) + 1)
    version = config_version(str(values.get("config") or "")).version
    marks = marks_of(values, preset, version)
    before = shown if isinstance(shown, dict) else mark_state({})
    old_counts = before.get(COUNTS_KEY, {})
    fields = [gr.update(info=marked_info(option, version, marks.get(option.name)))
              if option.name in _MARKED else gr.skip() for option in tf.FIELD_OPTIONS]
    state = mark_state(marks)
    sections = []
    for section in fm.SECTIONS:
        count = state[COUNTS_KEY][section]
        if opens and count > old_counts.get(section, 0):
            sections.append(gr.update(label=fm.section_title(section, count), open=True))
        else:  # the title follows; the section stays as the reader left it
            sections.append(gr.update(label=fm.section_title(section, count)))
    return [*fields, *sections, state]


def fill_updates(values: dict[str, Any], preset: str | None, shown: Any) -> list[Any]:
    """[a section update per ``field_marks.SECTIONS``, the new mark state] for a fill of the form (the page's load,
    a project's, a preset's, a YAML file's): computed from the values the fill writes, so a section that gains a
    changed field opens. The fields' small text follows from the refresh their change triggers (``wire``)."""
    return mark_updates(values, preset, shown)[len(FIELD_NAMES):]


def wire(baseline: gr.State, fields: list[Any], inputs: list[Any], sections: list[gr.Accordion], state: gr.State,
         read: Callable[..., tuple[dict[str, Any] | None, str]], turn: str) -> None:
    """Every edit and every fill changes a field's value, and applying a preset changes ``baseline`` (its name):
    each refreshes the fields' small text and the sections' titles. A fill's change events reach the server one field
    at a time (one of them sees fields the fill has not reached yet) and the page keeps only the newest answer of
    such a burst, so each refresh writes every mark whole, and none opens a section: a fill opens its sections from
    the values it writes (``fill_updates``), and an edited field's section is open already (it was edited there).
    ``fields``: FIELD_OPTIONS order; ``inputs``: what ``read`` takes; ``sections``: ``field_marks.SECTIONS`` order;
    ``turn``: the concurrency id shared with the model badge's refresh (both write the fields' small text)."""

    def refresh(name: str | None, *raw: Any) -> list[Any]:
        values, _ = read(*raw[:-1])
        return mark_updates(values, name, raw[-1], opens=False)

    gr.on([baseline.change, *(field.change for field in fields)], refresh, inputs=[baseline, *inputs, state],
          outputs=[*fields, *sections, state], show_progress="hidden", trigger_mode="always_last",
          concurrency_limit=1, concurrency_id=turn)
