"""The evaluation table of a run, as Markdown lines for an export's model card."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trainer.evaluation.results import base_result_path, read_result, results_by_step, score_text

MAX_ROWS = 30


def evaluation_lines(run_dir: Path, exported_step: int | None) -> list[str]:
    """A Markdown table of the base model's and every measured checkpoint's scores (the exported one marked);
    empty when the run has no per-checkpoint evaluation results."""
    by_step = results_by_step(run_dir)
    if not by_step:
        return []
    base = read_result(base_result_path(run_dir))
    steps = list(by_step)[-MAX_ROWS:]
    if exported_step in by_step and exported_step not in steps:
        steps = [exported_step, *steps[1:]]
    sample = by_step[steps[-1]]
    second = next((r["second"] for r in by_step.values() if isinstance(r.get("second"), dict)), None)
    header = "| model | step | CER | WER | SIM |" + (f" CER ({second['language']}) |" if second else "")
    rule = "| --- | ---: | ---: | ---: | ---: |" + (" ---: |" if second else "")
    rows = [header, rule]

    def row(label: str, result: dict[str, Any]) -> str:
        cells = [label, str(result.get("step", "")), score_text(result.get("cer")), score_text(result.get("wer")),
                 score_text(result.get("sim"))]
        if second:
            other = result.get("second") if isinstance(result.get("second"), dict) else {}
            cells.append(score_text(other.get("cer")))
        return "| " + " | ".join(cells) + " |"

    if base is not None and base.get("eval_set") == sample.get("eval_set"):
        rows.append(row("base model", base))
    for step in steps:
        rows.append(row(f"**model_step{step} (this export)**" if step == exported_step else f"model_step{step}",
                        by_step[step]))
    models = sample.get("models") if isinstance(sample.get("models"), dict) else {}
    about = (f"Measured with `python -m trainer.evaluate` on the run's evaluation set ({sample.get('language') or 'any'}"
             f" sentences, fixed voices and decoding): CER/WER by the speech recogniser {models.get('asr') or '?'} "
             "after the language's scoring normaliser (lower is better; above 1 when the transcript inserts), "
             f"SIM the cosine of x-vectors of {models.get('speaker') or '?'} against the reference voice "
             "(higher is closer).")
    return [about, "", *rows]
