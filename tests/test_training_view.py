"""What the Training tab shows: metrics curves read incrementally, progress/ETA, pre-flight, the live view."""

from __future__ import annotations

import html
import itertools
import json
import os
import re
import shlex
import sys
from pathlib import Path

import pytest

from webui.jobs.process_tools import wait_until
from webui.jobs.run_record import read_record
from webui.training.metrics_view import MetricsReader, Series, format_duration, progress_html
from webui.training.preflight_view import PreflightResult, parse_report, preflight_html

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
    from trainer.options_parser import parse_argv
    from webui.training.preflight_view import run_preflight

    values = parse_argv(demo_workspace.train_argv())
    values["output_dir"] = str(Path(values["output_dir"]).parent / "preflight-test")
    result = run_preflight(values, timeout_s=240)
    assert result.ok, (result.error, result.checks)
    assert result.resume_step is None and result.checks


def test_live_view_streams_and_a_new_session_sees_the_run_again(tmp_path: Path) -> None:
    import gradio as gr

    from webui.context import StudioContext
    from webui.jobs.run_view import poll_view
    from webui.training.form_values import latest_training_run
    from webui.training.run_start import TRAIN_LABEL

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

    from webui.training.checkpoint_labels import checkpoint_choices

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
    assert "unreadable" in labels[str(out / "latest.pth")]
    assert checkpoint_choices(str(tmp_path / "missing")) == choices[:1]


def test_resume_choices_name_each_checkpoints_model_from_its_metadata(demo_workspace, tmp_path: Path) -> None:
    import shutil

    from generations.indextts2.demo.build import DemoPaths as DemoV2Paths
    from webui.training.checkpoint_labels import checkpoint_choices

    out = tmp_path / "run"
    out.mkdir()
    shutil.copy(DemoV2Paths.under(demo_workspace.root).base_checkpoint, out / "model_step5.pth")
    shutil.copy(demo_workspace.base_checkpoint, out / "model_step3.pth")
    labels = [label for label, _ in checkpoint_choices(str(out))[1:]]
    assert "IndexTTS2" in labels[0] and "model_step5.pth" in labels[0]
    assert "IndexTTS-1.5" in labels[1] and "model_step3.pth" in labels[1]


def test_the_config_decides_the_version_badge_and_the_fields(demo_workspace, tmp_path: Path) -> None:
    from generations.indextts2.demo.build import DemoPaths as DemoV2Paths
    from webui.training.tab_training import VERSIONED, version_view

    badge, *updates = version_view(str(DemoV2Paths.under(demo_workspace.root).config))
    fields = dict(zip(VERSIONED, updates))
    assert 'data-version="2"' in badge and "IndexTTS2 GPT" in badge and 'data-tone="ok"' in badge
    assert fields["train_manifest"]["label"] == "Training data * (IndexTTS2 paired manifest)"
    assert fields["vocoder"]["interactive"] is False and "not used for IndexTTS2" in fields["vocoder"]["info"]
    assert fields["sample_model_dir"]["interactive"] and fields["sample_steps"]["interactive"]

    badge, *updates = version_view(str(demo_workspace.config))
    fields = dict(zip(VERSIONED, updates))
    assert 'data-version="1.5"' in badge and "IndexTTS-1.5 GPT" in badge
    assert fields["val_manifest"]["label"] == "Validation data (IndexTTS-1.5 codes manifest)"
    assert fields["vocoder"]["interactive"] and not fields["sample_model_dir"]["interactive"]

    newer = tmp_path / "config_25.yaml"
    newer.write_text(demo_workspace.config.read_text(encoding="utf-8") + "\nversion: 2.5\n", encoding="utf-8")
    badge, *_ = version_view(str(newer))
    assert "not trainable here" in badge and "IndexTTS-2.5" in badge and 'data-tone="error"' in badge
    badge, *updates = version_view(str(tmp_path / "missing.yaml"))
    assert 'data-version=""' in badge and "config file not found" in badge
    assert dict(zip(VERSIONED, updates))["train_manifest"]["label"] == "Training data *"


