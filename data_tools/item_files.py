"""Reading one training item's files: the single code path the trainer loads with and the checker checks with.

Every function raises ``RuleError`` (``.code`` = the checker's problem code, ``str()`` = one line naming the
file) and nothing else for bad data; callers add the manifest's ``file:line``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from data_tools.fileio import UnusableFile, regular_file_size
from data_tools.npy import NpyHeader, read_npy, read_npy_header
from data_tools.shape_rules import (
    DataLimits,
    RuleError,
    check_code_values,
    check_condition,
    check_emo_vec,
    check_finite,
    check_spk_vec,
    check_text_id_values,
    codes_length,
    cond_mel_frames,
    declared_length,
    text_ids_length,
)

FILE_PROBLEM_CODES = {"missing": "file-missing", "not-regular": "file-not-regular", "unreadable": "file-unreadable"}


def _file_problem(exc: UnusableFile, what: str, path: Path) -> RuleError:
    if exc.kind == "missing":
        return RuleError("file-missing", f"{what} file not found: {path}")
    return RuleError(FILE_PROBLEM_CODES.get(exc.kind, "file-unreadable"), f"{what} file unusable: {exc}")


def header(path: Path, what: str) -> NpyHeader:
    try:
        return read_npy_header(path)
    except UnusableFile as exc:
        raise _file_problem(exc, what, path) from None


def array(path: Path, what: str) -> np.ndarray:
    try:
        return read_npy(path)
    except UnusableFile as exc:
        raise _file_problem(exc, what, path) from None
    except (OSError, MemoryError) as exc:
        raise RuleError("file-unreadable", f"{what} file unusable: {path} ({exc})") from None


# ----- v1.5 codes manifest -----------------------------------------------------------------------------


def codes_count(path: Path) -> int:
    """Number of codes from the header (1-D integer)."""
    head = header(path, "codes")
    return codes_length(head.shape, head.dtype, path)


def cond_mel_header_frames(path: Path) -> int:
    head = header(path, "cond_mel")
    return cond_mel_frames(head.shape, head.dtype, path)


def cond_audio_frames(path: Path) -> int:
    """Mel frames the prompt audio will give (from the audio header; only regular files are opened)."""
    from data_tools.audio import AudioError, audio_info
    from data_tools.features import SAMPLE_RATE, num_frames

    try:
        regular_file_size(path)
        duration, _rate = audio_info(path)
    except UnusableFile as exc:
        raise _file_problem(exc, "cond_audio", path) from None
    except AudioError as exc:
        raise RuleError("file-unreadable", f"cond_audio: {exc}") from None
    except OSError as exc:  # an I/O error reading the header
        raise RuleError("file-unreadable", f"cond_audio file unusable: cannot read {path}: {exc.strerror or exc}"
                        ) from None
    frames = num_frames(int(duration * SAMPLE_RATE))
    if duration <= 0:
        raise RuleError("cond-audio-empty", f"cond_audio has no samples: {path}")
    return frames


def load_codes(path: Path, limits: DataLimits, length: int | None = None) -> np.ndarray:
    """The codes (cut to ``length`` when given), checked: 1-D integer, in range."""
    codes = array(path, "codes")
    size = codes_length(codes.shape, codes.dtype, path)
    if length is not None:
        declared_length(length, "target_code_len", size, path)
        codes = codes[:length]
    check_code_values(codes, limits, path)
    return codes


def load_cond_mel(path: Path) -> np.ndarray:
    """A conditioning mel as float32 [100, frames], checked: shape, finite."""
    mel = array(path, "cond_mel")
    frames = cond_mel_frames(mel.shape, mel.dtype, path)
    check_finite(mel, "cond_mel", path)
    return np.ascontiguousarray(mel.reshape(mel.shape[-2], frames), dtype=np.float32)


# ----- paired manifests (IndexTTS2 and 2.5) -------------------------------------------------------------


def read_text_ids(path: Path, text_len: int | None, vocab: int | None) -> np.ndarray:
    """Precomputed text ids (int [L], cut to ``text_len``), checked against the tokenizer's ``vocab``."""
    ids = array(path, "text ids")
    size = text_ids_length(ids.shape, ids.dtype, path)
    if text_len is not None:
        declared_length(text_len, "target_text_len", size, path)
        ids = ids[:text_len]
    check_text_id_values(ids, vocab, path)
    return ids.astype(np.int32)


def declared_codes_count(codes: Path, code_len: int | None) -> tuple[int, int]:
    """(codes used: ``code_len`` or the array's size, codes the file holds), from the header, checked."""
    head = header(codes, "codes")
    codes_size = codes_length(head.shape, head.dtype, codes)
    if code_len is not None:
        declared_length(code_len, "target_code_len", codes_size, codes)
    return (code_len if code_len is not None else codes_size), codes_size


# ----- IndexTTS2 paired manifest ------------------------------------------------------------------------


@dataclass(frozen=True)
class PairFacts:
    text_ids: np.ndarray  # int32, cut to target_text_len
    num_codes: int  # target_code_len (or the array's size)
    codes_size: int  # what the codes file holds
    dim: int  # the features' width


def inspect_pair(text_ids: Path, text_len: int | None, codes: Path, code_len: int | None, condition: Path,
                 emo_vec: Path, limits: DataLimits) -> PairFacts:
    """What loading a pair needs before training: text ids read and checked, the rest from the headers."""
    ids = read_text_ids(text_ids, text_len, limits.text_vocab)
    num_codes, codes_size = declared_codes_count(codes, code_len)
    cond = header(condition, "condition")
    dim = check_condition(cond.shape, cond.dtype, condition, limits)
    emo = header(emo_vec, "emo vec")
    emo_dim = check_emo_vec(emo.shape, emo.dtype, emo_vec, limits)
    if emo_dim != dim:
        raise RuleError("emo-vec-shape", f"emo vec width {emo_dim} differs from the condition's {dim}: {emo_vec}")
    return PairFacts(ids, num_codes, codes_size, dim)


def load_condition(path: Path, limits: DataLimits) -> np.ndarray:
    cond = array(path, "condition")
    check_condition(cond.shape, cond.dtype, path, limits)
    check_finite(cond, "condition", path)
    return np.ascontiguousarray(cond, dtype=np.float32)


def load_emo_vec(path: Path, limits: DataLimits) -> np.ndarray:
    emo = array(path, "emo vec")
    check_emo_vec(emo.shape, emo.dtype, path, limits)
    check_finite(emo, "emo vec", path)
    return np.ascontiguousarray(emo, dtype=np.float32)


def load_spk_vec(path: Path) -> np.ndarray:
    vec = array(path, "spk vec")
    check_spk_vec(vec.shape, vec.dtype, path)
    check_finite(vec, "spk vec", path)
    return np.ascontiguousarray(vec, dtype=np.float32)
