"""What every generation's paired manifest line has alike (IndexTTS2's ``generations.indextts2.data.manifest``,
IndexTTS-2.5's ``generations.indextts25.data.manifest``): the pair's identity, the target's text, audio and
duration, and how those fields are read and bounded. Each format adds the arrays its trainer reads."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from data_tools.manifest import ManifestError, ManifestLine, string_field
from data_tools.shape_rules import MAX_ID_CHARS, valid_duration, valid_length_field

SHARED_STRING_FIELDS = ("speaker", "prompt_id", "target_id", "target_text")


@dataclass(frozen=True, kw_only=True)
class PairLine(ManifestLine):
    id: str
    speaker: str | None
    language: str | None
    prompt_id: str | None
    target_id: str | None
    target_text: str | None
    target_audio: Path | None
    prompt_audio: Path | None
    duration: float | None  # the target's seconds, when the line says

    @property
    def target_features(self) -> Path:
        """The target's codes file (what names the target utterance when the line gives no target_id)."""
        return self.codes  # type: ignore[attr-defined]  # every paired format's entry has its target's codes

    @property
    def prompt_features(self) -> Path:
        """The prompt's feature file (what names the prompt utterance when the line gives no prompt_id)."""
        raise NotImplementedError


def pair_strings(obj: dict, manifest: Path, lineno: int, keys: tuple[str, ...]) -> dict[str, str | None]:
    """The shared string fields and ``keys``, each a string or None (a ManifestError names a wrong type)."""
    return {key: string_field(obj, key, manifest, lineno) for key in (*SHARED_STRING_FIELDS, *keys)}


def pair_id(obj: dict, manifest: Path, lineno: int) -> str:
    """``id``, else ``ids`` joined by ``__``, else ``<target_id>__<prompt_id>``."""
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


def pair_language(obj: dict, manifest: Path, lineno: int, default: str | None) -> str | None:
    """``language``, else the first of ``languages``, else ``default``."""
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


def length_field(obj: dict, key: str, manifest: Path, lineno: int) -> int | None:
    if obj.get(key) is None:
        return None
    value = valid_length_field(obj[key])
    if value is None:
        raise ManifestError(manifest, lineno, f"field '{key}' must be a whole number >= 0, got {obj[key]!r:.40}")
    return value


def target_duration(obj: dict, manifest: Path, lineno: int) -> float | None:
    """The target's seconds from ``target_duration``, else ``duration``; None when neither is given."""
    for key in ("target_duration", "duration"):
        if obj.get(key) is not None:
            duration = valid_duration(obj[key])
            if duration is None:
                raise ManifestError(manifest, lineno, f"field '{key}' must be a number of seconds in [0, 86400], "
                                                      f"got {obj[key]!r:.40}")
            return duration
    return None


def emo_vec_field(strings: dict[str, str | None], manifest: Path, lineno: int, uid: str) -> str:
    """The emotion vector's field: ``prompt_emo_vec_path``, falling back to ``target_emo_vec_path`` when empty."""
    emo_field = "prompt_emo_vec_path" if strings["prompt_emo_vec_path"] else "target_emo_vec_path"
    if not strings[emo_field]:
        raise ManifestError(manifest, lineno, f"missing field 'prompt_emo_vec_path' (or target_emo_vec_path) (id {uid})")
    return emo_field
