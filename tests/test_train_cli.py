"""The trainer's refusals and fault handling: exit 2 with one line, never a traceback; crash safety.

Most runs are in-process (``run_main``; fast). The two-trainer test and one CLI test use real processes.
"""

from __future__ import annotations

import itertools
import os
import pickle
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml

from tests.trainer_helpers import REPO, events, load, run_cli, run_main, subset_manifest, tiny_args
from trainer.checkpoints import lock_holder
from trainer.schedule import MIN_LR_RATIO, lr_factor
from trainer.signals import GracefulStop
from trainer.train import start_disagreement


@pytest.fixture(scope="module")
def data(demo_workspace, tmp_path_factory):
    root = tmp_path_factory.mktemp("cli-data")
    return {
        "train": subset_manifest(demo_workspace.train_manifest, root / "train.jsonl", 8),
        "val": subset_manifest(demo_workspace.val_manifest, root / "val.jsonl", 2),
    }


def refusal(capsys) -> str:
    """The single stderr line of a refusal (asserts it is exactly one line, no traceback)."""
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("error: ")
    return lines[0]


# ----- bad input ------------------------------------------------------------------------------------


def test_missing_manifest(demo_workspace, data, tmp_path, capsys):
    missing = tmp_path / "nope.jsonl"
    code = run_main(tiny_args(demo_workspace, {**data, "train": missing}, tmp_path / "out"))
    assert code == 2
    assert refusal(capsys) == f"error: {missing}: manifest not found"


