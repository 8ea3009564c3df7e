"""Every form follows the session's project (issue 36): the page's load reads the project list and opens on the
project picked last, a finished step refills the forms, Listen & pick is done once a run is evaluated, and the
saved-manifest message names the project's generation. The studio is built in-process and its handlers are called
as Gradio calls them (no browser)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from trainer.project import DONE, create_project, open_project, step_states
from webui.context import StudioContext


@pytest.fixture
def workspace(demo_workspace, tmp_path: Path) -> Path:
    target = tmp_path / "workspace"
    shutil.copytree(demo_workspace.root, target, ignore=shutil.ignore_patterns("runs", "jobs"))
    return target


@pytest.fixture
def studio(workspace: Path) -> tuple[StudioContext, Any]:
    from webui.studio import build_studio

    ctx = StudioContext.create(workspace)
    return ctx, build_studio(ctx)


def _handlers(blocks: Any, target: Any, event: str) -> list[Any]:
    return [fn for fn in blocks.fns.values() if any(tuple(t)[:2] == (target._id, event) for t in fn.targets)]


def _element(blocks: Any, elem_id: str) -> Any:
    return next(block for block in blocks.blocks.values() if getattr(block, "elem_id", None) == elem_id)


def _load(ctx: StudioContext, blocks: Any) -> tuple[str | None, dict[str, Any]]:
    """What the page's load sets: (the session's project, its stamp)."""
    load = next(fn for fn in _handlers(blocks, blocks, "load") if ctx.project_stamp in fn.outputs)
    return load.fn(None)  # a fresh page: no project picked in its session yet


def _followed(ctx: StudioContext, blocks: Any, stamp: dict[str, Any], elem_id: str, *inputs: Any) -> Any:
    """The value the stamp's refresh gives the component ``elem_id``."""
    element = _element(blocks, elem_id)
    handler = next(fn for fn in _handlers(blocks, ctx.project_stamp, "change") if element in fn.outputs)
    outputs = handler.fn(stamp, *inputs)
    value = list(outputs)[handler.outputs.index(element)]
    return getattr(value, "value", value)


def test_the_page_load_reads_the_project_list_and_opens_on_a_project_created_after_the_start(studio, workspace):
    ctx, blocks = studio
    create_project(workspace, "voice-late", workspace / "v25" / "checkpoints")  # after the app was built
    name, stamp = _load(ctx, blocks)
    assert name == "voice-late" and stamp["project"] == "voice-late"
    picker = _element(blocks, "project-pick")
    handler = next(fn for fn in _handlers(blocks, ctx.project_stamp, "change") if picker in fn.outputs)
    shown = list(handler.fn(stamp))[handler.outputs.index(picker)]
    assert "voice-late" in [choice[0] for choice in shown.choices] and shown.value == "voice-late"


def test_the_page_opens_on_the_project_picked_last(studio, workspace):
    ctx, blocks = studio
    create_project(workspace, "voice-a", workspace / "v2" / "checkpoints")
    create_project(workspace, "voice-b", workspace / "v25" / "checkpoints")  # the newest project file
    picker = _element(blocks, "project-pick")
    pick = next(fn for fn in _handlers(blocks, picker, "change") if ctx.project_state in fn.outputs)
    _, stamp = _load(ctx, blocks)
    name, picked = list(pick.fn("voice-a", stamp))[:2]
    assert name == "voice-a" and picked["project"] == "voice-a"
    assert _load(ctx, blocks)[0] == "voice-a"  # a reload opens on it, not on the newest project file
    from webui.project import follow

    assert follow.opening_name(StudioContext.create(workspace)) == "voice-a"  # a restarted studio too


