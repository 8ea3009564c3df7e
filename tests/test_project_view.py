"""The Project tab without a browser: its layout, the step view, creating a project, the next-step tab."""

from __future__ import annotations

import os
from pathlib import Path

import gradio as gr

from trainer.project import create_project, record_step


def _build(workspace: Path, project: str | None):
    from webui.context import StudioContext
    from webui.project import tab_project

    ctx = StudioContext.create(workspace)
    with gr.Blocks() as blocks:
        ctx.project_state = gr.State(project)
        with gr.Tabs() as tabs:
            ctx.tabs = tabs
            with gr.Tab("Project", id="tab-project"):
                on_select = tab_project.build(ctx)
    return blocks, on_select


def test_the_tab_builds_with_its_picker_step_view_and_next_button(demo_workspace, tmp_path: Path):
    from webui.project.tab_project import model_dir_choices

    create_project(tmp_path, "voice", demo_workspace.root / "v2" / "checkpoints")
    blocks, on_select = _build(tmp_path, "voice")
    ids = {block.elem_id: block for block in blocks.blocks.values() if getattr(block, "elem_id", None)}
    assert {"project-pick", "project-new-name", "project-new-model", "project-create", "project-steps",
            "project-next", "project-summary"} <= set(ids)
    assert ids["project-pick"].value == "voice" and callable(on_select)
    assert ids["project-next"].value == "Next: Recordings → Data tab"
    demo_choices = dict((folder, label) for label, folder in model_dir_choices(demo_workspace.root))
    assert demo_choices[str(demo_workspace.root / "v25" / "checkpoints")].endswith("(IndexTTS-2.5)")
    assert demo_choices[str(demo_workspace.root / "checkpoints")].endswith("(IndexTTS-1.5)")


def test_the_step_view_shows_states_and_the_next_steps_tab(demo_workspace, tmp_path: Path):
    from webui.project.tab_project import project_view

    project = create_project(tmp_path, "voice", demo_workspace.root / "v2" / "checkpoints")
    (project.dir("recordings") / "talk.wav").write_bytes(b"RIFF")  # recorded, then proofread and saved
    manifest = project.dir("manifests") / "manifest_20260101_000000.jsonl"
    manifest.write_text('{"id": "a"}\n', encoding="utf-8")
    pairs = project.dir("prepared") / "pairs.jsonl"
    pairs.write_text('{"id": "a"}\n', encoding="utf-8")
    record_step(project, "prepare", [pairs], [manifest])
    view = project_view(tmp_path, "voice")
    assert 'data-step="prepare" data-state="done"' in view.steps and view.next_tab == "tab-training"
    assert view.next_label == "Next: Train → Training tab" and 'data-generation="2"' in view.summary
    manifest.write_text('{"id": "a", "text": "new"}\n', encoding="utf-8")
    info = manifest.stat()
    os.utime(manifest, (info.st_atime + 5, info.st_mtime + 5))
    view = project_view(tmp_path, "voice")
    assert 'data-step="prepare" data-state="out of date"' in view.steps and view.next_tab == "tab-data"
    assert "ERROR" in project_view(tmp_path, "ghost").summary and project_view(tmp_path, "ghost").next_tab is None


def test_creating_a_project_from_the_tab(demo_workspace, tmp_path: Path):
    from webui.project.tab_project import create_action

    message, made = create_action(tmp_path, "my voice", str(demo_workspace.root / "v2" / "checkpoints"))
    assert made is None and "not a safe folder name" in message
    message, made = create_action(tmp_path, "voice", "")
    assert made is None and "pick the base model folder" in message
    message, made = create_action(tmp_path, "voice", str(demo_workspace.root / "v25" / "checkpoints"))
    assert made == "voice" and "CREATED" in message and "IndexTTS-2.5" in message
    assert (tmp_path / "projects" / "voice" / "project.json").is_file()
