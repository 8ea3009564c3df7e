"""The run supervisor with a stand-in trainer: start, tail, stop, escalation, refusal, reattach, failures."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from webui.logtail import LogTail, read_complete_lines, read_log_chunk, tail_text
from webui.process_tools import is_process_alive, session_members, wait_until
from webui.run_record import read_record, write_record
from webui.supervisor import RunAlreadyActive, RunSupervisor, SupervisorRegistry

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
    record = read_record(directory) or {}
    for proc in session_members(record.get("sid")):
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
    assert status.saved_step is not None and status.summary.startswith(f"stopped, saved at step {status.saved_step}")
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
        "import sys; from pathlib import Path; from webui.supervisor import RunSupervisor\n"
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
    ("code", "error", "kind", "summary"),
    [
        (2, "error: --batch-size must be at least 1 (got 0)", "refused", "failed: refused: error: --batch-size"),
        (2, "error: cannot resume: runs/x/latest.pth is not a loadable checkpoint: truncated", "invalid checkpoint",
         "failed: invalid checkpoint"),
        (1, "FileNotFoundError: [Errno 2] No such file or directory: 'data/codes/a.npy'", "missing file",
         "failed: missing file"),
        (1, "ValueError: something odd", "unknown", "failed: unknown: ValueError: something odd (exit 1)"),
    ],
)
def test_failing_run_is_reported_with_kind_and_tail(out: Path, code: int, error: str, kind: str,
                                                    summary: str) -> None:
    supervisor = RunSupervisor(out)
    supervisor.start(fake("--steps", "2", "--fail", str(code), "--error", error))
    status = wait_ended(supervisor)
    assert status.state == "failed" and status.exit_code == code
    assert status.failure.kind == kind
    assert status.summary.startswith(summary), status.summary
    assert error in status.tail and "step 2" in status.tail


def test_unrunnable_command_fails_with_127(out: Path) -> None:
    supervisor = RunSupervisor(out)
    supervisor.start([str(out / "no-such-program")])
    status = wait_ended(supervisor)
    assert status.state == "failed" and status.exit_code == 127 and "cannot run" in status.tail


def test_each_run_shows_only_its_own_log(out: Path) -> None:
    supervisor = RunSupervisor(out)
    supervisor.start(fake("--steps", "1", "--fail", "1", "--error", "first run broke"))
    wait_ended(supervisor)
    supervisor.start(fake("--steps", "1"))
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
