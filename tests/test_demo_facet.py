"""A generation's demo is its entry's demo facet (issue 37): a generation registered from the tests alone, with a
demo of its own, gets it built by ``python -m demo``, gets its demo voice project, and its demo preset's files (the
training form's) are its demo's, and the form offers that preset (the shared tiny CPU run, as its entry's
presets facet names none of its own); no file of demo/ or webui/ names it."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
import yaml

from demo.projects import demo_projects
from demo.workspace import build_demo, demo_of
from generations.demo_facts import DemoFacts, DemoProject
from generations.registry import GENERATIONS, by_id, demo_facets
from generations.spec import Generation
from networks.generation_rule import gpt_section
from webui.training import training_form as tf

TOY_MARK = "toy_demo_generation"
TOY_PRESET = "Toy demo (CPU)"


@dataclass(frozen=True)
class ToyDemoPaths:
    root: Path
    config: Path
    train_manifest: Path
    val_manifest: Path

    @classmethod
    def under(cls, workspace: Path) -> ToyDemoPaths:
        root = Path(workspace) / "toy"
        return cls(root=root, config=root / "checkpoints" / "config.yaml", train_manifest=root / "data" / "train.jsonl",
                   val_manifest=root / "data" / "val.jsonl")


built: list[tuple[Path, bool]] = []


def ensure_toy_demo(workspace: Path, sentences: list[str], n_val: int, seed: int, force: bool = False) -> ToyDemoPaths:
    paths = ToyDemoPaths.under(workspace)
    built.append((Path(workspace), force))
    config = yaml.safe_load(by_id("1.5").demo.paths(workspace).config.read_text(encoding="utf-8"))
    config["gpt"][TOY_MARK] = True
    paths.config.parent.mkdir(parents=True, exist_ok=True)
    paths.config.write_text(yaml.safe_dump(config), encoding="utf-8")
    paths.train_manifest.parent.mkdir(parents=True, exist_ok=True)
    for manifest, lines in ((paths.val_manifest, sentences[:n_val]), (paths.train_manifest, sentences[n_val:])):
        manifest.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return paths


def toy_entry() -> Generation:
    v15 = by_id("1.5")
    return v15.renamed(
        id="toy-demo", name="IndexTTS-ToyDemo", demo_folder="toy",
        recognises=lambda config, keys=(): bool(gpt_section(config).get(TOY_MARK)),
        form=replace(v15.form, demo_preset=TOY_PRESET),
        demo=DemoFacts(paths=ToyDemoPaths.under, ensure=ensure_toy_demo, project="demo-toy",
                       project_files=lambda demo: DemoProject(model_dir=demo.config.parent, tokenizer=None,
                                                              folder=demo.root,
                                                              prepared=(demo.train_manifest, demo.val_manifest)),
                       form_files=lambda demo: {"train_manifest": demo.train_manifest,
                                                "val_manifest": demo.val_manifest, "tokenizer": demo.root / "tok",
                                                "config": demo.config, "base_checkpoint": demo.root / "gpt.pth",
                                                "output_dir": demo.root / "runs" / "demo"}))


@pytest.fixture
def toy() -> Iterator[Generation]:
    entry = toy_entry()
    GENERATIONS.insert(0, entry)  # the newest generation: its demo is built after the others'
    try:
        yield entry
    finally:
        GENERATIONS.remove(entry)


def test_the_shipped_demos_are_their_entries_facets():
    assert [facet.project for facet in demo_facets()] == list(demo_projects()) == [
        "demo-indextts-1.5", "demo-indextts2", "demo-indextts-2.5"]
    assert all(entry.demo is not None and entry.demo_folder is not None for entry in GENERATIONS)


def test_a_registered_generation_gets_its_demo_project_and_preset(toy, demo_workspace, tmp_path):
    import shutil

    workspace = tmp_path / "ws"
    shutil.copytree(demo_workspace.root, workspace)
    built.clear()
    assert build_demo(workspace).root == workspace  # the demo at the workspace's root, as before
    assert built == [(workspace, False)]  # the complete shipped demos are kept; the toy's is built
    demo = demo_of(toy, workspace)
    assert demo == ToyDemoPaths.under(workspace) and demo.config.is_file()
    assert demo_projects()[-1] == "demo-toy"
    project = yaml.safe_load((workspace / "projects" / "demo-toy" / "project.json").read_text(encoding="utf-8"))
    assert project["generation"] == "toy-demo"
    files = tf.demo_preset_files(workspace, TOY_PRESET)
    assert files is not None and files.train_manifest == demo.train_manifest and files.sample_model_dir is None
    assert (files.config, files.output_dir) == (demo.config, workspace / "toy" / "runs" / "demo")
    assert tf.demo_preset_files(workspace, tf.DEMO_PRESET) is None  # the root demo's preset: the workspace's files
    assert TOY_PRESET in tf.preset_names() and TOY_PRESET in tf.demo_presets()
    assert tf.apply_preset(TOY_PRESET, {}, files)["train_manifest"] == [str(demo.train_manifest)]


def test_a_generation_without_a_demo_folder_has_no_demo(toy, tmp_path):
    assert demo_of(toy.renamed(demo_folder=None), tmp_path) is None
    assert demo_of(toy.renamed(demo=None), tmp_path) is None
