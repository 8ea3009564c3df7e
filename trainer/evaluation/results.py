"""Evaluation results on disk: one JSON file per checkpoint beside it, and ``eval`` events in metrics.jsonl.

    <run>/model_step<N>.eval.json    the scores of model_step<N>.pth (kept when rotation removes the checkpoint)
    <run>/eval/base.eval.json        the base model's scores on the same set
    <run>/metrics.jsonl              {"event": "eval", "step", "epoch", "time", "checkpoint", "model", "cer", "wer",
                                      "sim", "language", "second", "seconds", "eval_set", "health", "rate", "runaway"}
                                     (the checkpoint's health, ``trainer.evaluation.health``: in one phrase, its
                                     speaking-rate ratio and its share of runaway items)

Units: stored ``cer`` and ``wer`` (and their intervals) are fractions of the reference's characters / words
(0.077 is 7.7 %; above 1 when the transcript inserts), ``sim`` a cosine. Everything shown to people (console lines,
tables, the model card, best.pth's reasons) gives CER and WER in percent through :func:`metric_text` /
:func:`score_cell`, and differences in percentage points.

A result names its checkpoint's identity (its content digest, else size and modification time) and the
evaluation set's fingerprint: a checkpoint counts as measured only when both match, so a file rewritten by a
resumed run, or a new evaluation set, is measured again. Result files are written atomically; events are
appended with one ``write`` each (``O_APPEND``), so they interleave whole with the trainer's.
"""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path
from typing import Any

from data_tools.fileio import atomic_write_text
from trainer.evaluation.eval_set import eval_dir

RESULT_SUFFIX = ".eval.json"
BASE_RESULT = "base.eval.json"
METRICS_FILE = "metrics.jsonl"
FORMAT_VERSION = 1


def result_path(checkpoint: Path) -> Path:
    """``model_step<N>.pth`` -> ``model_step<N>.eval.json`` beside it."""
    checkpoint = Path(checkpoint)
    return checkpoint.with_name(checkpoint.stem + RESULT_SUFFIX)


def base_result_path(run_dir: Path) -> Path:
    return eval_dir(run_dir) / BASE_RESULT


def checkpoint_identity(path: Path) -> str:
    """The checkpoint's content digest (read from its trailer), else its size and modification time."""
    from trainer.checkpoints.digest import read_trailer

    stat = Path(path).stat()
    trailer = read_trailer(path)
    digest = getattr(trailer, "digest", None)
    return f"sha256:{digest}" if isinstance(digest, str) and digest else f"stat:{stat.st_size}:{stat.st_mtime_ns}"


