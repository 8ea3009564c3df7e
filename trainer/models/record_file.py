"""``hub_download.json`` itself: what was fetched into a model folder (repository, commit, licence, every file with
its size, modification time and digest), written atomically beside the files after each file, so an interrupted
download leaves a record of what is complete. Read by ``record`` (the workspace's folders) and ``integrity``.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from data_tools.fileio import atomic_write_text

RECORD_NAME = "hub_download.json"
FORMAT = 1


def read_record(folder: Path) -> dict[str, Any]:
    """The folder's record ({} when there is none or it is unreadable: every file is then checked again)."""
    try:
        record = json.loads((Path(folder) / RECORD_NAME).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return {}
    return record if isinstance(record, dict) and record.get("format") == FORMAT else {}


def write_record(folder: Path, record: dict[str, Any]) -> None:
    record = {**record, "format": FORMAT, "updated_at": datetime.now(UTC).isoformat(timespec="seconds")}
    atomic_write_text(Path(folder) / RECORD_NAME, json.dumps(record, indent=2, sort_keys=True) + "\n")


def recorded_file(record: dict[str, Any], local: str) -> dict[str, Any] | None:
    for source in (record.get("sources") or {}).values():
        entry = (source.get("files") or {}).get(local)
        if isinstance(entry, dict):
            return entry
    return None
