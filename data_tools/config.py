"""Reading IndexTTS ``config.yaml`` files.

The ``gpt:`` section holds exactly the keyword arguments of the GPT model constructor; a few
keys have defaults upstream that are not written in the file. This module fills them in, so
every consumer (model, data checks, tokenizer verify, export) sees the same effective values.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml


class ConfigError(ValueError):
    """A config file that cannot be used; the message names the file and the problem."""


# Effective constructor values that upstream applies when the key is absent.
GPT_DEFAULTS: dict[str, Any] = {
    "condition_num_latent": 32,
    "max_conditioning_inputs": 1,
    "types": 1,
    "train_solo_embeddings": False,
    "use_mel_codes_as_input": True,
    "mel_length_compression": 1024,
    "start_text_token": 0,
    "stop_text_token": 1,
    "start_mel_token": 8192,
    "stop_mel_token": 8193,
    "number_mel_codes": 8194,
    "condition_type": "conformer_perceiver",
}

GPT_REQUIRED = (
    "model_dim",
    "layers",
    "heads",
    "max_text_tokens",
    "max_mel_tokens",
    "number_text_tokens",
    "condition_module",
)


def load_config(path: str | Path) -> dict[str, Any]:
    """Load a whole IndexTTS config.yaml as a dict (raises ConfigError with a one-line reason)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}") from None
    except OSError as exc:
        raise ConfigError(f"cannot read config {path}: {exc.strerror or exc}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        raise ConfigError(f"{where}: not valid YAML ({getattr(exc, 'problem', exc)})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    if "gpt" not in data or not isinstance(data["gpt"], dict):
        raise ConfigError(f"{path}: no 'gpt:' section (is this an IndexTTS config.yaml?)")
    data["gpt"] = effective_gpt_config(data["gpt"], source=str(path))
    return data


def effective_gpt_config(gpt: dict[str, Any], source: str = "config") -> dict[str, Any]:
    """Return a copy of a ``gpt:`` section with upstream's implicit defaults filled in."""
    missing = [key for key in GPT_REQUIRED if key not in gpt]
    if missing:
        raise ConfigError(f"{source}: gpt section lacks {', '.join(missing)}")
    out = copy.deepcopy(GPT_DEFAULTS)
    out.update(copy.deepcopy(gpt))
    for key in ("model_dim", "layers", "heads", "max_text_tokens", "max_mel_tokens", "number_text_tokens"):
        if not isinstance(out[key], int) or out[key] <= 0:
            raise ConfigError(f"{source}: gpt.{key} must be a positive integer, got {out[key]!r}")
    if out["model_dim"] % out["heads"]:
        raise ConfigError(f"{source}: gpt.model_dim {out['model_dim']} is not divisible by heads {out['heads']}")
    return out


def text_vocab_size(gpt: dict[str, Any]) -> int:
    """Rows of text_embedding / text_head (the rule lives in ``data_tools.shape_rules.text_rows``)."""
    from data_tools.shape_rules import text_rows

    return text_rows(gpt)


def save_config(data: dict[str, Any], path: str | Path) -> None:
    """Write a config atomically (temp file in the same folder, fsync, rename)."""
    from data_tools.fileio import atomic_write_text

    atomic_write_text(Path(path), yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
