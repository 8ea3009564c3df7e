"""IndexTTS2's manifest format: the community's paired manifest (``.manifest`` reads its lines,
``.check`` checks them).
Its items and dataset are ``generations.indextts2.dataset``'s."""

from __future__ import annotations

from typing import Any

from generations.format_facts import FormatChecker, FormatItems, ManifestFormat, Prompt
from generations.spec import lazy

MARKS = ("prompt_condition_path", "target_codes_path")
PATH_FIELDS = ("prompt_condition_path", "prompt_emo_vec_path", "target_emo_vec_path", "target_text_ids_path",
               "target_codes_path", "target_audio_path", "prompt_audio_path")
DATASET = "generations.indextts2.dataset"
DATA = "generations.indextts2.data"


def prompt(entry: Any) -> Prompt:
    """A pair's prompt is its prompt utterance."""
    return Prompt(entry.prompt_id or entry.id, entry.speaker, entry.prompt_audio)


PAIRED = ManifestFormat(
    id="v2", name="an IndexTTS2 paired manifest", marks=MARKS,
    parse_object=lazy(f"{DATA}.manifest", "parse_pair_object"), prompt=prompt, pairs=True,
    path_fields=PATH_FIELDS,
    checker=FormatChecker(table="a SentencePiece model (.model)", check_chunk=lazy(f"{DATA}.check", "check_pair_chunk")),
    items=FormatItems(load_item=lazy(DATASET, "load_item"), dataset=lazy(DATASET, "dataset")),
)
