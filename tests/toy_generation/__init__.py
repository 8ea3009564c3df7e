"""A fourth generation registered from the tests alone (issue 37): IndexTTS-Toy, built on IndexTTS-1.5's entry.

Everything of it lives in this folder: its entry (here), its own manifest format (``data/``: a codes manifest
with other field names), its own GPT subclass (``model.py``, recorded in the model config its saves write, which is
how a config or a checkpoint is recognised as the toy) and its own demo folder (``demo/``, built from the
IndexTTS-1.5 demo's files, its manifests converted to the toy's format). Registering it touches no shared file:
the studio's form, the checker, split, the pre-flight, training, samples, evaluation and export all reach it
through the registry.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from generations.demo_facts import DemoFacts
from generations.registry import by_id
from generations.spec import Capability, Generation, lazy
from networks.generation_rule import gpt_section
from tests.toy_generation.data.format import FIELDS_HINT, TOY_FORMAT

TOY_ID = "toy"
TOY_NAME = "IndexTTS-Toy"
TOY_MARK = "toy_gpt"  # the gpt-section key naming the toy's GPT class: its configs and saves carry it
TOY_CLASS = "ToyGPT"
TOY_SCALE = "toy_head_scale"  # the gpt-section key of its extra buffer
TOY_FOLDER = "toy"  # its demo's folder under a demo workspace
DEMO_PRESET = "Demo (CPU, toy)"
LORA_REFUSAL = "a toy has no attention projections worth adapting"
PACKAGE = __name__
MODEL = f"{PACKAGE}.model"
DEMO = f"{PACKAGE}.demo.build"


def toy_gpt_keys(scale: float = 1.0) -> dict[str, Any]:
    """What a gpt section adds to describe the toy's GPT."""
    return {TOY_MARK: TOY_CLASS, TOY_SCALE: float(scale)}


def recognises_toy(config: Mapping[str, Any] | None, state_keys: Iterable[str] = ()) -> bool:
    return gpt_section(config).get(TOY_MARK) == TOY_CLASS


def toy_entry() -> Generation:
    """The toy's entry: IndexTTS-1.5's, with its own name, recogniser, manifest format, GPT class, demo and form
    facts."""
    v15 = by_id("1.5")
    assert v15.export is not None
    return v15.renamed(
        id=TOY_ID, name=TOY_NAME, recognises=recognises_toy,
        config_hint=f"a config whose gpt section has {TOY_MARK}: {TOY_CLASS} describes {TOY_NAME}",
        manifest_format=TOY_FORMAT, format_hint=FIELDS_HINT,
        form=replace(v15.form, manifest_kind="toy codes manifest", demo_preset=DEMO_PRESET),
        # its own GPT class and saved config; the rest of 1.5's model facet (its BigVGAN, its training prompt)
        model=replace(v15.model, gpt_class=lazy(MODEL, TOY_CLASS), saved_config=lazy(MODEL, "saved_config")),
        export=replace(v15.export, name="IndexTTS Toy"),
        demo_folder=TOY_FOLDER,
        demo=DemoFacts(paths=lazy(DEMO, "paths"), ensure=lazy(DEMO, "ensure_demo"), project="demo-toy",
                       project_files=lazy(DEMO, "project_files"), form_files=lazy(DEMO, "form_files")),
        model_set=None,
        prepare=None,  # IndexTTS-1.5's preprocess writes 1.5 manifests, which the toy's pre-flight refuses
        missing={**v15.missing, Capability.LORA: LORA_REFUSAL,
                 Capability.PREPARE: "its manifests are converted from IndexTTS-1.5's prepared ones"},
    )
