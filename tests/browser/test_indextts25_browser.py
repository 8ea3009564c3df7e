"""The IndexTTS-2.5 demo preset in a real browser: the page names the model, pre-flights, trains, stops, resumes.

Follows ``test_studio_browser.test_indextts2_demo_trains_stops_and_resumes`` on the demo workspace's ``v25/``.
Every wait is on a visible condition with a timeout.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.browser.test_studio_browser import (
    RUN_TIMEOUT_MS,
    UI_TIMEOUT_MS,
    _started,
    choose_preset,
    command_text,
    fill_number,
    log_text,
    open_section,
    open_tab,
    phase,
    wait_command,
    wait_log,
    wait_step_after,
    wait_stopped_at,
)
from tests.studio_process import StudioProcess


@pytest.mark.slow
def test_indextts25_demo_preflights_trains_stops_and_resumes(page, studio_workspace: Path, artifacts: Path,
                                                            tmp_path: Path) -> None:
    _started[0] = time.monotonic()
    output_dir = studio_workspace / "v25" / "runs" / "demo"
    app = StudioProcess(studio_workspace, tmp_path / "studio-v25.log")
    try:
        app.wait_ready()
        page.goto(app.url)
        open_tab(page, "Tokenizer")
        page.wait_for_function("() => document.getElementById('tok25-table').innerText.includes('merges')",
                               timeout=UI_TIMEOUT_MS)  # the 2.5 panel measures the three schemes
        open_tab(page, "Training")
        choose_preset(page, "IndexTTS-2.5 demo (CPU)")
        wait_command(page, str(studio_workspace / "v25" / "data" / "train_pairs.jsonl"))
        badge = page.locator('#train-model-version-badge[data-version="2.5"]')
        badge.wait_for(timeout=UI_TIMEOUT_MS)
        assert "IndexTTS-2.5 GPT" in badge.inner_text()
        page.locator("#train-change-data").click()  # the data and model section opens on "change"
        assert "IndexTTS-2.5 paired manifest" in page.locator("#opt-train-manifest").inner_text()
        assert ".tiktoken" in command_text(page)  # the 2.5 table (the merges scheme is the default: not shown)
        open_section(page, "train-group-logging")
        assert not page.locator("#opt-vocoder").is_visible()  # options of another generation are hidden
        open_section(page, "train-group-length")
        fill_number(page, "opt-max-steps", 60)
        fill_number(page, "opt-log-interval", 1)
        fill_number(page, "opt-val-interval", 1000)
        wait_command(page, "--val-interval 1000")
        assert str(output_dir) in command_text(page) and "--resume" not in command_text(page)
        phase("IndexTTS-2.5 form ready")

        page.locator("#train-preflight").click()
        page.wait_for_function(
            "() => document.querySelector('#train-preflight-report').innerText.includes('tokens per character')",
            timeout=RUN_TIMEOUT_MS)
        assert page.locator("#preflight-verdict").get_attribute("data-ok") == "true"
        report = page.locator("#train-preflight-report").inner_text()
        assert "IndexTTS-2.5 table, 'merges' text scheme" in report and "grown 60,510 -> 62,510 rows" in report
        phase("pre-flight ok")

        page.locator("#train-start").click()
        wait_log(page, r"^step 2/\d+")
        assert "IndexTTS-2.5 GPT" in log_text(page)
        page.locator("#train-stop").click()
        saved_step = wait_stopped_at(page)
        assert saved_step >= 2 and (output_dir / "latest.pth").is_file()
        phase("stopped")

        page.locator("#train-resume input").check()
        wait_command(page, "--resume auto")
        page.locator("#train-start").click()
        wait_log(page, rf"resumed from \S+ at step {saved_step}\b")
        wait_step_after(page, saved_step)
        page.locator("#train-stop").click()
        assert wait_stopped_at(page) > saved_step
        page.screenshot(path=str(artifacts / "tab-training-indextts25.png"), full_page=True)
        phase("resumed and stopped again")
    finally:
        page.screenshot(path=str(artifacts / "last-state-indextts25.png"), full_page=True)
        app.stop()
