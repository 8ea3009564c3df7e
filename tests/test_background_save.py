"""Checkpoint saves in the background (issue 12): snapshot first, write while training goes on, one at a time.

- The writer returns at once while the file is written; the snapshot holds the values of the save point even when
  the live tensors change afterwards; a second save waits for the first; a write stuck past its timeout is an
  error, never a wait forever; a failed write is reported, not lost in the thread.
- A SIGKILL in the middle of a background write leaves the previous checkpoint valid, the next start removes the
  half-written temp file, ``--resume auto`` continues from the previous checkpoint and the run ends bitwise equal
  to an uninterrupted one.
"""

from __future__ import annotations

import threading

import pytest
import torch

from tests.trainer_helpers import (
    assert_same_training_state,
    events,
    load,
    run_cli,
    step_losses,
    subset_manifest,
    tiny_args,
)
from trainer.checkpoints import CheckpointManager, CheckpointSaveError, verify_checkpoint
from trainer.checkpoints.writer import BackgroundWriter, snapshot

WAIT_S = 60.0  # bound on every wait in these tests


class GatedManager(CheckpointManager):
    """A manager whose writes wait for the test to open a gate (so "still writing" is a fact, not a timing)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.gate = threading.Event()
        self.writing = threading.Event()

    def save(self, ckpt, step, is_best=False):
        self.writing.set()
        assert self.gate.wait(WAIT_S), "the test never opened the gate"
        return super().save(ckpt, step, is_best=is_best)


def _ckpt(value: float) -> dict:
    return {"format_version": 2, "step": 1, "model": {"w": torch.full((4,), value)}}


def test_submit_returns_while_the_write_runs_and_the_snapshot_is_frozen(tmp_path):
    manager = GatedManager(tmp_path, keep=3)
    writer = BackgroundWriter(manager)
    live = {"model": {"w": torch.zeros(4)}, "step": 1}
    frozen = snapshot(live)
    writer.submit(frozen, 1, is_best=False)
    assert manager.writing.wait(WAIT_S)
    assert writer.poll() is None and writer.busy  # training would go on here
    live["model"]["w"].add_(5.0)  # the next optimizer step changes the live tensors in place
    manager.gate.set()
    result = writer.wait()
    assert result is not None and result.error is None and result.step == 1
    saved = torch.load(result.path, weights_only=True)
    assert torch.equal(saved["model"]["w"], torch.zeros(4))  # what the save point held
    assert (tmp_path / "latest.pth").exists() and writer.poll() is None and not writer.busy


def test_a_second_save_waits_for_the_first_and_returns_its_result(tmp_path):
    manager = GatedManager(tmp_path, keep=3)
    writer = BackgroundWriter(manager)
    writer.submit(_ckpt(1.0), 1, is_best=False)
    assert manager.writing.wait(WAIT_S)
    opened = threading.Timer(0.05, manager.gate.set)  # opens the gate while submit() is blocked on the first write
    opened.start()
    previous = writer.submit(_ckpt(2.0), 2, is_best=True)
    assert previous is not None and previous.step == 1 and previous.error is None
    last = writer.wait()
    assert last is not None and last.step == 2 and last.is_best
    assert [p.name for p in sorted(tmp_path.glob("model_step*.pth"))] == ["model_step1.pth", "model_step2.pth"]


def test_a_stuck_write_is_an_error_after_its_timeout_and_a_failed_one_is_reported(tmp_path):
    manager = GatedManager(tmp_path, keep=3)
    writer = BackgroundWriter(manager, timeout_s=0.2)
    writer.submit(_ckpt(1.0), 1, is_best=False)
    with pytest.raises(CheckpointSaveError, match="still running after 0 s"):
        writer.wait()
    manager.gate.set()
    assert writer.wait(WAIT_S).error is None

    class Broken(CheckpointManager):
        def save(self, ckpt, step, is_best=False):
            raise OSError("the disk went away")

    broken = BackgroundWriter(Broken(tmp_path, keep=3))
    broken.submit(_ckpt(1.0), 3, is_best=False)
    result = broken.wait()
    assert result.path is None and "checkpoint for step 3 not saved: OSError: the disk went away" in result.error


@pytest.fixture(scope="module")
def data(demo_workspace, tmp_path_factory):
    root = tmp_path_factory.mktemp("bgsave")
    return {"train": subset_manifest(demo_workspace.train_manifest, root / "train.jsonl", 10),
            "val": subset_manifest(demo_workspace.val_manifest, root / "val.jsonl", 4)}


def test_a_kill_during_a_background_write_keeps_the_previous_checkpoint_and_resume_uses_it(demo_workspace, data,
                                                                                         tmp_path):
    reference = tmp_path / "reference"
    done = run_cli(tiny_args(demo_workspace, data, reference, max_steps=6))
    assert done.returncode == 0, done.stderr

    out = tmp_path / "run"
    argv = tiny_args(demo_workspace, data, out, max_steps=6)
    killed = run_cli(argv, env={"STUDIO_TEST_KILL_DURING_SAVE_AT_STEP": "4"})
    assert killed.returncode == -9, killed.stderr
    assert [e["step"] for e in events(out, "save")] == [2]  # step 4's save never committed
    assert load(out / "latest.pth")["step"] == 2 and verify_checkpoint(out / "latest.pth").verdict == "COMPLETE"
    assert not (out / "model_step4.pth").exists()
    assert len(list(out.glob(".model_step4.pth.*.tmp"))) == 1  # the half-written file

    resumed = run_cli(argv)
    assert resumed.returncode == 0, resumed.stderr
    assert "removed .model_step4.pth." in resumed.stdout and "resumed from" in resumed.stdout
    assert "at step 2" in resumed.stdout
    assert not list(out.glob(".*.tmp"))
    assert_same_training_state(load(out / "latest.pth"), load(reference / "latest.pth"))
    assert step_losses(out) == step_losses(reference)
    assert [e["step"] for e in events(out, "save")] == [2, 4, 6]
