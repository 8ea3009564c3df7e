"""The studio's forms follow the session's voice project: training form, presets, run lists (no browser)."""

from __future__ import annotations

from pathlib import Path

import gradio as gr
import pytest

from generations.registry import by_id
from trainer.project import create_project, record_step
from webui.training import training_form as tf


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def voice(demo_workspace, tmp_path: Path):
    """A workspace with the project 'voice' on the demo's IndexTTS2 folder, its data prepared."""
    project = create_project(tmp_path, "voice", demo_workspace.root / "v2" / "checkpoints")
    manifest = write(project.dir("manifests") / "manifest_20260101_000000.jsonl", '{"id": "a", "text": "ሰላም"}\n')
    train = write(project.dir("prepared") / "train_pairs.jsonl", '{"id": "a"}\n')
    val = write(project.dir("prepared") / "val_pairs.jsonl", '{"id": "b"}\n')
    record_step(project, "prepare", [train, val], [manifest], {"pairs": 2})
    return project, train, val


def _ctx(workspace: Path):
    from webui.context import StudioContext

    return StudioContext.create(workspace)


def test_the_training_form_opens_on_the_projects_data_and_model(voice, demo_workspace, tmp_path):
    from webui.training.form_values import initial_values

    project, train, val = voice
    values = initial_values(_ctx(tmp_path), "voice")
    folder = (demo_workspace.root / "v2" / "checkpoints").resolve()
    assert values["train_manifest"] == [str(train)] and values["val_manifest"] == [str(val)]
    assert Path(values["config"]).resolve() == folder / "config.yaml"
    assert Path(values["output_dir"]).parent == project.dir("runs")  # the project's next run folder
    assert Path(values["sample_model_dir"]).resolve() == folder  # samples at saves speak through its folder


def test_a_preset_changes_hyper_parameters_and_keeps_the_projects_data(voice, tmp_path):
    from webui.training.form_values import preset_values

    _, train, _ = voice
    ctx = _ctx(tmp_path)
    for preset in tf.preset_names():
        values, message = preset_values(ctx, preset, "voice", tf.default_values())
        assert values["train_manifest"] == [str(train)], preset
        assert "kept" in message
    without, message = preset_values(ctx, by_id("2").form.demo_preset, None, tf.default_values())
    assert without["train_manifest"] != [str(train)] and "kept" not in message  # no project: the demo's data


def test_picking_a_demo_project_switches_the_form_to_its_demo(demo_workspace):
    from webui.training.form_values import initial_values

    ctx = _ctx(demo_workspace.root)
    picked = initial_values(ctx, "demo-indextts-2.5", picked=True)
    assert picked["train_manifest"] == [str(demo_workspace.root / "v25" / "data" / "train_pairs.jsonl")]
    opened = initial_values(ctx, "demo-indextts-2.5")  # a page opening on a demo project shows the tiny demo
    assert opened["train_manifest"] == [str(demo_workspace.root / "data" / "train.jsonl")]


def test_run_lists_include_the_projects_runs(voice, tmp_path):
    from webui.checkpoints.rows import find_output_dirs
    from webui.testing.listen import run_globs

    project, _, _ = voice
    run = project.dir("runs") / "run1"
    write(run / "latest.pth", "weights")
    assert str(run) in find_output_dirs(tmp_path)
    assert any(run.match(f"{tmp_path}/{pattern}") for pattern in run_globs())


def test_each_generation_names_a_preset_the_form_has():
    from generations.registry import GENERATIONS

    assert {generation.form.demo_preset for generation in GENERATIONS} <= set(tf.preset_names())


def test_the_gpt_pickers_leave_s2mel_runs_out(voice, tmp_path):
    from webui.testing.listen import run_dirs

    project, _, _ = voice
    gpt, s2mel = project.dir("runs") / "run1", project.dir("runs") / "run2"
    write(gpt / "latest.pth", "weights")
    write(s2mel / "latest.pth", "weights")
    write(s2mel / "train_config.yaml", "train: s2mel\n")
    assert gpt in run_dirs(tmp_path) and s2mel not in run_dirs(tmp_path)


def test_one_prepared_manifest_is_split_for_training_without_leaks(demo_workspace, tmp_path):
    import json
    import shutil

    from trainer.project import defaults_for

    project = create_project(tmp_path, "split-voice", demo_workspace.root / "v2" / "checkpoints")
    prepared = project.dir("prepared")
    shutil.copytree(demo_workspace.root / "v2" / "data", prepared, ignore=shutil.ignore_patterns("val_*", "exact_*"),
                    dirs_exist_ok=True)
    pairs = prepared / "train_pairs.jsonl"
    record_step(project, "prepare", [pairs], [], {"pairs": 1})
    train = defaults_for(project, "train")
    assert [Path(p).parent for p in train["train_manifest"] + train["val_manifest"]] == [
        prepared / "split" / "train_pairs"] * 2

    def targets(path: str) -> set[str]:
        return {json.loads(line)["target_id"] for line in Path(path).read_text(encoding="utf-8").splitlines()}

    seen, held = targets(train["train_manifest"][0]), targets(train["val_manifest"][0])
    assert seen and held and not seen & held
    assert defaults_for(project, "train") == train  # the same split again, not a new one


def test_opening_the_training_tab_takes_data_prepared_since_and_leaves_a_matching_form_alone(voice, tmp_path):
    from webui.training.form_values import project_refill

    _, train, _ = voice
    ctx = _ctx(tmp_path)
    before = {**tf.default_values(), "train_manifest": ["/elsewhere/train.jsonl"], "learning_rate": 1e-3}
    values, message = project_refill(ctx, "voice", before)
    assert values is not None and values["train_manifest"] == [str(train)] and values["learning_rate"] == 1e-3
    assert "filled from project" in message
    assert project_refill(ctx, "voice", values)[0] is None  # already the project's data: nothing changes
    assert project_refill(ctx, None, before)[0] is None


def test_a_project_without_validation_data_leaves_none_of_another_in_the_form(demo_workspace, tmp_path):
    from webui.training.form_values import project_refill

    project = create_project(tmp_path, "one-recording", demo_workspace.root / "v2" / "checkpoints")
    pairs = write(project.dir("prepared") / "pairs.jsonl", '{"id": "a"}\n')  # cannot be split: stays whole
    record_step(project, "prepare", [pairs], [], {"pairs": 1})
    before = {**tf.default_values(), "train_manifest": ["/demo/train.jsonl"], "val_manifest": ["/demo/val.jsonl"]}
    values, _ = project_refill(_ctx(tmp_path), "one-recording", before)
    assert values is not None and values["train_manifest"] == [str(pairs)] and values["val_manifest"] == []


def test_a_finished_step_leaves_the_form_and_its_run_alone_while_the_project_has_nothing_prepared(
        demo_workspace, tmp_path):
    """A step of a project with no prepared data (a run ended, a tab opened) must not empty the form's data or move
    it off the run folder it shows (the stopped run's status would vanish)."""
    from webui.training.form_values import project_refill

    create_project(tmp_path, "fresh", demo_workspace.root / "v2" / "checkpoints")
    shown = {**tf.default_values(), "train_manifest": ["/demo/train.jsonl"], "output_dir": "runs/demo-run"}
    assert project_refill(_ctx(tmp_path), "fresh", shown) == (None, gr.skip())
