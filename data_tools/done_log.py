"""A batched preparation's record of finished items: ``<out>/<state_dir>/done.jsonl``, one JSON line per item.

One process appends to ``done.jsonl`` itself. Under torchrun each process appends to its own
``done.rank<R>.jsonl``, so no two processes ever write one file; the first process merges them into
``done.jsonl`` when the run starts (what a killed run left) and when every process has finished. A rerun
therefore reads the work of every process of the last run, whatever number of processes it has itself.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from data_tools.fileio import atomic_write_text

MERGED = "done.jsonl"
_RANK_PATTERN = "done.rank*.jsonl"


class DoneLog:
    """The done log(s) of one output folder; ``path`` is where this process appends."""

    def __init__(self, out_dir: Path, state_dir: str, rank: int | None = None) -> None:
        self.folder = out_dir / state_dir
        self.path = self.folder / (MERGED if rank is None else f"done.rank{rank}.jsonl")

    def rank_files(self) -> list[Path]:
        return sorted(self.folder.glob(_RANK_PATTERN))

    def read(self) -> dict[str, dict[str, Any]]:
        """Finished items by stem, from the merged log then each process's (a torn last line is ignored; a
        later line wins: the processes of one run never share an item, and every run starts merged)."""
        records: dict[str, dict[str, Any]] = {}
        for path in [self.folder / MERGED, *self.rank_files()]:
            records.update(_read_lines(path))
        return records

    def merge(self) -> None:
        """Fold every process's log into ``done.jsonl`` (atomically), then remove them; nothing to do when
        there are none. Interrupted between the two, the next read sees the same lines twice: the same result."""
        rank_files = self.rank_files()
        if not rank_files:
            return
        records = self.read()
        atomic_write_text(self.folder / MERGED,
                          "".join(json.dumps(record, ensure_ascii=False) + "\n" for record in records.values()))
        for path in rank_files:
            path.unlink(missing_ok=True)


def _read_lines(path: Path) -> dict[str, dict[str, Any]]:
    records: dict[str, dict[str, Any]] = {}
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return records
    for raw in lines:
        try:
            record = json.loads(raw)
            records[str(record["stem"])] = record
        except (json.JSONDecodeError, KeyError, TypeError):
            continue
    return records
