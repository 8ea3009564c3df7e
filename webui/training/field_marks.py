"""Which training-form fields differ from their baseline (issue 40): the one rule every fill of the form uses.

A field's baseline is the selected preset's value where that preset sets the field, else the option's default
(``trainer.options``'s table, the launcher's for processes and nodes). The project's data and model files are not
marked: the project (or a demo preset) fills them and the first view shows them. No Gradio and no torch here.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from trainer.options import Option
from webui.training import training_form as tf
from webui.training.presets import preset_settings

PRESET, DEFAULT = "preset", "default"
# What the project or a demo preset's workspace fills (``training_form.WorkspaceFiles``): never marked.
UNMARKED: frozenset[str] = frozenset(("train_manifest", "val_manifest", "tokenizer", "config", "base_checkpoint",
                                      "output_dir", "vocoder", "sample_model_dir"))
PROCESSES_SECTION = "Processes and nodes (torchrun)"
MARKED_OPTIONS: tuple[Option, ...] = tuple(o for o in tf.FIELD_OPTIONS if o.name not in UNMARKED)
_LAUNCH_NAMES = frozenset(o.name for o in tf.LAUNCH_OPTIONS)


@dataclass(frozen=True)
class Mark:
    """A field that differs from its baseline: what the baseline holds and where it comes from."""

    baseline: Any
    source: str  # PRESET or DEFAULT

    def text(self, option: Option) -> str:
        return f"• changed from {self.source}: {shown(option, self.baseline)}"


def shown(option: Option, value: Any) -> str:
    """A value as a person reads it in a mark: on/off, one line for a path list, "(empty)" for nothing."""
    if option.kind == "bool":
        return "on" if value else "off"
    text = str(tf.to_field(option, value)).replace("\n", " · ").strip()
    return text or "(empty)"


@functools.cache
def _preset_values(preset: str) -> tuple[tuple[str, Any], ...]:
    try:
        return tuple(preset_settings(preset).items())
    except (KeyError, ValueError):  # no such preset, or a GPU preset nothing fits: the defaults stand
        return ()


def baseline(preset: str | None) -> dict[str, Mark]:
    """Every marked field's baseline under preset ``preset`` (None or unknown: the defaults only)."""
    defaults = tf.default_values()
    chosen = dict(_preset_values(preset)) if preset else {}
    return {o.name: Mark(chosen[o.name], PRESET) if o.name in chosen else Mark(defaults[o.name], DEFAULT)
            for o in MARKED_OPTIONS}


def _same(option: Option, value: Any, base: Any) -> bool:
    if option.kind in ("int", "float") and not option.repeatable:
        try:
            return math.isclose(float(value), float(base), rel_tol=1e-9, abs_tol=1e-12)
        except (TypeError, ValueError):
            return value == base
    return tf.to_field(option, value) == tf.to_field(option, base)


def changed_fields(values: dict[str, Any], preset: str | None) -> dict[str, Mark]:
    """The fields of ``values`` (form values by option name) that differ from their baseline under ``preset``,
    in the form's order, each with its baseline; a field ``values`` leaves out is not changed."""
    marks = baseline(preset)
    options = {o.name: o for o in MARKED_OPTIONS}
    return {name: mark for name, mark in marks.items()
            if name in values and not _same(options[name], values[name], mark.baseline)}


def section_of(name: str) -> str | None:
    """The closed section that holds field ``name`` (None: the first view shows it)."""
    if name in tf.FIRST_VIEW:
        return None
    if name in _LAUNCH_NAMES:
        return PROCESSES_SECTION
    return tf.trainer_options.option_by_name(name).group


SECTIONS: tuple[str, ...] = (*tf.GROUPS, PROCESSES_SECTION)


def section_counts(changed: Iterable[str]) -> dict[str, int]:
    """How many changed fields each section holds (every section, zero included)."""
    counts = dict.fromkeys(SECTIONS, 0)
    for name in changed:
        section = section_of(name)
        if section is not None:
            counts[section] += 1
    return counts


def section_title(section: str, count: int) -> str:
    return f"{section} · {count} changed" if count else section
