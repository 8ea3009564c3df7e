"""The evaluation of a run, as Markdown lines for an export's model card: every checkpoint's scores with their
95 % intervals, the difference against the base model and its health (``health``), the recogniser's floor on real speech, and the
frozen test set's scores of the exported checkpoint (``frozen_test``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trainer.evaluation.eval_set import eval_dir
from trainer.evaluation.floor import read_floor
from trainer.evaluation.health import health_cell, health_lines
from trainer.evaluation.results import (
    base_result_path,
    display_scale,
    metric_text,
    of_one_item,
    read_result,
    results_by_step,
    score_cell,
)

MAX_ROWS = 30


def evaluation_lines(run_dir: Path, exported_step: int | None) -> list[str]:
    """A Markdown table of the base model's and every measured checkpoint's scores (the exported one marked), the
    floor and the frozen test set; empty when the run has neither per-checkpoint results nor a test set."""
    by_step = results_by_step(run_dir)
    if not by_step:
        return frozen_test_lines(run_dir, exported_step)[1:]
    base = read_result(base_result_path(run_dir))
    steps = list(by_step)[-MAX_ROWS:]
    if exported_step in by_step and exported_step not in steps:
        steps = [exported_step, *steps[1:]]
    sample = by_step[steps[-1]]
    second = next((r["second"] for r in by_step.values() if isinstance(r.get("second"), dict)), None)
    header = ("| model | step | CER % | CER 95 % CI | WER % | SIM | SIM 95 % CI | CER - base [95 % CI] |"
              + (f" CER % ({second['language']}) |" if second else "") + " health |")
    rule = "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |" + (" ---: |" if second else "") + " --- |"
    rows = [header, rule]

    def row(label: str, result: dict[str, Any]) -> str:
        cells = [label, str(result.get("step", "")), metric_text("cer", result.get("cer"), unit=False),
                 _ci(result, "cer"), metric_text("wer", result.get("wer"), unit=False),
                 metric_text("sim", result.get("sim")), _ci(result, "sim"), _difference(result.get("vs_base"), "cer")]
        if second:
            other = result.get("second") if isinstance(result.get("second"), dict) else {}
            cells.append(metric_text("cer", other.get("cer"), unit=False))
        cells.append(health_cell(result) if result.get("model") == "checkpoint" else "")
        return "| " + " | ".join(cells) + " |"

    if base is not None and base.get("eval_set") == sample.get("eval_set"):
        rows.append(row("base model", base))
    for step in steps:
        rows.append(row(f"**model_step{step} (this export)**" if step == exported_step else f"model_step{step}",
                        by_step[step]))
    models = sample.get("models") if isinstance(sample.get("models"), dict) else {}
    about = (f"Measured with `python -m trainer.evaluate` on the run's evaluation set ({sample.get('language') or 'any'}"
             f" sentences, fixed voices and decoding): CER/WER in percent by the speech recogniser "
             f"{models.get('asr') or '?'} after the language's scoring normaliser (lower is better; above 100 when "
             "the transcript inserts), "
             f"SIM the cosine of x-vectors of {models.get('speaker') or '?'} against the reference voice "
             "(higher is closer). Intervals: paired bootstrap over the set's texts x voices x seeds; best.pth moves "
             "only when the interval of the difference against the best so far excludes zero.")
    lines = [about, "", *rows]
    exported = by_step.get(exported_step) if exported_step is not None else None
    if isinstance((exported or {}).get("health"), dict):
        lines += ["", f"Health of model_step{exported_step} (see the README's \"Checkpoint health\"): "
                      + "; ".join(health_lines(exported["health"])) + "."]
    floor = read_floor(eval_dir(run_dir), sample.get("eval_set"))
    if floor is not None:
        lines += ["", f"Recogniser's floor: the same recogniser on the real recordings of {floor['clips']} evaluation "
                      f"sentence(s) gives CER {score_cell(floor, 'cer')}, WER {score_cell(floor, 'wer')}; "
                      "a good checkpoint approaches this, not zero."]
    return lines + frozen_test_lines(run_dir, exported_step)


def frozen_test_lines(run_dir: Path, exported_step: int | None) -> list[str]:
    """The frozen test set's section: the exported checkpoint's scores with intervals, the difference against the
    base model and the recogniser's floor (empty when the run has no test set)."""
    from trainer.evaluation.frozen_test import frozen_line, frozen_results

    info, by_step, floor = frozen_results(run_dir)
    if info is None:
        return []
    lines = ["", "### Held-out test set", "",
             f"Frozen before training ({info.get('sentences')} sentences, sha256 `{str(info.get('sha256'))[:16]}`), "
             "never used to choose a checkpoint."]
    result = by_step.get(exported_step) if exported_step is not None else None
    if result is None:
        return [*lines, "", f"Not measured for this checkpoint: `python -m trainer.evaluate {run_dir} --test-set "
                f"{info.get('file')} --checkpoint <this checkpoint>`."]
    lines += ["", f"model_step{exported_step}: {frozen_line(result, floor)}"]
    difference = _difference(result.get("vs_base"), "cer")
    if difference != "-":
        lines.append(f"CER against the base model: {difference} points.")
    if floor is not None:
        lines.append(f"Recogniser's floor on the test clips' real recordings: CER {score_cell(floor, 'cer')}.")
    return lines


def _ci(result: dict[str, Any], metric: str) -> str:
    interval = (result.get("intervals") or {}).get(metric)
    if of_one_item(result):
        return "one item"
    if not isinstance(interval, dict):
        return "-"
    low, high = (metric_text(metric, interval.get(end), unit=False) for end in ("low", "high"))
    return f"[{low}, {high}]"


def _difference(comparisons: Any, metric: str) -> str:
    """``-1.3 [-2.1, -0.5]`` in percent points (CER, WER) or cosine (SIM); '-' when not measured."""
    comparison = comparisons.get(metric) if isinstance(comparisons, dict) else None
    if not isinstance(comparison, dict):
        return "-"
    diff = comparison["difference"]
    scale, _unit, digits = display_scale(metric)
    return f"{diff['value'] * scale:+.{digits}f} [{diff['low'] * scale:+.{digits}f}, {diff['high'] * scale:+.{digits}f}]"
