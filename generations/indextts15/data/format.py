"""IndexTTS-1.5's manifest format: the v1.5 codes manifest (``.manifest`` reads its lines; README
"Codes manifest"). Its items and dataset are ``generations.indextts15.dataset``'s."""

from __future__ import annotations

from typing import Any

from generations.format_facts import FormatChecker, FormatItems, ManifestFormat, Prompt
from generations.spec import lazy

MARKS = ("codes",)  # a codes line names its DVAE codes file
PATH_FIELDS = ("codes", "cond_mel", "cond_audio", "audio")  # "audio": an audio list's (raw ingest's) lines
DATASET = "generations.indextts15.dataset"


def prompt(entry: Any) -> Prompt:
    """A codes entry's prompt is itself (its ``cond_audio``, when the prompt is audio)."""
    return Prompt(entry.id, entry.speaker, entry.cond_audio)


CODES = ManifestFormat(
    id="v1.5", name="a v1.5 codes manifest", marks=MARKS,
    parse_object=lazy("generations.indextts15.data.manifest", "parse_codes_object"), prompt=prompt, pairs=False,
    path_fields=PATH_FIELDS,
    checker=FormatChecker(table="a SentencePiece model (.model)",
                          check_chunk=lazy("data_tools.check_chunks", "check_codes_chunk")),
    items=FormatItems(load_item=lazy(DATASET, "load_item"), dataset=lazy(DATASET, "dataset")),
)
