"""The Test tab in a real browser with IndexTTS2: the v2 base model and a v2 fine-tuned checkpoint side by side.

On a copy of the demo workspace with a tiny IndexTTS2 training run (samples on, through the demo's tiny
download folder), the page synthesizes with A = the v2 base model and B = the run's latest checkpoint (S2Mel
steps lowered), then fetches the audio each player serves and reads its header: 22.05 kHz, more than zero
frames, a non-zero duration; then the Training tab's sample players of the same run (IndexTTS2 demo preset).
Every wait has a timeout.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from generations.indextts2.demo.build import DemoPaths as DemoV2Paths
from tests.browser.sections import check_kept, fill_kept, open_settled
from tests.browser.served_audio import served_audio
from tests.studio_process import StudioProcess
from tests.test_train_v2 import pair_subset, v2_args
from tests.trainer_helpers import run_main

SYNTH_TIMEOUT_MS = 300_000  # two synthesis processes (torch + transformers import, model load) on 2 busy cores
UI_TIMEOUT_MS = 60_000


@pytest.fixture
def trained_workspace(studio_workspace: Path) -> Path:
    ws = DemoV2Paths.under(studio_workspace)
    folder = ws.train_manifest.parent
    data = {"train": pair_subset(ws.train_manifest, folder / "browser_train.jsonl", 6),
            "val": pair_subset(ws.val_manifest, folder / "browser_val.jsonl", 3)}
    assert run_main(v2_args(ws, data, ws.output_dir, max_steps=2, save_interval=2,
                            sample_model_dir=ws.config.parent)) == 0
    return studio_workspace


def _pick(page, side: str, label: str) -> None:
    page.locator(f"#test-model-{side} input").click()
    page.locator(f"#test-model-{side}").get_by_role("option", name=label, exact=True).click()  # this picker's list


def test_v2_base_and_fine_tuned_side_by_side_in_the_browser(page, trained_workspace: Path, artifacts: Path,
                                                           tmp_path: Path):
    with StudioProcess(trained_workspace, tmp_path / "studio.log") as studio:
        studio.wait_ready()
        page.goto(studio.url)
        page.get_by_role("tab", name="Test", exact=True).click()
        page.locator("#test-run").wait_for(timeout=UI_TIMEOUT_MS)
        _pick(page, "a", "base model · v2/checkpoints (IndexTTS2)")
        _pick(page, "b", "v2/runs/demo · latest.pth (step 2)")
        for side in ("a", "b"):
            page.locator(f"#test-files-{side} .studio-badge[data-tone='ok']").wait_for(timeout=UI_TIMEOUT_MS)
            assert "IndexTTS2 folder v2/checkpoints" in page.locator(f"#test-files-{side}").inner_text()
        assert "amharic_extended.model" in page.locator("#test-files-b").inner_text()  # B's own tokenizer

        open_settled(page, "Decoding and files", "#test-decode", "#test-device")
        check_kept(page, page.locator("#test-decode").get_by_label("greedy"))
        open_settled(page, "IndexTTS2: S2Mel steps and emotion", "#test-v2-steps input", "#test-emotion-reference")
        fill_kept(page, "#test-v2-steps input", "4")
        page.locator("#test-run").click()
        page.wait_for_function(
            "() => ['a', 'b'].every(side => document.querySelector(`#test-status-${side} .studio-badge`)"
            "?.dataset.tone === 'ok') || document.querySelector('#test-message .studio-badge')?.dataset.tone "
            "=== 'error' || ['a', 'b'].some(side => document.querySelector(`#test-status-${side} .studio-badge`)"
            "?.dataset.tone === 'error')", timeout=SYNTH_TIMEOUT_MS)
        page.get_by_text("Commands and logs").click()
        command = page.locator("#test-command textarea").input_value()
        assert command.count("--model-dir") == 2 and command.count("--steps 4") == 2, command
        for side in ("a", "b"):
            status = page.locator(f"#test-status-{side}").inner_text()
            assert "real-time factor" in status and "22050 Hz" in status, (side, status,
                                                                             page.locator("#test-message").inner_text())
            rate, frames = served_audio(page, f"test-audio-{side}")
            assert rate == 22050 and frames > 0, (side, rate, frames)
            # the player shows the length once it has read the file's header: wait for it, not race it
            page.wait_for_function("(id) => (document.querySelector(`#${id} #duration`)?.innerText ?? '0:00') "
                                   "!== '0:00'", arg=f"test-audio-{side}", timeout=UI_TIMEOUT_MS)
        page.screenshot(path=str(artifacts / "tab-test-v2.png"), full_page=True)

        # The Training tab's sample players show the IndexTTS2 run's saves (its demo preset's output dir).
        page.get_by_role("tab", name="Training", exact=True).click()
        page.locator("#train-preset input").click()
        page.get_by_role("option", name="Demo (IndexTTS2)", exact=True).click()
        page.locator("#train-apply-preset").click()
        page.wait_for_function("() => document.querySelector('#train-samples-note')?.innerText.includes("
                               "'step 2: 3 sample(s)')", timeout=UI_TIMEOUT_MS)
        for index in range(3):
            rate, frames = served_audio(page, f"train-samples-player-{index}")
            assert rate == 22050 and frames > 0
        page.screenshot(path=str(artifacts / "samples-panel-v2.png"), full_page=True)
