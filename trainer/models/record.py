"""``hub_download.json`` (``record_file``: what was fetched into a model folder, written atomically after each
file), and which model folders a workspace holds, for the studio's fields.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from trainer.models.integrity import damage_line
from trainer.models.record_file import FORMAT as FORMAT
from trainer.models.record_file import RECORD_NAME as RECORD_NAME
from trainer.models.record_file import read_record as read_record
from trainer.models.record_file import recorded_file as recorded_file
from trainer.models.record_file import write_record as write_record

MODELS_DIR = "models"  # <workspace>/models/<set folder>


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
