"""Curves and progress from a run's metrics.jsonl, read incrementally with bounded memory (no Gradio)."""

from __future__ import annotations

import html
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

METRICS_FILE = "metrics.jsonl"
PLOT_COLUMNS = ["step", "value", "series"]
ETA_SMOOTHING = 0.2  # weight of the newest train event in the moving average of seconds per step


@dataclass
class Series:
    """(step, value) points, halved in resolution whenever they exceed ``max_points``."""

    max_points: int = 2000
    steps: list[int] = field(default_factory=list)
    values: list[float] = field(default_factory=list)
    stride: int = 1  # keep one point in ``stride`` after decimation
    _seen: int = 0

    def add(self, step: int, value: float) -> None:
        self._seen += 1
        if (self._seen - 1) % self.stride:
            return
        self.steps.append(step)
        self.values.append(value)
        if len(self.steps) > self.max_points:
            self.steps = self.steps[::2]
            self.values = self.values[::2]
            self.stride *= 2


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


class MetricsReader:
    """Follows ``<output-dir>/metrics.jsonl`` from a byte offset; starts over if the file is replaced."""

    TRAIN_KEYS = ("text_loss", "mel_loss", "mel_top1", "lr")
    VAL_KEYS = ("text_loss", "mel_loss", "mel_top1")
    # checkpoint evaluation (trainer.evaluation): one point per measured save; its health's speaking-rate ratio and
    # share of runaway items (trainer.evaluation.health) beside the scores
    EVAL_KEYS = ("cer", "wer", "sim", "rate", "runaway")
    # The trainer's own events that name the step it has reached (the log prints each of them): the progress
    # bar follows the newest, so after a stop at step 59 it says 59, not the last train line's 55. Eval events
    # come from another process and name older saves; samples name a save already counted.
    PROGRESS_EVENTS = ("start", "resume", "train", "val", "save", "stop", "end")

    def __init__(self, output_dir: Path, max_points: int = 2000) -> None:
        self.path = Path(output_dir) / METRICS_FILE
        self.max_points = max_points
        self._reset()

    def _reset(self) -> None:
        self.offset = 0
        self.inode: int | None = None
        self.series: dict[str, Series] = {}
        self.last_train: dict[str, Any] | None = None
        self.last_event: dict[str, Any] | None = None
        self.reached_step: int | None = None  # the newest step of a PROGRESS_EVENTS event
        self.seconds_per_step: float | None = None  # exponential moving average over the train events
        self.version = 0  # bumps when anything new was read

    def _series(self, name: str) -> Series:
        if name not in self.series:
            self.series[name] = Series(self.max_points)
        return self.series[name]

    def _take(self, event: dict[str, Any]) -> None:
        kind, step = event.get("event"), event.get("step")
        if not isinstance(step, int):
            return
        self.last_event = event
        if kind in self.PROGRESS_EVENTS:
            self.reached_step = step if kind in ("start", "resume") else max(step, self.reached_step or 0)
        if kind in ("start", "resume"):
            self.seconds_per_step = None  # a new process: its speed is measured afresh
            return
        if kind == "train":
            self.last_train = event
            self._smooth_speed(event)
            keys, prefix = self.TRAIN_KEYS, "train"
        elif kind == "val":
            keys, prefix = self.VAL_KEYS, "val"
        elif kind == "eval" and event.get("model", "checkpoint") == "checkpoint":
            keys, prefix = self.EVAL_KEYS, "eval"
        else:
            return
        for key in keys:
            value = _number(event.get(key))
            if value is not None:
                self._series(f"{prefix} {key}").add(step, value)

    def _smooth_speed(self, event: dict[str, Any]) -> None:
        """Average the trainer's seconds per step (its log window's mean) so the ETA does not jump by line."""
        speed = _number(event.get("seconds_per_step"))
        if speed is None:  # older metrics: the trainer's own ETA over the steps left
            eta, total, step = _number(event.get("eta_s")), _number(event.get("total_steps")), event["step"]
            if eta is not None and total is not None and total > step:
                speed = eta / (total - step)
        if speed is None or speed < 0:
            return
        if self.seconds_per_step is None:
            self.seconds_per_step = speed
        else:
            self.seconds_per_step += ETA_SMOOTHING * (speed - self.seconds_per_step)

    @property
    def progress_event(self) -> dict[str, Any] | None:
        """The last train event with the step the run has reached since (a save, a stop, the end)."""
        if self.last_train is None:
            return None
        step = max(self.last_train["step"], self.reached_step or 0)
        return self.last_train if step == self.last_train["step"] else {**self.last_train, "step": step}

    @property
    def eta_s(self) -> float | None:
        """Seconds left at the smoothed speed (None before a train event with a known total)."""
        event = self.last_train
        total = _number((event or {}).get("total_steps"))
        if event is None or total is None or self.seconds_per_step is None:
            return None
        return max(0.0, total - event["step"]) * self.seconds_per_step

    def poll(self, max_bytes: int = 4 * 1024 * 1024) -> bool:
        """Read newly appended complete lines; True if anything new arrived."""
        try:
            stat = os.stat(self.path)
        except OSError:
            if self.inode is not None:
                self._reset()
                return True
            return False
        if self.inode is not None and (stat.st_ino != self.inode or stat.st_size < self.offset):
            self._reset()  # rewritten (e.g. truncated to the resumed step) or replaced
        self.inode = stat.st_ino
        if stat.st_size == self.offset:
            return False
        changed = False
        with open(self.path, "rb") as handle:
            while True:
                handle.seek(self.offset)
                data = handle.read(max_bytes)
                end = data.rfind(b"\n")
                if end < 0:
                    break
                for line in data[: end + 1].splitlines():
                    try:
                        event = json.loads(line)
                    except ValueError:
                        continue  # a torn line from a killed run
                    if isinstance(event, dict):
                        self._take(event)
                        changed = True
                self.offset += end + 1
                if len(data) < max_bytes:
                    break
        if changed:
            self.version += 1
        return changed

    def frame(self, names: tuple[str, ...], max_points: int = 400) -> pd.DataFrame:
        """Long-format points of these series, at most ``max_points`` each (evenly spaced, last one kept):
        drawing cost in the browser grows with points, and a chart is no sharper than its pixels."""
        rows: list[tuple[int, float, str]] = []
        for name in names:
            series = self.series.get(name)
            if series is None or not series.steps:
                continue
            count = len(series.steps)
            picks = range(count) if count <= max_points else sorted(
                {round(i * (count - 1) / (max_points - 1)) for i in range(max_points)})
            rows.extend((series.steps[i], series.values[i], name) for i in picks)
        return pd.DataFrame(rows, columns=PLOT_COLUMNS)

    def loss_frame(self) -> pd.DataFrame:
        return self.frame(("train text_loss", "train mel_loss", "val text_loss", "val mel_loss"))

    def top1_frame(self) -> pd.DataFrame:
        return self.frame(("train mel_top1", "val mel_top1"))

    def lr_frame(self) -> pd.DataFrame:
        return self.frame(("train lr",))

    def eval_frame(self) -> pd.DataFrame:
        """CER, WER and speaker similarity of each measured save (empty without evaluation), its health's
        speaking-rate ratio (1: the speaker's real pace) and share of runaway items, and the recogniser's floor on
        real speech as a flat line across the measured steps (once it is measured)."""
        frame = self.frame(("eval cer", "eval wer", "eval sim", "eval rate", "eval runaway"))
        cer = self.series.get("eval cer")
        if cer is None or not cer.steps:
            return frame
        from trainer.evaluation.eval_set import eval_dir
        from trainer.evaluation.floor import read_floor

        floor = read_floor(eval_dir(self.path.parent))
        value = floor.get("cer") if floor else None
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            return frame
        flat = pd.DataFrame([(cer.steps[0], float(value), FLOOR_SERIES), (cer.steps[-1], float(value), FLOOR_SERIES)],
                            columns=PLOT_COLUMNS)
        return pd.concat([frame, flat], ignore_index=True)


