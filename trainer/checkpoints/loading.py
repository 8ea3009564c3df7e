"""Loading a checkpoint safely: ``weights_only=True``, no allow-list, never a fallback, one-line errors."""

from __future__ import annotations

import pickle
import re
import warnings
import zipfile
from pathlib import Path
from typing import Any

import torch

from trainer.checkpoints.format import CheckpointError


def _first_line(text: str, limit: int = 160) -> str:
    line = next((part.strip() for part in str(text).splitlines() if part.strip()), "")
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _header_reason(path: Path) -> str | None:
    """A reason judged from the file's bytes alone (zip header without its end: truncated), or None."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(4)
    except OSError:
        return None
    if head.startswith(b"PK\x03\x04"):
        if not zipfile.is_zipfile(path):
            return "truncated (the zip archive's end is missing: an interrupted write or copy)"
        return None
    if not head.startswith(b"\x80"):
        return "not a PyTorch checkpoint (unrecognised bytes)"
    return None


def explain_load_failure(exc: BaseException, path: Path | None = None) -> str:
    """Turn torch.load's exception into a short reason a user understands."""
    message = str(exc)
    global_marker = re.search(r"\bGLOBAL ([\w.]+)", message)
    if global_marker:
        culprit = global_marker.group(1).rstrip(".,")
        return (f"it references Python code or classes ({culprit}), not just tensors and plain values; "
                "loading it could run code, so it is refused and nothing in it was executed")
    by_bytes = _header_reason(path) if path is not None else None
    if by_bytes is not None:
        return by_bytes
    if isinstance(exc, pickle.UnpicklingError) and "Unsupported operand" in message:
        return "not a PyTorch checkpoint (a plain pickle or unrecognised bytes); nothing in it was executed"
    if "Weights only load failed" in message and "Unsupported operand" not in message:
        return ("it holds Python objects beyond tensors and plain values; loading it could run code, so it is "
                "refused and nothing in it was executed")
    if isinstance(exc, pickle.UnpicklingError) or "invalid load key" in message:
        return "not a PyTorch checkpoint (unrecognised bytes)"
    lowered = message.lower()
    if "central directory" in lowered or "zip archive" in lowered or isinstance(exc, zipfile.BadZipFile):
        return "truncated or corrupt (the zip archive is incomplete)"
    if isinstance(exc, EOFError) or "ran out of input" in lowered or "unexpected eof" in lowered:
        return "truncated (the file ends early)"
    if isinstance(exc, MemoryError):
        return "corrupt (declares an impossible size)"
    return f"corrupt ({type(exc).__name__}: {_first_line(message)})"


def load_checkpoint(path: str | Path, *, mmap: bool = False) -> dict[str, Any]:
    """Load ``path`` with ``torch.load(weights_only=True, map_location="cpu")``.

    ``mmap=True`` maps the tensors instead of reading them (checks that only look at shapes, e.g.
    pre-flight on a multi-GB checkpoint); files in torch's legacy format are read normally. Raises CheckpointError "<path> is not a loadable checkpoint: <reason>" for a missing, empty,
    truncated, random or code-carrying file, or anything that is not a dict. Nothing in it executes.
    """
    path = Path(path)
    reason: str | None = None
    if not path.exists():
        reason = "file not found"
    elif not path.is_file():
        reason = "not a regular file"
    else:
        try:
            size = path.stat().st_size
        except OSError as exc:
            size = -1
            reason = f"cannot read it ({exc.strerror or exc})"
        if size == 0:
            reason = "empty file (0 bytes), e.g. a save interrupted before any data was written"
    if reason is None:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # torch warns about pickle protocols of foreign files
                use_mmap = mmap and zipfile.is_zipfile(path)
                obj = torch.load(path, weights_only=True, map_location="cpu", mmap=use_mmap)
        except PermissionError as exc:
            reason = f"cannot read it ({exc.strerror or exc})"
        except (Exception, MemoryError) as exc:  # torch raises many types for bad bytes; all mean "refused"
            reason = explain_load_failure(exc, path)
        else:
            if isinstance(obj, dict):
                return obj
            reason = f"it holds a {type(obj).__name__}, not a checkpoint dict"
    raise CheckpointError(f"{path} is not a loadable checkpoint: {reason}")
