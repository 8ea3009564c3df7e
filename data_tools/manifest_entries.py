"""Any training manifest's entries, each line read by its format's one parser, and what an entry says of its
speaker prompt.

A manifest is a v1.5 codes manifest (``data_tools.manifest``), an IndexTTS2 paired manifest
(``data_tools.pairs_manifest``) or an IndexTTS-2.5 paired one (``generations.indextts25.data.manifest``);
``manifest_format`` tells them apart. A codes entry's prompt is itself (``cond_audio``, when it is audio), a pair's
is its prompt utterance (``prompt_id``, ``prompt_audio_path``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from data_tools.manifest import (
    FORMAT_V2,
    FORMAT_V15,
    FORMAT_V25,
    ManifestEntry,
    ManifestError,
    ManifestLine,
    iter_lines,
    manifest_format,
    parse_manifest_line,
)
from data_tools.pair_fields import PairLine
from data_tools.pairs_manifest import parse_pair_line
from generations.indextts25.data import manifest as indextts25_manifest

LineParser = Callable[[str, Path, int], ManifestLine | None]  # (raw line, manifest, line number) -> entry or None
LINE_PARSERS: dict[str, LineParser] = {FORMAT_V15: parse_manifest_line, FORMAT_V2: parse_pair_line,
                                       FORMAT_V25: indextts25_manifest.parse_pair_line}


def iter_entries(path: str | Path, fmt: str | None = None) -> Iterator[ManifestLine | ManifestError]:
    """Every entry of the manifest (its format's, ``fmt`` or read from the file) or the error of its line,
    streaming; ManifestError (raised) when the file is no manifest at all."""
    path = Path(path)
    parse = LINE_PARSERS[fmt or manifest_format(path)]
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


@dataclass(frozen=True)
class Prompt:
    """The speaker prompt an entry names: its utterance id, speaker and audio file (None: no audio, e.g. a mel)."""

    id: str
    speaker: str | None
    audio: Path | None


def prompt_of(entry: ManifestLine) -> Prompt | None:
    """The prompt of a codes entry or a pair (None for another kind of line)."""
    if isinstance(entry, ManifestEntry):
        return Prompt(entry.id, entry.speaker, entry.cond_audio)
    if isinstance(entry, PairLine):
        return Prompt(entry.prompt_id or entry.id, entry.speaker, entry.prompt_audio)
    return None
