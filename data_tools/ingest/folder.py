"""The ingest folder's claim: ``ingest.json`` records the settings its clips depend on, so a rerun with other
settings is refused (naming what changed) instead of mixing clips cut two ways.

Checking and marking are two steps: a run checks the folder, then loads its models (a separation model, a
recogniser), and only marks a new folder once they loaded, so a refused model leaves no trace behind and the
same command with a good model works.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from data_tools.ingest.jsonfiles import read_json, write_json

MARKER = "ingest.json"
# Folders whose ``.<name>.tmp`` files are writes a kill cut short ("." is the ingest folder itself).
TEMP_FOLDERS = ("clips", "sources", "manifests", "decoded", "separated", ".")  # pipeline.DECODED, SEPARATED
_LABELS = {"separate": "--separate (the separation model)", "target_lufs": "--loudness / --no-loudness",
           "loudness_scope": "--loudness-scope", "format": "the ingest format"}


def changed_settings(recorded: dict[str, Any], fixed: dict[str, Any]) -> list[str]:
    """The settings that differ between a folder's record and this run, named as the user sets them."""
    changed: list[str] = []
    for key in sorted(set(recorded) | set(fixed)):
        before, now = recorded.get(key), fixed.get(key)
        if before == now:
            continue
        if key == "slicing" and isinstance(before, dict) and isinstance(now, dict):
            changed += [name for name in sorted(set(before) | set(now)) if before.get(name) != now.get(name)]
        else:
            changed.append(f"{_LABELS.get(key, key)}: {before!r} before, {now!r} now")
    return changed


def check_folder(out: Path, fixed: dict[str, Any]) -> bool:
    """Whether ``out`` was claimed before; refused (ValueError, one line) when with other settings."""
    recorded = read_json(out / MARKER)
    if recorded is None:
        return False
    if recorded != fixed:
        what = "; ".join(changed_settings(recorded if isinstance(recorded, dict) else {}, fixed)) or "format"
        raise ValueError(f"{out} was made with other settings ({what}); use a new --out-dir or the same settings")
    return True


def mark_folder(out: Path, fixed: dict[str, Any], claimed: bool) -> None:
    """Stale temp files cleared and, for a new folder, its settings recorded (OSError when it cannot be written)."""
    for folder in TEMP_FOLDERS:
        for stale in (out / folder).rglob(".*.tmp") if folder != "." else out.glob(".*.tmp"):
            stale.unlink(missing_ok=True)
    if not claimed:
        out.mkdir(parents=True, exist_ok=True)
        write_json(out / MARKER, fixed)
