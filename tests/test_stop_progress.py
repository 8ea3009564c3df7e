"""The progress bar names the step the log names (issue 28: it said 55 while the log said "stopped at step 59"):
the trainer logs train lines every --log-interval steps, but a save, a stop and the end name later steps."""

from __future__ import annotations

import json
from pathlib import Path

from webui.training.metrics_view import MetricsReader, progress_html


def _write(path: Path, *events: dict) -> None:
    with open(path, "a", encoding="utf-8") as handle:
        for event in events:
            handle.write(json.dumps(event) + "\n")


def test_progress_follows_the_save_stop_and_end_after_the_last_train_line(tmp_path: Path) -> None:
    metrics = tmp_path / "metrics.jsonl"
    train = {"event": "train", "step": 55, "epoch": 2, "total_steps": 100, "eta_s": 40.0}
    _write(metrics, {"event": "start", "step": 0, "epoch": 0}, train)
    reader = MetricsReader(tmp_path)
    reader.poll()
    assert 'data-step="55"' in progress_html(reader.progress_event, running=True)
    _write(metrics, {"event": "stop", "step": 59, "epoch": 2}, {"event": "save", "step": 59, "epoch": 2},
           {"event": "eval", "step": 0, "epoch": 0, "model": "base", "cer": 0.1},  # another process, an older step
           {"event": "end", "step": 59, "epoch": 2, "status": "stopped"})
    reader.poll()
    shown = progress_html(reader.progress_event, running=False)
    assert 'data-step="59"' in shown and "step 59 / 100" in shown
    assert reader.last_train["step"] == 55  # the losses shown are still the last train line's


def test_a_resume_counts_from_its_own_step(tmp_path: Path) -> None:
    _write(tmp_path / "metrics.jsonl", {"event": "train", "step": 10, "epoch": 0, "total_steps": 20},
           {"event": "resume", "step": 6, "epoch": 0}, {"event": "train", "step": 8, "epoch": 0, "total_steps": 20})
    reader = MetricsReader(tmp_path)
    reader.poll()
    assert reader.progress_event["step"] == 8
