"""The training form marks a field that differs from its preset or default, and opens the section that holds it
(issue 40): the rule (webui.training.field_marks) and what the Training tab does with it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from webui.training import field_marks as fm
from webui.training import training_form as tf
from webui.training.presets import preset_settings

DEMO = tf.DEMO_PRESET
S2MEL = tf.S2MEL_LORA12_PRESET


def _under(preset: str, **changes: Any) -> dict[str, Any]:
    return {**tf.default_values(), **preset_settings(preset), **changes}


def _not_set_by(preset: str) -> str:
    """A marked option that ``preset`` leaves at its default (a number, so a test can change it)."""
    settings = preset_settings(preset)
    return next(o.name for o in fm.MARKED_OPTIONS
                if o.name not in settings and o.kind in ("int", "float") and not o.repeatable)


def test_a_form_just_filled_by_its_preset_has_no_changed_field() -> None:
    assert fm.changed_fields(_under(DEMO), DEMO) == {}
    assert fm.changed_fields(_under(S2MEL), S2MEL) == {}


def test_a_field_the_preset_sets_is_compared_with_the_preset() -> None:
    preset_rate = preset_settings(DEMO)["learning_rate"]
    changed = fm.changed_fields(_under(DEMO, learning_rate=preset_rate * 2), DEMO)
    assert list(changed) == ["learning_rate"]
    assert changed["learning_rate"] == fm.Mark(preset_rate, fm.PRESET)
    # the default is not what a preset's field is compared with
    default_rate = tf.default_values()["learning_rate"]
    assert fm.changed_fields(_under(DEMO, learning_rate=default_rate), DEMO)["learning_rate"].baseline == preset_rate


def test_a_field_the_preset_leaves_alone_is_compared_with_the_default() -> None:
    name = _not_set_by(DEMO)
    default = tf.default_values()[name]
    changed = fm.changed_fields(_under(DEMO, **{name: default + 1}), DEMO)
    assert changed == {name: fm.Mark(default, fm.DEFAULT)}
    assert "changed from default" in changed[name].text(tf.trainer_options.option_by_name(name))


def test_the_same_value_in_another_form_is_not_a_change() -> None:
    values = _under(DEMO, batch_size=float(preset_settings(DEMO)["batch_size"]))  # a browser's number
    values["learning_rate"] = float(f"{values['learning_rate']:.12g}")
    assert fm.changed_fields(values, DEMO) == {}


def test_the_projects_files_are_never_marked_and_launcher_fields_are() -> None:
    values = _under(DEMO, train_manifest=["/data/a.jsonl"], output_dir="/runs/x", config="/m/config.yaml",
                    nproc_per_node=2)
    assert list(fm.changed_fields(values, DEMO)) == ["nproc_per_node"]
    assert fm.section_of("nproc_per_node") == fm.PROCESSES_SECTION


def test_an_unknown_preset_compares_with_the_defaults() -> None:
    assert fm.changed_fields(tf.default_values(), "no such preset") == {}


def test_section_counts_and_titles() -> None:
    counts = fm.section_counts(["weight_decay", "learning_rate", "epochs", "nnodes"])
    assert counts[tf.trainer_options.GROUP_OPTIM] == 2
    assert counts[fm.PROCESSES_SECTION] == 1
    assert sum(counts.values()) == 3  # epochs is in the first view: no section
    assert fm.section_title("Optimisation", 2) == "Optimisation · 2 changed"
    assert fm.section_title("Optimisation", 0) == "Optimisation"


# -- the Training tab: what a fill and an edit do with the marks -----------------------------------------------
def _training_tab(tmp_path: Path) -> Any:
    import gradio as gr

    from webui.context import StudioContext
    from webui.training import tab_training

    ctx = StudioContext.create(tmp_path)
    with gr.Blocks() as blocks:
        tab_training.build(ctx)
    return blocks


def _by_id(blocks: Any, elem_id: str) -> Any:
    return next(b for b in blocks.blocks.values() if getattr(b, "elem_id", None) == elem_id)


def _refresh(blocks: Any) -> Any:
    """The marks' refresh: the event every fill and edit of a field triggers."""
    marks_field = _by_id(blocks, tf.elem_id(tf.trainer_options.option_by_name("weight_decay")))
    return next(fn for fn in blocks.fns.values()
                if any(tuple(t)[:2] == (marks_field._id, "change") for t in fn.targets)
                and len(fn.outputs) > len(tf.FIELD_OPTIONS))


