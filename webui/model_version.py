"""Which IndexTTS GPT the training form's config describes, as the studio shows it beside the config field.

The rule is ``trainer.versions.model_variant`` (the same call the pre-flight and the trainer make); this
module only reads the typed config file (a few KB of YAML) and turns the answer into a badge.
"""

from __future__ import annotations

import html
from dataclasses import dataclass

from webui.plots import badge_html

# trainer.versions.ModelVariant.name by version, for files whose metadata records only the version.
MODEL_NAMES = {"1.5": "IndexTTS-1.5", "2": "IndexTTS2", "2.5": "IndexTTS-2.5"}


@dataclass(frozen=True)
class ConfigVersion:
    version: str | None  # "1.5" | "2" | "2.5"; None when the config cannot be read
    name: str = ""  # e.g. "IndexTTS2"
    detail: str = ""  # what the prompt is, why it is refused, or why the config cannot be read
    trainable: bool = False


def config_version(config: str | None) -> ConfigVersion:
    """The model version of the config file at the typed path (never raises: problems become the detail)."""
    from data_tools.config import ConfigError, load_config
    from data_tools.paths import PathError, expand_path
    from trainer.versions import model_variant

    text = (config or "").strip()
    if not text:
        return ConfigVersion(None, detail="no --config given yet")
    try:
        path = expand_path(text, "--config")
        variant = model_variant(load_config(path), f"--config {path}")
    except (PathError, ConfigError) as exc:
        return ConfigVersion(None, detail=str(exc).splitlines()[0])
    if variant.refusal:
        return ConfigVersion(variant.version, variant.name, variant.refusal, trainable=False)
    return ConfigVersion(variant.version, variant.name, f"prompt: {variant.prompt}", trainable=True)


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
