"""Download a model set into its folder: resumable, every file checked against the Hub's checksum, recorded.

Per file: a file already in the folder whose record (or, without one, whose content) matches the Hub's digest is
kept; anything else is fetched into a hidden ``.<name>.<digest>.incomplete`` beside its final place. That
partial file survives an interrupted run and the next run continues it with an HTTP Range request
(huggingface_hub's ``http_get``, which also resumes by itself when a connection drops mid-file). A finished file
is hashed (sha256 for LFS files, the git blob id for small ones) before it is moved into place: a mismatch is
refused by name and fetched again from the start, once; a second mismatch ends the run. ``hub_download.json``
gets each file as it lands.

Offline (``HF_HUB_OFFLINE=1`` or ``offline=True``) nothing is asked of the Hub: the folder is checked against the
catalogue and its record (``trainer.models.integrity``), and a missing or damaged file is named in one line.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from trainer.models.catalog import ModelSet
from trainer.models.hub import (
    HubProblem,
    RemoteFile,
    RemoteSource,
    _hub_errors,
    bounded_session,
    describe_error,
    endpoint,
    offline_mode,
    resolve_set,
    timeout_s,
)
from trainer.models.integrity import damage_line, file_digest
from trainer.models.record import read_record, recorded_file, write_record

ATTEMPTS = 2  # a file whose digest does not match is fetched once more before the run gives up


class OfflineMissing(HubProblem):
    """Offline, and the folder lacks a file the set needs."""


class DigestMismatch(HubProblem):
    """A fetched file does not match the Hub's checksum (again)."""


class DownloadInterrupted(HubProblem):
    """The connection failed mid-file; what arrived is kept for the next run."""


@dataclass
class FetchReport:
    set_name: str
    folder: Path
    offline: bool
    files: list[dict[str, Any]] = field(default_factory=list)  # local, repo_id, size, digest, action
    downloaded_bytes: int = 0

    def as_json(self) -> dict[str, Any]:
        return {"set": self.set_name, "folder": str(self.folder), "offline": self.offline, "files": self.files,
                "downloaded_bytes": self.downloaded_bytes}


def local_digest(path: Path, remote: RemoteFile) -> str:
    """The file's digest in the Hub's terms for this file (``sha256:...`` or ``git-sha1:...``)."""
    return file_digest(path, "sha256" if remote.sha256 else "git-sha1")


def _stat_key(path: Path) -> tuple[int, int]:
    stat = path.stat()
    return stat.st_size, stat.st_mtime_ns


def _forwarding_bar(bar: Any) -> type:
    """A progress-bar class for ``http_get`` that adds each file's bytes to the run's one bar."""

    class Forward:
        def __init__(self, *args: Any, initial: int = 0, **kwargs: Any) -> None:
            bar.update(initial)

        def update(self, n: int = 1) -> None:
            bar.update(n)

        def close(self) -> None:
            pass

        def __enter__(self) -> Forward:
            return self

        def __exit__(self, *exc: Any) -> bool:
            return False

    return Forward


def partial_path(final: Path, remote: RemoteFile) -> Path:
    return final.with_name(f".{final.name}.{remote.digest.split(':', 1)[1][:16]}.incomplete")