def test_malformed_manifest_line_names_file_and_line(demo_workspace, data, tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    lines = data["train"].read_text(encoding="utf-8").splitlines()
    bad.write_text("\n".join([lines[0], lines[1], '{"id": "x", "text": "ሰላም"}']) + "\n", encoding="utf-8")
    code = run_main(tiny_args(demo_workspace, {**data, "train": bad}, tmp_path / "out"))
    assert code == 2
    assert refusal(capsys) == f"error: {bad}:3: missing field 'codes'"


@pytest.mark.parametrize("which, fragment", [
    ("tokenizer", "tokenizer not found"),
    ("config", "config file not found"),
    ("base_checkpoint", "is not a loadable checkpoint: file not found"),
])
def test_missing_files(demo_workspace, data, tmp_path, capsys, which, fragment):
    code = run_main(tiny_args(demo_workspace, data, tmp_path / "out", **{which: str(tmp_path / "missing.file")}))
    assert code == 2
    line = refusal(capsys)
    assert fragment in line and "missing.file" in line


def write_config(demo_workspace, tmp_path, **gpt_changes):
    config = yaml.safe_load(demo_workspace.config.read_text(encoding="utf-8"))
    config["gpt"].update(gpt_changes)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


def test_config_not_matching_base_checkpoint_shapes(demo_workspace, data, tmp_path, capsys):
    config = write_config(demo_workspace, tmp_path, model_dim=32)
    code = run_main(tiny_args(demo_workspace, data, tmp_path / "out", config=config))
    assert code == 2
    line = refusal(capsys)
    assert "does not fit the model of --config" in line and "text_embedding.weight" in line


def test_config_with_other_text_vocab_than_base_checkpoint(demo_workspace, data, tmp_path, capsys):
    config = write_config(demo_workspace, tmp_path, number_text_tokens=900)
    code = run_main(tiny_args(demo_workspace, data, tmp_path / "out", config=config))
    assert code == 2
    assert "does not match --base-checkpoint" in refusal(capsys)


def test_fp16_on_cpu_refused(demo_workspace, data, tmp_path, capsys):
    assert run_main(tiny_args(demo_workspace, data, tmp_path / "out", amp="fp16")) == 2
    assert "--amp fp16 needs a CUDA device" in refusal(capsys)


def test_cli_refusal_has_no_traceback(demo_workspace, data, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{broken\n", encoding="utf-8")
    proc = run_cli(tiny_args(demo_workspace, {**data, "train": bad}, tmp_path / "out"))
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [f"error: {bad}:1: malformed JSON (Expecting property name "
                                                "enclosed in double quotes at column 2)"]


# ----- checkpoints: refusals, fallbacks, disk full ------------------------------------------------------


@pytest.fixture(scope="module")
def finished_run(demo_workspace, data, tmp_path_factory):
    """A 4-step run saving at steps 2 and 4 (latest.pth = step 4)."""
    out = tmp_path_factory.mktemp("finished") / "run"
    assert run_main(tiny_args(demo_workspace, data, out, max_steps=4)) == 0
    return out


def test_finished_run_layout(finished_run):
    names = sorted(p.name for p in finished_run.iterdir())
    assert {"latest.pth", "model_step2.pth", "model_step4.pth", "metrics.jsonl", "train_config.yaml",
            "logs"} <= set(names)
    assert load(finished_run / "latest.pth")["step"] == 4
    config = yaml.safe_load((finished_run / "train_config.yaml").read_text(encoding="utf-8"))
    assert config["max_steps"] == 4 and config["resume"] == "auto"
    assert events(finished_run)[-1]["status"] == "completed"


def test_fresh_start_over_existing_run_refused(demo_workspace, data, finished_run, tmp_path, capsys):
    out = tmp_path / "run"
    shutil.copytree(finished_run, out)
    assert run_main(tiny_args(demo_workspace, data, out, resume="")) == 2
    assert "already holds checkpoints" in refusal(capsys)


def test_bare_model_is_not_resumable(demo_workspace, data, tmp_path, capsys):
    code = run_main(tiny_args(demo_workspace, data, tmp_path / "out", resume=str(demo_workspace.base_checkpoint)))
    assert code == 2
    line = refusal(capsys)
    assert "bare model" in line and "--base-checkpoint" in line


class _Marker:
    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


def test_pickle_with_code_refused_and_never_run(demo_workspace, data, tmp_path, capsys):
    marker = tmp_path / "marker"
    evil = tmp_path / "evil.pth"
    evil.write_bytes(pickle.dumps({"model": _Marker(marker)}))
    assert run_main(tiny_args(demo_workspace, data, tmp_path / "out", resume=str(evil))) == 2
    line = refusal(capsys)
    assert line.startswith(f"error: cannot resume from {evil}: ") and "executed" in line
    assert not marker.exists()


@pytest.mark.parametrize("damage", ["truncated", "zero-byte", "random-bytes"])
def test_torn_latest_falls_back_to_newest_valid_step(demo_workspace, data, finished_run, tmp_path, capsys, damage):
    out = tmp_path / "run"
    shutil.copytree(finished_run, out)
    latest = out / "latest.pth"
    good = latest.read_bytes()
    latest.unlink()  # latest.pth is a hard link to model_step4.pth: replace it, do not write through it
    latest.write_bytes({"truncated": good[: len(good) // 2], "zero-byte": b"",
                        "random-bytes": os.urandom(4096)}[damage])
    assert run_main(tiny_args(demo_workspace, data, out, max_steps=4)) == 0
    out_text = capsys.readouterr().out
    assert "resuming from model_step4.pth instead of latest.pth (latest.pth: " in out_text
    assert f"resumed from {out / 'model_step4.pth'} at step 4" in out_text
    assert load(out / "latest.pth")["step"] == 4  # the final state was re-committed as latest.pth


def test_disk_full_during_save_keeps_earlier_checkpoints(demo_workspace, data, tmp_path, capsys, monkeypatch):
    out = tmp_path / "run"
    monkeypatch.setenv("STUDIO_TEST_FAIL_SAVE_AT_STEP", "4")
    assert run_main(tiny_args(demo_workspace, data, out, max_steps=6)) == 2
    line = refusal(capsys)
    assert "checkpoint for step 4 not saved" in line and "disk full" in line
    assert "earlier checkpoints are intact" in line and "training stopped" in line
    assert load(out / "latest.pth")["step"] == 2
    assert load(out / "model_step2.pth")["step"] == 2
    assert not (out / "model_step4.pth").exists()
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp")]
    assert events(out)[-1]["status"] == "save_failed"


def test_resume_with_mismatched_config_says_what_differs(demo_workspace, data, finished_run, tmp_path, capsys):
    out = tmp_path / "run"
    shutil.copytree(finished_run, out)
    config = write_config(demo_workspace, tmp_path, layers=3)
    assert run_main(tiny_args(demo_workspace, data, out, config=config, base_checkpoint="")) == 2
    line = refusal(capsys)
    assert "model config differs" in line and "layers 2 (checkpoint) vs 3 (now)" in line


def test_changed_hyper_parameters_are_warned_and_used(demo_workspace, data, finished_run, tmp_path, capsys):
    out = tmp_path / "run"
    shutil.copytree(finished_run, out)
    assert run_main(tiny_args(demo_workspace, data, out, max_steps=5, learning_rate=1e-3)) == 0
    text = capsys.readouterr().out
    assert "hyper-parameters changed since the checkpoint (new values are used)" in text
    assert "learning_rate 0.003 -> 0.001" in text
    step5 = next(e for e in events(out, "train") if e["step"] == 5)
    assert step5["lr"] == pytest.approx(1e-3 * lr_factor(4, 3, 5))


def test_second_trainer_on_same_dir_names_the_first_pid(demo_workspace, data, tmp_path, capsys):
    out = tmp_path / "run"
    first = subprocess.Popen([sys.executable, "-m", "trainer.train",
                              *tiny_args(demo_workspace, data, out, max_steps=100000, save_interval=100000)],
                             cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             env={**os.environ, "OMP_NUM_THREADS": "1"})
    try:
        deadline = time.monotonic() + 120
        while lock_holder(out) != first.pid:
            assert first.poll() is None, "the first trainer exited early"
            assert time.monotonic() < deadline, "the first trainer never took the lock"
            time.sleep(0.1)  # polling a condition with a deadline, not a sleep as synchronisation
        assert run_main(tiny_args(demo_workspace, data, out)) == 2
        assert refusal(capsys) == f"error: output dir {out} is in use by PID {first.pid} (another trainer is running there)"
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=60)


def test_sigterm_finishes_the_step_saves_and_exits_130(demo_workspace, data, tmp_path, capsys, monkeypatch):
    out = tmp_path / "run"
    monkeypatch.setenv("STUDIO_TEST_STOP_AFTER_STEP", "1")
    monkeypatch.setenv("STUDIO_TEST_STOP_SIGNAL", "TERM")
    before = signal.getsignal(signal.SIGTERM)
    assert run_main(tiny_args(demo_workspace, data, out, max_steps=5)) == 130
    text = capsys.readouterr().out
    assert "SIGTERM received: finishing the current optimizer step" in text
    assert f"stopped by signal at step 1; saved {out / 'latest.pth'}" in text
    assert load(out / "latest.pth")["step"] == 1
    assert events(out)[-1] == {**events(out)[-1], "event": "end", "status": "stopped", "signal": "SIGTERM"}
    assert signal.getsignal(signal.SIGTERM) == before  # the trainer's handler was removed again


def test_torchrun_two_processes_only_rank0_writes(demo_workspace, data, tmp_path):
    out = tmp_path / "run"
    argv = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", "-m",
            "trainer.train", *tiny_args(demo_workspace, data, out, max_steps=2, save_interval=2)]
    # Its own session, so a hang can be ended as a whole (the ranks included) at the deadline.
    proc = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    try:
        stdout, stderr = proc.communicate(timeout=240)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=60)
        pytest.fail("torchrun did not finish within 240 s")
    assert proc.returncode == 0, stderr[-2000:]
    assert "x 2 processes" in stdout
    assert "2 batches of 2 per epoch" in stdout  # 8 items = 2 global batches of 2 x 2, each split over the ranks
    assert "val step 2" in stdout  # 2 val items = 1 global batch of 4, one item for each of the 2 ranks
    assert [e["step"] for e in events(out, "train")] == [1, 2]  # one writer: no duplicate events
    assert load(out / "latest.pth")["step"] == 2


# ----- pieces ---------------------------------------------------------------------------------------


def test_lr_schedule_warmup_starts_above_zero_then_cosine():
    assert lr_factor(0, 10, 100) == pytest.approx(0.1)  # step 1 trains at lr/warmup, never 0
    assert lr_factor(9, 10, 100) == 1.0
    assert lr_factor(99, 10, 100) == pytest.approx(MIN_LR_RATIO)
    values = [lr_factor(k, 10, 100) for k in range(10, 100)]
    assert all(a >= b for a, b in itertools.pairwise(values))
    assert lr_factor(0, 0, 10) == pytest.approx(1.0, rel=0.05)


def test_second_signal_during_save_is_ignored():
    said = []
    stop = GracefulStop(said.append)
    stop._handle(signal.SIGINT, None)
    assert stop.requested == "SIGINT"
    with stop.saving_checkpoint():
        stop._handle(signal.SIGTERM, None)  # must not raise: the save goes on
        assert stop.requested == "SIGINT"
    assert "still saving" in said[-1]


def test_tensorboard_and_metrics_hold_the_same_steps(finished_run):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    runs = list((finished_run / "logs").iterdir())
    assert len(runs) == 1 and runs[0].name.startswith("run_")
    acc = EventAccumulator(str(runs[0]))
    acc.Reload()
    for tag in ("train/text_loss", "train/mel_loss", "train/mel_top1", "train/lr"):
        assert [s.step for s in acc.Scalars(tag)] == [1, 2, 3, 4]
    jsonl = {e["step"]: e for e in events(finished_run, "train")}
    for scalar in acc.Scalars("train/mel_loss"):
        assert scalar.value == pytest.approx(jsonl[scalar.step]["mel_loss"], rel=1e-6)
    assert torch.tensor([e["lr"] for e in jsonl.values()]).gt(0).all()


def _catches_sigterm(pid: int) -> bool:
    """Whether the process has installed its own SIGTERM handler (the trainer does first thing; Python does not)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    mask = int(next(line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:")), 16)
    return bool(mask & (1 << (signal.SIGTERM - 1)))


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux /proc to see the signal handlers")
def test_sigint_while_importing_exits_130_without_traceback(demo_workspace, data, tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "trainer.train", *tiny_args(demo_workspace, data, tmp_path / "r")],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not _catches_sigterm(proc.pid):  # polling a condition with a deadline, not a sleep as sync
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.005)
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    assert not (tmp_path / "r" / "latest.pth").exists()


def test_fault_injection_hooks_need_their_second_guard(demo_workspace, data, tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("STUDIO_TEST_HOOKS")
    monkeypatch.setenv("STUDIO_TEST_FAIL_SAVE_AT_STEP", "2")  # a stray variable alone does nothing
    assert run_main(tiny_args(demo_workspace, data, tmp_path / "a", max_steps=2)) == 0
    assert "test hook" not in capsys.readouterr().out
    monkeypatch.setenv("STUDIO_TEST_HOOKS", "1")
    assert run_main(tiny_args(demo_workspace, data, tmp_path / "b", max_steps=2)) == 2
    assert "warning: test hook STUDIO_TEST_FAIL_SAVE_AT_STEP=2 is active" in capsys.readouterr().out


def test_ranks_that_would_not_start_where_rank_0_does_are_named():
    resumed = (2, 0, 2, 8)
    assert start_disagreement([None]) is None and start_disagreement([None, None]) is None
    assert start_disagreement([resumed, resumed, resumed]) is None
    message = start_disagreement([resumed, resumed, None])
    assert message is not None and message.startswith(
        "rank 2 would start fresh at step 0 but rank 0 would resume at step 2 (epoch 0, position 2, 8 samples seen): ")
    assert (start_disagreement([None, (4, 1, 0, 16)]) or "").startswith(
        "rank 1 would resume at step 4 (epoch 1, position 0, 16 samples seen) but rank 0 would start fresh at step 0")
