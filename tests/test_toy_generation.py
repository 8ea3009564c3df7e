"""A fourth generation registered from the tests alone (issue 27): a renamed copy of IndexTTS-1.5's entry.

Without touching any hub file, the training form labels its fields for it, the pre-flight plans it, a run
trains and resumes, its checkpoints are listed under its name, and a capability its entry lacks is refused by
the pre-flight in one line that names the generation and the capability.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from generations.registry import GENERATIONS, by_id, generation_ids, register, unregister
from generations.spec import Capability, Generation
from networks.generation_rule import gpt_section
from tests.trainer_helpers import run_main, subset_manifest, tiny_args
from trainer.checkpoints.metadata import read_metadata
from trainer.options import option_by_name
from trainer.options_parser import parse_argv
from trainer.plan import make_plan
from webui.model_version import config_version
from webui.training import training_form as tf

TOY_MARK = "toy_generation"  # a gpt-section key the toy's configs and checkpoints carry


def recognises_toy(config: Any, state_keys: Any = ()) -> bool:
    return bool(gpt_section(config).get(TOY_MARK))


def toy_entry() -> Generation:
    v15 = by_id("1.5")
    return v15.renamed(id="toy", name="IndexTTS-Toy", recognises=recognises_toy,
                       form=replace(v15.form, manifest_kind="toy codes manifest"),
                       missing={Capability.LORA: "a toy has no attention projections worth adapting"})


@pytest.fixture
def toy() -> Iterator[Generation]:
    entry = toy_entry()
    register(entry)
    try:
        yield entry
    finally:
        unregister(entry.id)
    assert "toy" not in generation_ids()


@pytest.fixture
def toy_files(tmp_path: Path, demo_workspace) -> dict[str, Path]:
    config = yaml.safe_load(demo_workspace.config.read_text(encoding="utf-8"))
    config["gpt"][TOY_MARK] = True
    for key in ("gpt_checkpoint", "bigvgan_checkpoint"):  # keep the config's relative files reachable
        if config.get(key):
            config[key] = str((demo_workspace.config.parent / config[key]).resolve())
    dataset = config.get("dataset") or {}
    if dataset.get("bpe_model"):
        dataset["bpe_model"] = str((demo_workspace.config.parent / dataset["bpe_model"]).resolve())
    path = tmp_path / "toy" / "config.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return {"config": path,
            "train": subset_manifest(demo_workspace.train_manifest, tmp_path / "train.jsonl", 8),
            "val": subset_manifest(demo_workspace.val_manifest, tmp_path / "val.jsonl", 4)}


def test_the_toy_is_one_more_entry_of_the_one_list(toy):
    assert GENERATIONS[0] is toy and generation_ids()[-1] == "toy"  # asked first, listed last (newest)
    assert by_id("toy").name == "IndexTTS-Toy"


def test_the_form_offers_the_toy(toy, toy_files):
    found = config_version(str(toy_files["config"]))
    assert (found.version, found.name, found.trainable) == ("toy", "IndexTTS-Toy", True)
    assert tf.field_label(option_by_name("train_manifest"), found.version).endswith("(toy codes manifest)")
    assert tf.applies(option_by_name("vocoder"), found.version)  # its samples speak as 1.5's do


def test_the_toy_plans_trains_resumes_and_lists(toy, toy_files, demo_workspace, tmp_path):
    out = tmp_path / "run"
    argv = tiny_args(demo_workspace, toy_files, out, config=str(toy_files["config"]), max_steps=2, save_interval=2)
    plan = make_plan(parse_argv(argv))
    assert plan.ok, plan.lines()
    assert plan.generation is toy and "IndexTTS-Toy GPT" in next(c for c in plan.checks if c.name == "config").message
    assert run_main(argv) == 0
    assert read_metadata(out / "latest.pth").model_version == "toy"  # the Checkpoints tab's name comes from it
    resumed = tiny_args(demo_workspace, toy_files, out, config=str(toy_files["config"]), max_steps=4, save_interval=2)
    assert run_main(resumed) == 0
    events = [json.loads(line) for line in (out / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [e["event"] for e in events if e["event"] in ("start", "resume")] == ["start", "resume"]
    assert next(e for e in events if e["event"] == "resume")["step"] == 2 and events[-1]["event"] == "end"
    assert {e["version"] for e in events if e["event"] in ("start", "resume")} == {"toy"}


def test_a_capability_the_toy_lacks_is_refused_by_name(toy, toy_files, demo_workspace, tmp_path):
    argv = tiny_args(demo_workspace, toy_files, tmp_path / "run", config=str(toy_files["config"]), lora=True)
    plan = make_plan(parse_argv(argv))
    failed = [c for c in plan.checks if not c.ok]
    assert [c.name for c in failed] == ["LoRA and languages"]
    assert failed[0].message == ("IndexTTS-Toy cannot train LoRA adapters: a toy has no attention projections "
                                 "worth adapting")