def _download(remote: RemoteFile, revision: str, final: Path, token: str | None, bar: Any) -> None:
    """Fetch (or continue) one file into its partial file, check its digest, move it into place."""
    from huggingface_hub import get_hf_file_metadata, hf_hub_url
    from huggingface_hub.file_download import http_get
    from huggingface_hub.utils import build_hf_headers

    bounded_session()
    final.parent.mkdir(parents=True, exist_ok=True)
    part = partial_path(final, remote)
    for stale in final.parent.glob(f".{final.name}.*.incomplete"):
        if stale != part:  # a partial file of another version of this file
            stale.unlink(missing_ok=True)
    if part.exists() and part.stat().st_size > remote.size:
        part.unlink()
    url = hf_hub_url(remote.repo_id, remote.path, revision=revision, endpoint=endpoint())
    kept = part.stat().st_size if part.exists() else 0
    try:
        metadata = get_hf_file_metadata(url, token=token, timeout=timeout_s(), endpoint=endpoint())
        # as huggingface_hub does: a Xet-stored file is fetched through the resolve address (redirects followed)
        location = url if metadata.xet_file_data is not None else (metadata.location or url)
        headers = build_hf_headers(token=token)
        if urlparse(location).netloc != urlparse(url).netloc:
            headers.pop("authorization", None)  # a signed CDN address: the token stays with the Hub
        with open(part, "r+b" if part.exists() else "wb") as handle:
            handle.seek(0, os.SEEK_END)
            http_get(location, handle, resume_size=handle.tell(), headers=headers, expected_size=remote.size,
                     displayed_filename=remote.local, tqdm_class=_forwarding_bar(bar))
            handle.flush()
            os.fsync(handle.fileno())
    except _hub_errors() as exc:
        now = part.stat().st_size if part.exists() else 0
        raise DownloadInterrupted(describe_error(exc, remote.repo_id, remote.path)
                                  + f"; {now:,} of {remote.size:,} bytes of {remote.local} kept"
                                  + (f" ({now - kept:,} this run)" if now > kept else "")
                                  + ": run the download again to continue it") from None
    actual = local_digest(part, remote)
    if actual != remote.digest:
        part.unlink(missing_ok=True)
        raise DigestMismatch(f"{final}: the downloaded file's {actual} does not match the Hub's {remote.digest}")
    os.replace(part, final)


def _already_there(folder: Path, remote: RemoteFile, record: dict[str, Any], say: Callable[[str], None]) -> bool:
    """Whether the folder's file is the Hub's: by the record when size and time match it, else by its content.

    A file that is there but differs is refused by name and removed (it is then fetched again)."""
    path = folder / remote.local
    if not path.is_file():
        return False
    entry = recorded_file(record, remote.local)
    if entry and entry.get("digest") == remote.digest and [entry.get("size"), entry.get("mtime_ns")] == list(
            _stat_key(path)):
        return True
    actual = local_digest(path, remote)
    if actual == remote.digest:
        return True
    say(f"refused: {path} has {actual}, the Hub's file has {remote.digest}: fetching it again")
    path.unlink()
    return False


def _record_base(model_set: ModelSet, folder: Path) -> dict[str, Any]:
    record = read_record(folder)
    record.update(set=model_set.name, title=model_set.title, kind=model_set.kind, complete=False)
    record.setdefault("sources", {})
    return record


def _record_file(record: dict[str, Any], source: RemoteSource, remote: RemoteFile, path: Path) -> None:
    entry = record["sources"].setdefault(source.source.repo_id + ("@" + source.source.subfolder
                                                                  if source.source.subfolder else ""), {})
    if entry.get("revision") != source.revision:
        entry["files"] = {}
    size, mtime_ns = _stat_key(path)
    entry.update(repo_id=source.source.repo_id, revision=source.revision, licence=source.licence,
                 licence_in_catalogue=source.source.licence, subfolder=source.source.subfolder)
    entry.setdefault("files", {})[remote.local] = {"path": remote.path, "size": size, "mtime_ns": mtime_ns,
                                                   "digest": remote.digest}


