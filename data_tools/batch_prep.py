"""Batched, resumable preparation of audio + transcript items, for any model generation.

A generation says what it computes through a ``Preparer`` (what to screen, load, compute per batch and write
per item); this module owns everything else, the same for every generation:

- **Batches by length**: every item's duration comes from its audio header; items are sorted by duration
  (then name) and cut into batches of at most ``batch_seconds`` of padded audio (items x longest) and
  ``max_batch_items`` items. The plan covers every input item, finished or not, so a rerun forms exactly the
  batches an uninterrupted run forms: a batch is recomputed whole when any of its items is unfinished, and
  only the unfinished ones are written (batched models see their neighbours' padding; this keeps the files of
  a resumed run equal to those of an uninterrupted one).
- **Loading overlaps computing**: items are loaded (decoded, resampled, featurised) by a thread pool one batch
  ahead while the current batch computes.
- **Resumable**: each item's files are written atomically (temp + rename); once a whole batch is written, one
  line per item is appended to ``<out>/<state_dir>/done.jsonl`` and synced. A rerun skips items whose line
  is there (same audio path, size and mtime, same transcript and language, same settings fingerprint) and
  whose files exist; a killed run loses at most the batch in flight. A rerun first removes the temp files
  (``.<name>.npy|jsonl|json.<tag>.tmp``) a killed run left in the output folder (a preparation owns its output
  folder; a temp file of another live process, named by its pid, is left alone).
- **Several processes** (torchrun, ``data_tools.ranks``): every process plans the same batches from the same done
  log and computes every N-th batch that has an unfinished item, logging to its own done file
  (``data_tools.done_log``); when all are done, each returns what one process would have, and the first one
  writes the manifests. The batches, hence the files, are those of one process; a killed process's batches are
  redone by a rerun with any number of processes.
- **Bad items never stop the rest**: a missing, unreadable, silent, too short or too long item is reported
  (``where: reason``, where = input file:line or the audio file) and skipped.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

import numpy as np

from data_tools.audio import AudioError, audio_info
from data_tools.done_log import DoneLog
from data_tools.fileio import fsync_dir
from data_tools.preprocess_inputs import SourceItem
from data_tools.ranks import ONE_PROCESS, Ranks, barrier, gather
from data_tools.stale_temps import remove_stale_temp_files
from data_tools.test_hooks import PREP_KILL_IN_BATCH_ENV, PREP_KILL_RANK_ENV, hook_number, kill_now

Loaded = TypeVar("Loaded")
Result = TypeVar("Result")


class ItemProblem(Exception):
    """Why one item cannot be prepared (``reason`` reads like ``"too long: 31.2 s > 20 s"``)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Preparer(Protocol[Loaded, Result]):
    """What one model generation prepares. ``load`` runs in worker threads; the rest in the main thread."""

    state_dir: str  # folder under the output dir for the done log, e.g. ".prepare_v2"
    fingerprint: str  # identifies the settings and models that shape the files (a change redoes every item)

    def outputs(self, item: SourceItem) -> Sequence[Path]:
        """The files (relative to the output dir) a finished item has."""

    def screen(self, item: SourceItem, seconds: float) -> str | None:
        """A reason to skip the item from its header duration alone (too short, too long), or None."""

    def load(self, item: SourceItem) -> Loaded:
        """Everything per item that needs no model (thread-safe); raises ItemProblem or AudioError."""

    def compute(self, batch: Sequence[tuple[SourceItem, Loaded]]) -> list[Result | ItemProblem]:
        """The model work of one batch: one result (or ItemProblem) per item, in order."""

    def write(self, out_dir: Path, item: SourceItem, result: Result) -> dict[str, Any]:
        """Write one item's files (with ``write_npy``); returns what its done-log line records."""


@dataclass
class Skipped:
    id: str
    where: str
    reason: str


class SkipCounts:
    """For a preparation's report (a dataclass with ``skipped``): its skipped items counted by reason (the
    reason's text before the first colon), also in its JSON."""

    skipped: list[Skipped]

    @property
    def skipped_by_reason(self) -> dict[str, int]:
        return dict(Counter(s.reason.split(":")[0] for s in self.skipped))

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)  # type: ignore[call-overload]
        data["skipped_by_reason"] = self.skipped_by_reason
        return data


