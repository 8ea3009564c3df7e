"""The IndexTTS2 community paired manifest (``build_gpt_prompt_pairs.py``), read as it is.

Each line pairs two utterances of one speaker: the PROMPT gives the precomputed conditioning, the TARGET
the text ids and codes. Fields used (paths relative to the manifest's folder, ``~`` expanded):

- ``prompt_condition_path`` (required): float32 [32, model_dim] conditioning latents.
- ``prompt_emo_vec_path``, falling back to ``target_emo_vec_path`` when empty: float32 [model_dim].
- ``target_text_ids_path`` (required): int [L] SentencePiece ids, no start/stop.
- ``target_codes_path`` (required): int [M] semantic codes at 50 Hz.
- ``target_text_len`` / ``target_code_len``: the lengths used (the arrays are cut to them); absent: the
  array's size.
- ``id`` (else ``ids``, else ``<target_id>__<prompt_id>``), ``speaker``, ``prompt_id``, ``target_id``,
  ``target_text``, ``language`` / ``languages``, ``target_audio_path``, ``prompt_audio_path``,
  ``target_duration`` / ``duration`` (seconds of the target): optional.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from data_tools import pair_fields
from data_tools.manifest import ManifestError, load_json_object, resolve_path
from generations.indextts2.data.format import PATH_FIELDS
from generations.registry import format_of_line


@dataclass(frozen=True, kw_only=True)
class PairEntry(pair_fields.PairLine):
    condition: Path
    emo_vec: Path
    text_ids: Path
    codes: Path
    text_len: int | None  # None: the array's size
    code_len: int | None

    @property
    def prompt_features(self) -> Path:
        return self.condition


def parse_pair_object(obj: dict, manifest: Path, lineno: int, default_language: str | None = None) -> PairEntry:
    """One paired line's fields, typed and bounded; raises ManifestError (``file:line: what``)."""
    found = format_of_line(obj)
    if found is not None and not found.pairs:
        raise ManifestError(manifest, lineno, "a v1.5 codes line in an IndexTTS2 paired manifest")
    uid = pair_fields.pair_id(obj, manifest, lineno)
    strings = pair_fields.pair_strings(obj, manifest, lineno, PATH_FIELDS)
    for key in ("prompt_condition_path", "target_text_ids_path", "target_codes_path"):
        if not strings[key]:
            raise ManifestError(manifest, lineno, f"missing field '{key}' (id {uid})")
    emo_field = pair_fields.emo_vec_field(strings, manifest, lineno, uid)
    duration = pair_fields.target_duration(obj, manifest, lineno)
    base = manifest.parent

    def path(key: str) -> Path:
        return resolve_path(base, strings[key], manifest, lineno, key)

    return PairEntry(
        id=uid, speaker=strings["speaker"],
        language=pair_fields.pair_language(obj, manifest, lineno, default_language),
        prompt_id=strings["prompt_id"], target_id=strings["target_id"], target_text=strings["target_text"],
        condition=path("prompt_condition_path"), emo_vec=path(emo_field), text_ids=path("target_text_ids_path"),
        codes=path("target_codes_path"),
        text_len=pair_fields.length_field(obj, "target_text_len", manifest, lineno),
        code_len=pair_fields.length_field(obj, "target_code_len", manifest, lineno),
        target_audio=path("target_audio_path") if strings["target_audio_path"] else None,
        prompt_audio=path("prompt_audio_path") if strings["prompt_audio_path"] else None,
        duration=duration, manifest=manifest, line=lineno,
    )


def parse_pair_line(raw: str, manifest: Path, lineno: int, default_language: str | None = None) -> PairEntry | None:
    if not raw.strip():
        return None
    return parse_pair_object(load_json_object(raw, manifest, lineno), manifest, lineno, default_language)
