"""A checkpoint's metadata without its tensor data: milliseconds for a 7 GB file (the UI process stays light).

``torch.load(..., map_location="meta", weights_only=True)`` unpickles only ``data.pkl`` and reads each
record's small zip header; every tensor comes back on the meta device (shape and dtype, no bytes), so
no tensor storage is read. The digest record is read from the last bytes of the file; checking it
(hashing the file) is a separate call: :func:`trainer.checkpoints.digest.check_file_digest_cached`.
"""

from __future__ import annotations

import warnings
import zipfile
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

import torch

from trainer.checkpoints.digest import declares_digest, read_trailer
from trainer.checkpoints.format import CheckpointError, checkpoint_kind, model_state_of
from trainer.checkpoints.loading import explain_load_failure


@dataclass
class CheckpointMetadata:
    path: Path
    size_bytes: int
    mtime: float
    kind: str  # studio | community | bare | unknown
    format_version: int | None = None
    model_version: str | None = None  # the generation id (generations) of the recorded config or weights
    step: int | None = None
    epoch: int | None = None
    position: int | None = None
    saved_at: str | None = None
    last_losses: dict[str, Any] | None = None
    last_val_loss: float | None = None
    best_val_loss: float | None = None
    tokenizer: dict[str, Any] | None = None
    base_vocab_size: int | None = None
    text_vocab_rows: int | None = None
    has_optimizer: bool = False
    has_rng: bool = False
    has_digest: bool = False  # a digest record is at the end of the file (not yet checked)
    digest: str | None = None
    declares_digest: bool = False  # the pickle says its saver wrote one
    digest_note: str = ""  # why the digest record is unusable, when it is
    tensors: int = 0
    tensor_bytes: int = 0
    repaired_from: dict[str, Any] | None = None
    hparams: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["path"] = str(self.path)
        return out


def _open(path: Path) -> IO[bytes]:
    """Opening is one seam (tests count the bytes read through it)."""
    return open(path, "rb")


def _tensor_stats(value: Any) -> tuple[int, int]:
    if isinstance(value, torch.Tensor):
        return 1, value.numel() * value.element_size()
    if isinstance(value, Mapping):
        values = list(value.values())
    elif isinstance(value, (list, tuple)):
        values = list(value)
    else:
        return 0, 0
    count = size = 0
    for item in values:
        c, s = _tensor_stats(item)
        count, size = count + c, size + s
    return count, size


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _float(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def read_metadata(path: str | Path) -> CheckpointMetadata:
    """Step, epoch, kind, losses, tokenizer record, digest presence... of ``path``, reading no tensor data.

    Raises CheckpointError (one line) when the file is missing, not a zip checkpoint, or refused by the
    weights-only unpickler (nothing in it runs).
    """
    path = Path(path)
    try:
        stat = path.stat()
    except OSError as exc:
        raise CheckpointError(f"{path} is not a loadable checkpoint: {exc.strerror or exc}") from None
    if stat.st_size == 0:
        raise CheckpointError(f"{path} is not a loadable checkpoint: empty file (0 bytes)")
    if not zipfile.is_zipfile(path):
        from trainer.checkpoints.loading import _header_reason

        reason = _header_reason(path) or "not a zip-format checkpoint (metadata needs the zip format)"
        raise CheckpointError(f"{path} is not a loadable checkpoint: {reason}")
    try:
        with _open(path) as handle, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            obj = torch.load(handle, map_location="meta", weights_only=True)
    except (Exception, MemoryError) as exc:
        raise CheckpointError(f"{path} is not a loadable checkpoint: {explain_load_failure(exc, path)}") from None
    if not isinstance(obj, dict):
        raise CheckpointError(f"{path} is not a loadable checkpoint: it holds a {type(obj).__name__}")
    return _metadata_of(obj, path, stat.st_size, stat.st_mtime)


def _metadata_of(ckpt: dict[str, Any], path: Path, size: int, mtime: float) -> CheckpointMetadata:
    kind = checkpoint_kind(ckpt)
    state = model_state_of(ckpt) or {}
    meta = CheckpointMetadata(path=path, size_bytes=size, mtime=mtime, kind=kind)
    meta.format_version = _int(ckpt.get("format_version"))
    if isinstance(ckpt.get("model_config"), Mapping) or state:
        from generations.registry import generation_of_checkpoint

        meta.model_version = generation_of_checkpoint(ckpt, state).id
    meta.step, meta.epoch = _int(ckpt.get("step")), _int(ckpt.get("epoch"))
    meta.position = _int(ckpt.get("position", ckpt.get("batch_idx")))
    meta.saved_at = ckpt.get("saved_at") if isinstance(ckpt.get("saved_at"), str) else None
    extra = ckpt.get("extra") if isinstance(ckpt.get("extra"), Mapping) else {}
    losses = ckpt.get("last_losses")
    meta.last_losses = {str(k): v for k, v in losses.items()} if isinstance(losses, Mapping) else None
    meta.last_val_loss, meta.best_val_loss = _float(ckpt.get("last_val_loss")), _float(ckpt.get("best_val_loss"))
    tokenizer = ckpt.get("tokenizer")
    if isinstance(tokenizer, Mapping):
        meta.tokenizer = dict(tokenizer)
    elif isinstance(extra.get("tokenizer"), str):
        meta.tokenizer = {"path": extra["tokenizer"], "sha256": None, "vocab_size": None}
    meta.base_vocab_size = _int(ckpt.get("base_vocab_size"))
    embedding = state.get("text_embedding.weight")
    meta.text_vocab_rows = int(embedding.shape[0]) if isinstance(embedding, torch.Tensor) else None
    meta.has_optimizer = isinstance(ckpt.get("optimizer"), Mapping)
    meta.has_rng = ckpt.get("rng") is not None or ckpt.get("rng_state") is not None
    meta.declares_digest = declares_digest(ckpt)
    try:
        trailer = read_trailer(path)
    except OSError as exc:  # e.g. rotated away since it was loaded
        raise CheckpointError(f"{path} is not a loadable checkpoint: {exc.strerror or exc}") from None
    if isinstance(trailer, str):
        meta.digest_note = trailer
    elif trailer is not None:
        meta.has_digest, meta.digest = True, trailer.digest
    elif meta.declares_digest:
        meta.digest_note = "recorded at save, missing from the file (torn)"
    meta.tensors, meta.tensor_bytes = _tensor_stats(ckpt)
    if isinstance(ckpt.get("repaired_from"), Mapping):
        meta.repaired_from = dict(ckpt["repaired_from"])
    if isinstance(ckpt.get("hparams"), Mapping):
        meta.hparams = dict(ckpt["hparams"])
    return meta