@dataclass
class BatchRun:
    """The outcome: records of every finished item (by stem), and what was skipped."""

    finished: dict[str, dict[str, Any]]
    new: int = 0
    resumed: int = 0
    batches: int = 0  # computed in this run
    redone: int = 0  # finished earlier with other settings (fingerprint), prepared again now
    skipped: list[Skipped] = field(default_factory=list)
    seconds_prepared: float = 0.0  # audio seconds prepared in this run
    compute_s: float = 0.0  # time inside Preparer.compute
    elapsed_s: float = 0.0


@dataclass(frozen=True)
class Planned:
    item: SourceItem
    seconds: float


def write_npy(out_dir: Path, relative: Path, array: np.ndarray) -> None:
    """Write ``out_dir/relative`` as .npy through a temp file and a rename (the batch commit syncs)."""
    path = out_dir / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as handle:
            np.save(handle, array)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def audio_signature(path: Path) -> list[int]:
    try:
        stat = path.stat()
    except OSError:
        return []
    return [stat.st_size, stat.st_mtime_ns]


def plan_batches(planned: Sequence[Planned], batch_seconds: float, max_batch_items: int) -> list[list[Planned]]:
    """Sort by duration (then stem) and cut greedily: items x longest <= batch_seconds, <= max_batch_items."""
    ordered = sorted(planned, key=lambda p: (p.seconds, p.item.stem))
    batches: list[list[Planned]] = []
    current: list[Planned] = []
    for entry in ordered:
        longest = max(entry.seconds, current[-1].seconds if current else 0.0)
        if current and ((len(current) + 1) * longest > batch_seconds or len(current) >= max_batch_items):
            batches.append(current)
            current = []
        current.append(entry)
    if current:
        batches.append(current)
    return batches


def _is_finished(item: SourceItem, record: dict[str, Any] | None, preparer: Preparer, out_dir: Path) -> bool:
    if record is None:
        return False
    same = (record.get("audio") == str(item.audio) and record.get("signature") == audio_signature(item.audio)
            and record.get("text") == item.text and record.get("language") == item.language
            and record.get("fingerprint") == preparer.fingerprint)
    return same and all((out_dir / name).is_file() for name in preparer.outputs(item))


def _measure(items: Sequence[SourceItem], preparer: Preparer, skip: Callable[[Skipped], None]) -> list[Planned]:
    planned = []
    for item in items:
        try:
            seconds, _rate = audio_info(item.audio)
        except AudioError as exc:
            skip(Skipped(item.id, str(item.audio), _audio_reason(item, exc)))
            continue
        reason = preparer.screen(item, seconds)
        if reason:
            skip(Skipped(item.id, str(item.audio), reason))
            continue
        planned.append(Planned(item, seconds))
    return planned


def _audio_reason(item: SourceItem, exc: AudioError) -> str:
    detail = str(exc).removeprefix(f"{item.audio}: ")
    return f"{'missing audio' if 'not found' in detail else 'unreadable audio'}: {detail}"


def _load(preparer: Preparer, item: SourceItem) -> Any:
    try:
        return preparer.load(item)
    except ItemProblem as exc:
        return exc
    except AudioError as exc:
        return ItemProblem(_audio_reason(item, exc))
    except Exception as exc:  # one odd file must not end the job: it is reported like any bad item
        return ItemProblem(f"failed: {type(exc).__name__}: {exc}")


