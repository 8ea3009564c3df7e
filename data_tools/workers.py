"""Process pools whose every wait has a timeout: a worker that hangs ends the job with one line, not a hang."""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Iterator, Sequence
from multiprocessing.context import BaseContext
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")


def pool_results(context: BaseContext, processes: int, func: Callable[[T], R], tasks: Sequence[T], *,
                 timeout_s: float, what: str, ordered: bool = True,
                 initializer: Callable[..., Any] | None = None, initargs: tuple[Any, ...] = ()) -> Iterator[R]:
    """``func`` of every task in a pool of ``processes`` (at most one per task); results in task order, or as
    they finish when not ``ordered``. Raises RuntimeError naming ``what`` when a result takes over ``timeout_s``."""
    with context.Pool(min(processes, len(tasks)), initializer=initializer, initargs=initargs) as pool:
        results = (pool.imap if ordered else pool.imap_unordered)(func, tasks)
        for _ in tasks:
            try:
                yield results.next(timeout=timeout_s)
            except multiprocessing.TimeoutError:
                raise RuntimeError(f"a {what} worker gave no answer in {timeout_s:.0f} s") from None
