"""What the Training tab shows: metrics curves read incrementally, progress/ETA, pre-flight, the live view."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from webui.metrics_view import MetricsReader, Series, format_duration, progress_html
from webui.preflight_view import PreflightResult, parse_report, preflight_html
from webui.process_tools import wait_until
from webui.run_record import read_record

FAKE = Path(__file__).resolve().parent / "fake_trainer.py"


def append(path: Path, *events: dict, raw: str = "") -> None:
    with open(path, "a", encoding="utf-8") as handle:
        handle.write("".join(json.dumps(e) + "\n" for e in events) + raw)


def train_event(step: int, **extra) -> dict:
    return {"event": "train", "step": step, "epoch": 0, "text_loss": 5.0 / step, "mel_loss": 7.0 / step,
            "mel_top1": 0.01 * step, "lr": 1e-3, "total_steps": 100, "eta_s": 90.0, "tokens_per_s": 1234.0,
            **extra}


def test_metrics_are_read_incrementally_and_survive_torn_and_rewritten_files(tmp_path: Path) -> None:
    metrics = tmp_path / "metrics.jsonl"
    reader = MetricsReader(tmp_path)
    assert not reader.poll() and reader.loss_frame().empty
    append(metrics, {"event": "start", "step": 0, "epoch": 0}, train_event(1), train_event(2),
           raw='{"event": "train", "step": 3, "te')  # a line still being written
    assert reader.poll()
    frame = reader.loss_frame()
    assert sorted(frame["series"].unique()) == ["train mel_loss", "train text_loss"]
    assert frame["step"].max() == 2 and reader.last_train["step"] == 2
    append(metrics, raw='xt_loss": 1.0}\n')
    append(metrics, {"event": "val", "step": 3, "epoch": 0, "text_loss": 1.0, "mel_loss": 2.0, "mel_top1": 0.5})
    assert reader.poll()
    assert "val mel_loss" in set(reader.loss_frame()["series"]) and reader.last_train["step"] == 3
    assert list(reader.top1_frame()["series"].unique()) == ["train mel_top1", "val mel_top1"]
    assert not reader.poll()  # nothing new: nothing re-read

    # The trainer rewrites metrics.jsonl when it resumes from an earlier step (a new file): start over.
    replacement = tmp_path / "metrics.new"
    append(replacement, train_event(1))
    os.replace(replacement, metrics)
    assert reader.poll() and reader.loss_frame()["step"].max() == 1


def test_series_memory_is_bounded() -> None:
    series = Series(max_points=100)
    for step in range(100_000):
        series.add(step, float(step))
    assert len(series.steps) <= 100 and series.steps[0] == 0 and series.steps[-1] > 99_000


def test_plot_frames_are_capped_and_keep_the_last_point(tmp_path: Path) -> None:
    append(tmp_path / "metrics.jsonl", *(train_event(step) for step in range(1, 1001)))
    reader = MetricsReader(tmp_path)
    reader.poll()
    frame = reader.frame(("train mel_loss",), max_points=50)
    assert len(frame) == 50 and frame["step"].iloc[0] == 1 and frame["step"].iloc[-1] == 1000


def test_progress_bar_and_eta() -> None:
    running = progress_html(train_event(25, eta_s=3725.0), running=True)
    assert 'data-step="25"' in running and "25 / 100 (25%)" in running and "ETA 1h 02m" in running
    assert "epoch 1" in running  # metrics count epochs from 0, people from 1
    assert "ETA" not in progress_html(train_event(25), running=False)
    assert "no training metrics yet" in progress_html(None, running=True)
    assert format_duration(65) == "1m 05s" and format_duration(None) == "?"


def test_preflight_report_rendering() -> None:
    report = parse_report({"ok": True, "checks": [{"name": "manifests", "ok": True, "message": "296 items"}],
                           "resume_step": 40, "resume_epoch": 1, "resume_path": "/r/latest.pth"}, 0)
    assert report.resume_line == "will resume from step 40, epoch 1 (/r/latest.pth)"
    page = preflight_html(report)
    assert 'data-ok="true"' in page and "will resume from step 40" in page and "296 items" in page
    fresh = parse_report({"ok": True, "checks": [], "resume_step": None}, 0)
    assert fresh.resume_line == "fresh start (step 0)"
    failed = preflight_html(PreflightResult(ok=False, error="error: --train-manifest x.jsonl not found",
                                            exit_code=2))
    assert 'data-ok="false"' in failed and "x.jsonl not found" in failed and "(exit 2)" in failed


@pytest.mark.slow
def test_preflight_of_the_demo_workspace_in_a_subprocess(demo_workspace) -> None:
    from trainer.options import parse_argv
    from webui.preflight_view import run_preflight

    values = parse_argv(demo_workspace.train_argv())
    values["output_dir"] = str(Path(values["output_dir"]).parent / "preflight-test")
    result = run_preflight(values, timeout_s=240)
    assert result.ok, (result.error, result.checks)
    assert result.resume_step is None and result.checks


def test_live_view_streams_and_a_new_session_sees_the_run_again(tmp_path: Path) -> None:
    import gradio as gr

    from webui.context import StudioContext
    from webui.tab_training import TRAIN_LABEL, latest_training_run, poll_view

    ctx = StudioContext.create(tmp_path)
    out = tmp_path / "runs" / "fake"
    supervisor = ctx.registry.get(out)
    supervisor.start([sys.executable, str(FAKE), "--output-dir", str(out)], label=TRAIN_LABEL)
    try:
        state: dict = {"view": None, "log": "", "loss": None}

        def tick() -> bool:
            view, _status, _progress, log, loss, *_ = poll_view(ctx, state["view"], str(out))
            state["view"] = view
            if not isinstance(log, dict) or log.get("__type__") != "update":
                state["log"] = log
            if isinstance(loss, dict) and "value" in loss:
                state["loss"] = loss
            return "step 3 " in state["log"] and state["loss"] is not None

        assert wait_until(tick, 20)
        assert "fake trainer pid" in state["log"]

        # A page reload (a new session with no view) shows the same run's log again.
        reloaded = poll_view(ctx, None, str(out))
        assert "fake trainer pid" in reloaded[3] and reloaded[0].run_id == read_record(out)["run_id"]
        assert latest_training_run(ctx).run_id == reloaded[0].run_id
    finally:
        supervisor.stop(grace_s=20)
    final = poll_view(ctx, state["view"], str(out))
    assert "stopped, saved at step" in final[1] and "stopped by signal" in final[3]
    again = poll_view(ctx, final[0], str(out))  # nothing changed: nothing is resent to the browser
    assert again[1:7] == (gr.skip(),) * 6
    assert final[8] == gr.update(value=2.0) and again[8] == gr.skip()  # the timer slows down once, when idle


def test_resume_dropdown_lists_checkpoints_newest_first(tmp_path: Path) -> None:
    import torch

    from webui.tab_training import checkpoint_choices

    out = tmp_path / "run"
    out.mkdir()
    for step in (10, 20):
        torch.save({"step": step, "model": {}}, out / f"model_step{step}.pth")
    (out / "latest.pth").write_bytes(b"torn")
    choices = checkpoint_choices(str(out))
    assert choices[0][1] == "auto"
    values = [value for _, value in choices[1:]]
    assert values[:2] == [str(out / "model_step20.pth"), str(out / "model_step10.pth")]
    labels = dict((value, label) for label, value in choices)
    assert "step 20" in labels[str(out / "model_step20.pth")]
    assert "INVALID" in labels[str(out / "latest.pth")]
    assert checkpoint_choices(str(tmp_path / "missing")) == choices[:1]