# -- the page never shows a stale or false state ------------------------------------------------------------
def _demo_values(tmp_path: Path, out: Path) -> dict:
    from webui.training import training_form as tf

    files = tf.WorkspaceFiles(train_manifest=tmp_path / "t.jsonl", val_manifest=tmp_path / "v.jsonl",
                              tokenizer=tmp_path / "t.model", config=tmp_path / "c.yaml",
                              base_checkpoint=tmp_path / "g.pth", output_dir=out)
    return tf.workspace_values(files)


def _fake_trainer_argv(monkeypatch, *flags: str) -> None:
    """Make Start run the fake trainer (with the form's --output-dir) instead of ``python -m trainer.train``."""
    from webui.training import training_form

    def argv(values: dict, python: str = sys.executable) -> list[str]:
        return [python, str(FAKE), "--output-dir", str(values["output_dir"]), *flags]

    monkeypatch.setattr(training_form, "trainer_argv", argv)


def test_start_shows_the_argv_it_started_and_a_refused_start_keeps_the_badge(tmp_path: Path, monkeypatch) -> None:
    import gradio as gr

    from webui.context import StudioContext
    from webui.training.run_start import start_run

    _fake_trainer_argv(monkeypatch)
    ctx = StudioContext.create(tmp_path)
    out = tmp_path / "runs" / "a"
    values = _demo_values(tmp_path, out)
    try:
        first = start_run(ctx, values)
        record = read_record(out)
        started = shlex.join(record["argv"])
        assert first.command == started and first.message == ""
        assert 'data-state="running"' in first.status and html.escape(started) in first.status
        second = start_run(ctx, values)  # a second Start on the same output dir is refused
        assert second.status == gr.skip()  # the RUNNING badge of the first run stays
        assert "in use by a running process" in second.message and read_record(out)["run_id"] == record["run_id"]
        missing = start_run(ctx, {**values, "tokenizer": ""})
        assert missing.status == gr.skip() and "required: --tokenizer" in missing.message
        broken = start_run(ctx, None, form_error="--epochs: expected a whole number, got 1.5")
        assert broken.status == gr.skip() and "--epochs" in broken.message
    finally:
        ctx.registry.get(out).stop(grace_s=20)


def test_a_preflight_report_about_another_command_does_not_stay(tmp_path: Path, monkeypatch) -> None:
    import gradio as gr

    from webui.context import StudioContext
    from webui.training.run_start import form_changed, start_run

    values = _demo_values(tmp_path, tmp_path / "runs" / "a")
    command = form_changed(values, None)[0]
    assert form_changed(values, None)[1:] == (gr.skip(), gr.skip())  # no report on the page: nothing to clear
    assert form_changed(values, command)[1:] == (gr.skip(), gr.skip())  # the report is about this command
    other = {**values, "output_dir": str(tmp_path / "runs" / "b")}
    assert form_changed(other, command)[1:] == ("", None)  # another output dir: the report goes

    _fake_trainer_argv(monkeypatch)
    ctx = StudioContext.create(tmp_path)
    try:
        started = start_run(ctx, other, preflight_for=command)
        assert started.preflight_report == "" and started.preflight_for is None
    finally:
        ctx.registry.get(other["output_dir"]).stop(grace_s=20)


def test_after_a_finished_run_resume_is_unticked_and_the_old_report_cleared(tmp_path: Path) -> None:
    import gradio as gr

    from webui.context import StudioContext
    from webui.jobs.run_view import poll_view

    ctx = StudioContext.create(tmp_path)
    out = tmp_path / "runs" / "a"
    ctx.registry.get(out).start([sys.executable, str(FAKE), "--output-dir", str(out), "--steps", "3"], label="train")
    first = poll_view(ctx, None, str(out), resume_ticked=True)
    assert first.resume == gr.skip() and first.preflight_report == gr.skip()
    ticks = [first]

    def ended() -> bool:
        ticks.append(poll_view(ctx, ticks[-1].view, str(out), resume_ticked=True))
        return 'data-state="finished"' in str(ticks[-1].status)

    assert wait_until(ended, 20)
    last = ticks[-1]
    assert last.resume is False  # "will resume from step 12" must not stay ticked under a finished run
    assert last.preflight_report == "" and last.preflight_for is None
    later = poll_view(ctx, last.view, str(out), resume_ticked=False)
    assert later.resume == gr.skip() and later.preflight_report == gr.skip()


