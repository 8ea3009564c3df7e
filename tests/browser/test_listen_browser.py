"""The Test tab in a real browser: the base model and a fine-tuned checkpoint speak side by side.

On a copy of the demo workspace with a tiny training run (with the demo vocoder, so it has samples), the
page synthesizes with A = base model and B = the run's latest checkpoint, then fetches the audio each
player serves and reads its header: 24 kHz, more than zero frames; then the Training tab's sample players of
the same run. The full studio is used (every tab is mandatory). Every wait has a timeout.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from generations.indextts15.demo.build import DemoPaths
from tests.browser.served_audio import served_audio
from tests.studio_process import StudioProcess
from tests.trainer_helpers import run_main, subset_manifest, tiny_args

SYNTH_TIMEOUT_MS = 300_000  # two synthesis processes (torch import, model load) on a busy 2-core machine
UI_TIMEOUT_MS = 60_000


@pytest.fixture
def trained_workspace(studio_workspace: Path, tmp_path: Path) -> Path:
    ws = DemoPaths.under(studio_workspace)
    data = {"train": subset_manifest(ws.train_manifest, tmp_path / "train.jsonl", 6),
            "val": subset_manifest(ws.val_manifest, tmp_path / "val.jsonl", 3)}
    assert run_main(tiny_args(ws, data, ws.output_dir, max_steps=2, save_interval=2, vocoder=ws.vocoder)) == 0
    return studio_workspace


def test_base_and_fine_tuned_side_by_side_in_the_browser(page, trained_workspace: Path, artifacts: Path,
                                                        tmp_path: Path):
    with StudioProcess(trained_workspace, tmp_path / "studio.log") as studio:
        studio.wait_ready()
        page.goto(studio.url)
        page.get_by_role("tab", name="Test", exact=True).click()
        page.locator("#test-run").wait_for(timeout=UI_TIMEOUT_MS)
        assert page.locator("#test-model-a input").input_value().startswith("base model · checkpoints")
        assert page.locator("#test-model-b input").input_value() == "runs/demo · latest.pth (step 2)"
        page.locator("#test-files-b .studio-badge[data-tone='ok']").wait_for(timeout=UI_TIMEOUT_MS)
        assert "amharic_extended.model" in page.locator("#test-files-b").inner_text()  # B's own tokenizer
        assert "bpe.model" in page.locator("#test-files-a").inner_text()

        page.get_by_text("Decoding and files").click()
        page.locator("#test-decode").get_by_label("greedy").check()
        page.locator("#test-run").click()
        page.wait_for_function(
            "() => ['a', 'b'].every(side => document.querySelector(`#test-status-${side} .studio-badge`)"
            "?.dataset.tone === 'ok') || document.querySelector('#test-message .studio-badge')?.dataset.tone "
            "=== 'error' || ['a', 'b'].some(side => document.querySelector(`#test-status-${side} .studio-badge`)"
            "?.dataset.tone === 'error')", timeout=SYNTH_TIMEOUT_MS)
        for side in ("a", "b"):
            status = page.locator(f"#test-status-{side}").inner_text()
            assert "real-time factor" in status and "24000 Hz" in status, (side, status,
                                                                             page.locator("#test-message").inner_text())
            rate, frames = served_audio(page, f"test-audio-{side}")
            assert rate == 24000 and frames > 0, (side, rate, frames)
            # the player shows the length once it has read the file's header: wait for it, not race it
            page.wait_for_function("(id) => (document.querySelector(`#${id} #duration`)?.innerText ?? '0:00') "
                                   "!== '0:00'", arg=f"test-audio-{side}", timeout=UI_TIMEOUT_MS)
        page.screenshot(path=str(artifacts / "tab-test.png"), full_page=True)

        # The Training tab's sample players show the run's saves.
        page.get_by_role("tab", name="Training", exact=True).click()
        note = page.locator("#train-samples-note")
        page.wait_for_function("() => document.querySelector('#train-samples-note')?.innerText.includes("
                               "'step 2: 3 sample(s)')", timeout=UI_TIMEOUT_MS)
        assert "missing" not in note.inner_text()
        for index in range(3):
            rate, frames = served_audio(page, f"train-samples-player-{index}")
            assert rate == 24000 and frames > 0
        page.screenshot(path=str(artifacts / "samples-panel.png"), full_page=True)
