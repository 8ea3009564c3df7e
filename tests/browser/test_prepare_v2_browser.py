"""The Data tab prepares the IndexTTS2 demo audio into pairs, in a real browser (issue 20 item 2).

The form starts filled with the demo workspace's IndexTTS2 files (tiny random w2v-BERT folder, codec, stats,
synthetic speech); Start runs ``python -m data_tools.prepare_v2`` as a supervised job whose status, progress
and log the tab shows. Every wait is on a visible condition with a timeout.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.studio_process import StudioProcess

UI_TIMEOUT_MS = 60_000
JOB_TIMEOUT_MS = 240_000  # a cold torch + transformers import on a busy 2-core machine


def test_data_tab_prepares_the_v2_demo_audio_into_pairs(page, studio_workspace: Path, artifacts: Path,
                                                        tmp_path: Path) -> None:
    prepared = studio_workspace / "v2" / "data" / "prepared"
    with StudioProcess(studio_workspace, tmp_path / "studio.log") as studio:
        studio.wait_ready()
        page.goto(studio.url)
        page.get_by_role("tab", name="Data", exact=True).click()
        field = page.locator("#prep2-input textarea")
        field.wait_for(timeout=UI_TIMEOUT_MS)
        assert field.input_value() == str(studio_workspace / "v2" / "audio")
        assert page.locator("#prep2-out textarea").input_value() == str(prepared)
        page.locator("#prep2-start").click()
        page.wait_for_function("() => document.querySelector('#prep2-status').innerText.includes('FINISHED')",
                               timeout=JOB_TIMEOUT_MS)
        log = page.locator("#prep2-log textarea").input_value()
        assert "pairs:" in log and "(24 pairs)" in log, log[-2000:]
        assert "12 / 12 (100%)" in page.locator("#prep2-progress").inner_text()
        page.locator("#prep2-status").scroll_into_view_if_needed()
        page.screenshot(path=str(artifacts / "tab-data-prepare-v2.png"), full_page=True)
    pairs = [json.loads(x) for x in (prepared / "pairs.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(pairs) == 24
    assert all((prepared / p["prompt_condition_path"]).is_file() and (prepared / p["target_codes_path"]).is_file()
               for p in pairs)
