"""Amharic normaliser (placeholder: NFC only until the full normaliser lands)."""

from __future__ import annotations

from data_tools.text import register_language


def normalize_amharic(text: str) -> str:
    return text


register_language("am", normalize_amharic)
