"""Training data: the codes manifest -> tokenized items -> length-bucketed batches -> padded tensors.

- ``load_items`` reads the manifests (``file:line`` errors), tokenizes each text once with the run's
  tokenizer (front-end inside), reads only the ``.npy`` headers to learn lengths, and drops items longer
  than the model's limits, counting every drop (``DropReport``) so nothing is discarded silently.
- The epoch order (``BucketBatchSampler``) lives in ``trainer.sampler``.
- ``CodesDataset`` loads one item's arrays; a bad file becomes an ``error`` entry in the batch rather
  than an exception (worker processes would wrap it in a traceback), and the trainer refuses with it.
"""

from __future__ import annotations

import functools
import math
import os
import re
import signal
import sys
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from data_tools.manifest import ManifestEntry, ManifestError, read_manifest
from data_tools.text_tokenizer import TextTokenizer
from trainer.sampler import BucketBatchSampler  # noqa: F401  (re-exported: its old home)

MEL_BANDS = 100
# The conformer's sinusoidal table has 5000 rows and subsamples 2x, so longer prompts cannot be encoded.
MAX_COND_FRAMES = 2 * 5000


@dataclass(frozen=True)
class DataItem:
    id: str
    where: str  # manifest:line
    text_ids: np.ndarray  # int32 token ids (no start/stop)
    codes: Path
    num_codes: int
    cond_mel: Path | None
    cond_audio: Path | None

    @property
    def length(self) -> int:
        return int(self.text_ids.size) + self.num_codes


@dataclass
class DropReport:
    """Why items were left out; ``lines()`` is what the trainer logs."""

    kept: int = 0
    too_many_text_tokens: list[str] = field(default_factory=list)
    too_many_codes: list[str] = field(default_factory=list)
    cond_too_long: list[str] = field(default_factory=list)
    empty_text: list[str] = field(default_factory=list)
    empty_codes: list[str] = field(default_factory=list)
    with_unknown_tokens: list[str] = field(default_factory=list)  # kept, but worth knowing

    @property
    def dropped(self) -> int:
        return (len(self.too_many_text_tokens) + len(self.too_many_codes) + len(self.cond_too_long)
                + len(self.empty_text) + len(self.empty_codes))

    def lines(self, name: str, max_text_tokens: int, max_codes: int) -> list[str]:
        out = [f"{name}: {self.kept} items kept, {self.dropped} dropped"]
        reasons = (
            (self.too_many_text_tokens, f"more than max_text_tokens={max_text_tokens} text tokens"),
            (self.too_many_codes, f"more than max_mel_tokens={max_codes} codes"),
            (self.cond_too_long, f"conditioning mel longer than {MAX_COND_FRAMES} frames"),
            (self.empty_text, "no text tokens after the front-end"),
            (self.empty_codes, "no codes"),
        )
        for items, why in reasons:
            if items:
                out.append(f"  dropped {len(items)} with {why} (e.g. {', '.join(items[:3])})")
        if self.with_unknown_tokens:
            out.append(f"  warning: {len(self.with_unknown_tokens)} kept items contain unknown tokens "
                       f"(e.g. {', '.join(self.with_unknown_tokens[:3])}); is --tokenizer the right one?")
        return out


def npy_shape(path: Path) -> tuple[tuple[int, ...], np.dtype]:
    """Shape and dtype from an .npy header, without reading the data."""
    with open(path, "rb") as handle:
        version = np.lib.format.read_magic(handle)
        if version == (1, 0):
            shape, _, dtype = np.lib.format.read_array_header_1_0(handle)
        elif version == (2, 0):
            shape, _, dtype = np.lib.format.read_array_header_2_0(handle)
        else:
            array = np.load(path, mmap_mode="r")
            shape, dtype = array.shape, array.dtype
            del array
    return tuple(int(n) for n in shape), np.dtype(dtype)


def _codes_length(entry: ManifestEntry) -> int:
    path = entry.codes
    try:
        shape, dtype = npy_shape(path)
    except FileNotFoundError:
        raise ManifestError(entry.manifest, entry.line, f"codes file not found: {path}") from None
    except (OSError, ValueError) as exc:
        raise ManifestError(entry.manifest, entry.line, f"codes file {path} is not a readable .npy ({exc})") from None
    non_unit_dims = [n for n in shape if n != 1]
    if not shape or len(non_unit_dims) > 1 or dtype.kind not in "iu":
        raise ManifestError(entry.manifest, entry.line,
                            f"codes file {path} must hold a 1-D integer array, got shape {list(shape)} {dtype}")
    return int(np.prod(shape))


