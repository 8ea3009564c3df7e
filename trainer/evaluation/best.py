"""``--best-by``: which checkpoint ``best.pth`` points at, and which few are pinned against rotation.

``val_loss`` (the default) leaves everything to the trainer (best.pth follows the validation loss, as
before). ``cer`` (lowest) and ``sim`` (highest) follow the evaluation results, which arrive after the
save, from another process: so the evaluation moves ``best.pth`` itself when a result makes a new best,
with the store's atomic link replacement (a hard link made under a temp name and renamed over best.pth:
a crash leaves the old or the new link, never a missing or partial file; a hard link never dangles).

The ``keep_best`` best measured checkpoints are pinned: the trainer's rotation (``CheckpointManager``'s
``protect`` hook, :func:`rotation_guard`) does not delete them. Rotation and a best update each hold the
run's pin lock (``<run>/.eval_pins.lock``, flock), so rotation never reads the pins, then deletes a file
that a result arriving meanwhile has just made the best: either the result is written first and the file
is pinned, or the file is gone first and the result cannot pick it (only existing files are ranked).
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from trainer.evaluation.errors import EvaluationError
from trainer.evaluation.results import results_by_step

BEST_BY = ("val_loss", "cer", "sim")
PIN_LOCK = ".eval_pins.lock"
PIN_LOCK_TIMEOUT_S = 120.0
_POLL_S = 0.05

try:
    import fcntl
except ImportError:  # Windows: no flock; rotation and evaluation then rely on the order of their writes
    fcntl = None  # type: ignore[assignment]


def score_of(result: dict[str, Any], best_by: str) -> float | None:
    """The result's number for ``best_by``, oriented so that lower is better (None when missing)."""
    value = result.get(best_by)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value) if best_by == "cer" else -float(value)


def ranking(run_dir: Path, best_by: str) -> list[tuple[int, Path, float]]:
    """(step, checkpoint, value) of every measured model_step file that still exists, best first; ties: earlier."""
    from trainer.checkpoints.store import step_file_name

    ranked: list[tuple[float, int, Path, float]] = []
    for step, result in results_by_step(run_dir).items():
        path = Path(run_dir) / step_file_name(step)
        score = score_of(result, best_by)
        if score is not None and path.is_file():
            ranked.append((score, step, path, float(result[best_by])))
    ranked.sort(key=lambda row: (row[0], row[1]))
    return [(step, path, value) for _score, step, path, value in ranked]


def pinned_names(run_dir: Path, best_by: str, keep_best: int) -> set[str]:
    """File names of the ``keep_best`` best measured checkpoints (none for ``val_loss``)."""
    if best_by == "val_loss" or keep_best <= 0:
        return set()
    return {path.name for _step, path, _value in ranking(run_dir, best_by)[:keep_best]}


@contextlib.contextmanager
def pin_lock(run_dir: Path, timeout_s: float = PIN_LOCK_TIMEOUT_S) -> Iterator[None]:
    """Hold the run's pin lock (rotation and best updates take turns); EvaluationError after ``timeout_s``."""
    if fcntl is None:
        yield
        return
    fd = os.open(Path(run_dir) / PIN_LOCK, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise EvaluationError(f"{Path(run_dir) / PIN_LOCK} stayed locked for {timeout_s:.0f} s") from None
                time.sleep(_POLL_S)  # the holder works for milliseconds (a listing, a rename)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def rotation_guard(run_dir: Path, best_by: str, keep_best: int) -> Callable[[], contextlib.AbstractContextManager]:
    """The ``protect`` hook of ``CheckpointManager``: rotation runs under the pin lock, sparing the pins."""

    @contextlib.contextmanager
    def guard() -> Iterator[set[str]]:
        with pin_lock(run_dir):
            yield pinned_names(run_dir, best_by, keep_best)

    return guard


def update_best(run_dir: Path, best_by: str) -> tuple[int, float] | None:
    """Point best.pth at the best measured checkpoint by ``best_by`` (caller holds the pin lock).

    Returns (step, value) when best.pth was moved, None when it already pointed there or nothing is measured.
    """
    from trainer.checkpoints.store import BEST, _replace_with_link

    if best_by == "val_loss":
        return None
    ranked = ranking(run_dir, best_by)
    if not ranked:
        return None
    step, path, value = ranked[0]
    best = Path(run_dir) / BEST
    with contextlib.suppress(OSError):
        if os.path.samefile(best, path):
            return None
    _replace_with_link(path, best)
    return step, value
