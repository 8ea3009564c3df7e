"""A fourth generation registered from the tests alone (issue 37): IndexTTS-Toy, one folder (tests/toy_generation/).

Its own GPT subclass, its own demo folder, an entry built on IndexTTS-1.5's. Touching no shared file: the studio's
form offers it (and its demo preset), the demo workspace lists its folder, the pre-flight plans it, a run trains
it (its GPT class is what runs) and resumes, its samples at saves speak, it is evaluated and it exports; a
capability its entry lacks is refused by the pre-flight in one line that names the generation.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from generations.registry import (
    DEMO_RUNS,
    GENERATIONS,
    build_gpt,
    by_id,
    demo_facets,
    demo_folders,
    generation_ids,
    generation_of_config,
    register,
    unregister,
)
from generations.spec import Generation
from networks.unified_voice import load_gpt_state_dict
from tests.speech_model_factory import judge_models, tone_wav
from tests.toy_generation import DEMO_PRESET, LORA_REFUSAL, TOY_CLASS, TOY_MARK, TOY_NAME, toy_entry
from tests.toy_generation.demo.build import ToyDemoPaths, build_demo
from tests.toy_generation.model import ToyGPT
from tests.trainer_helpers import events, load, run_main, subset_manifest, tiny_args
from trainer.checkpoints.metadata import read_metadata
from trainer.options import option_by_name
from trainer.options_parser import parse_argv
from trainer.plan import make_plan
from trainer.run import TrainingRun
from webui.model_version import config_version
from webui.training import training_form as tf
from webui.training.presets import preset_names


@pytest.fixture(scope="module")
def toy() -> Iterator[Generation]:
    entry = toy_entry()
    register(entry)
    try:
        yield entry
    finally:
        unregister(entry.id)
    assert "toy" not in generation_ids()


@pytest.fixture(scope="module")
def toy_demo(demo_workspace, tmp_path_factory) -> ToyDemoPaths:
    """A workspace holding the IndexTTS-1.5 demo's files (copied: the shared one stays untouched) and the toy's."""
    workspace = tmp_path_factory.mktemp("toy_workspace")
    for part in ("checkpoints", "tokenizers", "data"):
        shutil.copytree(demo_workspace.root / part, workspace / part)
    return build_demo(workspace)


@pytest.fixture(scope="module")
def data(toy_demo, tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("toy_data")
    return {"train": subset_manifest(toy_demo.train_manifest, root / "train.jsonl", 8),
            "val": subset_manifest(toy_demo.val_manifest, root / "val.jsonl", 4), "voice": tone_wav(root / "voice.wav")}


def _built_classes(monkeypatch: pytest.MonkeyPatch) -> list[type]:
    """The class of every GPT a training run builds from now on."""
    built: list[type] = []
    original = TrainingRun.build_model

    def spy(self: TrainingRun) -> None:
        original(self)
        built.append(type(self.model))

    monkeypatch.setattr(TrainingRun, "build_model", spy)
    return built


@pytest.fixture(scope="module")
def trained(toy, toy_demo, data, tmp_path_factory) -> dict[str, Any]:
    """A toy run of two saves with samples and the evaluation's options, then resumed for two more."""
    models = judge_models(tmp_path_factory.mktemp("judges"))
    out = tmp_path_factory.mktemp("toy_run") / "run"
    flags = {"config": str(toy_demo.config), "save_interval": 2, "vocoder": str(toy_demo.vocoder),
             "eval_asr": str(models["asr"]), "eval_speaker_model": str(models["speaker"]), "eval_sentences": 2,
             "eval_reference": str(data["voice"]), "eval_base": False}
    with pytest.MonkeyPatch.context() as patch:
        built = _built_classes(patch)
        plan = make_plan(parse_argv(tiny_args(toy_demo, data, out, max_steps=2, **flags)))
        first = run_main(tiny_args(toy_demo, data, out, max_steps=2, **flags))
        second = run_main(tiny_args(toy_demo, data, out, max_steps=4, **flags))
    return {"out": out, "plan": plan, "codes": (first, second), "built": built}


def test_the_toy_is_one_more_entry_and_the_demo_workspace_lists_its_folder(toy):
    assert GENERATIONS[0] is toy and generation_ids()[-1] == "toy"  # asked first, listed last (newest)
    assert by_id("toy").name == TOY_NAME
    assert demo_folders()[-1] == "toy" and demo_folders(DEMO_RUNS)[-1] == "toy/runs"
    assert demo_facets()[-1] is toy.demo