def fetch_set(model_set: ModelSet, folder: Path, *, token: str | None = None, offline: bool = False,
              progress: bool = True, say: Callable[[str], None] | None = None) -> FetchReport:
    """Bring ``folder`` to the set's files at the Hub's current commits (see the module doc)."""
    say = say or (lambda line: print(line, flush=True))
    folder = Path(folder)
    if offline or offline_mode():
        return check_offline(model_set, folder)
    remotes = resolve_set(model_set, token)
    folder.mkdir(parents=True, exist_ok=True)
    record = _record_base(model_set, folder)
    report = FetchReport(model_set.name, folder, offline=False)
    needed: list[tuple[RemoteSource, RemoteFile]] = []
    for source in remotes:
        for remote in source.files:
            if _already_there(folder, remote, record, say):
                _record_file(record, source, remote, folder / remote.local)
                report.files.append(_row(remote, "present"))
            else:
                needed.append((source, remote))
    write_record(folder, record)
    _check_space(folder, needed)
    from tqdm import tqdm

    with tqdm(total=sum(remote.size for _, remote in needed), unit="B", unit_scale=True, unit_divisor=1024,
              desc=model_set.name, file=sys.stderr, disable=not progress, mininterval=0.5) as bar:
        for source, remote in needed:
            final = folder / remote.local
            for attempt in range(1, ATTEMPTS + 1):
                try:
                    _download(remote, source.revision, final, token, bar)
                    break
                except DigestMismatch as exc:
                    if attempt == ATTEMPTS:
                        raise
                    bar.total += remote.size
                    say(f"refused: {exc}: fetching it again")
            _record_file(record, source, remote, final)
            write_record(folder, record)
            report.files.append(_row(remote, "downloaded"))
            report.downloaded_bytes += remote.size
            say(f"fetched {remote.local} ({remote.size:,} bytes, {remote.digest})")
    record["complete"] = True
    write_record(folder, record)
    return report


def _check_space(folder: Path, needed: list[tuple[RemoteSource, RemoteFile]]) -> None:
    """Refuse before the first byte when the disk cannot hold what is still to come (partial files count)."""
    missing = sum(remote.size - _partial_size(folder / remote.local, remote) for _, remote in needed)
    free = shutil.disk_usage(folder).free
    if missing > free:
        raise HubProblem(f"{folder}: {missing / 1e9:.2f} GB still to download but only {free / 1e9:.2f} GB free "
                         "on that disk; free some space or choose another folder (--dir / --workspace)")


def _partial_size(final: Path, remote: RemoteFile) -> int:
    part = partial_path(final, remote)
    return min(part.stat().st_size, remote.size) if part.is_file() else 0


def _row(remote: RemoteFile, action: str) -> dict[str, Any]:
    return {"local": remote.local, "repo_id": remote.repo_id, "size": remote.size, "digest": remote.digest,
            "action": action}


def required_locals(model_set: ModelSet, folder: Path) -> list[str]:
    """Files of the set that must be in the folder (a weights alternative counts when any one is there)."""
    needed = []
    for source in model_set.sources:
        needed += [source.local_path(name) for name in source.files]
        if source.weights and not any((folder / source.local_path(name)).is_file() for name in source.weights):
            needed.append(source.local_path(source.weights[0]))
    return needed


def check_offline(model_set: ModelSet, folder: Path) -> FetchReport:
    """Offline: name the first missing file, or the first recorded file that no longer matches its record
    (``integrity.damage_line``), in one line; else report what is there."""
    missing = [name for name in required_locals(model_set, folder) if not (folder / name).is_file()]
    if missing:
        more = f" (and {len(missing) - 1} more file(s))" if len(missing) > 1 else ""
        raise OfflineMissing(f"offline (HF_HUB_OFFLINE is set): {folder / missing[0]} is not downloaded{more}; "
                             "connect to the network and run the download again")
    damage = damage_line(folder)
    if damage is not None:
        raise OfflineMissing(f"offline (HF_HUB_OFFLINE is set): {damage}")
    record = read_record(folder)
    report = FetchReport(model_set.name, folder, offline=True)
    for name in required_locals(model_set, folder):
        entry = recorded_file(record, name) or {}
        size = (folder / name).stat().st_size
        action = "present" if entry else "present (not recorded: unchecked)"
        report.files.append({"local": name, "size": size, "digest": entry.get("digest"), "action": action})
    return report
