"""The registry is the only list (issue 37 item 3): the training form's presets and the Hub catalogue's generation
sets come from the entries, and moving them there changed nothing the studio offers.

The pins (tests/fixtures/form_presets.json, hub_catalogue.json) were captured from the hand-written lists before
they moved: every preset's name, its place in the form, and the settings it sets; every set of the catalogue in
order with all its sources. The browser tests pick presets by name, the CLI sets by name.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from generations.registry import GENERATIONS
from trainer.models import catalog
from webui.training import presets
from webui.training import training_form as tf

FIXTURES = Path(__file__).parent / "fixtures"


def _pinned(name: str) -> Any:
    return json.loads((FIXTURES / name).read_text(encoding="utf-8"))


def test_the_form_offers_the_pinned_presets_in_the_pinned_order():
    pins = _pinned("form_presets.json")
    assert list(tf.preset_names()) == pins["presets"]
    assert list(tf.demo_presets()) == pins["demo_presets"]
    assert pins["demo_preset"] == tf.DEMO_PRESET
    assert list(presets.gpu_presets()) == pins["gpu_presets"]


def test_every_preset_sets_the_pinned_settings():
    pins = _pinned("form_presets.json")
    for name, settings in pins["settings"].items():
        assert json.loads(json.dumps(presets.preset_settings(name))) == settings, name


def test_each_demo_preset_is_named_once_by_its_entry():
    assert presets.demo_presets() == tuple(entry.form.demo_preset for entry in reversed(GENERATIONS))
    facets = [entry.presets for entry in GENERATIONS if entry.presets is not None]
    assert facets and all(list(facet.gpu_presets()) == list(facet.names) for facet in facets)


def test_the_catalogue_lists_the_pinned_sets():
    listed = [dataclasses.asdict(entry) for entry in catalog.all_sets()]
    assert json.loads(json.dumps(listed)) == _pinned("hub_catalogue.json")
    assert catalog.generation_sets() == tuple(entry.model_set() for entry in GENERATIONS if entry.model_set)


def test_a_registered_generation_brings_its_presets_and_its_set():
    shipped = next(entry for entry in GENERATIONS if entry.presets is not None and entry.model_set is not None)
    own_set = dataclasses.replace(shipped.model_set(), name="toy-set", title="Toy")
    toy = shipped.renamed(id="toy-lists", name="Toy", form=dataclasses.replace(shipped.form, demo_preset="Toy demo"),
                          model_set=lambda: own_set)
    GENERATIONS.insert(0, toy)
    try:
        assert presets.preset_names()[-3] == "Toy demo" and "Toy demo" in presets.demo_presets()
        assert presets.preset_settings("Toy demo") == presets.preset_settings(shipped.form.demo_preset)
        assert catalog.all_sets()[0] == own_set and catalog.model_set("toy-set") == own_set
    finally:
        GENERATIONS.remove(toy)
