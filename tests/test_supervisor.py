"""The run supervisor with a stand-in trainer: start, tail, stop, escalation, refusal, reattach, failures."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from webui.jobs import outcome
from webui.jobs.logtail import LogTail, read_complete_lines, read_log_chunk, tail_text
from webui.jobs.process_tools import is_process_alive, wait_until
from webui.jobs.run_record import read_record, write_record
from webui.jobs.supervisor import RunAlreadyActive, RunSupervisor, child_env
from webui.jobs.supervisor_registry import SupervisorRegistry

FAKE = Path(__file__).resolve().parent / "fake_trainer.py"
REPO = Path(__file__).resolve().parents[1]
WAIT_S = 20.0


def fake(*args: str) -> list[str]:
    return [sys.executable, str(FAKE), *args]


@pytest.fixture
def out(tmp_path: Path):
    """An output dir whose run (if any) is force-killed after the test, so a failure leaks nothing."""
    directory = tmp_path / "run"
    yield directory
    for proc in RunSupervisor(directory).run_processes():
        proc.kill()


def wait_for_log(supervisor: RunSupervisor, needle: str, timeout_s: float = WAIT_S) -> str:
    seen: list[str] = []
    offset = 0

    def found() -> bool:
        nonlocal offset
        text, offset = supervisor.read_log(offset)
        seen.append(text)
        return needle in "".join(seen)

    assert wait_until(found, timeout_s), f"{needle!r} not in log:\n{''.join(seen)}"
    return "".join(seen)


def wait_ended(supervisor: RunSupervisor, timeout_s: float = WAIT_S):
    assert wait_until(lambda: not supervisor.poll().running, timeout_s), "run did not end"
    return supervisor.poll()


def grandchild_pid(log: str) -> int:
    line = next(line for line in log.splitlines() if line.startswith("grandchild pid"))
    return int(line.split()[-1])


# -- start, live tail, finish --------------------------------------------------------------------------
def test_start_streams_log_and_records_run(out: Path) -> None:
    threads_before = threading.active_count()
    supervisor = RunSupervisor(out)
    status = supervisor.start(fake("--output-dir", str(out), "--steps", "8", "--progress"), label="train")
    assert status.running and status.pid and status.label == "train"
    record = json.loads((out / "run.json").read_text())
    assert record["status"] == "running" and record["argv"][1] == str(FAKE) and record["pgid"] == record["pid"]

    wait_for_log(supervisor, "step 3")  # seen while the run is still going
    final = wait_ended(supervisor)
    assert final.state == "finished" and final.exit_code == 0, final
    assert final.summary == "finished (exit 0)"
    full, _ = supervisor.read_log(0)
    assert "loading 5/5\n" in full and "loading 1/5" not in full  # \r progress collapsed to its last state
    assert "training finished" in full
    assert threading.active_count() == threads_before


def test_graceful_stop_saves_and_leaves_no_process(out: Path) -> None:
    supervisor = RunSupervisor(out)
    supervisor.start(fake("--output-dir", str(out), "--grandchild"))
    log = wait_for_log(supervisor, "step 2")
    grandchild = grandchild_pid(log)
    members = supervisor.processes()
    assert len(members) >= 3  # wrapper, trainer, grandchild

    status = supervisor.stop(grace_s=WAIT_S)
    assert status.state == "stopped" and status.exit_code == 130, status
    assert status.saved_step is not None and status.saved_step >= 2
    assert status.summary.startswith(f"stopped, saved at step {status.saved_step}")
    assert supervisor.processes() == []
    assert not any(is_process_alive(pid) for pid in [*members, grandchild])
    assert read_record(out)["stop_requested"] is True


def test_stop_escalates_to_kill_when_signals_are_ignored(out: Path) -> None:
    supervisor = RunSupervisor(out)
    supervisor.start(fake("--output-dir", str(out), "--ignore-signals", "--grandchild"))
    log = wait_for_log(supervisor, "step 2")
    grandchild = grandchild_pid(log)
    started = time.monotonic()
    status = supervisor.stop(grace_s=0.5, term_s=0.5, kill_s=WAIT_S)
    assert time.monotonic() - started < WAIT_S
    assert status.state == "killed", status
    assert status.failure is not None and "force-stopped" in status.failure.detail
    assert supervisor.processes() == [] and not is_process_alive(grandchild)
    assert not psutil.pid_exists(grandchild) or psutil.Process(grandchild).status() == psutil.STATUS_ZOMBIE


def test_force_stop_kills_at_once(out: Path) -> None:
    supervisor = RunSupervisor(out)
    supervisor.start(fake("--output-dir", str(out)))
    wait_for_log(supervisor, "step 1")
    status = supervisor.force_stop()
    assert status.state == "killed" and supervisor.processes() == []
    assert "saved" not in status.tail  # nothing saved: it never got the chance


def test_second_run_on_same_output_dir_is_refused(out: Path) -> None:
    first = RunSupervisor(out)
    first.start(fake("--output-dir", str(out)))
    wait_for_log(first, "step 1")
    with pytest.raises(RunAlreadyActive, match="in use"):
        first.start(fake("--output-dir", str(out)))
    with pytest.raises(RunAlreadyActive):
        RunSupervisor(out).start(fake("--output-dir", str(out)))  # another UI instance
    assert first.poll().running
    first.stop(grace_s=WAIT_S)
    again = first.start(fake("--output-dir", str(out), "--steps", "1"))  # allowed once the first ended
    assert again.running or again.state == "finished"
    assert wait_ended(first).state == "finished"


# -- reattach after a UI restart ---------------------------------------------------------------------
def test_new_supervisor_reattaches_and_stops_a_running_run(out: Path) -> None:
    original = RunSupervisor(out)
    started = original.start(fake("--output-dir", str(out)), label="train")
    wait_for_log(original, "step 1")

    attached = RunSupervisor.attach(out)
    status = attached.poll()
    assert status.running and status.pid == started.pid and status.run_id == started.run_id
    registry = SupervisorRegistry(out.parent)
    assert registry.latest_running(label="train").run_id == started.run_id

    stopped = attached.stop(grace_s=WAIT_S)  # not its child: the wrapper reports the exit code
    assert stopped.state == "stopped" and stopped.exit_code == 130 and stopped.saved_step is not None
    assert original.poll().state == "stopped"


def _start_from_another_ui(out: Path, argv: list[str]) -> None:
    """Start a run from a separate Python process that exits at once, like a UI that was closed."""
    script = (
        "import sys; from pathlib import Path; from webui.jobs.supervisor import RunSupervisor\n"
        "RunSupervisor(Path(sys.argv[1])).start(sys.argv[2:], label='train')\n"
    )
    subprocess.run([sys.executable, "-c", script, str(out), *argv], cwd=REPO, check=True, timeout=WAIT_S)


def test_exit_code_of_a_run_that_ended_while_no_ui_was_attached(out: Path) -> None:
    _start_from_another_ui(out, fake("--output-dir", str(out), "--steps", "3", "--fail", "1",
                                     "--error", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2 GiB"))
    record = read_record(out)
    assert record["status"] == "running" or record["exit_code"] == 1
    # Wait for the wrapper (not our child) to write the outcome, without any supervisor watching.
    assert wait_until(lambda: read_record(out)["status"] != "running", WAIT_S)

    status = RunSupervisor.attach(out).poll()
    assert status.state == "failed" and status.exit_code == 1
    assert status.failure.kind == "out of memory"
    assert status.summary.startswith("failed: out of memory")
    assert "CUDA out of memory" in status.tail and "step 3" in status.tail


def test_record_of_a_vanished_run_is_closed_and_a_new_run_allowed(out: Path) -> None:
    out.mkdir(parents=True)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait(timeout=WAIT_S)
    write_record(out, {"run_id": "old", "status": "running", "pid": dead.pid, "pgid": dead.pid,
                       "sid": dead.pid, "create_time": 1.0, "argv": ["x"], "log_offset": 0})
    status = RunSupervisor.attach(out).poll()
    assert status.state == "killed" and status.exit_code is None
    assert read_record(out)["ended_without_record"] is True
    new = RunSupervisor(out).start(fake("--steps", "1"))
    assert new.run_id != "old"


def test_a_run_being_launched_by_another_ui_is_not_taken_for_dead(out: Path) -> None:
    out.mkdir(parents=True)
    write_record(out, {"run_id": "launching", "status": "running", "pid": None, "started_at_epoch": time.time(),
                       "argv": ["x"], "log_offset": 0})
    assert RunSupervisor.attach(out).poll().running
    with pytest.raises(RunAlreadyActive):
        RunSupervisor(out).start(fake("--steps", "1"))
    write_record(out, {**read_record(out), "started_at_epoch": time.time() - 3600})  # it never launched
    assert RunSupervisor.attach(out).poll().state == "killed"


def test_pid_reuse_is_not_mistaken_for_the_run(out: Path) -> None:
    me = psutil.Process()
    assert is_process_alive(os.getpid(), me.create_time())
    assert not is_process_alive(os.getpid(), me.create_time() - 1000.0)  # same pid, another process
    out.mkdir(parents=True)
    write_record(out, {"run_id": "reused", "status": "running", "pid": os.getpid(), "pgid": None, "sid": None,
                       "create_time": me.create_time() - 1000.0, "argv": ["x"], "log_offset": 0})
    assert RunSupervisor.attach(out).poll().state == "killed"


# -- failures ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("code", "status", "error", "kind", "summary"),
    [
        (2, "failed", "error: cannot resume: runs/x/latest.pth is not a loadable checkpoint: truncated",
         "invalid checkpoint", "failed: invalid checkpoint: cannot resume"),
        (1, "failed", "FileNotFoundError: [Errno 2] No such file or directory: 'data/codes/a.npy'", "missing file",
         "failed: missing file"),
        (2, "failed", "error: the tokenizer has 40 pieces, the checkpoint's text head 41", "refused",
         "failed: refused: the tokenizer has 40 pieces"),
        (2, "save_failed", "error: cannot write runs/x/model_step2.pth: No space left on device",
         "checkpoint save failed", "failed: checkpoint save failed: cannot write"),
        (1, "nonfinite", "the loss became nan at step 2", "non-finite loss", "failed: non-finite loss: the loss"),
        (1, "failed", "ValueError: something odd", "unknown", "failed: unknown: ValueError: something odd; last checkpoint at step 2 (exit 1)"),
    ],
)
def test_failing_run_is_reported_from_its_end_event(out: Path, code: int, status: str, error: str, kind: str,
                                                    summary: str) -> None:
    supervisor = RunSupervisor(out)
    supervisor.start(fake("--output-dir", str(out), "--steps", "2", "--save-interval", "1", "--fail", str(code),
                          "--fail-status", status, "--error", error))
    final = wait_ended(supervisor)
    assert final.state == "failed" and final.exit_code == code
    assert final.failure.kind == kind
    assert final.summary.startswith(summary), final.summary
    assert final.saved_step == 2 and "; last checkpoint at step 2" in final.summary
    assert error in final.tail and "step 2" in final.tail


def test_the_kind_comes_from_the_event_not_from_console_wording(out: Path) -> None:
    """A console line that mentions memory does not make a save failure an out-of-memory failure."""
    supervisor = RunSupervisor(out)
    supervisor.start(fake("--output-dir", str(out), "--steps", "1", "--fail", "2", "--fail-status", "save_failed",
                          "--error", "error: disk full; CUDA out of memory was not the problem"))
    assert wait_ended(supervisor).failure.kind == "checkpoint save failed"


def test_refused_before_any_event_quotes_the_error_line(out: Path) -> None:
    supervisor = RunSupervisor(out)
    supervisor.start(fake("--output-dir", str(out), "--refuse", "--batch-size must be at least 1 (got 0)"))
    final = wait_ended(supervisor)
    assert final.state == "failed" and final.failure.kind == "refused" and final.saved_step is None
    assert final.summary == "failed: refused: error: --batch-size must be at least 1 (got 0) (exit 2)"


def test_stop_before_the_first_save_says_nothing_was_saved(out: Path) -> None:
    supervisor = RunSupervisor(out)
    supervisor.start(fake("--output-dir", str(out), "--first-step-delay", "60"))
    wait_for_log(supervisor, "starting fresh at step 0")
    status = supervisor.stop(grace_s=WAIT_S)
    assert status.state == "stopped" and status.saved_step is None
    assert status.summary == "stopped, before the first checkpoint: nothing saved (exit 130)"
    assert "step 0" not in status.summary


def test_stop_of_a_resumed_run_before_a_new_save(out: Path) -> None:
    out.mkdir(parents=True)
    old_events = [{"event": "start", "step": 0, "time": time.time() - 100},
                  {"event": "save", "step": 12, "time": time.time() - 90},
                  {"event": "end", "step": 12, "status": "stopped", "time": time.time() - 89}]
    (out / "metrics.jsonl").write_text("".join(json.dumps(e) + "\n" for e in old_events))
    supervisor = RunSupervisor(out)
    supervisor.start(fake("--output-dir", str(out), "--resume-from", "12", "--first-step-delay", "60"))
    wait_for_log(supervisor, "resumed from")
    status = supervisor.stop(grace_s=WAIT_S)
    assert status.saved_step is None  # the earlier run's save at step 12 is not this run's
    assert status.summary.startswith("stopped, no new checkpoint: stopped at step 12, where it resumed")


def test_run_events_ignore_earlier_runs_and_torn_lines(tmp_path: Path) -> None:
    lines = [json.dumps({"event": "start", "step": 0, "time": 10.0}), json.dumps({"event": "save", "step": 4,
             "time": 11.0}), json.dumps({"event": "resume", "step": 4, "time": 100.0}),
             json.dumps({"event": "train", "step": 5, "time": 101.0}), '{"event": "save", "st']
    (tmp_path / "metrics.jsonl").write_text("\n".join(lines[:-1]) + "\n" + lines[-1])
    events = outcome.read_run_events(tmp_path, since_epoch=99.5)
    assert events.resumed_step == 4 and events.saved_step is None and events.end is None
    assert outcome.read_run_events(tmp_path, since_epoch=200.0) == outcome.RunEvents()
    assert outcome.read_run_events(tmp_path / "missing", since_epoch=None) == outcome.RunEvents()


def test_unrunnable_command_fails_with_127(out: Path) -> None:
    supervisor = RunSupervisor(out)
    supervisor.start([str(out / "no-such-program")])
    status = wait_ended(supervisor)
    assert status.state == "failed" and status.exit_code == 127 and "cannot run" in status.tail


def test_each_run_shows_only_its_own_log(out: Path) -> None:
    supervisor = RunSupervisor(out)
    supervisor.start(fake("--output-dir", str(out), "--steps", "1", "--fail", "1", "--error", "first run broke"))
    wait_ended(supervisor)
    supervisor.start(fake("--output-dir", str(out), "--steps", "1"))
    status = wait_ended(supervisor)
    assert status.state == "finished" and status.log_offset > 0
    assert "first run broke" not in status.tail and "training finished" in status.tail


# -- log reading ---------------------------------------------------------------------------------------
def test_log_chunks_collapse_progress_and_keep_partial_lines(tmp_path: Path) -> None:
    log = tmp_path / "console.log"
    log.write_bytes(b"one\r\ntwo\n\r 10%|#\r 20%|##")
    chunk = read_log_chunk(log, 0)
    assert chunk.lines == ["one", "two"] and chunk.partial == " 20%|##"
    with open(log, "ab") as handle:
        handle.write(b"\r100%|####|\nthree")
    chunk = read_log_chunk(log, chunk.offset)
    assert chunk.lines == ["100%|####|"] and chunk.partial == "three"
    text, offset = read_complete_lines(log, 0)
    assert text == "one\ntwo\n100%|####|\n" and offset == log.stat().st_size - len(b"three")


def test_log_reads_are_bounded(tmp_path: Path) -> None:
    log = tmp_path / "console.log"
    bar = b"".join(b"\r%d%%|" % i + b"#" * 200 for i in range(2000))  # ~400 KB of one rewritten line
    log.write_bytes(bar)
    chunk = read_log_chunk(log, 0, max_bytes=4096)
    assert chunk.offset > 0 and len(chunk.partial) < 4096  # overwritten part skipped, not buffered
    offset = 0
    for _ in range(200):
        chunk = read_log_chunk(log, offset, max_bytes=4096)
        if chunk.offset == offset:
            break
        offset = chunk.offset
    assert chunk.partial.startswith("1999%|")

    long_line = tmp_path / "long.log"
    long_line.write_bytes(b"x" * 10000 + b"\n")
    chunk = read_log_chunk(long_line, 0, max_bytes=4096)
    assert chunk.offset == 4096 and chunk.lines == ["x" * 4096]


def test_log_tail_view_is_bounded_and_skips_gaps(tmp_path: Path) -> None:
    log = tmp_path / "console.log"
    log.write_text("".join(f"line {i}\n" for i in range(10000)))
    view = LogTail(log, max_lines=50, skip_threshold=20000, tail_bytes=2000)
    assert view.poll()
    lines = view.text().splitlines()
    assert len(lines) == 50 and lines[-1] == "line 9999"
    assert view.total_lines < 1000  # the gap was skipped, not read line by line
    assert not view.poll()  # nothing new
    with open(log, "a") as handle:
        handle.write("line 10000\npartial")
    assert view.poll() and view.text().endswith("line 10000\npartial")
    log.write_text("new file\n")  # truncated or replaced
    assert view.poll() and view.text() == "new file"


def test_tail_text_starts_at_the_run_and_drops_the_cut_line(tmp_path: Path) -> None:
    log = tmp_path / "console.log"
    log.write_text("old run\n" + "".join(f"l{i}\n" for i in range(100)))
    assert tail_text(log, 10_000, start_offset=len("old run\n")).startswith("l0\n")
    tail = tail_text(log, 20)
    assert tail.splitlines()[-1] == "l99" and all(line.startswith("l") for line in tail.splitlines())


def test_wrapper_forwards_a_signal_sent_to_it_alone(out: Path) -> None:
    supervisor = RunSupervisor(out)
    status = supervisor.start(fake("--output-dir", str(out)))
    wait_for_log(supervisor, "step 1")
    os.kill(status.pid, signal.SIGTERM)  # e.g. `kill <pid>` by a user
    final = wait_ended(supervisor)
    assert final.state == "stopped" and final.exit_code == 130 and supervisor.processes() == []


# -- stop means stopped: every descendant, also one in a session of its own -----------------------------
def _wait_setsid_child(supervisor: RunSupervisor) -> psutil.Process:
    log = wait_for_log(supervisor, "setsid child pid")
    pid = int(next(line for line in log.splitlines() if line.startswith("setsid child pid")).split()[-1])
    child = psutil.Process(pid)
    assert wait_until(lambda: os.getsid(pid) == pid, WAIT_S)  # it left the run's session
    return child


def _no_process_of_the_run(supervisor: RunSupervisor, *extra: psutil.Process) -> bool:
    def gone(proc: psutil.Process) -> bool:
        return not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE

    return supervisor.processes() == [] and all(gone(proc) for proc in extra)


@pytest.mark.parametrize("ignore_signals", [False, True])
def test_stop_leaves_no_process_behind_even_one_that_called_setsid(out: Path, ignore_signals: bool) -> None:
    supervisor = RunSupervisor(out)
    flags = ["--ignore-signals"] if ignore_signals else []
    supervisor.start(fake("--output-dir", str(out), "--setsid-child", "--grandchild", *flags))
    escaped = _wait_setsid_child(supervisor)
    wait_for_log(supervisor, "step 2")
    assert escaped.pid in supervisor.processes()  # found although it is not in the run's session
    assert wait_until(lambda: [escaped.pid, escaped.create_time()] in (read_record(out).get("descendants") or []),
                      WAIT_S)  # recorded with its create time, for a supervisor after a wrapper's death
    status = supervisor.stop(grace_s=0.5 if ignore_signals else WAIT_S, term_s=0.5, kill_s=WAIT_S)
    assert status.state == ("killed" if ignore_signals else "stopped"), status
    assert wait_until(lambda: _no_process_of_the_run(supervisor, escaped), WAIT_S)


def test_a_finished_run_leaves_nothing_behind(out: Path) -> None:
    supervisor = RunSupervisor(out)
    supervisor.start(fake("--output-dir", str(out), "--setsid-child", "--steps", "20"))
    escaped = _wait_setsid_child(supervisor)
    final = wait_ended(supervisor)
    assert final.state == "finished"
    assert _no_process_of_the_run(supervisor, escaped)  # the wrapper stopped it before recording the end
    assert "stopped 1 process(es) the run left behind" in supervisor.log_tail()


def test_descendants_of_a_killed_wrapper_are_still_stopped(out: Path) -> None:
    supervisor = RunSupervisor(out)
    status = supervisor.start(fake("--output-dir", str(out), "--setsid-child"))
    escaped = _wait_setsid_child(supervisor)
    assert wait_until(lambda: [escaped.pid, escaped.create_time()] in (read_record(out).get("descendants") or []),
                      WAIT_S)
    psutil.Process(status.pid).kill()  # the wrapper dies alone; the trainer and the setsid child go on
    assert supervisor.poll().running  # its processes still count as the run
    assert escaped.pid in supervisor.processes()
    supervisor.stop(grace_s=WAIT_S, term_s=1.0)
    assert wait_until(lambda: _no_process_of_the_run(supervisor, escaped), WAIT_S)


def test_fault_injection_variables_reach_a_run_only_when_a_test_asks(out: Path, monkeypatch) -> None:
    monkeypatch.setenv("STUDIO_TEST_KILL_AFTER_STEP", "1")
    assert "STUDIO_TEST_KILL_AFTER_STEP" not in child_env(None)
    assert child_env(None, allow_test_hooks=True)["STUDIO_TEST_KILL_AFTER_STEP"] == "1"
    probe = [sys.executable, "-c", "import os; print('hooks:', sorted(k for k in os.environ if 'STUDIO_TEST' in k))"]
    supervisor = RunSupervisor(out)
    supervisor.start(probe)
    wait_ended(supervisor)
    assert "hooks: []" in supervisor.log_tail()
    supervisor.start(probe, allow_test_hooks=True)
    wait_ended(supervisor)
    assert "hooks: ['STUDIO_TEST_HOOKS', 'STUDIO_TEST_KILL_AFTER_STEP']" in supervisor.log_tail()


# -- torchrun runs ---------------------------------------------------------------------------------------
def test_torchrun_outcome_comes_from_the_trainer_end_event() -> None:
    stopped = outcome.RunEvents(end={"event": "end", "status": "stopped"})
    failed = outcome.RunEvents(end={"event": "end", "status": "failed", "error": "boom"})
    assert outcome.launcher_exit(1, stopped) == 130  # every rank exited 130 after rank 0 saved: torchrun says 1
    assert outcome.launcher_exit(1, failed) == 1 and outcome.launcher_exit(1, outcome.RunEvents()) == 1
    assert outcome.launcher_exit(0, stopped) == 0
    tail = "[default0]:step 3/9\n[default1]:error: --train-manifest: no such file\nE1124 torchrun: failed\n"
    assert outcome.last_error_line(tail) == "[default1]:error: --train-manifest: no such file"


def test_rank_logs_are_found_in_the_newest_launch_and_attempt(tmp_path: Path) -> None:
    from webui.jobs import rank_logs

    argv = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--nnodes", "1",
            "--standalone", "--log-dir", str(tmp_path / "ranks"), "-m", "trainer.train", "--x"]
    assert [s.value for s in rank_logs.log_sources(tmp_path, argv, time.time())] == [rank_logs.CONSOLE]
    old = tmp_path / "ranks" / "none_old" / "attempt_0" / "0"
    old.mkdir(parents=True)
    os.utime(old.parents[1], (1.0, 1.0))  # a launch from before this run started
    assert [s.value for s in rank_logs.log_sources(tmp_path, argv, time.time() - 1)] == [rank_logs.CONSOLE]
    for attempt in ("attempt_0", "attempt_1"):
        for rank in ("0", "1"):
            (tmp_path / "ranks" / "id_new" / attempt / rank).mkdir(parents=True)
    sources = rank_logs.log_sources(tmp_path, argv, time.time() - 1)
    assert [s.value for s in sources] == ["console", "0/stdout", "0/stderr", "1/stdout", "1/stderr"]
    assert sources[3].path == tmp_path / "ranks" / "id_new" / "attempt_1" / "1" / "stdout.log"
    assert sources[0].path == tmp_path / "console.log" and sources[3].label == "rank 1 · stdout"
    plain = [sys.executable, "-m", "trainer.train", "--x"]
    assert [s.value for s in rank_logs.log_sources(tmp_path, plain, None)] == [rank_logs.CONSOLE]


@pytest.mark.slow
def test_torchrun_run_from_the_form_stops_with_a_save_and_no_process_left(demo_workspace, tmp_path: Path) -> None:
    """A real 2-process CPU torchrun run started as the Training tab starts it: the preview is the command
    that runs; Stop reaches the ranks first, rank 0 saves, the outcome is 'stopped', nothing is left."""
    import torch

    from webui.context import StudioContext
    from webui.jobs import rank_logs
    from webui.training import training_form as tf
    from webui.training.form_values import workspace_files
    from webui.training.run_start import form_changed, start_run

    ctx = StudioContext.create(demo_workspace.root)
    out = tmp_path / "torchrun"
    values = tf.apply_preset(tf.DEMO_PRESET, {"nproc_per_node": 2}, workspace_files(ctx, out))
    values.update(max_steps=400, batch_size=2, log_interval=1, save_interval=1000, val_interval=1000)
    preview = form_changed(values, None)[0]
    assert " -m torch.distributed.run --nproc-per-node 2 --nnodes 1 --standalone " in preview
    supervisor = ctx.registry.get(out)
    seen: set[tuple[int, float]] = set()
    try:
        started = start_run(ctx, values)
        assert started.message == "" and started.command == preview
        assert shlex.join(read_record(out)["argv"]) == preview  # the previewed command is the one that runs
        logged = wait_until(lambda: "step 3/" in supervisor.log_tail() or not supervisor.poll().running, 240)
        assert logged and supervisor.poll().running, supervisor.log_tail()
        seen.update((proc.pid, proc.create_time()) for proc in supervisor.run_processes())
        assert len(seen) >= 4  # wrapper, torchrun, two ranks
        sources = rank_logs.log_sources(out, tuple(read_record(out)["argv"]), read_record(out)["started_at_epoch"])
        assert [s.value for s in sources] == ["console", "0/stdout", "0/stderr", "1/stdout", "1/stderr"]
        assert "step 3/" in sources[1].path.read_text()  # rank 0's own file, beside the console

        final = supervisor.stop(grace_s=120)
    finally:
        for proc in supervisor.run_processes():
            proc.kill()
    assert final.state == "stopped" and final.exit_code == 130, final.summary
    assert final.summary.startswith(f"stopped, saved at step {final.saved_step}")
    assert supervisor.run_processes() == []
    assert [pid for pid, created in seen if is_process_alive(pid, created)] == []
    checkpoint = torch.load(out / "latest.pth", weights_only=True, map_location="cpu")
    assert checkpoint["step"] == final.saved_step >= 3


SLOW_SAVE_SITECUSTOMIZE = '''
import os
if os.environ.get("RANK") == "0" and os.environ.get("SLOW_SAVE_S"):  # torchrun's rank 0 only
    import time
    import torch
    _real_save = torch.save
    def _slow_save(*args, **kwargs):
        time.sleep(float(os.environ["SLOW_SAVE_S"]))
        return _real_save(*args, **kwargs)
    torch.save = _slow_save
'''


@pytest.mark.slow
def test_torchrun_stop_waits_for_a_slow_save(demo_workspace, tmp_path: Path) -> None:
    """Rank 0's checkpoint write takes 6 s (torch.save slowed in rank 0 only): Stop signals the ranks, not
    torchrun, and waits for the save with the studio's grace; the run ends stopped with that checkpoint. (If a rank
    exits early, torchrun SIGTERMs the others, which the trainer ignores while saving, and its SIGKILL comes only
    after --shutdown-timeout, the studio's grace: see the form tests.)"""
    import torch

    from webui.context import StudioContext
    from webui.training import training_form as tf
    from webui.training.form_values import workspace_files

    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(SLOW_SAVE_SITECUSTOMIZE)
    ctx = StudioContext.create(demo_workspace.root)
    out = tmp_path / "torchrun"
    values = tf.apply_preset(tf.DEMO_PRESET, {"nproc_per_node": 2}, workspace_files(ctx, out))
    values.update(max_steps=400, batch_size=2, log_interval=1, save_interval=1000, val_interval=1000)
    supervisor = ctx.registry.get(out)
    env = {**os.environ, "PYTHONPATH": str(hooks), "SLOW_SAVE_S": "6"}
    try:
        supervisor.start(tf.run_argv(values), env=env, label="train")
        logged = wait_until(lambda: "step 3/" in supervisor.log_tail() or not supervisor.poll().running, 240)
        assert logged and supervisor.poll().running, supervisor.log_tail()
        final = supervisor.stop(grace_s=120)
    finally:
        for proc in supervisor.run_processes():
            proc.kill()
    events = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    last_step = [e for e in events if e["event"] == "train"][-1]
    save = [e for e in events if e["event"] == "save"][-1]
    assert save["step"] == last_step["step"] and save["time"] - last_step["time"] >= 5.0  # the slow save happened
    assert final.state == "stopped" and final.exit_code == 130, final.summary
    assert supervisor.run_processes() == []
    checkpoint = torch.load(out / "latest.pth", weights_only=True, map_location="cpu")
    assert checkpoint["step"] == final.saved_step >= 3


@pytest.mark.parametrize(("error_type", "message", "kind"), [
    ("OutOfMemoryError", "CUDA error: allocation of 2 GiB refused", "out of memory"),
    ("FileNotFoundError", "[Errno 2] codes/a.npy", "missing file"),
    ("StateDictMismatchError", "text_head.weight: [1917, 64] vs [1001, 64]", "invalid checkpoint"),
    ("RuntimeError", "CUDA out of memory. Tried to allocate 2 GiB", "out of memory"),  # generic type: the message
    ("ValueError", "gpt.layers must be a positive integer", "unknown"),
])
def test_failure_kind_comes_from_the_recorded_exception_type_first(error_type, message, kind):
    from webui.jobs.outcome import RunEvents, classify_failure

    events = RunEvents(end={"event": "end", "status": "failed", "error": message, "error_type": error_type})
    assert classify_failure(1, None, events).kind == kind
