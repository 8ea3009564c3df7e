"""The checkpoint format: what a training checkpoint holds, built from plain values only.

A checkpoint is a dict that ``torch.load(path, weights_only=True)`` reads without any allow-list:
tensors, dicts, lists, tuples, str, int, float, bool and None. Everything else (numpy arrays, Paths,
``TorchVersion``) is converted by :func:`to_plain` before it is stored.

Format version 2 (current) keys:

- ``format`` ("indextts-studio-checkpoint"), ``format_version`` (2), ``saved_at`` (ISO time, UTC)
- ``model``: state dict in the IndexTTS layout (drops into inference unchanged)
- ``optimizer`` / ``scheduler`` / ``scaler``: one set, all present or all None (``scaler`` is None when
  no fp16 grad scaler is used); ``optimizer_param_names``: parameter names per param group, so the set
  can be matched to a model
- ``epoch`` (the epoch to continue), ``position`` (batches of that epoch already consumed), ``step``
  (optimizer steps done), ``sampler`` (the data order state, owned by the trainer; None when unknown)
- ``rng``: see :mod:`trainer.checkpoints.rng` (None when unknown)
- ``recent_checkpoints``: names of the model_step files kept in the output directory
- ``manifests``: {"train": [record], "val": [record]}, record = {path, lines, sha256}
- ``tokenizer``: {path, sha256, vocab_size}; ``base_vocab_size``: text vocabulary of the base model
- ``model_config``: the effective ``gpt:`` section the model was built from
- ``hparams``: the run's resolved options; ``last_losses``, ``last_val_loss``, ``best_val_loss``
- ``versions``: {torch, python, project}; ``repaired_from``: set by ``repair`` (what was filled)

Format version 1 (older builds of this project) had ``batch_idx`` instead of ``position`` and no
``sampler``, ``optimizer_param_names``, ``recent_checkpoints`` or ``base_vocab_size``; ``repair`` upgrades it.
"""

from __future__ import annotations

import datetime as _dt
import math
import platform
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from data_tools.fileio import sha256_file
from trainer.errors import UsageError

FORMAT_NAME = "indextts-studio-checkpoint"
FORMAT_VERSION = 2
PROJECT_VERSION = "0.1.0"

# Keys every current-format checkpoint carries (values may be None where documented above).
REQUIRED_KEYS: tuple[str, ...] = (
    "format", "format_version", "saved_at", "model", "optimizer", "scheduler", "scaler",
    "optimizer_param_names", "epoch", "position", "step", "sampler", "rng", "recent_checkpoints",
    "manifests", "tokenizer", "base_vocab_size", "model_config", "hparams", "last_losses",
    "last_val_loss", "best_val_loss", "versions",
)

# Keys a checkpoint written by the community IndexTTS trainers carries (README_indextts2.md, "Checkpoints").
COMMUNITY_KEYS: tuple[str, ...] = ("model", "optimizer", "scheduler", "scaler", "epoch", "step")


class CheckpointError(UsageError):
    """A checkpoint that cannot be used; ``str(err)`` is one line saying what and what to do."""


class UnsafeValueError(CheckpointError):
    """A value that would not load with ``weights_only=True`` was about to be stored."""


