"""Kept only when it helps (issue 30): an S2Mel that makes the voice less similar is measured through the whole
pipeline, left out of the export, and the run's log says why.

A 4-step full S2Mel run of the demo's tiny IndexTTS-2.5 folder, trained (seeded) toward mels whose energy falls
steeply with frequency, is judged by ``python -m trainer.s2mel.evaluate`` on two held-out voices with the
evaluation's own judges (an x-vector speaker model and a CTC recogniser, tiny and random, built here): each voice
speaks through the same GPT with the stock and with the trained S2Mel. With this seed the trained decoder lowers the
similarity (the demo's networks are random, so the direction is the seed's, not a property of the run); the export
then refuses it by default, naming the measurement, and writes it only on the user's override.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from generations.indextts25.demo.build import DemoPaths as DemoV25Paths
from tests.s2mel_demo_run import make_s2mel_run
from tests.speech_model_factory import TINY_CONV, build_ctc_model, build_xvector_model
from trainer.checkpoints.__main__ import main as checkpoints_main
from trainer.s2mel.evaluate import SCORES_FILE
from trainer.s2mel.evaluate import main as evaluate_main
from webui.testing.s2mel_scores_view import scores_html


@pytest.fixture(scope="module")
def judges(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("judges")
    # The seed below was chosen with the 800 frames/s encoder (TINY_CONV), whose random x-vectors tell these
    # short clips apart more than the default's do.
    return build_xvector_model(folder / "xvector", conv=TINY_CONV), build_ctc_model(folder / "ctc")


def _events(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]


def test_an_s2mel_that_lowers_similarity_is_left_out_of_the_export_and_the_log_says_why(
        demo_workspace, judges, tmp_path: Path, capsys) -> None:
    paths = DemoV25Paths.under(demo_workspace.root)
    model_dir = paths.config.parent
    run = tmp_path / "run"
    latest = make_s2mel_run(model_dir, run, mode="full", steps=4, learning_rate=0.05, mel_level=-5.0,
                            mel_tilt=-5.0, seed=0)
    voices = sorted((paths.train_manifest.parent / "wavs").glob("*.wav"))  # the validation utterances' audio
    held_out = [voices[0], voices[-1]]
    xvector, ctc = judges
    assert evaluate_main([str(latest), "--model-dir", str(model_dir), "--voices", *map(str, held_out),
                          "--speaker-model", str(xvector), "--asr", str(ctc), "--steps", "2",
                          "--max-codes", "20"]) == 0
    printed = capsys.readouterr().out
    scores = json.loads((run / SCORES_FILE).read_text(encoding="utf-8"))
    assert [s["voice"] for s in scores["without"]] == [s["voice"] for s in scores["with"]] == [v.name for v in held_out]
    without = sum(s["similarity"] for s in scores["without"]) / 2
    with_s2mel = sum(s["similarity"] for s in scores["with"]) / 2
    assert with_s2mel < without - 1e-3, scores  # the seeded run makes the voice less similar
    assert scores["step"] == 4 and scores["keep"] is False
    assert scores["reason"].startswith("S2Mel adapter left out: similarity fell")
    assert scores["reason"] in printed
    assert _events(run)[-1] == {"part": "s2mel", "event": "keep", "step": 4, "keep": False, "strength": 1.0,
                                "reason": scores["reason"]}
    assert "<b>left out</b>" in scores_html(latest)  # what the studio shows under the picked S2Mel

    export = ["export-s2mel", str(latest), "--model-dir", str(model_dir), "--out", str(tmp_path / "out")]
    assert checkpoints_main(export) == 2  # the scores beside the checkpoint gate it by default
    refusal = capsys.readouterr().err
    assert f"not exported: {scores['reason']}" in refusal and "--keep keep" in refusal
    assert not (tmp_path / "out").exists()
    logged = _events(run)[-1]
    assert logged["event"] == "export" and logged["exported"] is False and logged["reason"] == scores["reason"]

    assert checkpoints_main([*export, "--keep", "keep"]) == 0  # the user's override, with the measurement
    assert "kept by the user's override although similarity fell" in capsys.readouterr().out
    assert (tmp_path / "out" / "s2mel.pth").is_file()

    stale = dict(scores, step=2)  # scores of another step than the checkpoint's do not decide for it
    (run / SCORES_FILE).write_text(json.dumps(stale), encoding="utf-8")
    assert checkpoints_main([*export, "--force"]) == 2
    assert "measured step 2, latest.pth is step 4" in capsys.readouterr().err


def test_the_studio_shows_both_sides_scores_and_the_decision(tmp_path: Path) -> None:
    latest = tmp_path / "latest.pth"
    latest.write_bytes(b"")
    assert scores_html(latest) == ""  # not measured: nothing shown
    (tmp_path / SCORES_FILE).write_text(json.dumps({
        "step": 4, "keep": False, "reason": "S2Mel adapter left out: similarity fell (-0.0100, need +0.0000)",
        "without": [{"voice": "a.wav", "similarity": 0.8, "cer": 0.1}],
        "with": [{"voice": "a.wav", "similarity": 0.7, "cer": 0.1}]}), encoding="utf-8")
    shown = scores_html(latest)
    assert 'data-keep="false"' in shown and "<b>left out</b>" in shown and "similarity fell" in shown
    assert "<td>a.wav</td><td>0.8000</td><td>0.7000</td><td>10.0 %</td><td>10.0 %</td>" in shown  # CER in percent