class _Prefetcher(Generic[Loaded]):
    """Loads the items of upcoming batches in a thread pool, ``ahead`` batches in advance."""

    def __init__(self, preparer: Preparer, batches: list[list[Planned]], threads: int, ahead: int = 1) -> None:
        self._preparer = preparer
        self._batches = batches
        self._pool = ThreadPoolExecutor(max_workers=max(1, threads), thread_name_prefix="prep-load")
        self._futures: dict[int, list[Future]] = {}
        self._ahead = ahead

    def _submit(self, index: int) -> None:
        if index < len(self._batches) and index not in self._futures:
            self._futures[index] = [self._pool.submit(_load, self._preparer, p.item) for p in self._batches[index]]

    def get(self, index: int, timeout_s: float) -> list[Any]:
        """The loaded items of batch ``index`` (an item still loading after ``timeout_s`` becomes an ItemProblem)."""
        for upcoming in range(index, index + self._ahead + 1):
            self._submit(upcoming)
        results = []
        for future in self._futures.pop(index):
            try:
                results.append(future.result(timeout=timeout_s))
            except FutureTimeout:
                results.append(ItemProblem(f"failed: loading took over {timeout_s:g} s"))
        return results

    def close(self) -> None:
        for futures in self._futures.values():
            for future in futures:
                future.cancel()
        # wait=False: a load that hangs (the reason for the timeout above) must not hang the end of the run
        self._pool.shutdown(wait=False, cancel_futures=True)


def run_batches(
    items: Sequence[SourceItem],
    preparer: Preparer,
    out_dir: Path,
    *,
    batch_seconds: float,
    max_batch_items: int,
    load_threads: int = 2,
    load_timeout_s: float = 600.0,
    progress: Callable[[int, int], None] | None = None,
    on_skip: Callable[[Skipped], None] | None = None,
    ranks: Ranks = ONE_PROCESS,
) -> BatchRun:
    """Prepare ``items`` into ``out_dir`` with ``preparer`` (see the module docstring). Under torchrun
    (``ranks``: ``data_tools.ranks.join()``) this process computes its share of the batches and returns the
    outcome of every process's share (see ``_merge_ranks``)."""
    started = time.perf_counter()
    if batch_seconds <= 0 or max_batch_items < 1:
        raise ValueError("need batch seconds > 0 and at least 1 item per batch")
    run = BatchRun(finished={})
    in_batches: list[tuple[int, Skipped]] = []  # (plan index, item) skipped while computing, for the merge

    def skip(entry: Skipped, plan_index: int | None = None) -> None:
        run.skipped.append(entry)
        if plan_index is not None:
            in_batches.append((plan_index, entry))
        if on_skip is not None and (plan_index is not None or ranks.is_main):  # every process measures alike
            on_skip(entry)

    log = DoneLog(out_dir, preparer.state_dir, ranks.rank if ranks.enabled else None)
    if ranks.is_main:
        remove_stale_temp_files(out_dir)  # another live process's temp files (named by its pid) are left alone
        log.merge()
    barrier(ranks)
    done = log.read()
    planned = _measure(items, preparer, skip)
    for entry in planned:
        record = done.get(entry.item.stem)
        if _is_finished(entry.item, record, preparer, out_dir):
            run.finished[entry.item.stem] = done[entry.item.stem]
        elif record is not None and record.get("fingerprint") != preparer.fingerprint:
            run.redone += 1
    run.resumed = len(run.finished)
    # The share: every process plans alike from the same done log, and takes every world_size-th batch to do
    plan = [batch for batch in plan_batches(planned, batch_seconds, max_batch_items)
            if any(p.item.stem not in run.finished for p in batch)]
    mine = ranks.share(list(enumerate(plan)))
    batches = [batch for _, batch in mine]
    total = sum(1 for batch in batches for p in batch if p.item.stem not in run.finished)
    kill_in_batch = hook_number(PREP_KILL_IN_BATCH_ENV)
    if hook_number(PREP_KILL_RANK_ENV) not in (None, ranks.rank):
        kill_in_batch = None
    count = 0
    if progress is not None:
        progress(0, total)
    log.path.parent.mkdir(parents=True, exist_ok=True)
    prefetcher: _Prefetcher = _Prefetcher(preparer, batches, load_threads)
    try:
        with open(log.path, "a", encoding="utf-8") as handle:
            for index, (plan_index, batch) in enumerate(mine):
                loaded = prefetcher.get(index, load_timeout_s)
                ready: list[tuple[Planned, Any]] = []
                for entry, value in zip(batch, loaded, strict=True):
                    if isinstance(value, ItemProblem):
                        if entry.item.stem not in run.finished:
                            skip(Skipped(entry.item.id, str(entry.item.audio), value.reason), plan_index)
                            count += 1
                    else:
                        ready.append((entry, value))
                tick = time.perf_counter()
                results = preparer.compute([(entry.item, value) for entry, value in ready]) if ready else []
                run.compute_s += time.perf_counter() - tick
                run.batches += 1
                lines = []
                for (entry, _value), result in zip(ready, results, strict=True):
                    item = entry.item
                    if item.stem in run.finished:
                        continue  # recomputed only as a neighbour of unfinished items
                    count += 1
                    if isinstance(result, ItemProblem):
                        skip(Skipped(item.id, str(item.audio), result.reason), plan_index)
                        continue
                    record = {"id": item.id, "stem": item.stem, "audio": str(item.audio),
                              "signature": audio_signature(item.audio), "text": item.text,
                              "language": item.language, "speaker": item.speaker,
                              "fingerprint": preparer.fingerprint, "seconds": round(entry.seconds, 4),
                              **preparer.write(out_dir, item, result)}
                    if kill_in_batch == index + 1:
                        kill_now()
                    lines.append(record)
                _commit(out_dir, preparer, [r["stem"] for r in lines], batch, lines, handle)
                for record in lines:
                    run.finished[record["stem"]] = record
                    run.seconds_prepared += float(record["seconds"])
                run.new += len(lines)
                if progress is not None:
                    progress(count, total)
    finally:
        prefetcher.close()
    if ranks.enabled:
        _merge_ranks(run, ranks, log, [p.item for batch in plan for p in batch], in_batches, preparer, out_dir)
    run.elapsed_s = time.perf_counter() - started
    return run


