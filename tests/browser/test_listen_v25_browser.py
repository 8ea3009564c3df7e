"""The Test tab in a real browser with IndexTTS-2.5: the 2.5 base model and a 2.5 fine-tune side by side, then a
LoRA run's checkpoint with its adapter on and off.

On a copy of the demo workspace with two tiny 2.5 runs (``v25/runs/demo``, samples on through the demo's tiny
2.5 download folder, and ``v25/runs/lora`` with ``--lora``), the page synthesizes each pair (S2Mel steps lowered,
a duration factor set), then fetches the audio each player serves and reads its header: 22.05 kHz, more than
zero frames, a non-zero duration; then the Training tab's sample players of the fine-tune (IndexTTS-2.5 demo
preset). Every wait has a timeout.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from generations.indextts25.demo.build import DemoPaths as DemoV25Paths
from tests.browser.sections import check_kept, fill_kept, open_settled
from tests.browser.served_audio import served_audio
from tests.studio_process import StudioProcess
from tests.test_train_v25 import pair_subset, v25_args
from tests.trainer_helpers import run_main

SYNTH_TIMEOUT_MS = 300_000  # two synthesis processes (torch + transformers import, model load) on 2 busy cores
UI_TIMEOUT_MS = 60_000
ALL_DONE = (
    "() => ['a', 'b'].every(side => document.querySelector(`#test-status-${side} .studio-badge`)?.dataset.tone "
    "=== 'ok') || document.querySelector('#test-message .studio-badge')?.dataset.tone === 'error' || "
    "['a', 'b'].some(side => document.querySelector(`#test-status-${side} .studio-badge`)?.dataset.tone === 'error')"
)

STARTED = ("() => ['a', 'b'].every(side => document.querySelector(`#test-status-${side} .studio-badge`)?.dataset.tone "
           "!== 'ok')")


@pytest.fixture
def trained_workspace(studio_workspace: Path) -> Path:
    ws = DemoV25Paths.under(studio_workspace)
    folder = ws.train_manifest.parent
    data = {"train": pair_subset(ws.train_manifest, folder / "browser_train.jsonl", 6),
            "val": pair_subset(ws.val_manifest, folder / "browser_val.jsonl", 3)}
    assert run_main(v25_args(ws, data, ws.output_dir, max_steps=2, sample_model_dir=ws.config.parent,
                             sample_steps=2)) == 0
    assert run_main([*v25_args(ws, data, ws.root / "runs" / "lora", max_steps=2), "--lora"]) == 0
    return studio_workspace


def _pick(page, side: str, label: str) -> None:
    page.locator(f"#test-model-{side} input").click()
    options = page.locator(f"li[role='option'][aria-label='{label}']:visible")
    (options.first if side == "a" else options.last).click()  # A's list may still be in the page: B's is last
    page.keyboard.press("Escape")


def _synthesize_and_check(page, artifacts: Path, shot: str) -> str:
    page.locator("#test-run").click()
    page.wait_for_function(STARTED, timeout=UI_TIMEOUT_MS)  # the last pair's results are gone
    page.wait_for_function(ALL_DONE, timeout=SYNTH_TIMEOUT_MS)
    for side in ("a", "b"):
        status = page.locator(f"#test-status-{side}").inner_text()
        assert "real-time factor" in status and "22050 Hz" in status, (side, status,
                                                                         page.locator("#test-message").inner_text())
        rate, frames = served_audio(page, f"test-audio-{side}")
        assert rate == 22050 and frames > 0, (side, rate, frames)
        page.wait_for_function(f"() => (document.querySelector('#test-audio-{side} #duration')?.innerText || '0:00') "
                               "!== '0:00'", timeout=UI_TIMEOUT_MS)  # the player has read the new audio
    page.screenshot(path=str(artifacts / shot), full_page=True)
    return page.locator("#test-command textarea").input_value()


def test_v25_base_and_fine_tune_then_adapter_on_and_off_in_the_browser(page, trained_workspace: Path,
                                                                       artifacts: Path, tmp_path: Path):
    with StudioProcess(trained_workspace, tmp_path / "studio.log") as studio:
        studio.wait_ready()
        page.goto(studio.url)
        page.get_by_role("tab", name="Test", exact=True).click()
        page.locator("#test-run").wait_for(timeout=UI_TIMEOUT_MS)
        _pick(page, "a", "base model · v25/checkpoints (IndexTTS-2.5)")
        _pick(page, "b", "v25/runs/demo · latest.pth (step 2)")
        for side in ("a", "b"):
            page.locator(f"#test-files-{side} .studio-badge[data-tone='ok']").wait_for(timeout=UI_TIMEOUT_MS)
            assert "IndexTTS-2.5 folder v25/checkpoints" in page.locator(f"#test-files-{side}").inner_text()

        open_settled(page, "Decoding and files", "#test-decode", "#test-device")
        check_kept(page, page.locator("#test-decode").get_by_label("greedy"))
        open_settled(page, "IndexTTS-2.5: duration", "#test-v2-steps input", "#test-emotion-reference")
        fill_kept(page, "#test-v2-steps input", "2")
        fill_kept(page, "#test-duration-factor input", "1.2")
        page.get_by_text("Commands and logs").click()
        command = _synthesize_and_check(page, artifacts, "tab-test-v25.png")
        assert command.count("--model-dir") == 2 and command.count("--duration-factor 1.2") == 2, command
        assert "--no-adapter" not in command

        _pick(page, "a", "v25/runs/lora · latest.pth (step 2)")
        _pick(page, "b", "v25/runs/lora · latest.pth (step 2) · LoRA adapter off")
        command = _synthesize_and_check(page, artifacts, "tab-test-v25-lora.png")
        first, second = command.split("\n# B\n")
        assert "--no-adapter" not in first and "--no-adapter" in second, command

        # The Training tab's sample players show the 2.5 run's saves (its demo preset's output dir).
        page.get_by_role("tab", name="Training", exact=True).click()
        page.locator("#train-preset input").click()
        page.get_by_role("option", name="IndexTTS-2.5 demo (CPU)", exact=True).click()
        page.locator("#train-apply-preset").click()
        page.wait_for_function("() => document.querySelector('#train-samples-note')?.innerText.includes("
                               "'step 2: 3 sample(s)')", timeout=UI_TIMEOUT_MS)
        for index in range(3):
            rate, frames = served_audio(page, f"train-samples-player-{index}")
            assert rate == 22050 and frames > 0
        page.screenshot(path=str(artifacts / "samples-panel-v25.png"), full_page=True)
