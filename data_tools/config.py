"""Reading and writing IndexTTS ``config.yaml`` files.

``load_config`` returns the whole config with the ``gpt:`` section's implicit defaults filled in (the
arithmetic lives in ``networks.gpt_config``); every refusal is a ``ConfigError`` with a one-line reason.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from networks.gpt_config import ConfigError, effective_gpt_config


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


def save_config(data: dict[str, Any], path: str | Path) -> None:
    """Write a config atomically (temp file in the same folder, fsync, rename)."""
    from data_tools.fileio import atomic_write_text

    atomic_write_text(Path(path), yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