def _prepared_by_the_studio(ctx: StudioContext, name: str) -> Path:
    """A preparation the studio started into the project's prepared folder, whose report was then written."""
    from webui.data.prepare_section import note_preparation

    project = ctx.project(name)
    manifest = project.dir("manifests") / "manifest_20260101_000000.jsonl"
    manifest.parent.mkdir(parents=True, exist_ok=True)
    manifest.write_text('{"id": "a", "text": "ሰላም"}\n', encoding="utf-8")
    prepared = project.dir("prepared")
    assert note_preparation(ctx.project(name), str(manifest), str(prepared))
    pairs = prepared / "pairs.jsonl"
    prepared.mkdir(parents=True, exist_ok=True)
    pairs.write_text('{"id": "a"}\n', encoding="utf-8")
    report = prepared / "prepare_report.json"
    report.write_text(json.dumps({"pairs_manifest": str(pairs), "pairs": 1}), encoding="utf-8")
    from trainer.project import load_project

    later = load_project(ctx.workspace, name).pending["prepare"]["at"] + 5
    os.utime(report, (later, later))
    return pairs


def test_after_prepare_the_check_form_holds_the_projects_prepared_files(studio, workspace):
    from trainer.project import defaults_for

    ctx, blocks = studio
    create_project(workspace, "voice-a", workspace / "v2" / "checkpoints")
    name, stamp = _load(ctx, blocks)
    assert name == "voice-a"
    before = _followed(ctx, blocks, stamp, "data-train-manifests")
    assert before == ""  # the project has no prepared data yet: not the demo's
    _prepared_by_the_studio(ctx, name)
    timer = next(fn for fn in blocks.fns.values() if ctx.project_stamp in fn.outputs and fn.name == "<lambda>"
                 and any(tuple(t)[1] == "tick" for t in fn.targets))
    stepped = timer.fn(name, stamp)  # the studio's step timer sees the preparation finish
    assert isinstance(stepped, dict) and stepped["cause"] == "step"
    handed = defaults_for(ctx.project(name), "check")
    shown = _followed(ctx, blocks, stepped, "data-train-manifests")
    assert handed["train_manifest"] and shown == "\n".join(handed["train_manifest"])
    assert all(Path(p).is_relative_to(ctx.project(name).dir("prepared")) for p in handed["train_manifest"])
    assert _followed(ctx, blocks, stepped, "data-check-config") == str(workspace / "v2" / "checkpoints" / "config.yaml")
    assert "records" not in timer.fn(name, stepped)  # nothing new since: gr.skip(), the forms are left alone


def test_listen_and_pick_is_done_once_the_run_is_evaluated(workspace):
    project = create_project(workspace, "voice-a", workspace / "v2" / "checkpoints")
    run = project.dir("runs") / "run1"
    run.mkdir(parents=True)
    (run / "train_config.yaml").write_text("train_manifest: []\n", encoding="utf-8")
    (run / "model_step2.pth").write_bytes(b"weights")
    (run / "latest.pth").write_bytes(b"weights")
    states = {s.step: s.state for s in step_states(open_project(workspace, "voice-a"))}
    assert states["train"] == DONE and states["listen"] != DONE
    result = run / "model_step2.eval.json"  # what Evaluate writes beside the checkpoint
    result.write_text(json.dumps({"format": 1, "step": 2, "cer": 0.1}), encoding="utf-8")
    later = (run / "latest.pth").stat().st_mtime + 5
    os.utime(result, (later, later))
    shown = {s.step: s for s in step_states(open_project(workspace, "voice-a"))}
    assert shown["listen"].state == DONE and str(result) in shown["listen"].outputs


def test_the_saved_manifest_message_names_the_projects_generation(workspace):
    from data_tools.ingest.pipeline import IngestSettings, run_ingest
    from generations.registry import by_id
    from tests.ingest_factory import EnergyVad, FakeAsr, tone_recording
    from webui.data import proofread_panel

    project = create_project(workspace, "voice-25", workspace / "v25" / "checkpoints")
    recordings = project.dir("recordings")
    tone_recording(recordings / "spk1" / "long.wav", [2.0, 2.5], [0.8])
    run_ingest(IngestSettings(recordings, project.dir("ingest"), language="am"),
               transcriber=FakeAsr(confidence=0.7), vad_model=EnergyVad())
    message, path = proofread_panel.save_manifest(str(project.dir("ingest")), workspace)
    assert "MANIFEST SAVED" in message and path
    assert by_id(project.generation).name in message
    others = [by_id(ident).name for ident in ("2", "1.5")]
    assert not any(f"({name}" in message or f" {name})" in message for name in others), message
