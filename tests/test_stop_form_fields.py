"""The training form shows only the options that apply to the model's generation (issue 28, item 5): an option
of another generation is hidden, not shown greyed out as "not used for this model"."""

from __future__ import annotations

import gradio as gr

from generations.indextts2.demo.build import DemoPaths as DemoV2Paths
from generations.indextts25.demo.build import DemoPaths as DemoV25Paths
from trainer.options import option_by_name
from webui.training import training_form as tf
from webui.training.tab_training import VERSIONED, _component, version_view


def _visible(config) -> dict[str, bool]:
    _badge, *updates = version_view(str(config))
    return {name: update["visible"] for name, update in zip(VERSIONED, updates)}


def test_each_generation_shows_only_its_own_fields(demo_workspace) -> None:
    v2 = _visible(DemoV2Paths.under(demo_workspace.root).config)
    assert not v2["vocoder"] and not v2["text_scheme"] and not v2["text_merges"]  # 1.5-only and 2.5-only: hidden
    assert v2["sample_model_dir"] and v2["sample_steps"] and v2["train_manifest"]
    v25 = _visible(DemoV25Paths.under(demo_workspace.root).config)
    assert v25["text_scheme"] and v25["sample_model_dir"] and not v25["vocoder"]
    v15 = _visible(demo_workspace.config)
    assert v15["vocoder"] and not v15["sample_model_dir"] and not v15["text_scheme"]
    assert all(_visible(demo_workspace.root / "missing.yaml").values())  # no model known yet: nothing hidden


def test_the_first_render_hides_the_same_fields() -> None:
    with gr.Blocks():
        shown = _component(option_by_name("text_scheme"), "merges", "2")
        kept = _component(option_by_name("sample_model_dir"), "", "2")
    assert shown.visible is False and kept.visible is True
    assert not tf.applies(option_by_name("text_scheme"), "2")
