"""Whether a downloaded model folder still holds the files its ``hub_download.json`` recorded.

One rule, used by the training pre-flight (and so the trainer: ``trainer.plan``), the offline check
(``python -m trainer.models download --offline`` and ``verify``) and the studio's model lists
(``record.downloaded_model_dirs``). Hashing multi-GB weights on every check would be slow, so the everyday check
is cheap: a recorded file whose size and modification time are still those recorded at download is trusted; a
different size is damage without reading a byte; a file whose time changed (edited, replaced, or copied without
keeping times) is hashed again and judged by its digest. ``verify`` hashes every file, and re-records the size and
time of files that still match, so a copied folder is cheap to check again afterwards.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from data_tools.fileio import sha256_file
from trainer.models.record_file import RECORD_NAME, read_record, write_record

CHUNK = 8 * 1024 * 1024
REPAIR = "run python -m trainer.models download for its set again to fetch the file anew"


def git_blob_sha1(path: Path) -> str:
    digest = hashlib.sha1(f"blob {path.stat().st_size}\0".encode())
    with open(path, "rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def file_digest(path: Path, kind: str) -> str:
    """``sha256:...`` or ``git-sha1:...`` of the file, as the record writes digests of that ``kind``."""
    return f"sha256:{sha256_file(path)}" if kind == "sha256" else f"git-sha1:{git_blob_sha1(path)}"


def recorded_entries(record: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(local path inside the folder, its entry) for every file the record holds."""
    for source in (record.get("sources") or {}).values():
        for local, entry in (source.get("files") or {}).items():
            if isinstance(entry, dict):
                yield str(local), entry


def file_problem(folder: Path, local: str, entry: dict[str, Any], rehash: bool = False) -> str | None:
    """Why one recorded file no longer matches its record (None: it does). Hashes only when its size is as
    recorded and its modification time is not (or always, with ``rehash``)."""
    path = Path(folder) / local
    if not path.is_file():
        return f"{path}: missing"
    stat = path.stat()
    size = entry.get("size")
    if isinstance(size, int) and size != stat.st_size:
        return f"{path}: {stat.st_size:,} bytes, the record says {size:,}"
    if not rehash and entry.get("mtime_ns") == stat.st_mtime_ns and isinstance(size, int):
        return None
    digest = str(entry.get("digest") or "")
    actual = file_digest(path, digest.split(":", 1)[0])
    return None if actual == digest else f"{path}: {actual} does not match the recorded {digest}"


def damaged_files(folder: Path, rehash: bool = False) -> list[str]:
    """One line per recorded file that is missing or no longer matches (a folder without a record: none)."""
    record = read_record(folder)
    return [problem for local, entry in recorded_entries(record)
            if (problem := file_problem(folder, local, entry, rehash)) is not None]


def damage_line(folder: Path) -> str | None:
    """The one line naming a damaged model folder and its (first) damaged file; None when the folder is intact
    or holds no record. The cheap check (see the module doc)."""
    problems = damaged_files(folder)
    if not problems:
        return None
    more = f" (and {len(problems) - 1} more file(s))" if len(problems) > 1 else ""
    return f"model folder {folder} is damaged: {problems[0]}{more}; {REPAIR}"


def verify_folder(folder: Path) -> list[str]:
    """Hash every recorded file again: one line per file that is missing or whose digest differs. When all match,
    the files' current sizes and times are recorded, so the cheap check trusts them again (a copied folder)."""
    record = read_record(folder)
    if not record:
        return [f"{folder}: no readable {RECORD_NAME}: nothing to verify against"]
    problems = damaged_files(folder, rehash=True)
    if not problems:
        _rerecord_times(Path(folder), record)
    return problems


def _rerecord_times(folder: Path, record: dict[str, Any]) -> None:
    changed = False
    for local, entry in recorded_entries(record):
        stat = (folder / local).stat()
        if entry.get("mtime_ns") != stat.st_mtime_ns:
            entry["mtime_ns"] = stat.st_mtime_ns
            changed = True
    if changed:
        with contextlib.suppress(OSError):  # a read-only folder stays correct: the next check hashes again
            write_record(folder, record)


def recorded_folder_of(path: Path) -> Path | None:
    """The model folder behind an option's path: the folder itself, or a file's folder, when it holds a record
    (the options name a download folder or a file at its top: config, gpt.pth, tokenizer, vocoder); else None."""
    path = Path(path)
    folder = path if path.is_dir() else path.parent
    return folder if (folder / RECORD_NAME).is_file() else None


def model_folders_damage(paths: list[str]) -> tuple[list[Path], str | None]:
    """(the recorded model folders behind ``paths``, the first damaged one's line or None)."""
    folders: list[Path] = []
    for text in paths:
        folder = recorded_folder_of(Path(text)) if text else None
        if folder is not None and folder not in folders:
            folders.append(folder)
    return folders, next((line for folder in folders if (line := damage_line(folder)) is not None), None)
