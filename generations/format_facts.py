"""What a generation's training manifest format is to the studio: the entry's ``manifest_format`` facet.

Shared code (the data checker, split, the trainer's item loading, the evaluation set, the reference voices) asks
the format of a manifest (``generations.registry.format_of``) for its facts and functions; it never compares
format ids. One rule recognises a line (``generations.registry.format_of_line``: each entry's ``marks``, newest
generation first). Torch-free and light: the parsers, checkers and the trainer's loaders are named with ``lazy``
(the loaders and datasets sit in the trainer layer, reached through the fields ``tests/layers.field_layer``
allows).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Prompt:
    """The speaker prompt an entry names: its utterance id, speaker and audio file (None: no audio, e.g. a mel)."""

    id: str
    speaker: str | None
    audio: Path | None


@dataclass(frozen=True)
class FormatChecker:
    """What the data checker needs of a format: its kind of --tokenizer table and its per-chunk checker."""

    table: str  # the --tokenizer it needs, in the checker's words, e.g. "a SentencePiece model (.model)"
    check_chunk: Callable[..., Any]  # (data_tools.check_records.ChunkTask, CheckSettings) -> ChunkResult
    # the checker's settings from a --tokenizer table of this format's own kind: (table, scheme, merges) -> the
    # CheckSettings values (ValueError: one line); None: the table is a SentencePiece model
    table_settings: Callable[..., Mapping[str, Any]] | None = None
    # a torch-free text counter from such a table: path -> ``encode(text, language)`` (None: a SentencePiece model)
    open_table: Callable[..., Any] | None = None


@dataclass(frozen=True)
class FormatItems:
    """What the trainer reads a format's entries into (both in the trainer layer, named lazily)."""

    load_item: Callable[..., Any]  # (entry, tokenizer, DataLimits) -> (item, prompt frames); RuleError
    dataset: Callable[..., Any]  # (items, DataLimits, gpt config) -> its dataset (``.collate`` pads)


@dataclass(frozen=True)
class ManifestFormat:
    """One manifest format: how a line of it is recognised and read, and what checks and loads its entries."""

    id: str  # stored in reports, eval sets and check chunks ("v1.5", "v2", "v2.5"); a key, never compared outside
    name: str  # in sentences: "an IndexTTS2 paired manifest"
    marks: tuple[str, ...]  # a JSON line with any of these fields is of this format (asked newest generation first)
    # (JSON object, manifest, line number, default language) -> the entry (a data_tools.manifest.ManifestLine);
    # ManifestError (``file:line: what``) for a line that is not a valid one
    parse_object: Callable[..., Any]
    prompt: Callable[[Any], Prompt]  # entry -> the speaker prompt it names
    pairs: bool  # its lines pair a prompt with a target (split plans the targets and keeps each pair whole)
    path_fields: tuple[str, ...]  # the line's fields that are paths (rewritten when split moves the manifest)
    checker: FormatChecker
    items: FormatItems
    text_field: str = "text"  # the line's transcript (the tokenizer trainer reads it without parsing the line)
    language_field: str = "language"  # the line's language code, when it has one

    def recognises(self, obj: Mapping[str, Any]) -> bool:
        """Whether a line's JSON object has a field that marks this format."""
        return not obj.keys().isdisjoint(self.marks)

    def renamed(self, **changes: Any) -> ManifestFormat:
        """A copy with other facts (tests register a toy format this way)."""
        return replace(self, **changes)


def unique(formats: Iterable[ManifestFormat]) -> list[ManifestFormat]:
    """Each format once, in order (renamed generations may share one)."""
    return list(dict.fromkeys(formats))
