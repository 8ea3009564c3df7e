"""Per-language normalisers. Each language is one small module that registers a hook."""

from __future__ import annotations


def load_builtin() -> None:
    from data_tools.languages import amharic  # noqa: F401  (registers itself)
