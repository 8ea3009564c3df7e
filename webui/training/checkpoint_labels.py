"""The resume dropdown's choices: each checkpoint of an output dir labelled from its metadata, newest step first."""

from __future__ import annotations

import threading
from pathlib import Path

from data_tools.paths import PathError, expand_path
from webui.model_version import model_name
from webui.training import training_form as tf

# Metadata only (no tensor data: milliseconds for a 7 GB file), cached per file version; the pre-flight and
# the trainer verify the checkpoint they resume from.
_labels: dict[tuple[int, int, int, int], tuple[int | None, str]] = {}
_labels_lock = threading.Lock()
_LABELS_MAX = 512


def _checkpoint_label(path: Path) -> tuple[int | None, str]:
    """(step, label) of one checkpoint file from its metadata (cached per file version)."""
    from trainer.checkpoints import CheckpointError
    from trainer.checkpoints.metadata import read_metadata
    from trainer.checkpoints.store import step_of

    stat = path.stat()
    key = (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)
    with _labels_lock:
        if key in _labels:
            return _labels[key]
        try:
            meta = read_metadata(path)
            step = meta.step if meta.step is not None else step_of(path)
            loss = f"{meta.last_val_loss:.4f}" if meta.last_val_loss is not None else "-"
            model = model_name(meta.model_version)
            kind = "" if meta.kind == "studio" else f" · {meta.kind} (repair it in the Checkpoints tab)"
            entry = (step, f"{path.name} · step {step if step is not None else '?'} · val loss {loss} · {model}{kind}")
        except CheckpointError as exc:
            reason = str(exc).split(" is not a loadable checkpoint: ", 1)[-1]
            entry = (step_of(path), f"{path.name} · unreadable: {reason}")
        if len(_labels) >= _LABELS_MAX:
            _labels.pop(next(iter(_labels)))
        _labels[key] = entry
        return entry


def checkpoint_choices(output_dir: str) -> list[tuple[str, str]]:
    """(label, value) pairs: "latest (auto)" first, then the output dir's checkpoints, newest step first."""
    choices = [(tf.RESUME_AUTO_LABEL, tf.RESUME_AUTO)]
    try:
        directory = expand_path(output_dir.strip(), "--output-dir") if output_dir.strip() else None
    except PathError:
        return choices
    if directory is None or not directory.is_dir():
        return choices
    entries: list[tuple[int, str, str]] = []
    for path in sorted(directory.glob("*.pth")):
        try:
            step, label = _checkpoint_label(path)
        except OSError:
            continue  # rotated away meanwhile
        entries.append((step if step is not None else -1, label, str(path)))
    entries.sort(key=lambda entry: -entry[0])
    return choices + [(label, value) for _, label, value in entries]
