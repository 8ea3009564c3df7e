"""The frozen test set: measured on request and for the model card, never for best-by.

``python -m data_tools.split --test-fraction F`` sets ``test.jsonl`` aside before training and records its
SHA-256; here it is checked against that digest (a test set changed on disk is refused in one line), its
transcripts become the sentences, spoken in the run's evaluation voices with the run's seeds and decoding.

    <run>/eval/test/test_set.json            which file, its sha256, the evaluation set it makes
    <run>/eval/test/model_step<N>.eval.json  a checkpoint's scores on it (base.eval.json: the base model's)
    <run>/eval/test/floor.eval.json          the recogniser on the test clips' real recordings

Measuring is ``frozen_measure.measure_test`` (it synthesises); this module only reads and describes, so the
model card of an export can use it. These results live apart from the per-checkpoint results that best.pth follows, so the test set never
chooses a checkpoint: it only reports on the one chosen.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from trainer.evaluation.errors import EvaluationError
from trainer.evaluation.eval_set import EvalSet, Sentence, eval_dir
from trainer.evaluation.results import display_scale, read_result
from trainer.evaluation.stats import METRICS, compare, interval_of

TEST_DIR = "test"
TEST_SET_FILE = "test_set.json"


def frozen_folder(run_dir: Path) -> Path:
    return eval_dir(run_dir) / TEST_DIR


def frozen_eval_set(test_manifest: Path, run_set: EvalSet) -> tuple[EvalSet, str]:
    """The evaluation set of the frozen test manifest (the run's voices, seeds and decoding); (set, sha256)."""
    from data_tools.split import SplitError, verify_test_set

    try:
        digest = verify_test_set(test_manifest)
    except SplitError as exc:
        raise EvaluationError(f"--test-set: {exc}") from None
    sentences: list[Sentence] = []
    languages: set[str] = set()
    for line in Path(test_manifest).read_text(encoding="utf-8").splitlines():
        obj = json.loads(line) if line.strip() else None
        if not isinstance(obj, dict):
            continue
        text = obj.get("text") or obj.get("target_text")
        uid = obj.get("target_id") or obj.get("id")
        if isinstance(text, str) and text.strip() and isinstance(uid, str):
            sentences.append(Sentence(uid, text))
            if isinstance(obj.get("language"), str):
                languages.add(obj["language"])
    if not sentences:
        raise EvaluationError(f"--test-set {test_manifest}: no transcribed line")
    language = run_set.language or (sorted(languages)[0] if len(languages) == 1 else None)
    test_set = replace(run_set, language=language, sentences=sentences, second_language=None, second_sentences=[])
    return test_set, digest


def with_intervals(result: dict[str, Any], base: dict[str, Any] | None) -> None:
    result["intervals"] = {m: (i.to_dict() if (i := interval_of(result, m)) else None) for m in METRICS}
    if base is not None:
        result["vs_base"] = {m: (c.to_dict() if (c := compare(result, base, m)) else None) for m in METRICS}


def frozen_line(result: dict[str, Any], floor: dict[str, Any] | None) -> str:
    """``CER 9.8 % [8.9, 10.7] (real speech 7.1 %) · WER ... · SIM ...``."""
    parts = []
    for metric in METRICS:
        interval = (result.get("intervals") or {}).get(metric)
        if not interval:
            continue
        scale, unit, digits = display_scale(metric)
        text = (f"{metric.upper()} {interval['value'] * scale:.{digits}f}{unit} [{interval['low'] * scale:.{digits}f}, "
                f"{interval['high'] * scale:.{digits}f}]")
        if floor is not None and metric in ("cer", "wer") and floor.get(metric) is not None:
            text += f" (real speech {floor[metric] * 100:.1f} %)"
        parts.append(text)
    return " · ".join(parts) or "no scores"


def frozen_results(run_dir: Path) -> tuple[dict[str, Any] | None, dict[int, dict[str, Any]], dict[str, Any] | None]:
    """(test_set.json, {step: result}, floor) of the run's frozen test set as measured so far."""
    from trainer.evaluation.floor import read_floor

    folder = frozen_folder(run_dir)
    try:
        info = json.loads((folder / TEST_SET_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None, {}, None
    by_step: dict[int, dict[str, Any]] = {}
    for path in folder.glob("model_step*.eval.json"):
        result = read_result(path)
        if result is not None and result.get("eval_set") == info.get("eval_set"):
            by_step[int(result.get("step") or 0)] = result
    return info, by_step, read_floor(folder, info.get("eval_set"))
