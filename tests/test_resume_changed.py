"""Resume after changed settings (issue 14): a different batch size or a changed manifest continues at the
same number of samples seen, says what changed in one line, and never loops past the epoch; a position
that cannot belong to the data is refused with one line.

Every run is in-process (``run_main``) and stops itself through the trainer's own test hook after a
given step, so each finishes or refuses within seconds.
"""

from __future__ import annotations

import json

import pytest
import torch

from tests.test_train_cli import refusal
from tests.trainer_helpers import events, load, run_main, subset_manifest, tiny_args
from trainer.checkpoints import CheckpointManager
from trainer.signals import STOP_AFTER_ENV


@pytest.fixture(scope="module")
def slices(demo_workspace, tmp_path_factory):
    root = tmp_path_factory.mktemp("changed")
    return {
        "train": subset_manifest(demo_workspace.train_manifest, root / "train16.jsonl", 16),
        "small": subset_manifest(demo_workspace.train_manifest, root / "train6.jsonl", 6),
        "large": subset_manifest(demo_workspace.train_manifest, root / "train24.jsonl", 24),
        "val": subset_manifest(demo_workspace.val_manifest, root / "val.jsonl", 2),
    }


def _run(ws, slices, out, monkeypatch, stop_after: int | None, train: str = "train", **overrides) -> int:
    if stop_after is None:
        monkeypatch.delenv(STOP_AFTER_ENV, raising=False)
    else:
        monkeypatch.setenv(STOP_AFTER_ENV, str(stop_after))
    data = {"train": slices[train], "val": slices["val"]}
    return run_main(tiny_args(ws, data, out, **{"max_steps": 100, "save_interval": 100, **overrides}))


def _samples(out) -> list[tuple[str, int, int]]:
    return [(e["event"], e["step"], e["samples"]) for e in events(out) if "samples" in e]


def test_batch_size_4_then_8_then_2_continues_the_sample_count(demo_workspace, slices, tmp_path, monkeypatch,
                                                               capsys):
    out = tmp_path / "run"
    assert _run(demo_workspace, slices, out, monkeypatch, 3, batch_size=4) == 130
    first = load(out / "latest.pth")
    assert (first["step"], first["epoch"], first["position"]) == (3, 0, 3)
    assert first["sampler"]["samples_seen"] == 12
    capsys.readouterr()

    assert _run(demo_workspace, slices, out, monkeypatch, 4, batch_size=8) == 130
    said = capsys.readouterr().out
    assert "the data or batching changed since the checkpoint (batch_size 4 -> 8" in said
    assert "it had seen 12 samples of epoch 1: continuing at sample 8 of 16 of epoch 1" in said
    assert "bitwise exactness with an uninterrupted run is lost" in said
    second = load(out / "latest.pth")
    assert (second["step"], second["epoch"], second["position"]) == (4, 1, 0)  # the 8 that were left: epoch done
    assert second["sampler"]["samples_seen"] == 20

    assert _run(demo_workspace, slices, out, monkeypatch, 6, batch_size=2) == 130
    said = capsys.readouterr().out
    assert "batch_size 8 -> 2" in said
    third = load(out / "latest.pth")
    assert (third["step"], third["epoch"], third["position"]) == (6, 1, 2)
    assert third["sampler"]["samples_seen"] == 24
    counts = _samples(out)
    assert [c for c in counts if c[0] == "resume"] == [("resume", 3, 12), ("resume", 4, 20)]
    train_counts = [samples for kind, _step, samples in counts if kind == "train"]
    assert train_counts == sorted(train_counts) and train_counts[-1] == 24


@pytest.mark.parametrize("train, expected", [("small", (1, 0)), ("large", (0, 3))], ids=["shrunk", "grown"])
def test_changed_manifest_continues_or_starts_the_next_epoch(demo_workspace, slices, tmp_path, monkeypatch, capsys,
                                                            train, expected):
    out = tmp_path / "run"
    assert _run(demo_workspace, slices, out, monkeypatch, 3, batch_size=4) == 130
    capsys.readouterr()
    # Shrunk (16 -> 6 items): 12 samples already cover the new epoch, so the next one starts.
    # Grown (16 -> 24): 12 of 24 samples seen, position 3 of 6 batches.
    assert _run(demo_workspace, slices, out, monkeypatch, 4, train=train, batch_size=4) == 130
    said = capsys.readouterr().out
    assert "num_items 16 -> " in said and "bitwise exactness with an uninterrupted run is lost" in said
    resumed = [e for e in events(out, "resume")][-1]
    assert (resumed["epoch"], resumed["position"]) == expected
    assert resumed["samples"] == 12
    assert 12 < load(out / "latest.pth")["sampler"]["samples_seen"] <= 12 + 4  # one batch of up to 4 more


@pytest.mark.parametrize("position", [5, 10**9], ids=["just-past-the-epoch", "huge"])
def test_a_position_beyond_the_epoch_is_refused_in_one_line(demo_workspace, slices, tmp_path, monkeypatch, capsys,
                                                            position):
    out = tmp_path / "run"
    assert _run(demo_workspace, slices, out, monkeypatch, 2, batch_size=4) == 130
    ckpt = load(out / "latest.pth")
    ckpt["position"] = position
    ckpt["sampler"]["position"] = position
    for path in out.glob("*.pth"):
        path.unlink()
    CheckpointManager(out, keep=3).save(ckpt, int(ckpt["step"]))
    capsys.readouterr()
    assert _run(demo_workspace, slices, out, monkeypatch, None, batch_size=4) == 2
    line = refusal(capsys)
    assert f"position {position} is beyond the 4 batches of an epoch of this data" in line


