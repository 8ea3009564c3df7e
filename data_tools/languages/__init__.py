"""Per-language normalisers. Each language is one small module that registers a hook.

A new language ``xx``: add ``data_tools/languages/xx.py`` with ``normalize_xx(text) -> str`` (NFC text
in, idempotent) and a call ``register_language("xx", normalize_xx, script="...")``, then import it in
``load_builtin`` below. ``amharic.py`` is the worked example.
"""

from __future__ import annotations


def load_builtin() -> None:
    from data_tools.languages import amharic  # noqa: F401  (registers itself)
