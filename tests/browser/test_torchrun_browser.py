"""The studio builds and runs a 2-process torchrun command on CPU, shows rank 0 and rank 1, and stops it whole.

On a fresh demo workspace: the Processes fields turn the previewed command into torchrun (and a bad
combination into one refusal line), Start runs exactly that command, the log shows rank 0's training
lines, the rank selector shows rank 1's own log file, and Stop saves and leaves no process of the group.
Every wait is on a visible condition with a timeout.
"""

from __future__ import annotations

import re
import shlex
import time
from pathlib import Path

import pytest

from tests.browser.test_studio_browser import (
    RUN_TIMEOUT_MS,
    UI_TIMEOUT_MS,
    command_text,
    fill_number,
    log_text,
    open_section,
    open_tab,
    phase,
    wait_command,
    wait_stopped_at,
)
from tests.studio_process import StudioProcess
from webui.jobs.process_tools import is_process_alive
from webui.jobs.run_record import read_record
from webui.jobs.supervisor import RunSupervisor


def wait_log_has(page, pattern: str, timeout_ms: int = RUN_TIMEOUT_MS) -> None:
    page.wait_for_function(
        "(pattern) => new RegExp(pattern, 'm').test(document.querySelector('#training-log textarea').value)",
        arg=pattern, timeout=timeout_ms)


def choose_log(page, label: str) -> None:
    page.locator("#train-log-source input").click()
    page.get_by_role("option", name=label, exact=True).click()


@pytest.mark.slow
def test_studio_runs_and_stops_a_two_process_torchrun(page, studio_workspace: Path, artifacts: Path,
                                                      tmp_path: Path) -> None:
    from tests.browser import test_studio_browser

    test_studio_browser._started[0] = time.monotonic()
    output_dir = studio_workspace / "runs" / "demo"
    app = StudioProcess(studio_workspace, tmp_path / "studio-torchrun.log")
    seen: set[tuple[int, float]] = set()
    try:
        app.wait_ready()
        page.goto(app.url)
        open_tab(page, "Training")
        wait_command(page, " -m trainer.train ")  # one process: the plain trainer
        assert "torch.distributed.run" not in command_text(page)

        open_section(page, "train-group-processes")
        fill_number(page, "opt-nnodes", 2)  # two nodes and no rendezvous address: refused in one line
        wait_command(page, "error: --rdzv-endpoint: 2 nodes need the rendezvous address")
        fill_number(page, "opt-nnodes", 1)
        fill_number(page, "opt-nproc-per-node", 2)
        wait_command(page, " -m torch.distributed.run --nproc-per-node 2 --nnodes 1 --standalone ")
        open_section(page, "train-group-length")
        open_section(page, "train-group-logging")
        fill_number(page, "opt-max-steps", 400)
        fill_number(page, "opt-batch-size", 2)
        fill_number(page, "opt-log-interval", 1)
        fill_number(page, "opt-val-interval", 1000)
        wait_command(page, "--val-interval 1000")
        preview = command_text(page)
        assert f"--log-dir {output_dir / 'ranks'} --tee 3" in preview and " -m trainer.train " in preview
        phase("torchrun form ready")

        page.locator("#train-start").click()
        wait_log_has(page, r"^\[default0\]:step 2/\d+")  # rank 0's training lines, through torchrun's tee
        phase("two ranks training")
        assert page.locator("#train-status-command").inner_text() == preview  # what runs is what was shown
        assert shlex.join(read_record(output_dir)["argv"]) == preview
        seen.update((proc.pid, proc.create_time()) for proc in RunSupervisor(output_dir).run_processes())
        assert len(seen) >= 4  # wrapper, torchrun, two ranks

        # -- rank 1's own log, then back to rank 0 ------------------------------------------------------------
        page.locator("#train-log-source").wait_for(state="visible", timeout=UI_TIMEOUT_MS)
        choose_log(page, "rank 1 · stdout")
        wait_log_has(page, r"^\[rank 1 · stdout: .*/attempt_0/1/stdout\.log\]$", UI_TIMEOUT_MS)
        assert not re.search(r"step \d+/", log_text(page))  # rank 1 prints no training lines: not rank 0's log
        page.screenshot(path=str(artifacts / "tab-training-torchrun-rank1.png"), full_page=True)
        choose_log(page, "rank 0 · console.log")
        wait_log_has(page, r"^\[default0\]:step \d+/\d+", UI_TIMEOUT_MS)
        phase("rank selector")

        # -- Stop: the ranks save, the outcome is 'stopped', nothing of the group is left -----------------------
        page.locator("#train-stop").click()
        saved_step = wait_stopped_at(page)
        assert saved_step >= 2 and (output_dir / "latest.pth").is_file()
        record = read_record(output_dir)
        assert record["status"] == "stopped" and record["exit_code"] == 130
        assert RunSupervisor(output_dir).run_processes() == []
        assert [pid for pid, created in seen if is_process_alive(pid, created)] == []
        page.screenshot(path=str(artifacts / "tab-training-torchrun-stopped.png"), full_page=True)
        phase("stopped")
    finally:
        page.screenshot(path=str(artifacts / "last-state-torchrun.png"), full_page=True)
        app.stop()
