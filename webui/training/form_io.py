"""The Training form's components as one list of inputs and outputs (``FormIO``), and what a fill of the form sends
them (``form_updates``): the page's load, a project's, a preset's and a YAML file's fills all go through it."""

from __future__ import annotations

from typing import Any

import gradio as gr

from webui.training import mark_view
from webui.training import training_form as tf
from webui.training.checkpoint_labels import checkpoint_choices
from webui.training.run_start import command_preview


def form_updates(values: dict[str, Any], baseline: str | None, shown: Any, preset: str | None = None) -> list[Any]:
    """A fill of the form (FormIO.outputs): the fields, resume, the command, the sections that hold changed fields
    (``mark_view``), and, when the values come from ``preset``, the picker and the marks' baseline set to it."""
    fields, resume_ticked, resume_from = tf.form_from_values(values)
    choices = checkpoint_choices(str(values.get("output_dir") or ""))
    if resume_from not in [value for _, value in choices]:
        choices.append((resume_from, resume_from))
    return [*fields, resume_ticked, gr.update(choices=choices, value=resume_from), command_preview(values),
            *mark_view.fill_updates(values, preset or baseline, shown), *[preset or gr.skip()] * 2]


class FormIO:
    """The form's components as one list of inputs/outputs, and reading values from what they hold."""

    def __init__(self, form: Any, run: Any, versioned: tuple[str, ...]) -> None:
        """``form``, ``run``: the tab's FormColumn and RunColumn (their fields, sections, marks, resume, command)."""
        self.fields = [form.fields[option.name] for option in tf.FIELD_OPTIONS]
        self.inputs = [*self.fields, run.resume, run.resume_from]
        self.marks_in = [form.baseline, form.marks]  # a fill's inputs end with these (``split``)
        self.outputs = [*self.fields, run.resume, run.resume_from, run.command, *form.sections.values(), form.marks,
                        form.preset, form.baseline]
        self.versioned = [form.fields[name] for name in versioned]

    @staticmethod
    def split(raw: tuple[Any, ...]) -> tuple[tuple[Any, ...], str | None, Any]:
        """(the form's inputs, the marks' baseline, the marks shown) out of a fill's inputs."""
        return raw[:-2], raw[-2], raw[-1]

    def values(self, *raw: Any) -> dict[str, Any]:
        return tf.values_from_form(list(raw[: len(self.fields)]), bool(raw[-2]), raw[-1])

    def read(self, *raw: Any) -> tuple[dict[str, Any] | None, str]:
        try:
            return self.values(*raw), ""
        except tf.FormError as exc:
            return None, str(exc)