def _update(value: Any) -> dict[str, Any]:
    """What an update changes (gr.skip() changes nothing)."""
    return {k: v for k, v in value.items() if k != "__type__"} if isinstance(value, dict) else {}


def _handler(blocks: Any, elem_id: str, event: str) -> Any:
    target = _by_id(blocks, elem_id)
    return next(fn for fn in blocks.fns.values() if any(tuple(t)[:2] == (target._id, event) for t in fn.targets)
                and any(getattr(block, "elem_id", None) == "train-group-optimisation" for block in fn.outputs))


def _as_built(blocks: Any, inputs: list[Any]) -> list[Any]:
    return [blocks.blocks[block._id].value for block in inputs]


def test_an_edited_field_is_marked_and_its_section_counts_it(tmp_path: Path) -> None:
    blocks = _training_tab(tmp_path)
    optim = _by_id(blocks, "train-group-optimisation")
    assert optim.open is False and optim.label == "Optimisation"  # the demo form: nothing changed
    refresh = _handler(blocks, "opt-weight-decay", "change")  # what every edit and fill of a field triggers
    baseline, *raw, state = _as_built(blocks, refresh.inputs)
    names = [o.name for o in tf.FIELD_OPTIONS]
    raw[names.index("weight_decay")] = float(raw[names.index("weight_decay")]) + 0.5
    outputs = refresh.fn(baseline, *raw, state)

    by_block = dict(zip(refresh.outputs, outputs))
    assert "changed from default" in _update(by_block[_by_id(blocks, "opt-weight-decay")])["info"]
    # the edited field's section is open (it was edited there): the title counts it, and nothing is opened or closed
    assert _update(by_block[optim]) == {"label": "Optimisation · 1 changed"}
    marked = [b.elem_id for b in refresh.outputs[:len(tf.FIELD_OPTIONS)]
              if "• changed from" in _update(by_block[b]).get("info", "")]
    assert marked == ["opt-weight-decay"]
    assert all(set(_update(value)) <= {"info"} for value in outputs[:len(tf.FIELD_OPTIONS)]), \
        "a mark changes no field's value or visibility: the first view keeps its fields"

    raw[names.index("weight_decay")] = tf.default_values()["weight_decay"]  # set back: the mark goes
    back = dict(zip(refresh.outputs, refresh.fn(baseline, *raw, outputs[-1])))
    assert "• changed from" not in _update(back[_by_id(blocks, "opt-weight-decay")])["info"]
    assert _update(back[optim]) == {"label": "Optimisation"}  # the title follows; the section is not closed


def test_a_preset_applied_over_a_changed_form_opens_the_section_of_what_it_keeps(tmp_path: Path) -> None:
    blocks = _training_tab(tmp_path)
    demo, s2mel, defaults = preset_settings(DEMO), preset_settings(S2MEL), tf.default_values()
    # a field the demo sets away from its default and the S2Mel preset does not set: the demo's value stays
    kept = next(name for name, value in demo.items() if name not in s2mel and value != defaults[name])
    section = fm.section_of(kept)
    accordion = next(b for b in blocks.blocks.values() if getattr(b, "label", None) == section)
    assert accordion.open is False

    apply = _handler(blocks, "train-apply-preset", "click")
    _, project, *rest = _as_built(blocks, apply.inputs)
    by_block = dict(zip(apply.outputs, apply.fn(S2MEL, project, *rest)))
    opened = _update(by_block[accordion])
    assert opened["open"] is True and opened["label"].startswith(f"{section} · ")
    first_view = [_by_id(blocks, tf.elem_id(tf.trainer_options.option_by_name(n))) for n in tf.FIRST_VIEW]
    assert not any(isinstance(by_block[field], dict) for field in first_view), \
        "the first view's fields get their values only (none shown or hidden)"
    baseline_state, marks_state = apply.inputs[-2:]
    assert by_block[baseline_state] == S2MEL  # what the marks compare with from now on
    assert kept in by_block[marks_state]["marks"]

    refresh = _handler(blocks, "opt-weight-decay", "change")  # the fields' change then writes the mark
    raw = [by_block.get(block, blocks.blocks[block._id].value) for block in refresh.inputs[1:-1]]
    updates = dict(zip(refresh.outputs, refresh.fn(S2MEL, *raw, {})))
    field = _by_id(blocks, tf.elem_id(tf.trainer_options.option_by_name(kept)))
    assert "changed from default" in _update(updates[field])["info"]
