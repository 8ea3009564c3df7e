"""Proofreading an ingest folder: the clips worst first, edits saved on disk at once, manifests saved new.

The pipeline's clip index (``clips.jsonl``) is read only; every edit (a transcript, a delete, a restore)
goes to ``edits.json``, rewritten atomically at each change, so edits survive a reload, a restart and a
rerun of the pipeline. ``save_manifest`` writes ``manifests/manifest_<time>.jsonl``, never over an
earlier one: the JSONL input ``python -m data_tools.preprocess --input`` reads (audio, text, speaker,
language, id, duration, source; audio paths relative to the manifest), for IndexTTS-1.5 and IndexTTS2 alike.
``speaker`` is the clustered label when the run had a speaker model (edited by hand here), and a manifest may
keep one speaker only.

A clip's status: ``deleted`` (by hand), ``restored`` (kept by hand despite its gate reasons), ``rejected``
(a gate failed), ``ok``. Manifests hold the ``ok`` and ``restored`` clips that have a transcript. An edited
transcript has its gates re-run as the import ran them (``regate``).
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from data_tools.fileio import fsync_dir
from data_tools.ingest.jsonfiles import read_json, read_jsonl, write_json

EDITS_FILE = "edits.json"
INDEX_FILE = "clips.jsonl"
MANIFESTS = "manifests"
STATUSES = ("rejected", "ok", "restored", "deleted")


class StoreError(ValueError):
    """A request the store cannot serve (unknown clip, no run yet): one line."""


def load_edits(path: Path) -> dict[str, dict[str, Any]]:
    edits = read_json(path)
    return edits if isinstance(edits, dict) else {}


@dataclass(frozen=True)
class ClipPage:
    clips: list[dict[str, Any]]  # each: id, audio (absolute path), text, given_text, asr_text, confidence,
    #                              reasons, status, edited, speaker, seconds, source
    total: int  # clips matching the filter
    page: int
    pages: int


class IngestStore:
    """The proofreading state of one ingest folder (safe to share between threads of one process)."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        self._lock = threading.Lock()
        self.reload()

    def reload(self) -> None:
        """Read the clip index and the edits again (after a pipeline rerun, or edits by another process)."""
        index = self.folder / INDEX_FILE
        if not index.is_file():
            raise StoreError(f"{self.folder}: no clips yet ({INDEX_FILE} is written when an ingest run ends)")
        clips = {row["id"]: row for row in read_jsonl(index)}
        with self._lock:
            self._clips, self._order = clips, list(clips)
            self._edits = load_edits(self.folder / EDITS_FILE)
            self._gates: Any = None  # the folder's GateContext, read on the first edit that needs it
            self._reasons: dict[str, list[str]] = {}  # re-run gates of clips edited since the import
        self._regate([c for c, edit in self._edits.items()
                      if c in clips and edit.get("text", clips[c].get("text")) != clips[c].get("text")])

    # ----- reading -----------------------------------------------------------------------------------

    def clip(self, clip_id: str) -> dict[str, Any]:
        """One clip as the table shows it (KeyError-free: StoreError for an unknown id)."""
        row = self._row(clip_id)
        edit = self._edits.get(clip_id, {})
        reasons = self._reasons.get(clip_id, row["reasons"])
        status = edit.get("status") or ("rejected" if reasons else "ok")
        pipeline_text = row.get("given_text") or row.get("asr_text") or ""
        return {"id": clip_id, "audio": str(self.folder / row["audio"]), "text": edit.get("text", pipeline_text),
                "given_text": row.get("given_text"), "given_kind": row.get("given_kind"),
                "asr_text": row.get("asr_text"), "confidence": row.get("confidence"), "reasons": reasons,
                "status": status, "edited": "text" in edit, "speaker": edit.get("speaker", row["speaker"]),
                "speaker_edited": "speaker" in edit,
                "language": row.get("language"), "seconds": row["seconds"], "source": row["source"],
                "origin_url": row.get("origin_url"), "licence": row.get("licence")}

    def list_clips(self, page: int = 0, page_size: int = 50, status: str | None = None,
                   speaker: str | None = None) -> ClipPage:
        """Clips worst first: rejected before kept, then lowest ASR confidence, then most reasons.

        ``status`` filters to one of ``STATUSES``, ``speaker`` to one speaker label (None: all); ``page``
        counts from 0.
        """
        if status is not None and status not in STATUSES:
            raise StoreError(f"unknown status {status!r} (one of {', '.join(STATUSES)})")
        rows = [self.clip(clip_id) for clip_id in self._order]
        if status is not None:
            rows = [row for row in rows if row["status"] == status]
        if speaker is not None:
            rows = [row for row in rows if row["speaker"] == speaker]
        rank = {"rejected": 0, "ok": 1, "restored": 1, "deleted": 2}
        rows.sort(key=lambda r: (rank[r["status"]], 1.0 if r["confidence"] is None else r["confidence"],
                                 -len(r["reasons"]), r["id"]))
        size = max(1, int(page_size))
        pages = max(1, -(-len(rows) // size))
        page = min(max(0, int(page)), pages - 1)
        return ClipPage(rows[page * size:(page + 1) * size], len(rows), page, pages)

    def audio_path(self, clip_id: str) -> Path:
        return self.folder / self._row(clip_id)["audio"]

    def speakers(self) -> dict[str, int]:
        """How many clips each speaker label has (edits applied), most first."""
        counts: dict[str, int] = {}
        for clip_id in self._order:
            who = self.clip(clip_id)["speaker"]
            counts[who] = counts.get(who, 0) + 1
        return dict(sorted(counts.items(), key=lambda item: (-item[1], item[0])))

    def counts(self) -> dict[str, int]:
        """How many clips have each status."""
        counts = dict.fromkeys(STATUSES, 0)
        for clip_id in self._order:
            counts[self.clip(clip_id)["status"]] += 1
        return counts

    # ----- editing (each change is on disk before the call returns) -------------------------------------

    def set_text(self, clip_id: str, text: str) -> dict[str, Any]:
        """The clip's transcript as proofread (spaces tidied); an empty text is refused."""
        self._row(clip_id)
        text = " ".join(str(text).split())
        if not text:
            raise StoreError(f"{clip_id}: an empty transcript; delete the clip instead")
        self._change(clip_id, text=text)
        self._regate([clip_id])
        return self.clip(clip_id)

    def _regate(self, clip_ids: list[str]) -> None:
        """Re-run the gates of clips whose transcript changed (``regate``: the import's own gates)."""
        if not clip_ids:
            return
        from data_tools.ingest.regate import load_context, reasons_now

        if self._gates is None:
            self._gates = load_context(self.folder, None)
        rows = [self._clips[c] for c in self._order]
        texts = {c: e["text"] for c, e in self._edits.items() if "text" in e}
        self._reasons.update(reasons_now(rows, texts, clip_ids, self._gates))

    def set_speaker(self, clip_id: str, speaker: str) -> dict[str, Any]:
        """The clip's speaker label as proofread (an empty one is refused)."""
        self._row(clip_id)
        speaker = " ".join(str(speaker).split())
        if not speaker:
            raise StoreError(f"{clip_id}: an empty speaker label")
        return self._change(clip_id, speaker=speaker)

    def delete(self, clip_id: str) -> dict[str, Any]:
        """Leave the clip out of manifests (its audio stays; ``restore`` brings it back)."""
        return self._change(clip_id, status="deleted")

    def restore(self, clip_id: str) -> dict[str, Any]:
        """Put a deleted or gate-rejected clip back into manifests (its reasons stay visible)."""
        return self._change(clip_id, status="restored")

    def _change(self, clip_id: str, **fields: Any) -> dict[str, Any]:
        self._row(clip_id)
        with self._lock:
            current = load_edits(self.folder / EDITS_FILE)  # another process (the CLI) may have edited too
            edits = {**current, clip_id: {**current.get(clip_id, {}), **fields, "at": time.time()}}
            try:
                write_json(self.folder / EDITS_FILE, edits)
            except OSError as exc:
                raise StoreError(f"cannot save the edit in {self.folder / EDITS_FILE}: {exc.strerror or exc} "
                                 "(the earlier edits are kept)") from None
            self._edits = edits
        return self.clip(clip_id)

    def _row(self, clip_id: str) -> dict[str, Any]:
        try:
            return self._clips[clip_id]
        except KeyError:
            raise StoreError(f"no clip {clip_id!r} in {self.folder}") from None

    # ----- manifests ------------------------------------------------------------------------------------

    def manifest_rows(self, speaker: str | None = None) -> list[dict[str, Any]]:
        """What a manifest saved now holds: kept clips (ok or restored) that have a transcript (of ``speaker``
        only, when given). Each row: id, audio, text, speaker (the label, edits applied), source (the clip's
        recording as a stable relative name: one recording's clips must stay on one side of a split),
        duration, and language, origin_url, licence where known."""
        if speaker is not None and speaker not in self.speakers():
            raise StoreError(f"no speaker {speaker!r} in {self.folder} (there are: {', '.join(self.speakers())})")
        rows = []
        for clip_id in self._order:
            clip = self.clip(clip_id)
            if clip["status"] in ("ok", "restored") and clip["text"] and speaker in (None, clip["speaker"]):
                audio = os.path.relpath(self.folder / self._clips[clip_id]["audio"], self.folder / MANIFESTS)
                row = {"id": clip_id, "audio": Path(audio).as_posix(), "text": clip["text"],
                       "speaker": clip["speaker"], "source": clip["source"], "duration": clip["seconds"]}
                for key in ("language", "origin_url", "licence"):
                    if clip[key]:
                        row[key] = clip[key]
                rows.append(row)
        return rows

    def save_manifest(self, speaker: str | None = None) -> Path:
        """Write the manifest (of ``speaker``'s clips only, when given) under a new name
        (``manifest_<YYYYmmdd_HHMMSS>[_N].jsonl``); returns its path.

        Written to a temp file, fsynced, then linked to a name that does not exist yet (never replacing one).
        """
        directory = self.folder / MANIFESTS
        text = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in self.manifest_rows(speaker))
        try:
            return self._write_new(directory, text)
        except OSError as exc:
            raise StoreError(f"cannot save a manifest in {directory}: {exc.strerror or exc} (earlier manifests "
                             "are untouched)") from None

    def _write_new(self, directory: Path, text: str) -> Path:
        directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".manifest.", suffix=".tmp", dir=directory)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
                handle.flush()
                os.fsync(handle.fileno())
            stamp = time.strftime("%Y%m%d_%H%M%S")
            for attempt in range(1, 10_000):
                target = directory / (f"manifest_{stamp}.jsonl" if attempt == 1 else f"manifest_{stamp}_{attempt}.jsonl")
                try:
                    os.link(tmp, target)
                except FileExistsError:
                    continue
                fsync_dir(directory)
                return target
            raise StoreError(f"{directory}: no free manifest name for {stamp}")
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
