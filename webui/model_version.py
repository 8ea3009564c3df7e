"""Which IndexTTS GPT the training form's config describes, as the studio shows it beside the config field.

The rule is the generation registry's (``generations.registry``, the same call the pre-flight and the
trainer make); this
module only reads the typed config file (a few KB of YAML) and turns the answer into a badge.
"""

from __future__ import annotations

import html
from dataclasses import dataclass

from webui.plots import badge_html


def model_name(version: str | None, unknown: str = "model ?") -> str:
    """The studio name of generation ``version`` (an id a file's metadata records), ``unknown`` where none."""
    from generations.registry import name_of

    return name_of(version, unknown)


@dataclass(frozen=True)
class ConfigVersion:
    version: str | None  # the generation id (generations); None when the config cannot be read
    name: str = ""  # e.g. "IndexTTS2"
    detail: str = ""  # what the prompt is, why it is refused, or why the config cannot be read
    trainable: bool = False


def config_version(config: str | None) -> ConfigVersion:
    """The model version of the config file at the typed path (never raises: problems become the detail)."""
    from data_tools.config import ConfigError, load_config
    from data_tools.paths import PathError, expand_path
    from generations.registry import config_refusal, generation_of_config

    text = (config or "").strip()
    if not text:
        return ConfigVersion(None, detail="no --config given yet")
    try:
        path = expand_path(text, "--config")
        config = load_config(path)
    except (PathError, ConfigError) as exc:
        return ConfigVersion(None, detail=str(exc).splitlines()[0])
    generation = generation_of_config(config)
    refusal = config_refusal(config, generation, f"--config {path}")
    if refusal:
        return ConfigVersion(generation.id, generation.name, refusal, trainable=False)
    return ConfigVersion(generation.id, generation.name, f"prompt: {generation.prompt}", trainable=True)


def version_badge_html(found: ConfigVersion) -> str:
    """The badge beside the config field; ``data-version`` carries the version for tests and scripts."""
    if found.version is None:
        badge = badge_html("MODEL ?", found.detail, "info")
    elif found.trainable:
        badge = badge_html(f"{found.name} GPT", found.detail, "ok")
    else:
        badge = badge_html(f"{found.name} GPT: not trainable here", found.detail, "error")
    version = html.escape(found.version or "")
    return f'<div id="train-model-version-badge" data-version="{version}">{badge}</div>'
