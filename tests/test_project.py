"""Voice projects: the project file, step records and states, the hand-off to the forms, the demo's projects."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from trainer.project import (
    DONE,
    OUT_OF_DATE,
    TO_DO,
    ProjectError,
    begin_step,
    create_project,
    defaults_for,
    load_project,
    next_step,
    open_project,
    project_names,
    record_step,
    step_states,
)


def states_of(workspace: Path, name: str) -> dict[str, str]:
    return {state.step: state.state for state in step_states(open_project(workspace, name))}


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def later(path: Path, seconds: float) -> None:
    """Move a file's mtime forward (a save made after a record, without sleeping)."""
    info = path.stat()
    os.utime(path, (info.st_atime + seconds, info.st_mtime + seconds))


@pytest.fixture
def v2_project(demo_workspace, tmp_path: Path):
    """A project in a fresh workspace fine-tuning the demo's IndexTTS2 folder (the demo itself is not touched)."""
    return create_project(tmp_path, "amharic-voice", demo_workspace.root / "v2" / "checkpoints")


def test_the_project_file_records_its_model_generation_and_folders(v2_project, demo_workspace, tmp_path: Path):
    data = json.loads((tmp_path / "projects" / "amharic-voice" / "project.json").read_text(encoding="utf-8"))
    assert data["generation"] == "2" and data["model_dir"] == str((demo_workspace.root / "v2" / "checkpoints").resolve())
    assert data["folders"]["prepared"] == "prepared/2" and data["steps"] == {}
    for key in ("recordings", "ingest", "prepared", "runs", "evaluations", "exports"):
        assert v2_project.dir(key).is_dir() and v2_project.dir(key).is_relative_to(v2_project.folder)
    assert project_names(tmp_path) == ["amharic-voice"]
    again = load_project(tmp_path, "amharic-voice")
    assert again.generation_name == "IndexTTS2" and again.model_path == v2_project.model_path
    for folder, generation in (("checkpoints", "1.5"), ("v25/checkpoints", "2.5")):
        made = create_project(tmp_path, f"p{generation}", demo_workspace.root / folder)
        assert made.generation == generation and made.dir("prepared").name == generation


@pytest.mark.parametrize("name", ["", "my voice", "../up", "a/b", ".hidden", "x" * 65, "a..b"])
def test_a_name_that_is_no_safe_folder_name_is_refused_in_one_line(name, demo_workspace, tmp_path: Path):
    with pytest.raises(ProjectError) as refused:
        create_project(tmp_path, name, demo_workspace.root / "v2" / "checkpoints")
    assert "\n" not in str(refused.value)
    assert not (tmp_path / "projects").exists() or not any((tmp_path / "projects").iterdir())


def test_refusals_name_what_is_wrong(v2_project, demo_workspace, tmp_path: Path):
    with pytest.raises(ProjectError, match="exists already"):
        create_project(tmp_path, "amharic-voice", demo_workspace.root / "v2" / "checkpoints")
    with pytest.raises(ProjectError, match="base model folder not found"):
        create_project(tmp_path, "other", tmp_path / "nowhere")
    with pytest.raises(ProjectError, match="no IndexTTS model folder"):
        create_project(tmp_path, "other", v2_project.dir("exports"))
    with pytest.raises(ProjectError, match=r"no project 'nope'.*amharic-voice"):
        load_project(tmp_path, "nope")
    write(v2_project.file, "{torn")
    with pytest.raises(ProjectError, match="unreadable project file"):
        load_project(tmp_path, "amharic-voice")


def _walk_to_training(project) -> tuple[Path, Path, Path]:
    """A saved manifest, its preparation and a run trained on it, as the studio records them."""
    manifest = write(project.dir("manifests") / "manifest_20260101_000000.jsonl", '{"id": "a", "text": "ሰላም"}\n')
    project = open_project(project.workspace, project.name)  # the proofread step is read from the folder
    pairs = write(project.dir("prepared") / "pairs.jsonl", '{"id": "a"}\n')
    record_step(project, "prepare", [pairs], [manifest], {"pairs": 1})
    checkpoint = write(project.dir("runs") / "run1" / "latest.pth", "weights")
    record_step(project, "train", [checkpoint], [pairs])
    return manifest, pairs, checkpoint


