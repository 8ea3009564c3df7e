"""The temp files a killed write leaves: ``.<name>.npy|jsonl|json.<tag>.tmp``, the tag being the writer's pid.

Preparation writes each file through such a temp file and a rename; a rerun removes what a killed run left,
except the temp files of a live other process (several preparation processes share one output folder under
torchrun: ``data_tools.ranks``).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

PID_MAX = 1 << 22  # Linux's largest pid_max: a longer all-digit tag is a random temp name, not a pid
_TEMP_NAME = re.compile(r"^\..+\.(?:npy|jsonl|json)\.(?P<tag>[^.]+)\.tmp$")


def remove_stale_temp_files(out_dir: Path) -> list[Path]:
    """Remove the temp files of writes a kill interrupted under ``out_dir``; returns those removed."""
    removed: list[Path] = []
    if not out_dir.is_dir():
        return removed
    for path in out_dir.rglob(".*.tmp"):
        found = _TEMP_NAME.match(path.name)
        if found is None or not path.is_file() or _is_live_other_process(found["tag"]):
            continue
        path.unlink(missing_ok=True)
        removed.append(path)
    return removed


def _is_live_other_process(tag: str) -> bool:
    if not tag.isdigit() or int(tag) == os.getpid() or int(tag) > PID_MAX:
        return False
    try:
        os.kill(int(tag), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, OSError):
        return True
    return True
