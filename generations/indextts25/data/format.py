"""IndexTTS-2.5's manifest format: its paired manifest (``generations.indextts25.data.manifest`` reads its
lines), checked by ``.check`` with its .tiktoken table; its items and dataset are ``generations.indextts25.dataset``'s."""

from __future__ import annotations

from generations.format_facts import FormatChecker, FormatItems, ManifestFormat
from generations.indextts2.data.format import prompt
from generations.spec import lazy

MARKS = ("prompt_spk_vec_path",)  # the CAM++ vector: only a 2.5 paired line has it
PATH_FIELDS = ("prompt_spk_vec_path", "prompt_emo_vec_path", "target_emo_vec_path", "target_text_ids_path",
               "target_codes_path", "target_audio_path", "prompt_audio_path")
PACKAGE = "generations.indextts25"

PAIRED = ManifestFormat(
    id="v2.5", name="an IndexTTS-2.5 paired manifest", marks=MARKS,
    parse_object=lazy(f"{PACKAGE}.data.manifest", "parse_pair_object"), prompt=prompt, pairs=True,
    path_fields=PATH_FIELDS,
    checker=FormatChecker(table="the IndexTTS-2.5 table (.tiktoken)",
                          check_chunk=lazy(f"{PACKAGE}.data.check", "check_pair_chunk"),
                          table_settings=lazy(f"{PACKAGE}.data.check", "table_settings"),
                          open_table=lazy(f"{PACKAGE}.data.text_table", "TextTable")),
    items=FormatItems(load_item=lazy(f"{PACKAGE}.dataset", "load_pair_v25"), dataset=lazy(f"{PACKAGE}.dataset", "dataset")),
)