def test_changing_the_saved_manifest_after_preparation_marks_prepare_and_train_out_of_date(v2_project, tmp_path):
    manifest, _, _ = _walk_to_training(v2_project)
    states = states_of(tmp_path, "amharic-voice")
    assert states == {"recordings": TO_DO, "proofread": DONE, "prepare": DONE, "train": DONE, "listen": TO_DO,
                      "export": TO_DO}
    write(manifest, '{"id": "a", "text": "ሰላም ዓለም"}\n')  # a transcript corrected by hand in the file
    later(manifest, 5)
    project = open_project(tmp_path, "amharic-voice")
    shown = {state.step: state for state in step_states(project)}
    assert shown["proofread"].state == DONE  # the manifest is the proofreading's output: recorded anew
    assert shown["prepare"].state == OUT_OF_DATE and "changed since" in shown["prepare"].note
    assert shown["train"].state == OUT_OF_DATE and "Proofread (saved manifest) produced something new" in shown["train"].note
    assert next_step(list(shown.values())).step == "recordings"


def test_a_new_saved_manifest_makes_the_preparation_out_of_date(v2_project, tmp_path):
    _walk_to_training(v2_project)
    newer = write(v2_project.dir("manifests") / "manifest_20260102_000000.jsonl", '{"id": "b", "text": "ዓለም"}\n')
    later(newer, 5)
    states = states_of(tmp_path, "amharic-voice")
    assert states["proofread"] == DONE and states["prepare"] == OUT_OF_DATE and states["train"] == OUT_OF_DATE
    assert defaults_for(load_project(tmp_path, "amharic-voice"), "prepare")["input"] == str(newer)


def test_an_output_that_is_gone_puts_the_step_back_to_do(v2_project, tmp_path):
    _, _, checkpoint = _walk_to_training(v2_project)
    checkpoint.unlink()
    project = open_project(tmp_path, "amharic-voice")
    train = next(state for state in step_states(project) if state.step == "train")
    assert train.state == TO_DO and "gone" in train.note


def test_a_preparation_started_by_the_studio_completes_when_its_report_is_written(v2_project, tmp_path):
    manifest = write(v2_project.dir("manifests") / "manifest_20260101_000000.jsonl", '{"id": "a"}\n')
    begin_step(v2_project, "prepare", [manifest], v2_project.dir("prepared"))
    assert states_of(tmp_path, "amharic-voice")["prepare"] == TO_DO
    pairs = write(v2_project.dir("prepared") / "pairs.jsonl", '{"id": "a"}\n')
    write(v2_project.dir("prepared") / "prepare_report.json",
          json.dumps({"pairs_manifest": str(pairs), "utterances": 1, "pairs": 1, "skipped": [{"where": "x"}]}))
    project = open_project(tmp_path, "amharic-voice")
    assert project.pending == {} and project.steps["prepare"]["counts"] == {"utterances": 1, "pairs": 1, "left out": 1}
    assert list(project.steps["prepare"]["inputs"]) == [project.portable(manifest)]
    assert states_of(tmp_path, "amharic-voice")["prepare"] == DONE


def test_a_run_trained_into_the_project_shows_as_its_train_step(v2_project, tmp_path):
    pairs = write(v2_project.dir("prepared") / "pairs.jsonl", '{"id": "a"}\n')
    run = v2_project.dir("runs") / "run1"
    write(run / "train_config.yaml", f"train_manifest:\n- {pairs}::am\nval_manifest: []\n")
    write(run / "latest.pth", "weights")
    project = open_project(tmp_path, "amharic-voice")
    assert project.steps["train"]["source"] == "observed"
    assert list(project.steps["train"]["inputs"]) == [project.portable(pairs)]
    assert defaults_for(project, "test")["checkpoint"] == str(run / "latest.pth")


