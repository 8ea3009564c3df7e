"""``hub_download.json``: what was fetched into a model folder (repository, commit, licence, every file with its
size and digest), written atomically beside the files after each file, so an interrupted download leaves a
record of what is complete. Also: which model folders a workspace holds, for the studio's fields.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from data_tools.fileio import atomic_write_text

RECORD_NAME = "hub_download.json"
FORMAT = 1
MODELS_DIR = "models"  # <workspace>/models/<set folder>


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


@dataclass(frozen=True)
class DownloadedModel:
    set_name: str
    title: str
    kind: str  # generation | asr | speaker
    path: Path
    complete: bool  # every file the set needs is recorded, and none is damaged
    damage: str | None = None  # the line naming a recorded file that no longer matches (integrity.damage_line)


def downloaded_model_dirs(workspace: Path, kind: str | None = None) -> list[DownloadedModel]:
    """Model folders under ``<workspace>/models/`` that hold a record (``kind``: only generations, asr, ...).

    The studio's path fields (``--model-dir``, ``--sample-model-dir``, ASR and speaker model) offer the complete
    ones. A folder whose recorded file no longer matches (the cheap size-and-time check, ``integrity``) is listed
    with ``damage`` set and not complete, so the pickers leave it out and the Models tab names the file.
    """
    from trainer.models.integrity import damage_line

    root = Path(workspace) / MODELS_DIR
    if not root.is_dir():
        return []
    found = []
    for record_path in sorted(root.glob(f"*/{RECORD_NAME}")) + sorted(root.glob(f"*/*/{RECORD_NAME}")):
        record = read_record(record_path.parent)
        if not record or (kind is not None and record.get("kind") != kind):
            continue
        damage = damage_line(record_path.parent)
        found.append(DownloadedModel(str(record.get("set")), str(record.get("title") or record.get("set")),
                                     str(record.get("kind")), record_path.parent,
                                     bool(record.get("complete")) and damage is None, damage))
    return found