def test_the_toy_demo_is_built_from_the_indextts15_demo(toy, toy_demo):
    assert toy_demo.exists() and toy_demo.root.name == "toy"
    config = yaml.safe_load(toy_demo.config.read_text(encoding="utf-8"))
    assert config["gpt"][TOY_MARK] == TOY_CLASS and generation_of_config(config) is toy
    assert toy.demo.paths(toy_demo.root.parent) == toy_demo  # the facet finds it under its workspace


def test_the_form_offers_the_toy_and_its_demo_preset(toy, toy_demo):
    found = config_version(str(toy_demo.config))
    assert (found.version, found.name, found.trainable) == ("toy", TOY_NAME, True)
    assert tf.field_label(option_by_name("train_manifest"), found.version).endswith("(toy codes manifest)")
    assert tf.applies(option_by_name("vocoder"), found.version)  # its samples speak as 1.5's do
    assert DEMO_PRESET in preset_names()
    files = tf.demo_preset_files(toy_demo.root.parent, DEMO_PRESET)
    assert files is not None and (files.config, files.vocoder) == (toy_demo.config, toy_demo.vocoder)
    assert tf.demo_preset_files(toy_demo.root.parent, by_id("1.5").form.demo_preset) is None  # 1.5's stays the root's


def test_the_checker_checks_its_manifest(toy, toy_demo, data):
    from data_tools.check_data import check_manifests

    report = check_manifests([data["train"]], [data["val"]], tokenizer=toy_demo.extended_tokenizer,
                             config=toy_demo.config, workers=1)
    assert report.errors == [] and report.verdict in ("clean", "warnings")


def test_the_toy_plans_trains_its_own_gpt_and_resumes(toy, trained):
    plan = trained["plan"]
    assert plan.ok, plan.lines()
    assert plan.generation is toy and f"{TOY_NAME} GPT" in next(c for c in plan.checks if c.name == "config").message
    assert trained["codes"] == (0, 0)
    assert trained["built"] == [ToyGPT, ToyGPT]  # the start and the resume both ran the toy's class
    out = trained["out"]
    assert read_metadata(out / "latest.pth").model_version == "toy"  # the Checkpoints tab's name comes from it
    assert load(out / "latest.pth")["model_config"][TOY_MARK] == TOY_CLASS  # its saved config says its class
    logged = [json.loads(line) for line in (out / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [e["event"] for e in logged if e["event"] in ("start", "resume")] == ["start", "resume"]
    assert next(e for e in logged if e["event"] == "resume")["step"] == 2 and logged[-1]["event"] == "end"
    assert {e["version"] for e in logged if e["event"] in ("start", "resume")} == {"toy"}


def test_the_toy_speaks_at_saves(trained):
    samples = events(trained["out"], "sample")
    assert [e["step"] for e in samples] == [2, 4]
    assert all("error" not in e and e["files"] for e in samples)


def test_the_toy_is_evaluated_with_its_own_gpt(toy, trained, tmp_path, monkeypatch):
    import trainer.synthesis.gpt_loading as gpt_loading
    from trainer.evaluate import main as evaluate_main

    run = tmp_path / "run"
    shutil.copytree(trained["out"], run)
    built: list[type] = []
    monkeypatch.setattr(gpt_loading, "build_gpt", lambda config: built.append(type(m := build_gpt(config))) or m)
    assert evaluate_main([str(run)]) == 0
    measured = events(run, "eval")
    assert [e["step"] for e in measured] == [2, 4] and all(e["cer"] >= 0.0 for e in measured)
    assert built and set(built) == {ToyGPT}


def test_the_toy_exports_a_folder_recognised_as_the_toy(toy, toy_demo, trained, tmp_path):
    from trainer.checkpoints.export import export_checkpoint

    out = tmp_path / "export"
    export_checkpoint(trained["out"] / "latest.pth", out, config=toy_demo.config)
    exported = yaml.safe_load((out / "config.yaml").read_text(encoding="utf-8"))
    assert generation_of_config(exported) is toy
    model = build_gpt(exported)
    assert type(model) is ToyGPT
    import torch

    assert load_gpt_state_dict(model, torch.load(out / "gpt.pth", weights_only=True)["model"]) == []  # strict


def test_a_capability_the_toy_lacks_is_refused_by_name(toy, toy_demo, data, tmp_path):
    argv = tiny_args(toy_demo, data, tmp_path / "run", config=str(toy_demo.config), lora=True)
    plan = make_plan(parse_argv(argv))
    failed = [c for c in plan.checks if not c.ok]
    assert [c.name for c in failed] == ["LoRA and languages"]
    assert failed[0].message == f"{TOY_NAME} cannot train LoRA adapters: {LORA_REFUSAL}"
