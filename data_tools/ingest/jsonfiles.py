"""The JSON state files of an ingest folder, written atomically; read back as None (or no rows) when missing or torn.

Kept apart from ``clips`` (which cuts audio and pulls in torch through the slicer) so the proofreading store,
which the studio's page uses in its own process, imports no torch.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from data_tools.fileio import atomic_write_text


def read_json(path: Path) -> Any:
    """A state file, or None when it is missing or torn (a torn one is redone, never trusted)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def write_json(path: Path, value: Any) -> None:
    atomic_write_text(path, json.dumps(value, ensure_ascii=False, indent=1) + "\n")


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    atomic_write_text(path, "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    return [json.loads(line) for line in lines if line.strip()]
