"""Running the data checker's chunks: a manifest cut into byte ranges of whole lines, each checked by the
checker of its format, in worker processes when there is more than one chunk and core (results in task order).
"""

from __future__ import annotations

import functools
import gc
import multiprocessing
import os
import threading
from pathlib import Path

from data_tools.check_records import CheckSettings, ChunkResult, ChunkTask
from data_tools.workers import pool_results
from generations.registry import default_format, format_of

CHUNK_TIMEOUT_S = 900.0


def check_chunk(task: ChunkTask, settings: CheckSettings) -> ChunkResult:
    """Check one chunk of whole lines with the checker of its manifest's format."""
    found = format_of(task.format) if task.format else default_format()
    return found.checker.check_chunk(task, settings)


def cpu_count() -> int:
    """The cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def chunk_tasks(path: Path, index: int, step: int, fmt: str, language: str | None) -> list[ChunkTask]:
    """Byte ranges of whole lines, about ``step`` bytes each (a boundary is found a block at a time)."""
    from data_tools.fileio import open_regular

    tasks: list[ChunkTask] = []
    start = 0
    with open_regular(path) as handle:
        size = os.fstat(handle.fileno()).st_size
        while start < size:
            end = min(size, start + step)
            handle.seek(end)
            while end < size:
                block = handle.read(1 << 16)
                if not block:
                    break
                newline = block.find(b"\n")
                if newline >= 0:
                    end += newline + 1
                    break
                end += len(block)
            end = min(end, size)
            tasks.append(ChunkTask(str(path), index, start, end, fmt, language))
            start = end
    if not tasks:
        tasks.append(ChunkTask(str(path), index, 0, 0, fmt, language))
    return tasks


def run_chunks(tasks: list[ChunkTask], settings: CheckSettings, workers: int):
    """Chunk results in task order; a process pool when there is more than one chunk and core."""
    run = functools.partial(check_chunk, settings=settings)
    if workers <= 1 or len(tasks) <= 1:
        for task in tasks:
            yield run(task)
        return
    yield from pool_results(multiprocessing.get_context(_start_method()), workers, run, tasks,
                            timeout_s=CHUNK_TIMEOUT_S, what="data-check", initializer=_worker_start)


def _worker_start() -> None:
    """A forked worker holds every object of its parent: frozen, its garbage collections never walk them
    (nor copy their pages, which writing their GC headers would). What the worker makes is collected as usual."""
    gc.freeze()


def _start_method() -> str:
    """fork where it is safe (a single-threaded process: CLI, scripts), spawn beside threads (the web UI).

    fork starts workers in milliseconds and needs no ``if __name__ == "__main__"`` guard in the caller;
    forking a process with other threads can deadlock a child on a lock one of them held.
    """
    if "fork" in multiprocessing.get_all_start_methods() and threading.active_count() == 1:
        return "fork"
    return "spawn"