def to_plain(value: Any) -> Any:
    """Convert ``value`` to what ``weights_only`` loading accepts (Paths -> str, numpy -> tensors, ...).

    Tensors are kept as they are (detached). Unknown objects raise UnsafeValueError naming their type.
    """
    if value is None or isinstance(value, (bool, int, float, str)):
        # str subclasses (e.g. TorchVersion) are pickled with their class: store a plain str.
        if isinstance(value, str) and type(value) is not str:
            return str(value)
        if isinstance(value, int) and type(value) not in (int, bool):
            return int(value)
        if isinstance(value, float) and type(value) is not float:
            return float(value)
        return value
    if isinstance(value, torch.Tensor):
        return value.detach()
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, Mapping):
        return {to_plain_key(k): to_plain(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return tuple(to_plain(v) for v in value)
    if isinstance(value, (list, set, frozenset)):
        return [to_plain(v) for v in value]
    module = type(value).__module__
    if module == "numpy" or module.startswith("numpy."):
        import numpy as np

        if isinstance(value, np.ndarray):
            if value.dtype == object:
                raise UnsafeValueError("cannot store a numpy object array in a checkpoint")
            return torch.from_numpy(value.copy())
        if isinstance(value, np.generic):
            return to_plain(value.item())
    if isinstance(value, torch.dtype):
        return str(value).removeprefix("torch.")
    if isinstance(value, torch.device):
        return str(value)
    raise UnsafeValueError(f"cannot store a {type(value).__module__}.{type(value).__qualname__} in a checkpoint")


def to_plain_key(key: Any) -> Any:
    if isinstance(key, (str, int)) and type(key) in (str, int):
        return key
    if isinstance(key, (str, Path)):
        return str(key)
    if isinstance(key, int) and not isinstance(key, bool):
        return int(key)
    raise UnsafeValueError(f"cannot store a dict key of type {type(key).__qualname__} in a checkpoint")


def unsafe_values(value: Any, where: str = "checkpoint", limit: int = 5) -> list[str]:
    """Paths (``checkpoint['hparams']['x']``) of values that would not load with weights_only=True."""
    found: list[str] = []

    def walk(obj: Any, path: str) -> None:
        if len(found) >= limit:
            return
        if obj is None or type(obj) in (bool, int, float, str) or isinstance(obj, torch.Tensor):
            return
        if type(obj) is dict:
            for key, item in obj.items():
                if type(key) not in (str, int):
                    found.append(f"{path} key {key!r} ({type(key).__qualname__})")
                walk(item, f"{path}[{key!r}]")
            return
        if type(obj) in (list, tuple):
            for index, item in enumerate(obj):
                walk(item, f"{path}[{index}]")
            return
        found.append(f"{path} ({type(obj).__module__}.{type(obj).__qualname__})")

    walk(value, where)
    return found


def tokenizer_record(path: str | Path, sha256: str | None = None, vocab_size: int | None = None) -> dict[str, Any]:
    """{path, sha256, vocab_size} of a SentencePiece model (computed when not given)."""
    path = Path(path)
    if vocab_size is None:
        from data_tools.text_tokenizer import TextTokenizer

        vocab_size = TextTokenizer(path).vocab_size  # TokenizerError (one line) when missing or not a model
    if sha256 is None:
        sha256 = sha256_file(path)
    # Absolute, so export and verify find it whatever folder they run from.
    return {"path": str(path.resolve()), "sha256": sha256, "vocab_size": int(vocab_size)}


def manifest_record(path: str | Path) -> dict[str, Any]:
    """{path, lines (non-blank), sha256} of a manifest file."""
    import hashlib

    path = Path(path)
    digest = hashlib.sha256()
    lines = 0
    with open(path, "rb") as handle:
        for raw in handle:
            digest.update(raw)
            if raw.strip():
                lines += 1
    return {"path": str(path.resolve()), "lines": lines, "sha256": digest.hexdigest()}


def manifests_record(train: Sequence[str | Path], val: Sequence[str | Path]) -> dict[str, list[dict[str, Any]]]:
    return {"train": [manifest_record(p) for p in train], "val": [manifest_record(p) for p in val]}


def versions_record() -> dict[str, str]:
    return {"torch": str(torch.__version__), "python": platform.python_version(), "project": PROJECT_VERSION}


def now_iso() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def optimizer_param_names(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> list[list[str]]:
    """Names of the parameters in each optimizer param group, in the optimizer's order."""
    names = {id(param): name for name, param in model.named_parameters()}
    return [[names.get(id(p), f"<unnamed {i}>") for i, p in enumerate(group["params"])]
            for group in optimizer.param_groups]


def _finite_or_none(value: float | None) -> float | None:
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def build_checkpoint(
    *,
    model_state: Mapping[str, torch.Tensor],
    optimizer_state: Mapping[str, Any] | None,
    scheduler_state: Mapping[str, Any] | None,
    scaler_state: Mapping[str, Any] | None,
    epoch: int,
    position: int,
    step: int,
    sampler_state: Mapping[str, Any] | None,
    rng_state: Mapping[str, Any] | None,
    manifests: Mapping[str, Any],
    tokenizer: Mapping[str, Any],
    base_vocab_size: int | None,
    model_config: Mapping[str, Any],
    hparams: Mapping[str, Any],
    optimizer_param_names: Sequence[Sequence[str]] | None = None,
    last_losses: Mapping[str, float] | None = None,
    last_val_loss: float | None = None,
    best_val_loss: float | None = None,
    recent_checkpoints: Sequence[str] = (),
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Assemble a current-format checkpoint from the training state (every field of the format).

    ``epoch`` is the epoch to continue and ``position`` the number of its batches already consumed; the
    optimizer, scheduler and scaler states are a set (pass None for all three to record none).
    ``CheckpointManager.save`` fills ``recent_checkpoints``. Raises UnsafeValueError when a value
    would not load with ``weights_only=True``.
    """
    for name, value in (("epoch", epoch), ("position", position), ("step", step)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{name} must be a non-negative int, got {value!r}")
    if optimizer_state is None and (scheduler_state is not None or scaler_state is not None):
        raise ValueError("optimizer, scheduler and scaler states are saved together: no optimizer, no scheduler/scaler")
    ckpt: dict[str, Any] = {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "saved_at": now_iso(),
        "model": dict(model_state),
        "optimizer": optimizer_state,
        "scheduler": scheduler_state,
        "scaler": scaler_state,
        "optimizer_param_names": [list(g) for g in optimizer_param_names] if optimizer_param_names else None,
        "epoch": int(epoch),
        "position": int(position),
        "step": int(step),
        "sampler": sampler_state,
        "rng": rng_state,
        "recent_checkpoints": list(recent_checkpoints),
        "manifests": manifests,
        "tokenizer": tokenizer,
        "base_vocab_size": None if base_vocab_size is None else int(base_vocab_size),
        "model_config": model_config,
        "hparams": hparams,
        "last_losses": dict(last_losses) if last_losses else None,
        "last_val_loss": _finite_or_none(last_val_loss),
        "best_val_loss": _finite_or_none(best_val_loss),
        "versions": versions_record(),
    }
    if extra:
        ckpt["extra"] = extra
    return to_plain(ckpt)


S2MEL_FORMAT_NAME, S2MEL_PART = "indextts-studio-s2mel", "s2mel"  # an S2Mel run's checkpoint (trainer.s2mel)


def is_s2mel_checkpoint(obj: Any) -> bool:
    """True for a checkpoint of an S2Mel run (the kind inspect/verify/synthesis should recognise)."""
    return isinstance(obj, dict) and obj.get("format") == S2MEL_FORMAT_NAME and obj.get("part") == S2MEL_PART


def checkpoint_kind(obj: Any) -> str:
    """Classify a loaded object: "studio" (ours), "s2mel" (an S2Mel run's), "community", "bare" (weights only) or
    "unknown"."""
    if not isinstance(obj, dict):
        return "unknown"
    if is_s2mel_checkpoint(obj):
        return "s2mel"
    if obj.get("format") == FORMAT_NAME:
        return "studio"
    model = obj.get("model")
    if isinstance(model, dict) and model and all(isinstance(v, torch.Tensor) for v in model.values()):
        if "optimizer" in obj and "step" in obj:
            return "community"
        if "step" not in obj and "optimizer" not in obj:
            return "bare"
    if obj and all(isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in obj.items()):
        return "bare"  # a raw state dict, saved without the {"model": ...} wrapper
    return "unknown"


def model_state_of(obj: dict[str, Any]) -> dict[str, torch.Tensor] | None:
    """The state dict inside a checkpoint of any kind (None when there is none)."""
    model = obj.get("model")
    if isinstance(model, dict) and all(isinstance(v, torch.Tensor) for v in model.values()):
        return model
    if obj and all(isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in obj.items()):
        return obj
    return None


def bare_model_message(path: str | Path) -> str:
    return (f"{path} is a bare model (weights only): use it as --base-checkpoint or --init-from, "
            "not --resume")


def community_message(path: str | Path) -> str:
    return (f"{path} was written by a community IndexTTS trainer, not this one: convert it with "
            f"`python -m trainer.checkpoints repair {path} --out NEW.pth --config CONFIG` and resume from NEW.pth")