def read_result(path: Path) -> dict[str, Any] | None:
    """A result file's content, or None when missing or unreadable (a torn file counts as not measured)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("format") == FORMAT_VERSION else None


def is_measured(checkpoint: Path, eval_fingerprint: str, result_file: Path | None = None) -> bool:
    result = read_result(result_file or result_path(checkpoint))
    if result is None or result.get("eval_set") != eval_fingerprint:
        return False
    try:
        return result.get("identity") == checkpoint_identity(checkpoint)
    except OSError:
        return False


def write_result(path: Path, result: dict[str, Any]) -> None:
    atomic_write_text(Path(path), json.dumps(_json_safe({"format": FORMAT_VERSION, **result}), indent=2,
                                             ensure_ascii=False) + "\n")


def append_event(run_dir: Path, step: int, epoch: int, **fields: Any) -> dict[str, Any]:
    """One ``eval`` event, appended to metrics.jsonl in a single write."""
    record = _json_safe({"event": "eval", "step": int(step), "epoch": int(epoch), "time": round(time.time(), 3),
                         **fields})
    line = (json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8")
    fd = os.open(Path(run_dir) / METRICS_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)
    return record


def event_fields(result: dict[str, Any]) -> dict[str, Any]:
    """What of a result goes into its ``eval`` event (no per-item detail)."""
    keys = ("checkpoint", "model", "cer", "wer", "sim", "language", "second", "seconds", "eval_set", "device")
    health = result.get("health") if result.get("model") == "checkpoint" else None
    health = health if isinstance(health, dict) else {}
    return {**{key: result.get(key) for key in keys}, "health": health.get("summary"),
            "rate": (health.get("rate") or {}).get("ratio"), "runaway": (health.get("runaway") or {}).get("share")}


def results_by_step(run_dir: Path) -> dict[int, dict[str, Any]]:
    """Every readable ``model_step<N>.eval.json`` of the run, by step (the files outlive rotation)."""
    from trainer.checkpoints.store import step_of

    found: dict[int, dict[str, Any]] = {}
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        return found
    for path in run_dir.glob("model_step*" + RESULT_SUFFIX):
        step = step_of(path.name.removesuffix(RESULT_SUFFIX) + ".pth")
        result = read_result(path)
        if step is not None and result is not None:
            found[step] = result
    return dict(sorted(found.items()))


def scores_of(checkpoint: Path) -> dict[str, Any] | None:
    """The evaluation result of ``checkpoint`` (a model_step file, or latest.pth / best.pth linking one), when
    one was measured from these very bytes; None otherwise."""
    from trainer.checkpoints.format import CheckpointError
    from trainer.checkpoints.metadata import read_metadata
    from trainer.checkpoints.store import step_file_name, step_of

    path = Path(checkpoint)
    step = step_of(path)
    if step is None:
        try:
            step = read_metadata(path).step
        except (CheckpointError, OSError):
            return None
    if step is None:
        return None
    result = read_result(result_path(path.parent / step_file_name(step)))
    try:
        return result if result is not None and result.get("identity") == checkpoint_identity(path) else None
    except OSError:
        return None


def scores_line(result: dict[str, Any]) -> str:
    """``CER 12.3 % · WER 45.6 % · SIM 0.789`` (+ the second language's CER)."""
    line = " · ".join(f"{metric.upper()} {metric_text(metric, result.get(metric))}" for metric in ("cer", "wer", "sim"))
    second = result.get("second")
    if isinstance(second, dict):
        line += f" · {second.get('language')} CER {metric_text('cer', second.get('cer'))}"
    return line


def display_scale(metric: str) -> tuple[float, str, int]:
    """How a stored metric is shown: (scale, unit, decimals): CER/WER fractions in percent, SIM as a cosine."""
    return (100.0, " %", 1) if metric in ("cer", "wer") else (1.0, "", 3)


def metric_text(metric: str, value: Any, *, unit: bool = True) -> str:
    """A stored metric as people read it (``7.7 %``, ``0.812``; ``unit=False``: ``7.7``); '-' when missing."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return "-"
    scale, suffix, digits = display_scale(metric)
    return f"{value * scale:.{digits}f}{suffix if unit else ''}"


def of_one_item(result: dict[str, Any]) -> bool:
    """Whether a result was measured on a single item: its "interval" is the value itself, not a spread."""
    from trainer.evaluation.stats import main_items

    return isinstance(result.get("items"), list) and len(main_items(result)) == 1


def score_cell(result: dict[str, Any], metric: str) -> str:
    """A score as a table shows it, with its 95 % interval where the result carries one: CER and WER in percent
    (``7.7 % [6.1, 9.4]``), SIM as a cosine (``0.812 [0.790, 0.830]``); '-' when missing. A score of one item has
    no spread to measure: it says ``(one item)`` instead of a zero-width interval that would look like certainty."""
    value = result.get(metric)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return "-"
    scale, _unit, digits = display_scale(metric)
    text = metric_text(metric, value)
    if of_one_item(result):
        return f"{text} (one item)"
    interval = (result.get("intervals") or {}).get(metric)
    if isinstance(interval, dict):
        low, high = interval.get("low"), interval.get("high")
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in (low, high)):
            text += f" [{low * scale:.{digits}f}, {high * scale:.{digits}f}]"
    return text


def score_text(value: Any, digits: int = 3) -> str:
    """A plain number, 3 decimals, '-' when missing (CER and WER are shown with :func:`metric_text`)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return "-"
    return f"{value:.{digits}f}"


def _json_safe(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value