def _cond_frames(entry: ManifestEntry) -> int:
    if entry.cond_mel is None:
        return _audio_frames(entry)
    path = entry.cond_mel
    try:
        shape, dtype = npy_shape(path)
    except FileNotFoundError:
        raise ManifestError(entry.manifest, entry.line, f"cond_mel file not found: {path}") from None
    except (OSError, ValueError) as exc:
        raise ManifestError(entry.manifest, entry.line, f"cond_mel file {path} is not a readable .npy ({exc})") from None
    if len(shape) == 3 and shape[0] == 1:
        shape = shape[1:]
    if len(shape) != 2 or shape[0] != MEL_BANDS or shape[1] < 1 or dtype.kind != "f":
        raise ManifestError(entry.manifest, entry.line,
                            f"cond_mel file {path} must be a float array [{MEL_BANDS}, frames], got {list(shape)} {dtype}")
    return shape[1]


def _audio_frames(entry: ManifestEntry) -> int:
    from data_tools.audio import AudioError, audio_info
    from data_tools.features import HOP_LENGTH, SAMPLE_RATE

    path = entry.cond_audio
    assert path is not None
    if not path.is_file():
        raise ManifestError(entry.manifest, entry.line, f"cond_audio file not found: {path}")
    try:
        duration, _rate = audio_info(path)
    except AudioError as exc:
        raise ManifestError(entry.manifest, entry.line, f"cond_audio: {exc}") from None
    return 1 + int(duration * SAMPLE_RATE) // HOP_LENGTH


def _progress(iterable: Sequence[Any], desc: str) -> Any:
    if len(iterable) < 2000:
        return iterable
    from tqdm import tqdm

    return tqdm(iterable, desc=desc, unit="item", file=sys.stderr, mininterval=1.0)


def load_items(
    manifests: Sequence[str | Path],
    tokenizer: TextTokenizer,
    max_text_tokens: int,
    max_codes: int,
    name: str = "train",
) -> tuple[list[DataItem], DropReport]:
    """Read, tokenize and length-check every entry; raises ManifestError (``file:line: what``)."""
    entries: list[ManifestEntry] = []
    seen: dict[str, str] = {}
    for manifest in manifests:
        for entry in read_manifest(manifest):
            if entry.id in seen:
                raise ManifestError(entry.manifest, entry.line, f"duplicate id '{entry.id}' (also at {seen[entry.id]})")
            seen[entry.id] = entry.where
            entries.append(entry)
    report = DropReport()
    items: list[DataItem] = []
    unk = tokenizer.unk_id
    for entry in _progress(entries, f"reading {name} data"):
        ids = np.asarray(tokenizer.encode(entry.text, entry.language), dtype=np.int32)
        num_codes = _codes_length(entry)
        frames = _cond_frames(entry)
        if ids.size == 0:
            report.empty_text.append(entry.where)
        elif num_codes == 0:
            report.empty_codes.append(entry.where)
        elif ids.size > max_text_tokens:
            report.too_many_text_tokens.append(entry.where)
        elif num_codes > max_codes:
            report.too_many_codes.append(entry.where)
        elif frames > MAX_COND_FRAMES:
            report.cond_too_long.append(entry.where)
        else:
            if unk >= 0 and bool((ids == unk).any()):
                report.with_unknown_tokens.append(entry.where)
            items.append(DataItem(id=entry.id, where=entry.where, text_ids=ids, codes=entry.codes,
                                  num_codes=num_codes, cond_mel=entry.cond_mel, cond_audio=entry.cond_audio))
    report.kept = len(items)
    return items, report


# ----- loading items --------------------------------------------------------------------------------


# The header np.save writes, e.g. {'descr': '<f4', 'fortran_order': False, 'shape': (100, 87), } + padding.
_PLAIN_NPY_HEADER = re.compile(r"\{'descr': '(?P<descr>[<>|=]?[biuf]\d+)', 'fortran_order': False, "
                               r"'shape': \((?P<shape>[\d, ]*)\), \}\s*")


def read_npy(path: Path) -> np.ndarray:
    """``np.load(path)`` for the plain arrays np.save writes, without numpy's header parser.

    That parser (``ast.literal_eval``) costs more than reading a small file, and the loader reads two
    files per item every epoch. Any other header (Fortran order, structured dtypes) goes to ``np.load``.
    """
    with open(path, "rb") as handle:
        data = bytearray(handle.read())  # writable, so tensors made from it are too
    if data[:6] == b"\x93NUMPY" and data[6:7] in (b"\x01", b"\x02", b"\x03"):
        size_bytes = 2 if data[6] == 1 else 4
        start = 8 + size_bytes
        end = start + int.from_bytes(data[8:start], "little")
        match = _PLAIN_NPY_HEADER.fullmatch(data[start:end].decode("latin-1"))
        if match is not None:
            shape = tuple(int(n) for n in match["shape"].split(",") if n.strip())
            dtype, count = np.dtype(match["descr"]), math.prod(shape)
            if len(data) < end + count * dtype.itemsize:
                raise ValueError(f"{path} is truncated: {len(data) - end} data bytes for an array of shape "
                                 f"{list(shape)} {dtype}")
            return np.frombuffer(data, dtype=dtype, count=count, offset=end).reshape(shape)
    return np.load(path, allow_pickle=False)


