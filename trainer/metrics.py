"""Run metrics: ``metrics.jsonl`` (one JSON object per line) and TensorBoard scalars, written by rank 0.

Each event is ``{"event", "step", "epoch", "time", ...}``. Train events carry ``text_loss``, ``mel_loss``,
``mel_top1``, ``lr``, ``tokens_per_s``, ``eta_s``, ``total_steps`` and ``losses``: the full-precision
training loss of every optimizer step since the previous train event (``{step: loss}``), which is
what the exact-resume check compares. TensorBoard gets ``train/*`` and ``val/*`` scalars.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

from data_tools.fileio import atomic_write_text

TRAIN_SCALARS = ("text_loss", "mel_loss", "mel_top1", "lr", "loss")
VAL_SCALARS = ("text_loss", "mel_loss", "mel_top1", "loss")


def _json_safe(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None  # JSON has no NaN/inf; the stdout line still shows them
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value


def truncate_after_step(path: Path, step: int) -> int:
    """Drop events after ``step`` (left by a run that died after its last save); returns how many."""
    if not path.is_file():
        return 0
    kept: list[str] = []
    dropped = 0
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            dropped += 1  # a line torn by a kill
            continue
        if isinstance(event, dict) and isinstance(event.get("step"), int) and event["step"] > step:
            dropped += 1
            continue
        kept.append(line)
    if dropped:
        atomic_write_text(path, "".join(line + "\n" for line in kept))
    return dropped


class MetricsLog:
    """Append events to metrics.jsonl and mirror the scalars to TensorBoard (no-op when disabled)."""

    def __init__(self, output_dir: Path, enabled: bool = True, tensorboard: bool = True) -> None:
        self.enabled = enabled
        self.path = Path(output_dir) / "metrics.jsonl"
        self.tb_dir: Path | None = None
        self._writer: Any = None
        self._handle: Any = None
        if not enabled:
            return
        # Unbuffered append: each event is one write(), so lines of the evaluation process (which appends its
        # ``eval`` events to the same file, trainer.evaluation.results) never land inside one of ours.
        self._handle = open(self.path, "ab", buffering=0)  # noqa: SIM115 (open for the whole run)
        if tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            self.tb_dir = Path(output_dir) / "logs" / f"run_{time.strftime('%Y%m%d_%H%M%S')}"
            self._writer = SummaryWriter(log_dir=str(self.tb_dir))

    def event(self, kind: str, step: int, epoch: int, **fields: Any) -> None:
        if not self.enabled:
            return
        record = {"event": kind, "step": int(step), "epoch": int(epoch), "time": round(time.time(), 3), **fields}
        self._handle.write((json.dumps(_json_safe(record), ensure_ascii=False) + "\n").encode("utf-8"))
        if self._writer is not None and kind in ("train", "val"):
            names = TRAIN_SCALARS if kind == "train" else VAL_SCALARS
            for name in names:
                value = fields.get(name)
                if isinstance(value, (int, float)):
                    self._writer.add_scalar(f"{kind}/{name}", float(value), global_step=int(step))
            if kind == "train" and isinstance(fields.get("tokens_per_s"), (int, float)):
                self._writer.add_scalar("train/tokens_per_s", float(fields["tokens_per_s"]), global_step=int(step))
            for language, values in (fields.get("languages") or {}).items():  # val per language: val/<lang>/loss
                for name in VAL_SCALARS:
                    if isinstance(values.get(name), (int, float)):
                        self._writer.add_scalar(f"val/{language}/{name}", float(values[name]), global_step=int(step))
            self._writer.flush()

    def audio(self, tag: str, waveform: Any, step: int, sample_rate: int) -> None:
        """A sample's waveform (float, [-1, 1]) as TensorBoard audio."""
        if self._writer is None:
            return
        import torch

        self._writer.add_audio(tag, torch.as_tensor(waveform).reshape(1, -1), global_step=int(step),
                               sample_rate=int(sample_rate))
        self._writer.flush()

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        if self._handle is not None:
            self._handle.close()
            self._handle = None