FLOOR_SERIES = "floor cer (real speech)"  # the recogniser on the real recordings: what CER approaches


def format_duration(seconds: float | None) -> str:
    if seconds is None or seconds < 0:
        return "?"
    seconds = round(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes:02d}m"
    if minutes:
        return f"{minutes}m {secs:02d}s"
    return f"{secs}s"


def progress_html(event: dict[str, Any] | None, running: bool, eta_s: float | None = None) -> str:
    """A progress bar with step / total from the last train event, and the ETA (``eta_s``: the smoothed one
    of MetricsReader.eta_s; without it, the event's own)."""
    if not event:
        return '<div id="train-progress-bar" data-step="">no training metrics yet</div>'
    step = int(event.get("step") or 0)
    total = event.get("total_steps")
    total = int(total) if isinstance(total, (int, float)) and total > 0 else None
    percent = min(100.0, 100.0 * step / total) if total else 0.0
    eta = format_duration(eta_s if eta_s is not None else _number(event.get("eta_s"))) if running else "-"
    speed = _number(event.get("tokens_per_s"))
    detail = f"step {step}" + (f" / {total} ({percent:.0f}%)" if total else "")
    epoch = event.get("epoch")
    detail += f", epoch {epoch + 1}" if isinstance(epoch, int) else ""  # metrics count epochs from 0
    if running:
        detail += f", ETA {eta}"
    if speed:
        detail += f", {speed:,.0f} tokens/s"
    return (
        f'<div id="train-progress-bar" data-step="{step}" data-total="{total or ""}">'
        '<div style="background:#e5e8eb;border-radius:6px;height:14px;overflow:hidden;">'
        f'<div style="width:{percent:.1f}%;background:#2e86de;height:14px;"></div></div>'
        f'<span style="font-size:0.9em;">{html.escape(detail)}</span></div>'
    )
