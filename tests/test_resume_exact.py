"""Exact resume (issue 3): interrupted-and-resumed runs end bitwise equal to an uninterrupted one.

Data: 12 short demo items, batch 2, grad accumulation 2 -> 6 batches = 3 optimizer steps per epoch,
8 steps, a save every 2 steps and a validation every 4. Every run is a real process (the same thread
settings as each other); interruptions come from the trainer's test hooks, never from sleeps:
``STUDIO_TEST_KILL_AFTER_STEP`` (SIGKILL itself) and ``STUDIO_TEST_STOP_AFTER_STEP`` (SIGINT itself).
"""

from __future__ import annotations

import pytest

from tests.trainer_helpers import (
    assert_same_training_state,
    events,
    load,
    run_cli,
    step_losses,
    subset_manifest,
    tiny_args,
)

STEPS = 8


@pytest.fixture(scope="module")
def exact_data(demo_workspace, tmp_path_factory):
    root = tmp_path_factory.mktemp("exact")
    return {
        "train": subset_manifest(demo_workspace.train_manifest, root / "train.jsonl", 12),
        "val": subset_manifest(demo_workspace.val_manifest, root / "val.jsonl", 4),
    }


def args(ws, data, out, **overrides):
    return tiny_args(ws, data, out, max_steps=STEPS, grad_accumulation=2, val_interval=4, **overrides)


@pytest.fixture(scope="module")
def reference(demo_workspace, exact_data, tmp_path_factory):
    out = tmp_path_factory.mktemp("reference") / "run"
    proc = run_cli(args(demo_workspace, exact_data, out))
    assert proc.returncode == 0, proc.stderr
    return out


def test_reference_run_shape(reference):
    final = load(reference / "latest.pth")
    assert final["step"] == STEPS
    assert (final["epoch"], final["position"]) == (2, 4)  # 8 steps = 2 epochs of 3 steps + 2 steps (4 batches)
    assert sorted(step_losses(reference)) == list(range(1, STEPS + 1))
    assert [e["step"] for e in events(reference, "val")] == [4, 8]


def test_sigkill_mid_epoch_then_resume_auto(demo_workspace, exact_data, reference, tmp_path):
    out = tmp_path / "run"
    argv = args(demo_workspace, exact_data, out, num_workers=1)  # workers too: they must die with the trainer
    killed = run_cli(argv, env={"STUDIO_TEST_KILL_AFTER_STEP": "5"})
    assert killed.returncode == -9
    interrupted = load(out / "latest.pth")
    assert (interrupted["step"], interrupted["epoch"], interrupted["position"]) == (4, 1, 2)  # mid-epoch

    resumed = run_cli(argv)
    assert resumed.returncode == 0, resumed.stderr
    assert f"resumed from {out / 'latest.pth'} at step 4, epoch 1, position 2" in resumed.stdout
    assert_same_training_state(load(out / "latest.pth"), load(reference / "latest.pth"))
    expected = step_losses(reference)
    got = step_losses(out)
    assert {s: got[s] for s in range(5, STEPS + 1)} == {s: expected[s] for s in range(5, STEPS + 1)}
    # the killed run's events after its last save were dropped on resume: one event per step remains
    assert [e["step"] for e in events(out, "train")] == list(range(1, STEPS + 1))


def test_sigint_mid_epoch_then_sigkill_at_epoch_boundary(demo_workspace, exact_data, reference, tmp_path):
    out = tmp_path / "run"
    argv = args(demo_workspace, exact_data, out)
    stopped = run_cli(argv, env={"STUDIO_TEST_STOP_AFTER_STEP": "5"})
    assert stopped.returncode == 130, stopped.stderr
    assert f"stopped by signal at step 5; saved {out / 'latest.pth'}" in stopped.stdout
    at_stop = load(out / "latest.pth")
    assert (at_stop["step"], at_stop["epoch"], at_stop["position"]) == (5, 1, 4)
    assert events(out)[-1]["event"] == "end" and events(out)[-1]["status"] == "stopped"

    killed = run_cli(argv, env={"STUDIO_TEST_KILL_AFTER_STEP": "7"})
    assert killed.returncode == -9
    assert "at step 5, epoch 1, position 4" in killed.stdout
    boundary = load(out / "latest.pth")
    assert (boundary["step"], boundary["epoch"], boundary["position"]) == (6, 2, 0)  # an epoch boundary

    resumed = run_cli(argv)
    assert resumed.returncode == 0, resumed.stderr
    assert "at step 6, epoch 2, position 0" in resumed.stdout
    assert_same_training_state(load(out / "latest.pth"), load(reference / "latest.pth"))
    assert step_losses(out) == step_losses(reference)
