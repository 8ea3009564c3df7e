"""A fourth generation registered from the tests alone (issue 37): IndexTTS-Toy, one folder (tests/toy_generation/).

Its own manifest format (other field names), its own GPT subclass, its own demo folder, an entry built on
IndexTTS-1.5's. Touching no shared file: the studio's form offers it (and its demo preset), the demo workspace lists
its folder, its manifests are recognised, checked (a broken line named by path:line) and split, the pre-flight plans
it (and refuses another generation's manifest for it), a run trains it on toy-format data (its GPT class is what
runs) and resumes, its samples at saves speak, it is evaluated and it exports; a capability its entry lacks is
refused by the pre-flight in one line that names the generation.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from data_tools.check_data import check_manifests
from data_tools.manifest import manifest_format
from data_tools.manifest_entries import iter_entries, prompt_of
from data_tools.split import split_manifest
from generations.indextts15.data.manifest import ManifestEntry
from generations.indextts15.demo.build import DemoPaths as Demo15
from generations.registry import (
    DEMO_RUNS,
    GENERATIONS,
    build_gpt,
    by_id,
    demo_facets,
    demo_folders,
    format_of,
    format_of_line,
    formats,
    generation_ids,
    generation_of_config,
    register,
    unregister,
)
from generations.spec import Generation
from networks.unified_voice import load_gpt_state_dict
from tests.speech_model_factory import judge_models, tone_wav
from tests.toy_generation import DEMO_PRESET, LORA_REFUSAL, TOY_CLASS, TOY_MARK, TOY_NAME, toy_entry
from tests.toy_generation.data.format import FIELDS_HINT, FORMAT_ID, PATH_FIELDS, REQUIRED_FIELDS
from tests.toy_generation.demo.build import ToyDemoPaths, build_demo
from tests.toy_generation.model import ToyGPT
from tests.trainer_helpers import events, load, run_main, tiny_args
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
    assert "toy" not in generation_ids() and FORMAT_ID not in [found.id for found in formats()]


@pytest.fixture(scope="module")
def toy_demo(demo_workspace, tmp_path_factory) -> ToyDemoPaths:
    """A workspace holding the IndexTTS-1.5 demo's files (copied: the shared one stays untouched) and the toy's."""
    workspace = tmp_path_factory.mktemp("toy_workspace")
    for part in ("checkpoints", "tokenizers", "data"):
        shutil.copytree(demo_workspace.root / part, workspace / part)
    return build_demo(workspace)


def toy_subset(source: Path, target: Path, count: int) -> Path:
    """The ``count`` shortest lines (by codes) of a toy manifest, its paths made absolute."""
    rows = [json.loads(line) for line in source.read_text(encoding="utf-8").splitlines() if line.strip()]
    for row in rows:
        row.update({key: str((source.parent / row[key]).resolve()) for key in PATH_FIELDS})
    rows.sort(key=lambda row: (len(np.load(row["tokens_file"])), row["uid"]))
    target.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows[:count]), encoding="utf-8")
    return target


@pytest.fixture(scope="module")
def data(toy_demo, tmp_path_factory) -> dict[str, Path]:
    """Slices of the toy demo's own manifests (toy format) and a reference voice."""
    root = tmp_path_factory.mktemp("toy_data")
    return {"train": toy_subset(toy_demo.train_manifest, root / "train.jsonl", 8),
            "val": toy_subset(toy_demo.val_manifest, root / "val.jsonl", 4), "voice": tone_wav(root / "voice.wav")}


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
    source = Demo15.under(toy_demo.root.parent)
    for toy_manifest, codes_manifest in ((toy_demo.train_manifest, source.train_manifest),
                                         (toy_demo.val_manifest, source.val_manifest)):
        toy_lines = [json.loads(line) for line in toy_manifest.read_text(encoding="utf-8").splitlines()]
        codes_lines = [json.loads(line) for line in codes_manifest.read_text(encoding="utf-8").splitlines()]
        assert [line["uid"] for line in toy_lines] == [line["id"] for line in codes_lines]  # converted line for line
        assert all(set(REQUIRED_FIELDS) <= line.keys() and "codes" not in line for line in toy_lines)


def test_the_toy_manifest_format_is_recognised_by_its_own_fields(toy, toy_demo):
    line = json.loads(toy_demo.train_manifest.read_text(encoding="utf-8").splitlines()[0])
    assert format_of_line(line) is toy.manifest_format and format_of(FORMAT_ID) is toy.manifest_format
    assert formats()[0] is toy.manifest_format  # asked first, as its entry is
    assert manifest_format(toy_demo.train_manifest) == FORMAT_ID
    entries = list(iter_entries(toy_demo.train_manifest))
    assert entries and all(isinstance(entry, ManifestEntry) and entry.codes.is_file() for entry in entries)
    first = entries[0]
    assert (first.id, first.text, first.speaker, first.language) == (line["uid"], line["sentence"], line["talker"],
                                                                     line["lang"])
    assert first.cond_mel is not None and first.cond_mel.is_file() and prompt_of(first, FORMAT_ID).id == line["uid"]


