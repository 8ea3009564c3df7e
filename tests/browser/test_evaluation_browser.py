"""Checkpoint evaluation in a real browser (issue 22): a demo run measured with tiny ASR and speaker models
shows CER, WER and SIM beside each file in the Checkpoints tab, the CER curve in the Training tab, and a
checkpoint's scores under its picker in the Test tab. Every wait has a timeout."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import soundfile

from generations.indextts15.demo.build import DemoPaths
from tests.speech_model_factory import build_ctc_model, build_xvector_model
from tests.studio_process import StudioProcess
from tests.trainer_helpers import events, run_main, subset_manifest, tiny_args
from trainer.evaluate import main as evaluate_main

UI_TIMEOUT_MS = 60_000
# CER and WER in percent (over 100 when garbage transcripts insert), SIM a cosine, each with its 95 % interval
SCORE = re.compile(r"^\d+\.\d % \[\d+\.\d, \d+\.\d\]$")
SIMILARITY = re.compile(r"^-?\d\.\d{3} \[-?\d\.\d{3}, -?\d\.\d{3}\]$")


@pytest.fixture
def measured_workspace(studio_workspace: Path, tmp_path: Path) -> Path:
    ws = DemoPaths.under(studio_workspace)
    data = {"train": subset_manifest(ws.train_manifest, tmp_path / "train.jsonl", 6),
            "val": subset_manifest(ws.val_manifest, tmp_path / "val.jsonl", 3)}
    voice = tmp_path / "voice.wav"
    t = np.arange(24_000) / 24_000
    soundfile.write(voice, (0.3 * np.sin(2 * np.pi * 140 * t)).astype(np.float32), 24_000)
    argv = tiny_args(ws, data, ws.output_dir, max_steps=4, save_interval=2, vocoder=ws.vocoder, sample_every=1000,
                     eval_asr=build_ctc_model(tmp_path / "ctc"), eval_speaker_model=build_xvector_model(tmp_path / "xv"),
                     eval_sentences=2, eval_reference=voice, eval_base=False, best_by="cer")
    assert run_main(argv) == 0
    assert evaluate_main([str(ws.output_dir)]) == 0
    assert [e["step"] for e in events(ws.output_dir, "eval")] == [2, 4]
    return studio_workspace


def _column(page, table_id: str, name: str) -> list[str]:
    """The cells of one column of a gr.Dataframe, by its header text."""
    return page.evaluate(
        """([id, name]) => {
            const rows = [...document.querySelectorAll(`#${id} [role=row]`)].map(
                row => [...row.children].map(cell => cell.innerText.trim()));
            const index = rows.length ? rows[0].indexOf(name) : -1;
            return index < 0 ? null : rows.slice(1).map(cells => cells[index]);
        }""", [table_id, name])


def test_scores_in_checkpoints_training_and_test_tabs(page, measured_workspace: Path, artifacts: Path,
                                                     tmp_path: Path):
    with StudioProcess(measured_workspace, tmp_path / "studio.log") as studio:
        studio.wait_ready()
        page.goto(studio.url)

        page.get_by_role("tab", name="Checkpoints", exact=True).click()
        page.locator("#ckpt-list-run").click()
        page.wait_for_function(
            "() => { const t = document.getElementById('ckpt-list-table')?.innerText || '';"
            " return t.includes('model_step4.pth') && t.includes('CER') && t.includes('SIM'); }",
            timeout=UI_TIMEOUT_MS)
        files = _column(page, "ckpt-list-table", "file")
        cer, sim = _column(page, "ckpt-list-table", "CER"), _column(page, "ckpt-list-table", "SIM")
        assert files and cer and sim, (files, cer, sim)
        for name in ("model_step2.pth", "model_step4.pth", "latest.pth", "best.pth"):
            row = files.index(name)
            assert SCORE.match(cer[row]) and SIMILARITY.match(sim[row]), (name, cer[row], sim[row])
        page.screenshot(path=str(artifacts / "tab-checkpoints-scores.png"), full_page=True)

        page.get_by_role("tab", name="Training", exact=True).click()
        # CER, WER, SIM and the health's rate ratio and runaway share at steps 2 and 4: ten points (the legend is
        # drawn on a canvas).
        page.wait_for_function(
            "() => /10 points, up to step 4/.test(document.getElementById('train-eval-plot')?.innerText || '')",
            timeout=UI_TIMEOUT_MS)
        page.screenshot(path=str(artifacts / "tab-training-eval.png"), full_page=True)

        page.get_by_role("tab", name="Test", exact=True).click()
        page.locator("#test-files-b .test-scores").wait_for(timeout=UI_TIMEOUT_MS)
        assert re.search(r"CER \d+\.\d % · WER \d+\.\d % · SIM -?\d\.\d{3}",  # rates in percent (issue 36)
                         page.locator("#test-files-b").inner_text())
