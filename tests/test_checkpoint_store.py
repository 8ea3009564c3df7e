"""Checkpoint format and saving: weights-only loadable, atomic, latest/best links, rotation, failed saves, lock, RNG."""

from __future__ import annotations

import errno
import os
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.checkpoint_factory import make_checkpoint, trained_state
from trainer.checkpoints import (
    FORMAT_VERSION,
    REQUIRED_KEYS,
    CheckpointManager,
    CheckpointSaveError,
    LockHeld,
    OutputDirLock,
    UnsafeValueError,
    build_checkpoint,
    capture_rng_state,
    load_checkpoint,
    lock_holder,
    restore_rng_state,
    to_plain,
)
from trainer.checkpoints import store as store_module

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def state():
    return trained_state(steps=2)


def _ckpt(state, step: int = 1, **kw):
    return make_checkpoint(step, state=state, **kw)


def test_checkpoint_has_every_field_and_loads_weights_only_without_allow_list(tmp_path, state):
    ckpt = _ckpt(state, 7)
    assert set(REQUIRED_KEYS) <= set(ckpt)
    assert ckpt["format_version"] == FORMAT_VERSION
    assert type(ckpt["versions"]["torch"]) is str  # not a TorchVersion object
    path = CheckpointManager(tmp_path, keep=3).save(ckpt, 7)
    # The plain call, exactly as a user would write it: no safe_globals, no allow-list.
    loaded = torch.load(path, weights_only=True, map_location="cpu")
    model, optimizer, _ = state
    for name, tensor in model.state_dict().items():
        assert torch.equal(loaded["model"][name], tensor)
    assert loaded["optimizer"]["param_groups"][0]["lr"] == optimizer.param_groups[0]["lr"]
    assert torch.equal(loaded["optimizer"]["state"][0]["exp_avg"], optimizer.state_dict()["state"][0]["exp_avg"])
    assert loaded["step"] == 7 and loaded["position"] == 7 and loaded["epoch"] == 0
    assert loaded["rng"]["numpy"]["keys"].dtype == torch.uint32


def test_to_plain_converts_numpy_paths_and_version_objects_and_refuses_objects():
    plain = to_plain({"a": np.arange(3, dtype=np.uint32), "p": Path("/x/y"), "v": torch.__version__,
                      "n": np.float32(1.5), "t": (1, Path("z"))})
    assert isinstance(plain["a"], torch.Tensor) and plain["a"].tolist() == [0, 1, 2]
    assert plain["p"] == "/x/y" and type(plain["v"]) is str and type(plain["n"]) is float
    assert plain["t"] == (1, "z")
    with pytest.raises(UnsafeValueError, match="object"):
        to_plain({"bad": object()})


def test_build_checkpoint_refuses_scheduler_without_optimizer(state):
    with pytest.raises(ValueError, match="together"):
        _ckpt(state, optimizer_state=None)


def test_save_writes_step_file_and_links_latest_and_best(tmp_path, state):
    manager = CheckpointManager(tmp_path, keep=5)
    manager.save(_ckpt(state, 10), 10, is_best=True)
    manager.save(_ckpt(state, 20), 20, is_best=False)
    assert load_checkpoint(tmp_path / "latest.pth")["step"] == 20
    assert load_checkpoint(tmp_path / "best.pth")["step"] == 10
    latest, step20 = (tmp_path / "latest.pth").stat(), (tmp_path / "model_step20.pth").stat()
    # This filesystem has hard links (the copy fallback has its own test): latest.pth is the step file itself.
    assert latest.st_ino == step20.st_ino and latest.st_nlink == 2
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_save_falls_back_to_copy_where_hard_links_fail(tmp_path, state, monkeypatch):
    def no_links(*_args, **_kwargs):
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(store_module.os, "link", no_links)
    CheckpointManager(tmp_path, keep=2).save(_ckpt(state, 3), 3, is_best=True)
    assert load_checkpoint(tmp_path / "latest.pth")["step"] == 3
    assert load_checkpoint(tmp_path / "best.pth")["step"] == 3
    assert (tmp_path / "latest.pth").stat().st_ino != (tmp_path / "model_step3.pth").stat().st_ino