def _load_audio_mel(path: Path) -> torch.Tensor:
    from data_tools.audio import load_audio
    from data_tools.features import mel_spectrogram

    return mel_spectrogram(torch.from_numpy(np.ascontiguousarray(load_audio(path), dtype=np.float32)))


class CodesDataset(Dataset):
    def __init__(self, items: Sequence[DataItem], num_codes_valid: int) -> None:
        self.items = list(items)
        self.num_codes_valid = num_codes_valid  # codes must lie in 0..num_codes_valid-1 (below start_mel)

    def __len__(self) -> int:
        return len(self.items)

    def lengths(self) -> list[int]:
        return [item.length for item in self.items]

    def __getitem__(self, index: int) -> dict[str, Any]:
        item = self.items[index]
        try:
            codes = read_npy(item.codes).reshape(-1)
            if codes.size and (int(codes.min()) < 0 or int(codes.max()) >= self.num_codes_valid):
                raise ValueError(f"codes must lie in 0..{self.num_codes_valid - 1}, found "
                                 f"{int(codes.min())}..{int(codes.max())} in {item.codes}")
            if item.cond_mel is not None:
                mel = read_npy(item.cond_mel)
                cond = torch.from_numpy(np.ascontiguousarray(mel.reshape(MEL_BANDS, -1), dtype=np.float32))
            else:
                assert item.cond_audio is not None
                cond = _load_audio_mel(item.cond_audio)
        except (OSError, ValueError, EOFError) as exc:  # EOFError: np.load of an empty file
            return {"error": f"{item.where} (id {item.id}): {exc}"}
        return {
            "id": item.id,
            "text_ids": torch.from_numpy(item.text_ids.astype(np.int64)),
            "codes": torch.from_numpy(codes.astype(np.int64)),
            "cond_mel": cond,
        }


@dataclass(frozen=True)
class Collator:
    """Pad a list of items into one batch (text with stop_text, codes with stop_mel, mels with 0)."""

    text_pad: int = 1
    code_pad: int = 8193

    def __call__(self, items: list[dict[str, Any]]) -> dict[str, Any]:
        errors = [item["error"] for item in items if "error" in item]
        if errors:
            return {"error": errors[0]}
        size = len(items)
        text_len = [len(item["text_ids"]) for item in items]
        code_len = [len(item["codes"]) for item in items]
        mel_len = [item["cond_mel"].shape[-1] for item in items]
        # Padded in numpy: torch.zeros fills a large tensor with all intra-op threads, which costs
        # milliseconds in a training process whose threads are busy (num_workers 0).
        text = np.full((size, max(text_len)), self.text_pad, dtype=np.int64)
        codes = np.full((size, max(code_len)), self.code_pad, dtype=np.int64)
        mels = np.zeros((size, MEL_BANDS, max(mel_len)), dtype=np.float32)
        for row, item in enumerate(items):
            text[row, : text_len[row]] = np.asarray(item["text_ids"])
            codes[row, : code_len[row]] = np.asarray(item["codes"])
            mels[row, :, : mel_len[row]] = np.asarray(item["cond_mel"])
        return {
            "ids": [item["id"] for item in items],
            "text_ids": torch.from_numpy(text),
            "text_lengths": torch.tensor(text_len, dtype=torch.long),
            "codes": torch.from_numpy(codes),
            "code_lengths": torch.tensor(code_len, dtype=torch.long),
            "cond_mels": torch.from_numpy(mels),
            "cond_mel_lengths": torch.tensor(mel_len, dtype=torch.long),
            "num_tokens": sum(text_len) + sum(code_len),
        }


def _die_with_parent(trainer_pid: int) -> None:
    """Linux: the kernel SIGKILLs this worker when the trainer process dies (even by SIGKILL).

    Forked workers inherit the trainer's open files, including the output-dir lock; an orphaned worker
    would keep the directory locked after a crash. Elsewhere workers are spawned and inherit nothing.
    """
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    pr_set_pdeathsig = 1
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != trainer_pid:  # the trainer died before prctl took effect
        os._exit(1)


