"""What the transformers speech models (ASR, speaker verification) share: where a model comes from, which
head it has, the device, and turning a list of clips into length-sorted batches at the model's rate.

``transformers`` is imported inside functions only, so ``import data_tools`` stays fast. Every check raises
the caller's own error class (a ``ValueError``) with one line that names the model and the reason.
"""

from __future__ import annotations

import fnmatch
import json
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from data_tools.audio import resample

# "owner/name" (or a bare legacy "name") as the Hugging Face Hub spells model ids.
_MODEL_ID = re.compile(r"^[A-Za-z0-9][\w.-]{0,95}(/[A-Za-z0-9][\w.-]{0,95})?$")


def model_config(model: str, error: type[ValueError]) -> tuple[str, dict[str, Any]]:
    """(source for from_pretrained, config as a dict) of a local model folder or a Hub model id.

    A local folder is read without transformers; a model id is resolved through AutoConfig (the Hub or its
    cache). Anything else (a missing path that is not a plausible id, a folder without config.json) is
    refused in one line.
    """
    model = str(model).strip()
    if not model:
        raise error("no model given: a model folder or a model id such as facebook/mms-1b-all")
    path = Path(model).expanduser()
    if path.is_dir():
        config_file = path / "config.json"
        if not config_file.is_file():
            raise error(f"{path}: not a transformers model folder (no config.json)")
        try:
            config = json.loads(config_file.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise error(f"{config_file}: unreadable model config ({exc})") from None
        if not isinstance(config, dict):
            raise error(f"{config_file}: model config is not a JSON object")
        return str(path), config
    if path.exists():
        raise error(f"{path}: a file, not a model folder or model id")
    if not _MODEL_ID.match(model):
        raise error(f"{model}: no such model folder (and not a model id like owner/name)")
    from transformers import AutoConfig

    try:
        return model, AutoConfig.from_pretrained(model).to_dict()
    except (OSError, ValueError, KeyError) as exc:
        raise error(f"{model}: no such model folder, and it could not be loaded as a model id "
                    f"({first_line(exc)})") from None


def require_head(source: str, config: dict[str, Any], suffix: str, model_types: Sequence[str], what: str,
                 error: type[ValueError]) -> None:
    """Refuse a config whose architecture has no ``*{suffix}`` head (e.g. ForCTC, ForXVector)."""
    model_type = config.get("model_type")
    if not model_type:
        raise error(f"{source}: config.json names no model_type, so it is not a transformers model")
    architectures = [name for name in config.get("architectures") or [] if isinstance(name, str)]
    if architectures and not any(name.endswith(suffix) for name in architectures):
        raise error(f"{source}: a {architectures[0]} model, not a {what} (needs a *{suffix} model)")
    if model_type not in model_types:
        raise error(f"{source}: a '{model_type}' model, not a {what} (transformers has no {model_type} "
                    f"*{suffix} model)")


# Parameters only training uses (the time-mask embedding of wav2vec2-style encoders): a checkpoint may leave
# them out without changing what inference computes.
TRAINING_ONLY_KEYS = ("*masked_spec_embed",)


def load_model_strictly(auto_class: Any, source: str, what: str, error: type[ValueError],
                        training_only: Sequence[str] = TRAINING_ONLY_KEYS) -> Any:
    """``auto_class.from_pretrained(source)``, refusing weights that leave a layer freshly initialised
    (which transformers only warns about): the first missing key is named. ``training_only``: fnmatch
    patterns of keys that may be missing."""
    try:
        model, info = auto_class.from_pretrained(source, output_loading_info=True)
    except (OSError, ValueError, KeyError, RuntimeError) as exc:
        raise error(f"{source}: the {what} does not load ({first_line(exc)})") from None
    missing = sorted(key for key in info.get("missing_keys", ())
                     if not any(fnmatch.fnmatchcase(key, pattern) for pattern in training_only))
    if missing:
        raise error(f"{source}: the weights lack {missing[0]}" + (f" and {len(missing) - 1} more key(s)"
                    if len(missing) > 1 else "") + f": not a complete {what}")
    return model


def resolve_device(device: str, error: type[ValueError]) -> Any:
    """"auto" (the GPU when there is one), "cpu", "cuda" or "cuda:N" -> torch.device."""
    import torch

    name = (device or "auto").strip().lower()
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cpu":
        return torch.device("cpu")
    if re.fullmatch(r"cuda(:\d+)?", name):
        if not torch.cuda.is_available():
            raise error(f"device {device!r}: no CUDA GPU is visible here (use auto or cpu)")
        return torch.device(name)
    raise error(f"device {device!r}: expected auto, cpu, cuda or cuda:N")


def prepare_waves(waves: Sequence[np.ndarray], sample_rate: int, model_rate: int,
                  error: type[ValueError]) -> list[np.ndarray]:
    """Mono float32 clips at ``model_rate`` (soxr); one-line errors name the clip by its position."""
    if isinstance(sample_rate, bool) or not isinstance(sample_rate, (int, np.integer)) or sample_rate <= 0:
        raise error(f"sample rate {sample_rate!r}: expected a positive whole number of Hz")
    prepared: list[np.ndarray] = []
    for index, wave in enumerate(waves):
        samples = np.asarray(wave)
        if samples.ndim != 1:
            raise error(f"clip {index}: expected mono samples (1-D), got shape {samples.shape}")
        if not np.issubdtype(samples.dtype, np.floating) and not np.issubdtype(samples.dtype, np.integer):
            raise error(f"clip {index}: samples of type {samples.dtype} are not numbers")
        samples = samples.astype(np.float32, copy=False)
        if not np.all(np.isfinite(samples)):
            raise error(f"clip {index}: NaN or infinite samples")
        if samples.size:
            samples = resample(samples, int(sample_rate), int(model_rate)).astype(np.float32, copy=False)
        prepared.append(samples)
    return prepared


def length_batches(lengths: Sequence[int], batch_size: int, error: type[ValueError]) -> Iterator[list[int]]:
    """Indices grouped longest first, so each batch pads its clips to similar lengths."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise error(f"batch size {batch_size!r}: expected a whole number >= 1")
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    for start in range(0, len(order), batch_size):
        yield order[start:start + batch_size]


def feature_frame_lengths(model: Any, sample_lengths: Sequence[int]) -> list[int] | None:
    """Frames the model makes of each raw clip length, where the model can say (wav2vec2-style encoders)."""
    method = getattr(model, "_get_feat_extract_output_lengths", None)
    if method is None:
        return None
    import torch

    return [int(n) for n in method(torch.tensor(list(sample_lengths), dtype=torch.long)).tolist()]


def first_line(exc: BaseException) -> str:
    """An exception's message, cut to one line for a one-line error."""
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:300]
