"""Training the demo workspace for 60 steps on CPU lowers the validation loss; the logs hold every step."""

from __future__ import annotations

import pytest

from tests.trainer_helpers import events, run_main

STEPS = 60


@pytest.fixture(scope="module")
def demo_run(demo_workspace, tmp_path_factory):
    out = tmp_path_factory.mktemp("demo-run") / "run"
    argv = demo_workspace.train_argv(max_steps=STEPS)
    flag = argv.index("--output-dir")
    argv[flag + 1] = str(out)
    argv += ["--batch-size", "4", "--log-interval", "10", "--val-interval", "20", "--save-interval", "30",
             "--max-val-batches", "3", "--num-workers", "0"]
    assert run_main(argv) == 0
    return out


def test_validation_loss_falls(demo_run):
    val = events(demo_run, "val")
    assert [e["step"] for e in val] == [20, 40, 60]
    assert val[-1]["loss"] < val[0]["loss"] - 0.2
    assert val[-1]["mel_top1"] > val[0]["mel_top1"]
    train = events(demo_run, "train")
    assert train[-1]["loss"] < train[0]["loss"]


def test_metrics_jsonl_has_the_contract_fields(demo_run):
    kinds = [e["event"] for e in events(demo_run)]
    assert kinds[0] == "start" and kinds[-1] == "end"
    train = events(demo_run, "train")
    assert [e["step"] for e in train] == list(range(10, STEPS + 1, 10))
    for event in train:
        for key in ("text_loss", "mel_loss", "mel_top1", "lr", "tokens_per_s", "eta_s", "total_steps", "epoch",
                    "time"):
            assert key in event, key
        assert event["total_steps"] == STEPS and event["tokens_per_s"] > 0
        assert sorted(map(int, event["losses"])) == list(range(event["step"] - 9, event["step"] + 1))
    saves = {e["step"] for e in events(demo_run, "save")}
    bests = {e["step"] for e in events(demo_run, "val") if e["best"]}
    assert saves == {30, 60} | bests and 20 in bests
    assert events(demo_run, "end")[0]["status"] == "completed"


def test_tensorboard_events_hold_the_logged_steps(demo_run):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    (run_dir,) = (demo_run / "logs").iterdir()
    acc = EventAccumulator(str(run_dir))
    acc.Reload()
    logged = [e["step"] for e in events(demo_run, "train")]
    for tag in ("train/text_loss", "train/mel_loss", "train/mel_top1", "train/lr"):
        assert [s.step for s in acc.Scalars(tag)] == logged, tag
    for tag in ("val/loss", "val/text_loss", "val/mel_loss", "val/mel_top1"):
        assert [s.step for s in acc.Scalars(tag)] == [20, 40, 60], tag
    by_step = {e["step"]: e for e in events(demo_run, "val")}
    for scalar in acc.Scalars("val/mel_loss"):
        assert scalar.value == pytest.approx(by_step[scalar.step]["mel_loss"], rel=1e-6)
