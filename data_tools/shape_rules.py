"""The rules training data must follow: one definition, used by the data checker and the trainer alike.

A file the checker passes, the trainer loads, and the other way round, because both call these functions
(the checker turns a ``RuleError`` into a problem at ``file:line``, the trainer into a one-line refusal).

- v1.5 codes manifest: ``codes`` 1-D integer [frames]; ``cond_mel`` float [100, frames] (or [1, 100, frames]),
  at least ``MIN_COND_FRAMES`` and (else the item is dropped) at most ``MAX_COND_FRAMES`` frames.
- IndexTTS2 paired manifest: text ids and codes 1-D integer, condition float [condition_num_latent,
  model_dim], emo vec float [model_dim]; the manifest's ``*_len`` is the length used (>= 1 and no more than
  the array holds; the array is cut to it); text ids lie in [0, tokenizer vocab size).
- IndexTTS-2.5 paired manifest: as IndexTTS2, but the prompt is a CAM++ vector float [192] and an emo vec
  float [model_dim]; the text is tokenised with the run's scheme, ``"<|lang|> "`` prefix included in the
  ``max_text_tokens`` limit; codes are the codec's 25 Hz codes.
- All: codes lie in [0, code_limit) (below the start/stop ids); float features are finite and no value's
  magnitude exceeds ``MAX_FEATURE_MAGNITUDE``, checked in the file's own dtype before any cast; an item whose
  text or codes exceed the model's ``max_text_tokens`` / ``max_mel_tokens`` is dropped (``drop_reason``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

MEL_BANDS = 100
MIN_COND_FRAMES = 3  # the conformer's conv2d2 subsampling needs three frames
MAX_COND_FRAMES = 2 * 5000  # the conformer's sinusoidal table has 5000 rows and subsamples 2x
V1_SAMPLE_RATE = 24_000
V1_SAMPLES_PER_CODE = 1024  # gpt.mel_length_compression: one DVAE code per 1024 samples at 24 kHz
V2_CODES_PER_SECOND = 50  # MaskGCT semantic codes: one per 20 ms
V25_CODES_PER_SECOND = 25  # the IndexTTS-2.5 codec's codes: one per 40 ms
SPEAKER_VECTOR_DIM = 192  # IndexTTS-2.5's prompt: a CAM++ speaker vector
V2_CONDITION_LATENTS = 32
MAX_DURATION_S = 24 * 3600.0  # a manifest duration beyond a day is a broken value, not a recording
MAX_ID_CHARS = 1000
MAX_DECLARED_LENGTH = 10_000_000
# Real features are small: log-mels lie within about +-20, conformer conditions, emotion and CAM++ speaker
# vectors within a few hundred. 1e4 leaves room for any of them, while a value near float32's range (3e38,
# 1e30, or a float64 1e300 that the cast would make inf) overflows the first matmul into NaN losses.
MAX_FEATURE_MAGNITUDE = 1e4


def seconds_of_codes(num_codes: int, codes_per_second: float) -> float:
    """Audio seconds that ``num_codes`` codes stand for, at a generation's code rate
    (``networks.generation_rule.CODES_PER_SECOND``; the registry entry's ``codes_per_second``)."""
    return num_codes / codes_per_second


def codes_of_seconds(seconds: float, codes_per_second: float) -> int:
    """How many codes ``seconds`` of audio become (``seconds_of_codes`` inverted, rounded up)."""
    return math.ceil(seconds * codes_per_second)


class RuleError(ValueError):
    """A broken rule: ``code`` is the checker's problem code, ``str(err)`` the one-line message."""

    def __init__(self, code: str, message: str) -> None:
        self.code = code
        super().__init__(message)


def code_limit(gpt: dict[str, Any]) -> int:
    """Valid codes are [0, code_limit): below the start/stop ids and inside the mel embedding."""
    return min(int(gpt.get("start_mel_token", 8192)), int(gpt.get("stop_mel_token", 8193)),
               int(gpt.get("number_mel_codes", 8194)))


@dataclass(frozen=True)
class DataLimits:
    """What the model (and tokenizer) accept; ``None`` = not known, not checked."""

    max_text_tokens: int | None = None
    max_codes: int | None = None
    code_limit: int = 8192
    start_mel_token: int = 8192
    stop_mel_token: int = 8193
    text_vocab: int | None = None  # v2 text ids must lie below this (the tokenizer's vocab size)
    model_dim: int | None = None  # v2 condition [latents, model_dim] and emo vec [model_dim]
    condition_latents: int = V2_CONDITION_LATENTS

    @classmethod
    def from_gpt(cls, gpt: dict[str, Any], text_vocab: int | None = None) -> DataLimits:
        return cls(max_text_tokens=int(gpt["max_text_tokens"]), max_codes=int(gpt["max_mel_tokens"]),
                   code_limit=code_limit(gpt), start_mel_token=int(gpt.get("start_mel_token", 8192)),
                   stop_mel_token=int(gpt.get("stop_mel_token", 8193)),
                   text_vocab=text_vocab if text_vocab is not None else None,
                   model_dim=int(gpt["model_dim"]) if "model_dim" in gpt else None,
                   condition_latents=int(gpt.get("condition_num_latent", V2_CONDITION_LATENTS)))


# ----- array shapes (from the .npy header) ----------------------------------------------------------


def _is_int(dtype: np.dtype) -> bool:
    return dtype.kind in "iu"


def codes_length(shape: tuple[int, ...], dtype: np.dtype, path: object) -> int:
    """Codes are a 1-D integer array [frames]; returns frames."""
    if not _is_int(dtype):
        raise RuleError("codes-dtype", f"codes must be integers, {path} holds {dtype}")
    if len(shape) != 1:
        raise RuleError("codes-shape", f"codes must be 1-D [frames], {path} has shape {list(shape)}")
    return shape[0]


def text_ids_length(shape: tuple[int, ...], dtype: np.dtype, path: object) -> int:
    """Text ids are a 1-D integer array [tokens] (no start/stop ids); returns tokens."""
    if not _is_int(dtype):
        raise RuleError("text-ids-dtype", f"text ids must be integers, {path} holds {dtype}")
    if len(shape) != 1:
        raise RuleError("text-ids-shape", f"text ids must be 1-D [tokens], {path} has shape {list(shape)}")
    return shape[0]


def cond_mel_frames(shape: tuple[int, ...], dtype: np.dtype, path: object) -> int:
    """A conditioning mel is float [100, frames] (or [1, 100, frames]) with at least 3 frames."""
    if dtype.kind != "f":
        raise RuleError("cond-mel-dtype", f"cond_mel must be float, {path} holds {dtype}")
    if len(shape) == 3 and shape[0] == 1:
        shape = shape[1:]
    if len(shape) != 2 or shape[0] != MEL_BANDS:
        raise RuleError("cond-mel-shape", f"cond_mel must be a float array [{MEL_BANDS}, frames], {path} has "
                                          f"shape {list(shape)}")
    if shape[1] < MIN_COND_FRAMES:
        raise RuleError("cond-mel-shape", f"cond_mel has {shape[1]} frames, at least {MIN_COND_FRAMES} needed: {path}")
    return shape[1]


def check_condition(shape: tuple[int, ...], dtype: np.dtype, path: object, limits: DataLimits) -> int:
    """A precomputed condition is float [condition_num_latent, model_dim]; returns its width."""
    if dtype.kind != "f":
        raise RuleError("condition-dtype", f"condition must be float32, {path} holds {dtype}")
    latents = limits.condition_latents
    if len(shape) != 2 or shape[0] != latents or (limits.model_dim is not None and shape[1] != limits.model_dim):
        want = f"[{latents}, {limits.model_dim if limits.model_dim is not None else 'model_dim'}]"
        raise RuleError("condition-shape", f"condition must be {want}, {path} has shape {list(shape)}")
    return shape[1]


def check_emo_vec(shape: tuple[int, ...], dtype: np.dtype, path: object, limits: DataLimits) -> int:
    """A precomputed emotion vector is float [model_dim]; returns its width."""
    if dtype.kind != "f":
        raise RuleError("emo-vec-dtype", f"emo vec must be float32, {path} holds {dtype}")
    if len(shape) != 1 or (limits.model_dim is not None and shape[0] != limits.model_dim):
        want = f"[{limits.model_dim if limits.model_dim is not None else 'model_dim'}]"
        raise RuleError("emo-vec-shape", f"emo vec must be {want}, {path} has shape {list(shape)}")
    return shape[0]


def check_spk_vec(shape: tuple[int, ...], dtype: np.dtype, path: object) -> int:
    """An IndexTTS-2.5 prompt's CAM++ speaker vector is float [192]; returns its width."""
    if dtype.kind != "f":
        raise RuleError("spk-vec-dtype", f"spk vec must be float32, {path} holds {dtype}")
    if len(shape) != 1 or shape[0] != SPEAKER_VECTOR_DIM:
        raise RuleError("spk-vec-shape", f"spk vec must be [{SPEAKER_VECTOR_DIM}] (CAM++), {path} has shape "
                                         f"{list(shape)}")
    return shape[0]


def declared_length(value: int, field: str, size: int, path: object) -> int:
    """A manifest ``*_len`` against its array: at least 1, at most the array's size (the array is cut to it)."""
    if value < 1:
        raise RuleError("length-mismatch", f"'{field}' is {value}, must be at least 1")
    if value > size:
        raise RuleError("length-mismatch", f"'{field}' is {value} but {path} holds only {size}")
    return value


# ----- array values ------------------------------------------------------------------------------


def check_code_values(codes: np.ndarray, limits: DataLimits, path: object) -> None:
    if not codes.size:
        return
    low, high = int(codes.min()), int(codes.max())
    if low >= 0 and high < limits.code_limit:
        return
    special = {limits.start_mel_token, limits.stop_mel_token}
    if special & set(np.unique(codes[codes >= limits.code_limit]).tolist()):
        detail = (f"contain start/stop ids ({limits.start_mel_token}/{limits.stop_mel_token}); store the bare "
                  "codes, the model adds them")
    else:
        detail = f"must lie in 0..{limits.code_limit - 1}, found {low}..{high}"
    raise RuleError("codes-range", f"codes {detail}: {path}")


def check_text_id_values(ids: np.ndarray, vocab: int | None, path: object) -> None:
    if not ids.size or vocab is None:
        return
    low, high = int(ids.min()), int(ids.max())
    if low < 0 or high >= vocab:
        raise RuleError("text-ids-range", f"text ids must lie in 0..{vocab - 1} (the tokenizer's vocabulary), "
                                          f"found {low}..{high} in {path}: made with another tokenizer?")


def check_finite(array: np.ndarray, what: str, path: object) -> None:
    """Every value finite and within +-MAX_FEATURE_MAGNITUDE; call it on the array as stored, before any cast."""
    if array.dtype.kind != "f" or not array.size:
        return
    finite = np.isfinite(array)
    if not bool(finite.all()):
        bad = int(array.size - finite.sum())
        raise RuleError("non-finite", f"{what} holds {bad} NaN/infinite value(s): {path}")
    peak = float(np.abs(array).max())
    if peak > MAX_FEATURE_MAGNITUDE:
        bad = int((np.abs(array) > MAX_FEATURE_MAGNITUDE).sum())
        raise RuleError("non-finite", f"{what} holds {bad} value(s) beyond +-{MAX_FEATURE_MAGNITUDE:g} (largest "
                                      f"{peak:.3g}): a broken feature file, training on it gives NaN losses: {path}")


# ----- manifest values ---------------------------------------------------------------------------


def valid_duration(value: object) -> float | None:
    """A manifest duration in seconds, or None when it is not a sane number (NaN, inf, negative, > a day)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, int) and abs(value) > 10**15:
        return None
    number = float(value)
    if not math.isfinite(number) or number < 0 or number > MAX_DURATION_S:
        return None
    return number


def valid_length_field(value: object) -> int | None:
    """A manifest ``*_len``: a plain integer in [0, MAX_DECLARED_LENGTH], else None."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_DECLARED_LENGTH:
        return None
    return value


# ----- what the trainer drops (counted, never silent) -----------------------------------------------

DROP_REASONS = {
    "empty_text": "no text tokens",
    "empty_codes": "no codes",
    "too_many_text_tokens": "more than max_text_tokens text tokens",
    "too_many_codes": "more than max_mel_tokens codes",
    "cond_too_long": f"conditioning mel longer than {MAX_COND_FRAMES} frames",
}


def drop_reason(text_tokens: int, codes: int, cond_frames: int, limits: DataLimits) -> str | None:
    """Why the trainer leaves an item out (a key of DROP_REASONS), or None to keep it."""
    if text_tokens == 0:
        return "empty_text"
    if codes == 0:
        return "empty_codes"
    if limits.max_text_tokens is not None and text_tokens > limits.max_text_tokens:
        return "too_many_text_tokens"
    if limits.max_codes is not None and codes > limits.max_codes:
        return "too_many_codes"
    if cond_frames > MAX_COND_FRAMES:
        return "cond_too_long"
    return None