def test_rotation_keeps_newest_and_never_latest_or_best(tmp_path, state):
    manager = CheckpointManager(tmp_path, keep=2)
    for step in (10, 20, 30, 40):
        manager.save(_ckpt(state, step), step, is_best=step == 10)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["best.pth", "latest.pth", "model_step30.pth", "model_step40.pth"]
    assert load_checkpoint(tmp_path / "best.pth")["step"] == 10  # its step file was rotated away
    assert load_checkpoint(tmp_path / "latest.pth")["recent_checkpoints"] == ["model_step30.pth", "model_step40.pth"]


def test_rotation_leaves_files_of_a_later_abandoned_timeline(tmp_path, state):
    manager = CheckpointManager(tmp_path, keep=1)
    manager.save(_ckpt(state, 50), 50)
    manager.save(_ckpt(state, 20), 20)  # e.g. resumed from an older checkpoint after a fallback
    assert (tmp_path / "model_step20.pth").exists() and (tmp_path / "model_step50.pth").exists()
    assert load_checkpoint(tmp_path / "latest.pth")["step"] == 20


def test_failed_write_keeps_earlier_checkpoints_and_says_so(tmp_path, state, monkeypatch):
    manager = CheckpointManager(tmp_path, keep=1)
    manager.save(_ckpt(state, 10), 10, is_best=True)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}

    real_save = torch.save

    def disk_full(obj, handle, *args, **kwargs):
        handle.write(b"partial data")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(store_module.torch, "save", disk_full)
    with pytest.raises(CheckpointSaveError) as info:
        manager.save(_ckpt(state, 20), 20, is_best=True)
    message = str(info.value)
    assert "step 20" in message and "disk full" in message and "intact" in message and "\n" not in message
    monkeypatch.setattr(store_module.torch, "save", real_save)
    after = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    assert after == before  # nothing replaced, no temp files left, nothing rotated
    assert load_checkpoint(tmp_path / "latest.pth")["step"] == 10


def test_save_refuses_values_that_would_not_load_weights_only(tmp_path, state):
    ckpt = _ckpt(state, 5)
    ckpt["hparams"] = {"oops": np.float64(1.0)}
    with pytest.raises(CheckpointSaveError, match=r"hparams.*numpy"):
        CheckpointManager(tmp_path, keep=1).save(ckpt, 5)
    assert not list(tmp_path.iterdir())


def test_rng_round_trip_restores_every_generator():
    random.seed(1)
    np.random.seed(2)
    torch.manual_seed(3)
    saved = capture_rng_state()
    expected = (random.random(), np.random.rand(), torch.rand(3))
    random.seed(99)
    np.random.seed(99)
    torch.manual_seed(99)
    # Through a weights-only save/load, as it is stored.
    state = torch.load(_roundtrip(saved), weights_only=True)
    assert restore_rng_state(state) == []
    again = (random.random(), np.random.rand(), torch.rand(3))
    assert expected[0] == again[0] and expected[1] == again[1] and torch.equal(expected[2], again[2])


def _roundtrip(obj):
    import io

    buffer = io.BytesIO()
    torch.save(obj, buffer)
    buffer.seek(0)
    return buffer


def test_build_checkpoint_refuses_negative_counters(state):
    model, *_ = state
    with pytest.raises(ValueError, match="position"):
        build_checkpoint(model_state=model.state_dict(), optimizer_state=None, scheduler_state=None,
                         scaler_state=None, epoch=0, position=-1, step=0, sampler_state=None, rng_state=None,
                         manifests={}, tokenizer={}, base_vocab_size=None, model_config={}, hparams={})


def test_lock_refuses_second_holder_with_pid_and_frees_on_death(tmp_path):
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import sys, time
            sys.path.insert(0, {str(REPO)!r})
            from trainer.checkpoints import OutputDirLock
            with OutputDirLock({str(tmp_path)!r}):
                print("locked", flush=True)
                sys.stdin.readline()
        """)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        assert lock_holder(tmp_path) == holder.pid
        with pytest.raises(LockHeld) as info:
            OutputDirLock(tmp_path).acquire()
        assert info.value.pid == holder.pid
        assert f"is in use by PID {holder.pid}" in str(info.value)
    finally:
        holder.kill()  # SIGKILL: no cleanup code runs, the kernel must free the lock
        holder.wait(timeout=30)
    assert lock_holder(tmp_path) is None
    with OutputDirLock(tmp_path) as lock:
        assert lock.held and lock_holder(tmp_path) == os.getpid()
    assert lock_holder(tmp_path) is None
