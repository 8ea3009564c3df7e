"""The Listen tab in a real browser (issue 29 item 5): the grid of kept evaluation clips, a blind A/B choice made
with the keyboard, stored with the run, surviving a reload, and the preference rate. Every wait has a timeout."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from tests.studio_process import StudioProcess
from trainer.evaluation.audio_store import save_clips
from trainer.evaluation.eval_set import EvalSet, Sentence, Voice
from trainer.evaluation.listening import read_choices

UI_TIMEOUT_MS = 120_000  # the whole studio renders slowly on a busy two-core machine
RATE = 24_000


def _kept_clips(run: Path) -> None:
    """What an evaluation of two checkpoints keeps: two texts in one voice each."""
    sentences = [Sentence("val_001", "ሰላም ዓለም"), Sentence("val_002", "አዲስ አበባ ከተማ")]
    eval_set = EvalSet(language="am", sentences=sentences, voices=[Voice("voice1", "abebe", "p.wav", "p.wav")],
                       decode={}, seeds=[1234])
    t = np.arange(RATE // 2) / RATE
    for step, pitch in ((2, 140.0), (4, 220.0)):
        clips = [[(0.2 * np.sin(2 * np.pi * pitch * (k + 1) * t)).astype(np.float32) for k in range(2)]]
        save_clips(run, f"model_step{step}", eval_set, [("am", sentences)], [clips], RATE)


def _open_listen_tab(page, url: str) -> None:
    page.goto(url)
    page.get_by_role("tab", name="Listen", exact=True).click(timeout=UI_TIMEOUT_MS)
    page.wait_for_function("() => document.querySelectorAll('#listen-grid audio').length === 4",
                           timeout=UI_TIMEOUT_MS)


def test_grid_and_a_blind_choice_by_keyboard_that_survives_a_reload(page, studio_workspace: Path, artifacts: Path,
                                                                    tmp_path: Path):
    run = studio_workspace / "runs" / "listening"
    _kept_clips(run)
    page.set_default_timeout(UI_TIMEOUT_MS)
    with StudioProcess(studio_workspace, tmp_path / "studio.log") as studio:
        studio.wait_ready()
        try:
            _open_listen_tab(page, studio.url)
        except Exception:
            page.screenshot(path=str(artifacts / "tab-listen-failed.png"), full_page=True)
            print(studio.output()[-3000:])
            raise
        headers = page.locator("#listen-grid th").all_inner_texts()
        assert headers[1:] == ["model_step2", "model_step4"], headers
        rows = page.locator("#listen-grid tbody tr")
        assert rows.count() == 2 and "ሰላም ዓለም" in rows.nth(0).inner_text()
        assert page.locator("#listen-grid tbody tr").nth(1).locator("audio").count() == 2
        page.wait_for_function(
            "() => /no choices yet/.test(document.getElementById('listen-rate')?.innerText || '')",
            timeout=UI_TIMEOUT_MS)

        page.locator("#listen-start").click()
        page.locator("#listen-ab .listen-ab[data-token] audio").nth(1).wait_for(timeout=UI_TIMEOUT_MS)
        # Blind: neither player nor the trial's markup says which model plays as A or B.
        players = page.locator("#listen-ab .listen-ab-player").evaluate_all("els => els.map(e => e.outerHTML)")
        assert len(players) == 2 and not any("model_step" in html for html in players)
        trial = page.locator("#listen-ab .listen-ab[data-token]").evaluate(
            "el => [...el.attributes].map(a => a.value).join(' ')")
        assert "model_step" not in trial
        page.screenshot(path=str(artifacts / "tab-listen-ab.png"), full_page=True)
        page.keyboard.press("a")
        page.wait_for_function(
            "() => /stored: A is better/.test(document.getElementById('listen-ab')?.innerText || '')"
            " && /1 choice:/.test(document.getElementById('listen-ab')?.innerText || '')", timeout=UI_TIMEOUT_MS)
        choices = read_choices(run)
        assert len(choices) == 1 and choices[0]["choice"] == "A"
        assert {choices[0]["a"], choices[0]["b"]} == {"model_step2", "model_step4"}
        stored = json.loads((run / "eval" / "listening.jsonl").read_text(encoding="utf-8").splitlines()[0])
        assert stored["preferred"] == stored["a"]
        expected = "100 %" if stored["preferred"] == "model_step4" else "0 %"

        page.reload()
        _open_listen_tab(page, studio.url)
        page.wait_for_function(
            "() => /model_step4 preferred over model_step2: .*1 choice: /.test("
            "document.getElementById('listen-rate')?.innerText || '')", timeout=UI_TIMEOUT_MS)
        rate = page.locator("#listen-rate").inner_text()
        assert expected in rate and "[" in rate, rate
        page.screenshot(path=str(artifacts / "tab-listen-grid.png"), full_page=True)
