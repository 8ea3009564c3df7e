"""Speaker embeddings cached in the source records, each record naming the model that made them.

A record's ``speaker_model`` is ``{"source": what the user gave, "identity": ...}``: for a weights file or a model
folder the sha256 of its contents (so a renamed copy still counts as the same model and a replaced file does
not), for a Hub id the id. A rerun whose model has another identity embeds that record's clips again; a
record without one (made before the model was recorded) is embedded again too: embeddings of two models are
never clustered together.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from data_tools.ingest.speakers import Clip, SpeakerError, embed_clip, label_speakers, load_embedder

Records = list[tuple[Path, dict[str, Any]]]
_CHUNK = 1 << 20


def model_identity(source: str) -> str:
    """What names a speaker model's weights: the digest of a file or a folder's files, else the Hub id (hashed
    once per process while the files' sizes and times stay the same)."""
    path = Path(source)
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file() and
                                                 not p.name.startswith(".")) if path.is_dir() else []
    stamps = tuple((str(file), file.stat().st_size, file.stat().st_mtime_ns) for file in files)
    return _identity(str(source), stamps)


@functools.lru_cache(maxsize=8)
def _identity(source: str, stamps: tuple[tuple[str, int, int], ...]) -> str:
    path = Path(source)
    if path.is_file():
        return f"sha256:{_file_digest(path)}"
    if path.is_dir():
        digest = hashlib.sha256()
        for name, _, _ in stamps:
            digest.update(Path(name).relative_to(path).as_posix().encode("utf-8") + b"\0")
            digest.update(_file_digest(Path(name)).encode("ascii"))
        return f"sha256:{digest.hexdigest()}"
    return f"id:{source}"


def _file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(_CHUNK):
            digest.update(block)
    return digest.hexdigest()


def _made_by(record: dict[str, Any], identity: str) -> bool:
    made = record.get("speaker_model")
    return isinstance(made, dict) and made.get("identity") == identity


def embed_speakers(out: Path, records: Records, source: str, device: str,
                   write: Callable[[Path, dict[str, Any]], None]) -> None:
    """Each clip's embedding by the model ``source``: only clips without one, or every clip of a record that
    another model embedded. SpeakerError (one line) for a model that cannot be loaded."""
    identity = model_identity(source)
    pending = [(path, record) for path, record in records
               if not _made_by(record, identity) or any("speaker_embedding" not in c for c in record["clips"])]
    if not pending:
        return
    embedder = load_embedder(source, device)
    for path, record in pending:
        again = not _made_by(record, identity)
        for clip in record["clips"]:
            if again or "speaker_embedding" not in clip:
                clip["speaker_embedding"] = embed_clip(embedder, out / clip["audio"])
        record["speaker_model"] = {"source": str(source), "identity": identity}
        write(path, record)


def speaker_labels(records: Records, source: str, threshold: float, prefix: str) -> dict[str, str]:
    """Clip id -> clustered speaker label, over the clips the model ``source`` embedded (SpeakerError)."""
    identity = model_identity(source)
    clips = [Clip(clip["id"], record["source"], clip["seconds"], np.asarray(clip["speaker_embedding"]))
             for _, record in records if _made_by(record, identity)
             for clip in record["clips"] if "speaker_embedding" in clip]
    if len({clip.embedding.shape for clip in clips}) > 1:
        raise SpeakerError(f"--speaker-model {source}: its cached embeddings differ in size; delete the "
                           "'speaker_embedding' entries of the records in sources/ and rerun")
    return label_speakers(clips, threshold, prefix)