def test_the_form_offers_the_toy_and_its_demo_preset(toy, toy_demo):
    found = config_version(str(toy_demo.config))
    assert (found.version, found.name, found.trainable) == ("toy", TOY_NAME, True)
    assert tf.field_label(option_by_name("train_manifest"), found.version).endswith("(toy codes manifest)")
    assert tf.applies(option_by_name("vocoder"), found.version)  # its samples speak as 1.5's do
    assert DEMO_PRESET in preset_names()
    files = tf.demo_preset_files(toy_demo.root.parent, DEMO_PRESET)
    assert files is not None and (files.config, files.vocoder) == (toy_demo.config, toy_demo.vocoder)
    assert tf.demo_preset_files(toy_demo.root.parent, by_id("1.5").form.demo_preset) is None  # 1.5's stays the root's


def test_the_checker_checks_its_manifest_and_names_a_broken_line(toy, toy_demo, data, tmp_path):
    report = check_manifests([data["train"]], [data["val"]], tokenizer=toy_demo.extended_tokenizer,
                             config=toy_demo.config, workers=1)
    assert report.errors == [] and report.verdict in ("clean", "warnings")
    assert set(report.formats.values()) == {FORMAT_ID} and report.train.entries == 8

    lines = data["train"].read_text(encoding="utf-8").splitlines()
    broken = json.loads(lines[2])
    del broken["sentence"]
    lines[2] = json.dumps(broken)
    manifest = tmp_path / "broken.jsonl"
    manifest.write_text("\n".join(lines) + "\n", encoding="utf-8")
    report = check_manifests([str(manifest)], workers=1)
    assert report.formats == {str(manifest): FORMAT_ID}
    assert report.train.entries == 7 and report.verdict == "errors"
    assert [(problem.where, problem.message) for problem in report.errors] == [
        (f"{manifest}:3", "missing field 'sentence'")]


def test_split_splits_a_toy_manifest(toy, toy_demo, tmp_path):
    result = split_manifest(toy_demo.train_manifest, tmp_path / "split", val_fraction=0.25, seed=0)
    train = [json.loads(line) for line in result.train_path.read_text(encoding="utf-8").splitlines()]
    val = [json.loads(line) for line in result.val_path.read_text(encoding="utf-8").splitlines()]
    assert result.train_count == len(train) and result.val_count == len(val) and train and val
    assert {row["uid"] for row in train}.isdisjoint({row["uid"] for row in val})
    assert all(set(REQUIRED_FIELDS) <= row.keys() for row in train + val)
    assert manifest_format(result.train_path) == FORMAT_ID
    assert all(entry.codes.is_file() for entry in iter_entries(result.val_path))  # its path fields were rebased


def test_the_tokenizer_trainer_reads_a_toy_manifests_transcripts(toy, toy_demo):
    from data_tools.tokenizer.train import iter_corpus_lines

    rows = [json.loads(line) for line in toy_demo.train_manifest.read_text(encoding="utf-8").splitlines()]
    read = list(iter_corpus_lines(toy_demo.train_manifest))
    assert [text for text, _language, _line in read] == [row["sentence"] for row in rows]
    assert [language for _text, language, _line in read] == [row.get("lang") for row in rows]


def test_the_pre_flight_refuses_another_generations_manifest_for_the_toy(toy, toy_demo, tmp_path):
    codes_manifest = Demo15.under(toy_demo.root.parent).train_manifest  # IndexTTS-1.5's, beside the toy's demo
    codes = {"train": codes_manifest, "val": codes_manifest}
    plan = make_plan(parse_argv(tiny_args(toy_demo, codes, tmp_path / "run", config=str(toy_demo.config))))
    failed = [c for c in plan.checks if not c.ok]
    assert [c.name for c in failed] == ["data"]
    assert failed[0].message == (f"--config describes an {TOY_NAME} GPT, which trains on {FIELDS_HINT}; "
                                 "--train-manifest is a v1.5 codes manifest")


def test_the_toy_plans_trains_its_own_gpt_and_resumes(toy, trained):
    plan = trained["plan"]
    assert plan.ok, plan.lines()
    assert plan.generation is toy and f"{TOY_NAME} GPT" in next(c for c in plan.checks if c.name == "config").message
    assert plan.train.report.format == FORMAT_ID and plan.train.report.kept == 8  # it reads the toy's own lines
    assert "(a toy codes manifest)" in plan.train.lines[0]
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