def test_the_hand_off_fills_forms_from_the_project_and_its_model_folder(v2_project, demo_workspace, tmp_path):
    manifest, pairs, _ = _walk_to_training(v2_project)
    project = load_project(tmp_path, "amharic-voice")
    prepare = defaults_for(project, "prepare")
    folder = demo_workspace.root / "v2" / "checkpoints"
    assert prepare["input"] == str(manifest) and prepare["out_dir"] == str(project.dir("prepared"))
    assert prepare["w2v_bert"] == str((folder / "w2v-bert-2.0").resolve())  # the local copy, not the Hub id
    assert prepare["config"] == str((folder / "config.yaml").resolve())
    train = defaults_for(project, "train")
    assert train["train_manifest"] == [str(pairs)] and train["output_dir"] == str(project.dir("runs") / "run2")
    assert train["sample_model_dir"] == str(folder.resolve()) and train["base_checkpoint"].endswith("gpt.pth")
    with pytest.raises(ProjectError, match="no hand-off"):
        defaults_for(project, "dance")


def test_the_paired_preparation_forms_follow_the_project(v2_project, demo_workspace, tmp_path):
    from generations.indextts2.ui import prepare_section as paired_section
    from generations.indextts25.ui import prepare_section as table_section

    manifest, _, _ = _walk_to_training(v2_project)
    project = load_project(tmp_path, "amharic-voice")
    form = paired_section.default_form(tmp_path, project)
    assert form.input == str(manifest) and form.out_dir == str(project.dir("prepared"))
    assert form.codec.endswith("semantic_codec/model.safetensors") and Path(form.w2v_bert).is_dir()
    untouched = table_section.default_form(tmp_path, project)  # another generation's form keeps its values
    assert untouched.input == "" and untouched.config == ""
    demo25 = table_section.default_form(demo_workspace.root)  # opens filled, offline, on the demo
    assert demo25.config == str(demo_workspace.root / "v25" / "checkpoints" / "config.yaml")
    assert Path(demo25.w2v_bert).is_dir() and Path(demo25.input).is_dir()


def test_the_demo_has_a_project_per_generation_over_its_own_folders(demo_workspace):
    from demo.projects import demo_projects
    from webui.context import StudioContext

    root = demo_workspace.root
    assert set(demo_projects()) <= set(project_names(root))
    project = load_project(root, "demo-indextts2")
    assert project.dir("runs") == (root / "v2" / "runs").resolve()
    assert project.dir("prepared") == (root / "v2" / "data" / "prepared").resolve()
    assert project.dir("ingest") == (root / "ingest").resolve()
    assert {state.step: state.state for state in step_states(project)} == {
        "recordings": DONE, "proofread": TO_DO, "prepare": DONE, "train": TO_DO, "listen": TO_DO, "export": TO_DO}
    train = defaults_for(project, "train")
    assert train["train_manifest"] == [str(root / "v2" / "data" / "train_pairs.jsonl")]
    assert train["val_manifest"] == [str(root / "v2" / "data" / "val_pairs.jsonl")]
    assert load_project(root, "demo-indextts-2.5").generation == "2.5"
    assert load_project(root, "demo-indextts-1.5").tokenizer == "tokenizers/amharic_extended.model"
    assert StudioContext.create(root).default_project_name() == "demo-indextts2"


def test_a_record_another_process_wrote_meanwhile_is_kept(v2_project, tmp_path):
    stale = load_project(tmp_path, "amharic-voice")  # a page that loaded the project before the CLI wrote
    manifest = write(tmp_path / "elsewhere" / "clips.jsonl", '{"id": "a"}\n')
    record_step(load_project(tmp_path, "amharic-voice"), "proofread", [manifest], source="cli")
    pairs = write(v2_project.dir("prepared") / "pairs.jsonl", '{"id": "a"}\n')
    record_step(stale, "prepare", [pairs], [manifest])
    assert set(load_project(tmp_path, "amharic-voice").steps) == {"proofread", "prepare"} == set(stale.steps)


def test_the_paired_sections_name_their_generation_by_its_registry_id():
    from generations.registry import GENERATIONS
    from webui.data.tab_data import prepare_sections

    owned = {entry.id: entry.ui.prepare_section() for entry in GENERATIONS
             if entry.ui is not None and entry.ui.prepare_section is not None}
    assert owned and all(section.generation_id == ident for ident, section in owned.items())
    assert [section.prefix for section in prepare_sections()] == ["prep2", "prep25"]  # the Data tab's order
