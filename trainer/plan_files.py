"""The run plan's checks of the files around a run: its output directory, the disk its checkpoints fill, and the
downloaded model folders its paths point into.

``check_output_dir`` (writable, not locked by another run), ``check_disk`` (room for a few checkpoints: a warning,
never a refusal) and ``check_model_folders`` (the downloads still match their record) each add their check to a
``trainer.plan.RunPlan`` (typed ``Any`` here: the plans import this module; the S2Mel plan uses them too).
"""

from __future__ import annotations

import math
import shutil
import tempfile
from pathlib import Path
from typing import Any

from trainer.checkpoints import LockHeld, expected_state_shapes, lock_holder
from trainer.models.integrity import model_folders_damage

CHECKPOINTS_OF_HEADROOM = 3


def _gib(count: float) -> str:
    return f"{count / (1 << 30):.2f} GiB" if count >= (1 << 27) else f"{count / (1 << 20):.1f} MiB"


def check_output_dir(plan: Any, own_lock: bool) -> bool:
    if not plan.opts.output_dir:
        return plan.add("output directory", False, "no --output-dir given")
    out_dir = Path(plan.opts.output_dir)
    if out_dir.exists() and not out_dir.is_dir():
        return plan.add("output directory", False, f"--output-dir {out_dir} exists and is not a directory")
    probe_dir = out_dir if out_dir.is_dir() else _nearest_existing(out_dir)
    if not probe_dir.is_dir():
        return plan.add("output directory", False, f"--output-dir {out_dir}: {probe_dir} is not a directory")
    try:
        with tempfile.NamedTemporaryFile(dir=probe_dir, prefix=".preflight-", delete=True):
            pass
    except OSError as exc:
        return plan.add("output directory", False, f"--output-dir {out_dir} is not writable "
                                                   f"({exc.strerror or exc} in {probe_dir})")
    holder = None if own_lock else lock_holder(out_dir)
    if holder is not None:
        return plan.add("output directory", False, str(LockHeld(out_dir, holder or None)))
    state = "exists" if out_dir.is_dir() else f"will be created under {probe_dir}"
    return plan.add("output directory", True, f"{out_dir} {state}, writable, not in use")


def _nearest_existing(path: Path) -> Path:
    path = path.absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def checkpoint_size_estimate(parameters: int) -> int:
    """Bytes of one training checkpoint: fp32 weights + AdamW's two fp32 moments, plus a little metadata."""
    return parameters * 4 * 3 + (1 << 20)


def check_disk(plan: Any) -> None:
    assert plan.gpt is not None
    parameters = sum(math.prod(shape) for shape in expected_state_shapes(plan.gpt).values())
    per_checkpoint = checkpoint_size_estimate(parameters)
    needed = per_checkpoint * CHECKPOINTS_OF_HEADROOM
    where = _nearest_existing(Path(plan.opts.output_dir))
    free = shutil.disk_usage(where).free
    message = (f"{_gib(free)} free at {where}; {CHECKPOINTS_OF_HEADROOM} checkpoints need ~{_gib(needed)} "
               f"(~{_gib(per_checkpoint)} each: {parameters:,} parameters, weights + 2 AdamW moments)")
    if free >= needed:
        plan.add("disk space", True, message)
    else:
        plan.add("disk space", True, "warning: little disk left, saves may fail: " + message, warning=True)


MODEL_FOLDER_OPTIONS = ("model_dir", "sample_model_dir", "base_checkpoint", "config", "tokenizer", "vocoder")


def check_model_folders(plan: Any) -> None:
    """Downloaded model folders (``python -m trainer.models``) behind the path options still match their record
    (``trainer.models.integrity``: size and time, re-hashing only a file whose time changed). No line when no
    option points into one."""
    paths = [str(plan.opts.get(name) or "") for name in MODEL_FOLDER_OPTIONS]
    folders, damage = model_folders_damage(paths)
    if damage is not None:
        plan.add("model files", False, damage)
    elif folders:
        plan.add("model files", True, "recorded files match: " + ", ".join(str(folder) for folder in folders))
