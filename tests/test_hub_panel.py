"""The studio's Models tab (issue 31 item 1): the needs/present table, and a download as a supervised job
against a Hub-like server on 127.0.0.1, with the typed token in the job's environment and never in its argv."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.hub_server import TOKEN, FakeHub, serve
from webui.context import StudioContext
from webui.form_inputs import InputProblem
from webui.jobs.process_tools import wait_until
from webui.jobs.report_jobs import job_result, start_job
from webui.models import models_panel


def test_the_table_lists_every_repository_with_its_licence(tmp_path):
    frame = models_panel.needs_frame(tmp_path)
    masks = frame[frame["repository"] == "amphion/MaskGCT"]
    assert list(masks["set"]) == ["indextts-2"] and "CC-BY-NC-4.0" in masks["licence"].iloc[0]
    assert all(present.startswith("0/") for present in frame["present"])
    assert frame[frame["repository"] == "IndexTeam/IndexTTS-2"]["present"].iloc[0] == "0/7"
    assert "facebook/mms-1b-all" in set(frame["repository"])
    assert models_panel.downloaded_note(tmp_path) == "Nothing downloaded into this workspace yet."


def test_argv_refusals_and_the_token_stays_out_of_argv(tmp_path):
    with pytest.raises(InputProblem, match="choose what to download"):
        models_panel.download_argv("python", "indextts-9", False, tmp_path, tmp_path / "r.json")
    with pytest.raises(InputProblem, match="export folder not found"):
        models_panel.publish_argv("python", "nowhere", "me/x", False, tmp_path, tmp_path / "r.json")
    (tmp_path / "exp").mkdir()
    with pytest.raises(InputProblem, match="no repository given"):
        models_panel.publish_argv("python", "exp", " ", False, tmp_path, tmp_path / "r.json")
    assert models_panel.token_env("  ") is None and models_panel.token_env("abc")["HF_TOKEN"] == "abc"


def test_a_download_job_fetches_a_gated_set_with_the_typed_token(tmp_path, monkeypatch):
    files = {"config.json": b'{"model_type": "wavlm"}', "model.safetensors": b"s" * 5000,
             "preprocessor_config.json": b"{}"}
    hub = FakeHub({"microsoft/wavlm-base-plus-sv": files}, gated={"microsoft/wavlm-base-plus-sv"})
    ctx = StudioContext.create(tmp_path / "ws")
    job = models_panel.DOWNLOAD_JOB
    with serve(hub) as url:
        monkeypatch.setenv("HF_ENDPOINT", url)
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
        monkeypatch.delenv("HF_TOKEN", raising=False)
        argv = models_panel.download_argv(ctx.python, "microsoft/wavlm-base-plus-sv", False, ctx.workspace,
                                          job.report_path(ctx))
        start_job(ctx, job, argv, env=models_panel.token_env(TOKEN))
        assert wait_until(lambda: job_result(ctx, job).ended, 180, interval_s=0.2)
    result = job_result(ctx, job)
    verdict, table, needs, note = models_panel.download_view_of(result, ctx.workspace)
    assert result.exit_code == 0, result.view.log
    assert sorted(table["file"]) == ["config.json", "model.safetensors", "preprocessor_config.json"]
    assert "3 files, 3 downloaded" in verdict and "data-done" in result.view.progress
    assert needs[needs["repository"] == "microsoft/wavlm-base-plus-sv"]["present"].iloc[0] == "2/2"
    assert note.startswith("Downloaded: microsoft/wavlm-base-plus-sv `") and "incomplete" not in note
    record = (ctx.job_dir(job.name) / "run.json").read_text(encoding="utf-8")
    assert TOKEN not in record and TOKEN not in " ".join(result.argv)
    assert os.environ.get("HF_TOKEN") is None  # the studio's own environment is untouched


def test_the_models_tab_builds(tmp_path):
    from webui import studio

    blocks = studio.build_studio(StudioContext.create(tmp_path), tabs=(("Models", "webui.models.models_panel", "tab-models"),))
    ids = {block.elem_id for block in blocks.blocks.values() if getattr(block, "elem_id", None)}
    assert {"models-needs", "models-download", "models-download-job-status", "models-publish", "models-repo"} <= ids
    assert Path(tmp_path / "models").exists() is False  # building the tab writes nothing
