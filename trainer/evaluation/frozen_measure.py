"""Measure a checkpoint on the frozen test set (``frozen_test``): the test texts in the run's voices and seeds,
the base model once, and the recogniser's floor on the test clips' real recordings."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from data_tools.fileio import atomic_write_text
from trainer.evaluation.floor import measure_floor, real_audio_by_id
from trainer.evaluation.frozen_test import (
    TEST_SET_FILE,
    frozen_eval_set,
    frozen_folder,
    frozen_line,
    with_intervals,
)
from trainer.evaluation.results import read_result, write_result
from trainer.evaluation.runner import Evaluator


def measure_test(evaluator: Any, test_manifest: Path, checkpoint: Path, base: Path | None = None,
                 say: Any = print) -> dict[str, Any]:
    """Measure ``checkpoint`` (and once the base model) on the frozen test set, and the recogniser's floor on its
    real recordings; the checkpoint's result (with intervals and the difference against the base)."""
    from trainer.checkpoints.store import step_of

    run_dir = Path(evaluator.settings.run_dir)
    test_set, digest = frozen_eval_set(Path(test_manifest), evaluator.eval_set)
    folder = frozen_folder(run_dir)
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write_text(folder / TEST_SET_FILE, json.dumps(
        {"file": str(Path(test_manifest).resolve()), "sha256": digest, "sentences": len(test_set.sentences),
         "eval_set": test_set.fingerprint}, indent=2) + "\n")
    worker = Evaluator(replace(evaluator.settings, best_by="val_loss", keep_clips=False), test_set,
                             evaluator.scorer, backend=evaluator._backend, say=say)
    base_result = None
    if base is not None:
        base_file = folder / "base.eval.json"
        base_result = read_result(base_file)
        if base_result is None or base_result.get("eval_set") != test_set.fingerprint:
            base_result = worker.measure(base, model="base")
            with_intervals(base_result, None)
            write_result(base_file, base_result)
    result = worker.measure(Path(checkpoint))
    step = result["step"] or step_of(Path(checkpoint)) or 0
    result.update(step=int(step), test_set={"file": str(test_manifest), "sha256": digest})
    with_intervals(result, base_result)
    write_result(folder / f"model_step{step}.eval.json", result)
    floor = measure_floor(evaluator.scorer, test_set.sentences, test_set.language,
                          real_audio_by_id([test_manifest]), test_set.fingerprint, folder)
    say(f"test set ({len(test_set.sentences)} sentences, sha256 {digest[:12]}…) step {step}: " + frozen_line(result, floor))
    return result
