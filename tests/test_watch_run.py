"""Watching a run the studio did not start: state, log, curves and progress from its folder's files, read-only."""

from __future__ import annotations

import json
import os
from pathlib import Path

import gradio as gr
import pytest

from trainer.checkpoints import OutputDirLock
from webui.jobs import launcher, watch_panel
from webui.jobs.watch import QUIET_S, WatchError, open_watch, poll_watch, run_state


def append_events(folder: Path, *events: dict) -> None:
    with open(folder / "metrics.jsonl", "a", encoding="utf-8") as handle:
        for event in events:
            handle.write(json.dumps({"epoch": 0, "time": 0.0, **event}) + "\n")


def train(step: int, loss: float) -> dict:
    return {"event": "train", "step": step, "total_steps": 10, "text_loss": loss, "mel_loss": loss + 1, "lr": 1e-3}


def rank0_log(folder: Path, launch: str, attempt: int, text: str) -> Path:
    path = folder / launcher.RANKS_DIR / launch / f"attempt_{attempt}" / "0" / "stdout.log"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def elsewhere(tmp_path: Path) -> Path:
    """The folder of a 2-node elastic run started by Slurm: metrics, and torchrun's logs with one restart."""
    folder = tmp_path / "am1"
    folder.mkdir()
    append_events(folder, {"event": "start", "step": 0, "world_size": 2}, train(1, 5.0), train(2, 4.0))
    rank0_log(folder, "4242_abc", 0, "step 1/10\nstep 2/10\n")
    return folder


def test_a_folder_that_holds_no_run_is_refused_in_one_line(tmp_path: Path) -> None:
    for text, message in (("", "enter the output folder"), (str(tmp_path / "nope"), "is not a folder"),
                          (str(tmp_path), "holds no run yet")):
        with pytest.raises(WatchError, match=message) as caught:
            open_watch(text)
        assert "\n" not in str(caught.value)


def test_a_run_started_elsewhere_shows_its_log_curves_and_progress_and_follows_a_restart(elsewhere: Path) -> None:
    watch = open_watch(str(elsewhere))
    first = poll_watch(watch)
    assert 'data-state="running"' in first.status and "read-only" in first.status
    assert 'data-step="2" data-total="10"' in first.progress
    assert first.log.endswith("step 1/10\nstep 2/10") and "attempt_0" in first.log
    assert first.metrics_changed and set(watch.metrics.loss_frame()["step"]) == {1, 2}

    assert poll_watch(watch).log is None  # nothing new: nothing sent
    written = (elsewhere / "metrics.jsonl").stat().st_mtime
    assert poll_watch(watch, now=written + 1).status is None  # seconds passing alone change nothing on the page
    assert poll_watch(watch, now=written + 59).status is None

    # A node was lost: the group's end event, torchrun's next attempt, the resume at the last checkpoint.
    append_events(elsewhere, {"event": "end", "step": 2, "status": "failed", "error": "rank 1 died"},
                  {"event": "resume", "step": 2, "world_size": 1}, train(3, 3.0))
    rank0_log(elsewhere, "4242_abc", 1, "resumed from latest.pth at step 2\nstep 3/10\n")
    after = poll_watch(watch)
    assert "attempt_1" in after.log and after.log.endswith("step 3/10")
    assert 'data-step="3"' in after.progress and after.running


def test_the_state_follows_the_folder(elsewhere: Path) -> None:
    written = (elsewhere / "metrics.jsonl").stat().st_mtime
    assert run_state(elsewhere, now=written + 1)[0] == "running"
    state, line = run_state(elsewhere, now=written + QUIET_S + 60)
    assert state == "quiet" and "without a word" in line
    with OutputDirLock(elsewhere):  # a trainer on this machine holds the folder, however quiet its metrics
        state, line = run_state(elsewhere, now=written + QUIET_S + 60)
        assert state == "running" and f"pid {os.getpid()}" in line
    append_events(elsewhere, {"event": "end", "step": 2, "status": "failed", "error": "rank 1 died"})
    written = (elsewhere / "metrics.jsonl").stat().st_mtime
    assert run_state(elsewhere, now=written + 1)[0] == "running"  # an elastic restart may follow
    state, line = run_state(elsewhere, now=written + QUIET_S + 1)
    assert state == "failed" and "rank 1 died" in line
    append_events(elsewhere, {"event": "resume", "step": 2}, {"event": "end", "step": 10, "status": "completed"})
    assert run_state(elsewhere)[0] == "finished"


def test_the_console_log_of_a_studio_run_comes_first(elsewhere: Path) -> None:
    (elsewhere / "console.log").write_text("from the studio\n", encoding="utf-8")
    assert poll_watch(open_watch(str(elsewhere))).log.endswith("from the studio")


def test_the_panel_watches_read_only(elsewhere: Path) -> None:
    with gr.Blocks() as page:
        watch_panel.build()
    stop = next(block for block in page.blocks.values() if getattr(block, "elem_id", None) == "watch-stop")
    assert stop.interactive is False

    state, status, _progress, _log, _loss, timer = watch_panel.start_watch(str(elsewhere.parent / "missing"))
    assert state is None and "error: watch:" in status and timer.active is False
    state, status, progress, log_text, loss, timer = watch_panel.start_watch(str(elsewhere))
    assert state is not None and "RUNNING" in status and "step 2 / 10" in progress and timer.active and "step 2/10" in log_text
    assert list(loss["step"].unique()) == [1, 2]
    ticked = watch_panel.tick_watch(state)
    assert all(isinstance(output, type(gr.skip())) for output in ticked[1:5])  # nothing changed: nothing sent
