"""Any training manifest's entries, each line read by its format's one parser, and what an entry says of its
speaker prompt.

A manifest is of one generation's format (``generations/<gen>/data/format.py``); ``manifest_format`` tells them
apart and ``generations.registry.format_of`` gives the format's parser and the prompt rule of its entries (a codes
entry's prompt is itself, a pair's its prompt utterance).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from data_tools.manifest import ManifestError, ManifestLine, iter_lines, line_parser, manifest_format
from generations.format_facts import Prompt
from generations.registry import format_of

__all__ = ["Prompt", "iter_entries", "prompt_of"]


def iter_entries(path: str | Path, fmt: str | None = None) -> Iterator[ManifestLine | ManifestError]:
    """Every entry of the manifest (its format's, ``fmt`` or read from the file) or the error of its line,
    streaming; ManifestError (raised) when the file is no manifest at all."""
    path = Path(path)
    parse = line_parser(format_of(fmt or manifest_format(path)))
    for lineno, raw in iter_lines(path):
        if isinstance(raw, ManifestError):
            yield raw
            continue
        try:
            entry = parse(raw, path, lineno)
        except ManifestError as err:
            yield err
            continue
        if entry is not None:
            yield entry


def prompt_of(entry: ManifestLine, fmt: str) -> Prompt:
    """The prompt an entry of format ``fmt`` names."""
    return format_of(fmt).prompt(entry)
