"""The Checkpoints and Models tabs take from the project what the studio knows (no browser): the project's newest
run, its export folder, the run's config, the downloaded recogniser, the project's exports to publish."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainer.project import create_project
from webui.checkpoints.checkpoints_project import (
    downloaded_speech_model,
    newest_project_run,
    project_export_dir,
    run_config,
    run_of_project,
)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def trained(demo_workspace, tmp_path: Path):
    """The project 'voice' on the demo's IndexTTS2 folder with one run (its options file and a checkpoint)."""
    project = create_project(tmp_path, "voice", demo_workspace.root / "v2" / "checkpoints")
    run = project.dir("runs") / "run1"
    config = project.model_path / "config.yaml"
    write(run / "train_config.yaml", f"config: {config}\nmax_steps: 2\n")
    write(run / "latest.pth", "weights")
    return project, run, config


def test_a_project_checkpoint_exports_into_the_projects_exports_folder(trained, tmp_path: Path):
    project, run, config = trained
    assert run_of_project(run, project) and newest_project_run(project) == str(run)
    target = Path(project_export_dir(run / "latest.pth", project))
    assert target == project.dir("exports") / "run1_latest"
    write(target / "gpt.pth", "exported")  # an earlier export holds it: the next one gets its own folder
    assert Path(project_export_dir(run / "latest.pth", project)) == project.dir("exports") / "run1_latest_2"
    elsewhere = write(tmp_path / "runs" / "other" / "latest.pth", "weights")
    assert project_export_dir(elsewhere, project) == "" and not run_of_project(elsewhere.parent, project)
    assert project_export_dir(run / "latest.pth", None) == ""
    assert Path(run_config(run / "latest.pth")) == config and run_config(elsewhere) == ""


def test_evaluate_starts_from_the_downloaded_recogniser_and_publish_from_the_projects_export(trained, tmp_path):
    from trainer.models.record import MODELS_DIR, write_record
    from webui.checkpoints.scores import run_defaults
    from webui.models.models_panel import export_folders

    project, run, _ = trained
    assert downloaded_speech_model(tmp_path, "asr") == "" and run_defaults(str(run), tmp_path)[1] == ""
    folder = tmp_path / MODELS_DIR / "speech" / "some--ctc"
    write_record(folder, {"set": "some/ctc", "title": "some/ctc", "kind": "asr", "complete": True})
    assert downloaded_speech_model(tmp_path, "asr") == str(folder)
    assert downloaded_speech_model(tmp_path, "speaker") == ""
    assert run_defaults(str(run), tmp_path)[1:] == (str(folder), "")  # the run names none: the downloaded one
    write(run / "train_config.yaml", "eval_asr: facebook/mms-1b-all\n")
    assert run_defaults(str(run), tmp_path)[1] == "facebook/mms-1b-all"  # the run's own comes first

    export = write(project.dir("exports") / "run1_latest" / "MODEL_CARD.md", "card").parent
    assert export_folders(tmp_path) == [str(export)]