def _worker_init(trainer_pid: int, _worker_id: int) -> None:
    _die_with_parent(trainer_pid)
    # Ctrl-C and the UI's stop signal the whole process group; the trainer process decides when to
    # stop (after the current optimizer step), so its workers must not die first.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


# A worker hands each tensor of a batch to the training process through shared memory, which costs a
# socket handshake per tensor in the training process (about 0.5 ms each, several tensors per batch).
# Small arrays are much cheaper pickled by value; large ones (long prompt mels) still use shared memory.
# With pin_memory (CUDA) a DataLoader thread receives and pins the batches, off the training thread, and
# every tensor stays pinned so its copy to the GPU stays asynchronous: there batches travel as they are.
BY_VALUE_MAX_BYTES = 1 << 20


@dataclass(frozen=True)
class _ByValue:
    array: np.ndarray


@dataclass(frozen=True)
class _PackForTransfer:
    """The collate function as run in a worker: small tensors travel as pickled arrays."""

    collate: Callable[[list[dict]], dict]

    def __call__(self, items: list[dict[str, Any]]) -> dict[str, Any]:
        return {key: _ByValue(value.numpy()) if isinstance(value, torch.Tensor) and value.nbytes <= BY_VALUE_MAX_BYTES
                else value for key, value in self.collate(items).items()}


def _unpack(batch: dict[str, Any]) -> dict[str, Any]:
    return {key: torch.from_numpy(value.array) if isinstance(value, _ByValue) else value for key, value in batch.items()}


class _BatchList:
    """The DataLoader's batch sampler: whatever list of batches the ``BatchLoader`` holds now."""

    def __init__(self, batches: list[list[int]]) -> None:
        self.batches = batches

    def __iter__(self) -> Iterator[list[int]]:
        return iter(self.batches)

    def __len__(self) -> int:
        return len(self.batches)


class BatchLoader:
    """Collated batches of exactly ``batches``, in order; assign ``batches`` again for the next pass.

    With ``persistent`` the worker processes outlive a pass, so the trainer starts them once per run rather
    than once per epoch. The DataLoader gets its own generator, so creating or iterating it never draws from
    the global torch RNG (which drives dropout): a resumed run's random stream stays identical to an
    uninterrupted one's.
    """

    def __init__(self, dataset: CodesDataset, batches: Sequence[list[int]], collate: Callable[[list[dict]], dict],
                 num_workers: int, pin_memory: bool, seed: int, persistent: bool = False) -> None:
        self._sampler = _BatchList(list(batches))
        self._packed = num_workers > 0 and not pin_memory
        self._pass: Generator[dict[str, Any], None, None] | None = None
        self._loader: DataLoader | None = DataLoader(
            dataset,
            batch_sampler=self._sampler,
            collate_fn=_PackForTransfer(collate) if self._packed else collate,
            num_workers=num_workers,
            pin_memory=pin_memory,
            generator=torch.Generator().manual_seed(seed),
            worker_init_fn=functools.partial(_worker_init, os.getpid()) if num_workers else None,
            persistent_workers=persistent and num_workers > 0,
            prefetch_factor=4 if num_workers else None,
        )

    @property
    def batches(self) -> list[list[int]]:
        return self._sampler.batches

    @batches.setter
    def batches(self, batches: Sequence[list[int]]) -> None:
        self._sampler.batches = list(batches)

    def __len__(self) -> int:
        return len(self._sampler)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        if self._loader is None:
            raise RuntimeError("this BatchLoader is closed")
        self._pass = self._batches_of(self._loader)
        return self._pass

    def _batches_of(self, loader: DataLoader) -> Iterator[dict[str, Any]]:
        for batch in loader:
            yield _unpack(batch) if self._packed else batch

    def __enter__(self) -> BatchLoader:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """End the worker processes now.

        They ignore SIGTERM (see ``_worker_init``), so the interpreter's exit, which terminates and then
        joins them, would wait for them forever while a loader is still referenced (e.g. by a traceback).
        """
        if self._pass is not None:
            self._pass.close()
            self._pass = None
        self._loader = None  # the last reference: the DataLoader's iterator shuts its workers down


def make_loader(dataset: CodesDataset, batches: Sequence[list[int]], collate: Callable[[list[dict]], dict],
                num_workers: int, pin_memory: bool, seed: int, persistent: bool = False) -> BatchLoader:
    """A loader over exactly ``batches``, in order (see ``BatchLoader``)."""
    return BatchLoader(dataset, batches, collate, num_workers, pin_memory, seed, persistent)


def make_dataset(items: Sequence[DataItem], gpt_config: dict[str, Any]) -> CodesDataset:
    """The dataset for the run's items (codes must lie below the config's start_mel_token)."""
    return CodesDataset(items, num_codes_valid=int(gpt_config["start_mel_token"]))