def test_samples_beyond_the_checkpoints_own_epoch_are_refused(demo_workspace, slices, tmp_path, monkeypatch, capsys):
    out = tmp_path / "run"
    assert _run(demo_workspace, slices, out, monkeypatch, 2, batch_size=4) == 130
    ckpt = load(out / "latest.pth")
    ckpt["sampler"]["samples_in_epoch"] = 10**6
    for path in out.glob("*.pth"):
        path.unlink()
    CheckpointManager(out, keep=3).save(ckpt, int(ckpt["step"]))
    capsys.readouterr()
    assert _run(demo_workspace, slices, out, monkeypatch, None, batch_size=8) == 2
    assert "samples into an epoch of 16 items: the checkpoint's position cannot belong to its own data" in refusal(
        capsys)


def test_nonfinite_loss_stops_without_saving_over_good_checkpoints(demo_workspace, slices, tmp_path, monkeypatch,
                                                                   capsys):
    out = tmp_path / "run"
    assert _run(demo_workspace, slices, out, monkeypatch, 2, batch_size=4, save_interval=2) == 130
    good = load(out / "latest.pth")
    assert good["step"] == 2
    capsys.readouterr()
    # An absurd learning rate drives the loss to inf/NaN; skipped steps never change the weights.
    code = _run(demo_workspace, slices, out, monkeypatch, None, batch_size=4, save_interval=2,
                learning_rate=1e30, max_nonfinite_steps=3, grad_clip=0.0)
    assert code == 2
    line = refusal(capsys)
    assert "optimizer steps in a row" in line and "last good checkpoint: step 2" in line
    after = load(out / "latest.pth")
    assert after["step"] == 2
    for key, value in after["model"].items():
        assert torch.isfinite(value).all(), key
    end = events(out, "end")[-1]
    assert end["status"] == "nonfinite"
    assert json.dumps(end)  # the event is plain JSON


def test_grad_accumulation_1_then_2_continues_the_sample_count(demo_workspace, slices, tmp_path, monkeypatch,
                                                               capsys):
    """16 items in batches of 4: 2 steps of 1 micro-batch, then steps of 2 micro-batches from the same sample."""
    out = tmp_path / "run"
    assert _run(demo_workspace, slices, out, monkeypatch, 2, batch_size=4, grad_accumulation=1) == 130
    first = load(out / "latest.pth")
    assert (first["step"], first["epoch"], first["position"]) == (2, 0, 2)
    assert first["sampler"]["samples_seen"] == 8
    capsys.readouterr()

    assert _run(demo_workspace, slices, out, monkeypatch, 4, batch_size=4, grad_accumulation=2) == 130
    said = capsys.readouterr().out
    changed = [line for line in said.splitlines() if "grad_accumulation 1 -> 2" in line]
    assert len(changed) == 1 and changed[0].startswith("warning: hyper-parameters changed since the checkpoint")
    assert changed[0].endswith("bitwise exactness with an uninterrupted run is lost")
    assert "resumed from" in said and "epoch 0, position 2" in said  # the same batches: position kept
    resumed = events(out, "resume")[-1]
    assert (resumed["step"], resumed["epoch"], resumed["position"], resumed["samples"]) == (2, 0, 2, 8)
    second = load(out / "latest.pth")
    # Step 3 takes batches 2 and 3 (the epoch's end), step 4 the first two of epoch 1: 8 + 16 samples.
    assert (second["step"], second["epoch"], second["position"]) == (4, 1, 2)
    assert second["sampler"]["samples_seen"] == 24
    train_counts = [samples for kind, _step, samples in _samples(out) if kind == "train"]
    assert train_counts == sorted(train_counts) and train_counts[-1] == 24


def test_a_nonfinite_last_step_never_reports_a_checkpoint_it_did_not_write(demo_workspace, slices, tmp_path,
                                                                          monkeypatch, capsys):
    """The run ends on a step whose loss went non-finite (below --max-nonfinite-steps): exit 2, no "finished" line."""
    out = tmp_path / "run"
    code = _run(demo_workspace, slices, out, monkeypatch, None, batch_size=4, max_steps=3, learning_rate=1e30,
                max_nonfinite_steps=20, grad_clip=0.0)
    said = capsys.readouterr()
    assert code == 2, said.out + said.err
    assert "training finished" not in said.out
    lines = [line for line in said.err.splitlines() if line.strip()]
    assert len(lines) == 1 and "last step (3) was not finite" in lines[0] and "none yet" in lines[0], said.err
    assert not (out / "latest.pth").exists()
    assert events(out, "end")[-1]["status"] == "nonfinite"


def test_changing_only_when_to_stop_keeps_the_resume_exact(demo_workspace, slices, tmp_path, monkeypatch, capsys):
    """--stop-on-forgetting / --max-nonfinite-steps decide when a run stops, never what it computes."""
    out = tmp_path / "run"
    assert _run(demo_workspace, slices, out, monkeypatch, 2, batch_size=4, stop_on_forgetting=True,
                max_nonfinite_steps=20) == 130
    capsys.readouterr()
    assert _run(demo_workspace, slices, out, monkeypatch, 3, batch_size=4, stop_on_forgetting=False,
                max_nonfinite_steps=5) == 130
    said = capsys.readouterr().out
    assert "resumed from" in said and "bitwise exactness" not in said and "hyper-parameters changed" not in said
