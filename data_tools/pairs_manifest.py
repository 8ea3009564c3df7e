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

from data_tools.manifest import (
    FORMAT_V15,
    ManifestError,
    detect_format,
    load_json_object,
    resolve_path,
    string_field,
)
from data_tools.shape_rules import MAX_ID_CHARS, valid_duration, valid_length_field

PAIR_PATH_FIELDS = ("prompt_condition_path", "prompt_emo_vec_path", "target_emo_vec_path", "target_text_ids_path",
                    "target_codes_path", "target_audio_path", "prompt_audio_path")


@dataclass(frozen=True)
class PairEntry:
    id: str
    speaker: str | None
    language: str | None
    prompt_id: str | None
    target_id: str | None
    target_text: str | None
    condition: Path
    emo_vec: Path
    text_ids: Path
    codes: Path
    text_len: int | None  # None: the array's size
    code_len: int | None
    target_audio: Path | None
    prompt_audio: Path | None
    duration: float | None  # the target's seconds, when the line says
    manifest: Path
    line: int

    @property
    def where(self) -> str:
        return f"{self.manifest}:{self.line}"


def _pair_id(obj: dict, manifest: Path, lineno: int) -> str:
    value = obj.get("id")
    if value is None:
        value = obj.get("ids")
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            value = "__".join(value)
    if value is None:
        target, prompt = obj.get("target_id"), obj.get("prompt_id")
        if isinstance(target, str) and target:
            value = f"{target}__{prompt}" if isinstance(prompt, str) and prompt else target
    if value is None:
        raise ManifestError(manifest, lineno, "missing field 'id' (and no target_id to name the pair)")
    if not isinstance(value, str):
        raise ManifestError(manifest, lineno, f"field 'id' must be a string, got {type(value).__name__}")
    if not value.strip():
        raise ManifestError(manifest, lineno, "empty 'id'")
    if len(value) > MAX_ID_CHARS:
        raise ManifestError(manifest, lineno, f"field 'id' is longer than {MAX_ID_CHARS} characters")
    return value


def _language(obj: dict, manifest: Path, lineno: int, default: str | None) -> str | None:
    value = obj.get("language")
    if value is None:
        value = obj.get("languages")
        if isinstance(value, list):
            value = value[0] if value else None
    if value is None:
        return default
    if not isinstance(value, str) or len(value) > 32:
        raise ManifestError(manifest, lineno, f"field 'language' must be a short string, got {value!r:.40}")
    return value or default


def _length(obj: dict, key: str, manifest: Path, lineno: int) -> int | None:
    if obj.get(key) is None:
        return None
    value = valid_length_field(obj[key])
    if value is None:
        raise ManifestError(manifest, lineno, f"field '{key}' must be a whole number >= 0, got {obj[key]!r:.40}")
    return value


def _target_duration(obj: dict, manifest: Path, lineno: int) -> float | None:
    """The target's seconds from ``target_duration``, else ``duration``; None when neither is given."""
    for key in ("target_duration", "duration"):
        if obj.get(key) is not None:
            duration = valid_duration(obj[key])
            if duration is None:
                raise ManifestError(manifest, lineno, f"field '{key}' must be a number of seconds in [0, 86400], "
                                                      f"got {obj[key]!r:.40}")
            return duration
    return None


def _emo_vec_field(strings: dict[str, str | None], manifest: Path, lineno: int, uid: str) -> str:
    """The emotion vector's field: ``prompt_emo_vec_path``, falling back to ``target_emo_vec_path`` when empty."""
    emo_field = "prompt_emo_vec_path" if strings["prompt_emo_vec_path"] else "target_emo_vec_path"
    if not strings[emo_field]:
        raise ManifestError(manifest, lineno, f"missing field 'prompt_emo_vec_path' (or target_emo_vec_path) (id {uid})")
    return emo_field


def parse_pair_object(obj: dict, manifest: Path, lineno: int, default_language: str | None = None) -> PairEntry:
    """One paired line's fields, typed and bounded; raises ManifestError (``file:line: what``)."""
    if detect_format(obj) == FORMAT_V15:
        raise ManifestError(manifest, lineno, "a v1.5 codes line in an IndexTTS2 paired manifest")
    uid = _pair_id(obj, manifest, lineno)
    strings = {key: string_field(obj, key, manifest, lineno)
               for key in ("speaker", "prompt_id", "target_id", "target_text", *PAIR_PATH_FIELDS)}
    for key in ("prompt_condition_path", "target_text_ids_path", "target_codes_path"):
        if not strings[key]:
            raise ManifestError(manifest, lineno, f"missing field '{key}' (id {uid})")
    emo_field = _emo_vec_field(strings, manifest, lineno, uid)
    duration = _target_duration(obj, manifest, lineno)
    base = manifest.parent

    def path(key: str) -> Path:
        return resolve_path(base, strings[key], manifest, lineno, key)

    return PairEntry(
        id=uid, speaker=strings["speaker"], language=_language(obj, manifest, lineno, default_language),
        prompt_id=strings["prompt_id"], target_id=strings["target_id"], target_text=strings["target_text"],
        condition=path("prompt_condition_path"), emo_vec=path(emo_field), text_ids=path("target_text_ids_path"),
        codes=path("target_codes_path"),
        text_len=_length(obj, "target_text_len", manifest, lineno),
        code_len=_length(obj, "target_code_len", manifest, lineno),
        target_audio=path("target_audio_path") if strings["target_audio_path"] else None,
        prompt_audio=path("prompt_audio_path") if strings["prompt_audio_path"] else None,
        duration=duration, manifest=manifest, line=lineno,
    )


def parse_pair_line(raw: str, manifest: Path, lineno: int, default_language: str | None = None) -> PairEntry | None:
    if not raw.strip():
        return None
    return parse_pair_object(load_json_object(raw, manifest, lineno), manifest, lineno, default_language)