def _merge_ranks(run: BatchRun, ranks: Ranks, log: DoneLog, planned: list[SourceItem],
                 in_batches: list[tuple[int, Skipped]], preparer: Preparer, out_dir: Path) -> None:
    """When every process has done its share: ``run`` becomes what one process doing all of them returns
    (the finished items from every process's done log, the counts summed, the skipped items in plan order),
    and the first process merges the done logs."""
    barrier(ranks)
    done = log.read()
    for item in planned:
        if item.stem not in run.finished and _is_finished(item, done.get(item.stem), preparer, out_dir):
            run.finished[item.stem] = done[item.stem]
    mine = {"new": run.new, "batches": run.batches, "seconds": run.seconds_prepared, "compute_s": run.compute_s,
            "skipped": [(index, order, asdict(entry)) for order, (index, entry) in enumerate(in_batches)]}
    every = gather(ranks, mine)  # also: every process has read the logs before the first one merges them
    run.new = sum(int(part["new"]) for part in every)
    run.batches = sum(int(part["batches"]) for part in every)
    run.seconds_prepared = sum(float(part["seconds"]) for part in every)
    run.compute_s = sum(float(part["compute_s"]) for part in every)
    own = {id(entry) for _, entry in in_batches}
    measured = [entry for entry in run.skipped if id(entry) not in own]
    run.skipped = measured + [Skipped(**entry) for _, _, entry in
                              sorted(row for part in every for row in part["skipped"])]
    if ranks.is_main:
        log.merge()


def _commit(out_dir: Path, preparer: Preparer, stems: list[str], batch: list[Planned],
            lines: list[dict[str, Any]], handle: Any) -> None:
    """Make the batch's files durable, then record its items as done (one synced append)."""
    if not lines:
        return
    folders = {(out_dir / name).parent for entry in batch if entry.item.stem in stems
               for name in preparer.outputs(entry.item)}
    for folder in sorted(folders):
        fsync_dir(folder)
    handle.write("".join(json.dumps(record, ensure_ascii=False) + "\n" for record in lines))
    handle.flush()
    os.fsync(handle.fileno())


def iter_in_input_order(items: Sequence[SourceItem], finished: dict[str, dict[str, Any]]
                        ) -> Iterator[tuple[SourceItem, dict[str, Any]]]:
    """The finished items with their records, in the input's order (manifests keep it)."""
    for item in items:
        record = finished.get(item.stem)
        if record is not None:
            yield item, record
