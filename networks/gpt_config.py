"""The arithmetic of an IndexTTS ``gpt:`` config section: upstream's implicit defaults and derived sizes.

The ``gpt:`` section holds exactly the keyword arguments of the GPT constructor; a few keys have defaults
upstream that are not written in the file. ``effective_gpt_config`` fills them in, so every consumer (the
networks, data checks, tokenizer verify, export) sees the same effective values. Reading the YAML file is
data_tools.config's job; this module only does the arithmetic the networks need.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any


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


def text_rows(gpt: Mapping[str, Any]) -> int:
    """Rows of text_embedding / text_head: number_text_tokens * types + 1 (upstream's extra row)."""
    return int(gpt["number_text_tokens"]) * int(gpt.get("types", 1)) + 1


def text_tokens_of_rows(rows: int, gpt: Mapping[str, Any] | None = None) -> int:
    """``number_text_tokens`` of a text embedding with ``rows`` rows (``text_rows`` inverted; ``gpt`` gives
    ``types``, 1 when absent)."""
    return (int(rows) - 1) // int((gpt or {}).get("types", 1))
