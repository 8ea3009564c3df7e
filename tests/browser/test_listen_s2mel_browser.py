"""The Test tab in a real browser plays GPT-only vs GPT + S2Mel side by side (issue 30, "Use").

On a copy of the demo workspace with a 2-step S2Mel run of the demo's tiny IndexTTS-2.5 download folder
(``v25/runs/s2mel``, the real trainer on generated clips), the page picks the same 2.5 base model for A and B,
leaves A's S2Mel the stock one and picks the run's latest checkpoint for B from the S2Mel picker (no typed path),
synthesizes, and reads back what each player serves: 22.05 kHz audio on both sides, different sounds, B's command
alone with ``--s2mel``. Every wait has a timeout.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest
import soundfile

from generations.indextts25.demo.build import DemoPaths as DemoV25Paths
from tests.browser.sections import check_kept, fill_kept, open_settled
from tests.browser.served_audio import served_audio
from tests.s2mel_demo_run import make_s2mel_run
from tests.studio_process import StudioProcess

SYNTH_TIMEOUT_MS = 300_000  # two synthesis processes (torch import, model load) on 2 busy cores
UI_TIMEOUT_MS = 60_000
BASE = "base model · v25/checkpoints (IndexTTS-2.5)"
TRAINED = "S2Mel v25/runs/s2mel · latest.pth (step 2)"
ALL_DONE = (
    "() => ['a', 'b'].every(side => document.querySelector(`#test-status-${side} .studio-badge`)?.dataset.tone "
    "=== 'ok') || document.querySelector('#test-message .studio-badge')?.dataset.tone === 'error' || "
    "['a', 'b'].some(side => document.querySelector(`#test-status-${side} .studio-badge`)?.dataset.tone === 'error')"
)


@pytest.fixture
def s2mel_workspace(studio_workspace: Path) -> Path:
    make_s2mel_run(DemoV25Paths.under(studio_workspace).config.parent, studio_workspace / "v25" / "runs" / "s2mel",
                   learning_rate=1e-2)
    return studio_workspace


def _pick(page, picker: str, label: str) -> None:
    page.locator(f"#{picker} input").click()
    page.locator(f"li[role='option'][aria-label='{label}']:visible").last.click()  # the open list is this picker's
    page.keyboard.press("Escape")


def _served_samples(page, side: str):
    href = page.locator(f"#test-audio-{side} a[data-testid='download-link']").get_attribute("href")
    response = page.request.get(href)
    assert response.ok, (side, href, response.status)
    samples, _ = soundfile.read(io.BytesIO(response.body()))
    return samples


def test_gpt_only_and_gpt_with_trained_s2mel_side_by_side_in_the_browser(page, s2mel_workspace: Path,
                                                                         artifacts: Path, tmp_path: Path):
    with StudioProcess(s2mel_workspace, tmp_path / "studio.log") as studio:
        studio.wait_ready()
        page.goto(studio.url)
        page.get_by_role("tab", name="Test", exact=True).click()
        page.locator("#test-run").wait_for(timeout=UI_TIMEOUT_MS)
        _pick(page, "test-model-a", BASE)
        _pick(page, "test-model-b", BASE)
        _pick(page, "test-s2mel-b", TRAINED)  # the run is offered as a decoder, picked from the workspace's runs
        page.wait_for_function("() => document.querySelector('#test-files-b')?.innerText.includes("
                               "'S2Mel v25/runs/s2mel/latest.pth')", timeout=UI_TIMEOUT_MS)
        assert "S2Mel: stock" in page.locator("#test-files-a").inner_text()
        for side in ("a", "b"):
            page.locator(f"#test-files-{side} .studio-badge[data-tone='ok']").wait_for(timeout=UI_TIMEOUT_MS)

        open_settled(page, "Decoding and files", "#test-decode", "#test-device")
        check_kept(page, page.locator("#test-decode").get_by_label("greedy"))
        open_settled(page, "IndexTTS2: S2Mel steps and emotion", "#test-v2-steps input", "#test-emotion-reference")
        fill_kept(page, "#test-v2-steps input", "2")
        page.locator("#test-run").click()
        page.wait_for_function(ALL_DONE, timeout=SYNTH_TIMEOUT_MS)
        for side in ("a", "b"):
            status = page.locator(f"#test-status-{side}").inner_text()
            assert "real-time factor" in status and "22050 Hz" in status, (side, status,
                                                                             page.locator("#test-message").inner_text())
            rate, frames = served_audio(page, f"test-audio-{side}")
            assert rate == 22050 and frames > 0, (side, rate, frames)
        assert "+ S2Mel s2mel/latest.pth" in page.locator("#test-detail-b textarea").input_value()
        assert "S2Mel" not in page.locator("#test-detail-a textarea").input_value()
        a, b = _served_samples(page, "a"), _served_samples(page, "b")
        assert a.shape != b.shape or abs(a - b).max() > 1e-4  # the trained decoder changes the sound
        page.get_by_text("Commands and logs").click()
        commands = page.locator("#test-command textarea").input_value()
        first, second = commands.split("# B")
        assert "--s2mel" not in first and "--s2mel " in second, commands
        page.screenshot(path=str(artifacts / "tab-test-s2mel.png"), full_page=True)
