"""The recogniser's floor and the frozen test set (issue 29 items 3 and 4), on the stub speech of test_eval_stats.

Real recordings here are written so the stub recogniser knows them: sentence k's recording is (k + 1) * 1000
samples of quiet noise at 16 kHz, and real speech is garbled at the rate known for "step 99".
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import soundfile

from data_tools.split import split_manifest
from tests.test_eval_stats import TEXTS, _evaluator, _KnownRecogniser, _save
from trainer.evaluation import EvaluationError
from trainer.evaluation.frozen_measure import measure_test
from trainer.evaluation.frozen_test import frozen_results
from trainer.evaluation.report import evaluation_lines

REAL = 99


class _RecogniserWithRealSpeech(_KnownRecogniser):
    def transcribe(self, clips, sample_rate, language):
        real = [i for i, clip in enumerate(clips) if np.abs(clip).max() < 1.0]
        out = super().transcribe([np.array([REAL, len(clips[i]) // 1000 - 1, 0], dtype=np.float32) if i in real
                                  else clip for i, clip in enumerate(clips)], sample_rate, language)
        return out


def _recordings(folder, sources=4):
    """An audio list as raw ingest saves it: sentence k, clip (k + 1) * 1000 samples, recording k // 3."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = []
    for k, text in enumerate(TEXTS):
        audio = folder / f"clip{k}.wav"
        soundfile.write(audio, 0.01 * np.random.default_rng(k).standard_normal((k + 1) * 1000), 16_000)
        rows.append({"id": f"t{k}", "audio": audio.name, "text": text, "speaker": "spk", "language": "en",
                     "source": f"recording{k % sources}.wav"})
    manifest = folder / "manifest.jsonl"
    manifest.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return manifest


def _run(tmp_path):
    manifest = _recordings(tmp_path / "ingest")
    cer = {0: 0.30, 6: 0.12, REAL: 0.06}
    evaluator = _evaluator(tmp_path / "run", cer, {0: 0.8, 6: 0.8})
    evaluator.scorer = _RecogniserWithRealSpeech(cer, {0: 0.8, 6: 0.8})
    evaluator.settings.floor_manifests = [str(manifest)]
    return evaluator, manifest


def test_the_floor_is_measured_once_and_shown_beside_the_synthetic_cer(tmp_path):
    (tmp_path / "run").mkdir()
    evaluator, _manifest = _run(tmp_path)
    evaluator.evaluate_base()
    floor = evaluator.evaluate_floor()
    assert floor["clips"] == 12 and 0.02 < floor["cer"] < 0.12  # garbled at 6 %
    assert floor["intervals"]["cer"]["low"] <= floor["cer"] <= floor["intervals"]["cer"]["high"]
    assert evaluator.evaluate_floor() == floor  # kept, not measured again
    evaluator.evaluate_checkpoint(_save(evaluator.settings.run_dir, 6))
    card = "\n".join(evaluation_lines(evaluator.settings.run_dir, 6))
    assert f"CER {floor['cer'] * 100:.1f} % [" in card and "Recogniser's floor" in card
    assert "| base model | 0 |" in card and "CER - base [95 % CI]" in card

    from webui.training.metrics_view import FLOOR_SERIES, MetricsReader

    reader = MetricsReader(evaluator.settings.run_dir)
    reader.poll()
    curve = reader.eval_frame()
    flat = curve[curve["series"] == FLOOR_SERIES]
    assert list(flat["value"]) == [floor["cer"]] * 2 and list(flat["step"]) == [6, 6]  # beside the synthetic CER


def test_the_frozen_test_set_is_measured_apart_and_refused_when_changed(tmp_path):
    (tmp_path / "run").mkdir()
    evaluator, manifest = _run(tmp_path)
    split = split_manifest(manifest, tmp_path / "split", val_fraction=0.25, seed=2, test_fraction=0.25)
    test_rows = [json.loads(line) for line in split.test_path.read_text(encoding="utf-8").splitlines()]
    assert len({row["source"] for row in test_rows}) == 1 and len(test_rows) == 3  # one whole recording
    run = evaluator.settings.run_dir
    checkpoint = _save(run, 6)
    result = measure_test(evaluator, split.test_path, checkpoint, evaluator.settings.base_checkpoint,
                          say=lambda _line: None)
    assert len(result["items"]) == 3 * 3  # test sentences x voice x seeds
    assert result["vs_base"]["cer"]["difference"]["value"] < 0
    info, by_step, floor = frozen_results(run)
    assert info["sha256"] == split.test_digest and list(by_step) == [6] and floor["clips"] == 3
    assert not (run / "model_step6.eval.json").exists()  # the test set never feeds best-by
    card = "\n".join(evaluation_lines(run, 6) or ["(no per-checkpoint table)"])
    assert "### Held-out test set" in card and "model_step6: CER " in card and "real speech" in card

    split.test_path.write_text(split.test_path.read_text(encoding="utf-8").replace("sentence", "SENTENCE"),
                               encoding="utf-8")
    with pytest.raises(EvaluationError, match="changed on disk since it was frozen"):
        measure_test(evaluator, split.test_path, checkpoint, say=lambda _line: None)