def test_a_stopped_run_keeps_resume_but_not_the_old_report(tmp_path: Path) -> None:
    import gradio as gr

    from webui.context import StudioContext
    from webui.jobs.run_view import poll_view

    ctx = StudioContext.create(tmp_path)
    out = tmp_path / "runs" / "a"
    supervisor = ctx.registry.get(out)
    supervisor.start([sys.executable, str(FAKE), "--output-dir", str(out)], label="train")
    view = poll_view(ctx, None, str(out), resume_ticked=True).view
    assert wait_until(lambda: "step 1 " in supervisor.read_log(0)[0], 20)  # its signal handlers are in place
    supervisor.stop(grace_s=20)
    tick = poll_view(ctx, view, str(out), resume_ticked=True)
    assert 'data-state="stopped"' in tick.status and tick.resume == gr.skip() and tick.preflight_report == ""


def test_the_progress_bar_never_lags_the_log(tmp_path: Path) -> None:
    from webui.context import StudioContext
    from webui.jobs.run_view import poll_view

    ctx = StudioContext.create(tmp_path)
    out = tmp_path / "runs" / "a"
    supervisor = ctx.registry.get(out)
    supervisor.start([sys.executable, str(FAKE), "--output-dir", str(out), "--steps", "40", "--interval", "0.02"],
                     label="train")
    state = {"view": None, "progress": 0, "log": "", "checked": 0}

    def tick() -> bool:
        result = poll_view(ctx, state["view"], str(out))
        state["view"] = result.view
        if isinstance(result.progress, str):
            found = re.search(r'data-step="(\d*)"', result.progress)
            state["progress"] = int(found.group(1) or 0)
        if isinstance(result.log, str):
            state["log"] = result.log
        logged = [int(n) for n in re.findall(r"^step (\d+) ", state["log"], flags=re.MULTILINE)]
        assert state["progress"] >= (logged[-1] if logged else 0), (state["progress"], logged[-1:])
        state["checked"] += 1
        return not supervisor.poll().running and state["progress"] == 40

    assert wait_until(tick, 30, interval_s=0.01)
    assert state["checked"] > 5


def test_eta_is_smoothed_over_train_events(tmp_path: Path) -> None:
    speeds = [1.0, 3.0] * 10  # a noisy machine: every other log window three times slower
    append(tmp_path / "metrics.jsonl", {"event": "start", "step": 0, "epoch": 0},
           *(train_event(step, total_steps=1000, seconds_per_step=speed) for step, speed in enumerate(speeds, 1)))
    reader = MetricsReader(tmp_path)
    etas = []
    for line in (tmp_path / "metrics.jsonl").read_text().splitlines():
        reader._take(json.loads(line))
        if reader.eta_s is not None:
            etas.append(reader.eta_s)
    assert len(etas) == len(speeds)
    jumps = [max(a, b) / min(a, b) for a, b in itertools.pairwise(etas)]
    assert max(jumps) < 1.5, jumps  # the raw per-window ETA jumps threefold
    assert 1.5 < reader.seconds_per_step < 2.5  # and it settles near the mean speed
    shown = progress_html(reader.last_train, running=True, eta_s=reader.eta_s)
    assert f"ETA {format_duration(reader.eta_s)}" in shown
    append(tmp_path / "metrics.jsonl", {"event": "resume", "step": 20, "epoch": 0})
    reader.poll()
    assert reader.seconds_per_step is None  # a resumed process measures its own speed


def test_tensorboard_is_local_and_the_page_says_how_to_reach_it() -> None:
    from webui.training.tensorboard import tensorboard_html

    here = tensorboard_html("127.0.0.1", "6006", "127.0.0.1")
    assert "http://127.0.0.1:6006/" in here and "ssh" not in here
    remote = tensorboard_html("127.0.0.1", "6006", "gpu-box.lan")
    assert "ssh -N -L 6006:127.0.0.1:6006 USER@gpu-box.lan" in remote and "--tensorboard-host" in remote
    shared = tensorboard_html("127.0.0.1", "6007", "abcd.gradio.live")
    assert "gradio.live" not in shared.split("ssh", 1)[1]  # a tunnel to the share host would not work
    opened = tensorboard_html("0.0.0.0", "6006", "gpu-box.lan")
    assert "http://gpu-box.lan:6006/" in opened and "without a login" in opened
