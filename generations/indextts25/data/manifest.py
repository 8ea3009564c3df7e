"""The IndexTTS-2.5 paired manifest: one JSON object a line, pairing two utterances of one speaker.

Modelled on the IndexTTS2 paired manifest (``generations.indextts2.data.manifest``): the PROMPT gives the precomputed
conditioning, the TARGET the text and the codes. Paths are relative to the manifest's folder (``~`` expanded).

- ``prompt_spk_vec_path`` (required; marks the format): float32 [192], the prompt's CAM++ speaker vector.
- ``prompt_emo_vec_path``, falling back to ``target_emo_vec_path`` when empty: float32 [model_dim], the
  emotion vector (the GPT's emotion path output for the prompt).
- ``target_codes_path`` (required): int [M], the codec's 25 Hz codes in [0, 8192); ``target_code_len``
  (optional): the length used (the array is cut to it).
- ``target_text`` (raw text, tokenised when the run loads it, with the run's ``--text-scheme``), or
  ``target_text_ids_path`` (int [L] ids, ``"<|lang|> "`` prefix included, no start/stop) together with
  ``text_scheme`` (``bytes`` | ``merges`` | ``translit``: the scheme the ids were made with; a run with
  another scheme refuses them). When both are given the ids are used. ``target_text_len``: optional.
- ``language`` (or ``languages``, or ``PATH::lang`` on the command line): the language code, e.g. ``am``;
  it sets the text prefix and the ``lang_embedding`` row (``langs``). Required.
- ``id`` (else ``<target_id>__<prompt_id>``), ``speaker``, ``prompt_id``, ``target_id``,
  ``target_audio_path``, ``prompt_audio_path``, ``target_duration`` / ``duration``: optional.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from data_tools import item_files, pair_fields
from data_tools.manifest import ManifestError, load_json_object, resolve_path
from data_tools.shape_rules import DataLimits
from generations.indextts25.data.format import MARKS
from generations.indextts25.data.format import PATH_FIELDS as PATH_FIELDS
from generations.indextts25.data.tiktoken_table import unknown_language

TEXT_SCHEMES = ("bytes", "merges", "translit")  # generations.indextts25.data.text_table's (kept free of its imports)


@dataclass(frozen=True, kw_only=True)
class PairEntry(pair_fields.PairLine):
    spk_vec: Path
    emo_vec: Path
    codes: Path
    code_len: int | None
    text_ids: Path | None  # precomputed ids (then ``text_scheme`` says how they were made)
    text_len: int | None
    text_scheme: str | None

    @property
    def prompt_features(self) -> Path:
        return self.spk_vec


def parse_pair_object(obj: dict, manifest: Path, lineno: int,
                      default_language: str | None = None) -> PairEntry:
    """One 2.5 paired line's fields, typed and bounded; raises ManifestError (``file:line: what``)."""
    if not any(key in obj for key in MARKS):
        raise ManifestError(manifest, lineno, "not an IndexTTS-2.5 paired line (no 'prompt_spk_vec_path')")
    uid = pair_fields.pair_id(obj, manifest, lineno)
    strings = pair_fields.pair_strings(obj, manifest, lineno, ("text_scheme", *PATH_FIELDS))
    for key in ("prompt_spk_vec_path", "target_codes_path"):
        if not strings[key]:
            raise ManifestError(manifest, lineno, f"missing field '{key}' (id {uid})")
    emo_field = pair_fields.emo_vec_field(strings, manifest, lineno, uid)
    if not strings["target_text_ids_path"] and not (strings["target_text"] or "").strip():
        raise ManifestError(manifest, lineno, f"missing field 'target_text' (or target_text_ids_path) (id {uid})")
    scheme = strings["text_scheme"]
    if strings["target_text_ids_path"] and not scheme:
        raise ManifestError(manifest, lineno, f"'target_text_ids_path' needs 'text_scheme' (one of "
                                                  f"{', '.join(TEXT_SCHEMES)}): the scheme the ids were made with (id {uid})")
    if scheme and scheme not in TEXT_SCHEMES:
        raise ManifestError(manifest, lineno, f"field 'text_scheme' must be one of {', '.join(TEXT_SCHEMES)}, got "
                                              f"{scheme!r:.40} (id {uid})")
    language = pair_fields.pair_language(obj, manifest, lineno, default_language)
    if not language:
        raise ManifestError(manifest, lineno, f"missing field 'language': IndexTTS-2.5 needs each item's language "
                                              f"(or give the manifest as PATH::lang) (id {uid})")
    unknown = unknown_language(language)
    if unknown is not None:
        raise ManifestError(manifest, lineno, f"{unknown} (id {uid})")
    duration = pair_fields.target_duration(obj, manifest, lineno)
    base = manifest.parent

    def path(key: str) -> Path | None:
        return resolve_path(base, strings[key], manifest, lineno, key) if strings[key] else None

    spk_vec, emo_vec, codes = path("prompt_spk_vec_path"), path(emo_field), path("target_codes_path")
    assert spk_vec is not None and emo_vec is not None and codes is not None
    return PairEntry(
        id=uid, speaker=strings["speaker"], language=language, prompt_id=strings["prompt_id"],
        target_id=strings["target_id"], target_text=strings["target_text"], spk_vec=spk_vec, emo_vec=emo_vec,
        codes=codes, code_len=pair_fields.length_field(obj, "target_code_len", manifest, lineno),
        text_ids=path("target_text_ids_path"),
        text_len=pair_fields.length_field(obj, "target_text_len", manifest, lineno),
        text_scheme=scheme or None, target_audio=path("target_audio_path"), prompt_audio=path("prompt_audio_path"),
        duration=duration, manifest=manifest, line=lineno,
    )


def parse_pair_line(raw: str, manifest: Path, lineno: int,
                    default_language: str | None = None) -> PairEntry | None:
    if not raw.strip():
        return None
    return parse_pair_object(load_json_object(raw, manifest, lineno), manifest, lineno, default_language)


@dataclass(frozen=True)
class PairFacts:
    num_codes: int  # target_code_len (or the array's size)
    codes_size: int


def pair_vectors(spk_vec: Path, emo_vec: Path, limits: DataLimits) -> tuple[np.ndarray, np.ndarray]:
    """The prompt's speaker and emotion vectors, read whole and checked (file, dtype, shape, finite values), as
    float32; RuleError (one line naming the file) otherwise.

    The one check of these fields: the trainer's item loading (so its pre-flight, which runs that loading) and its
    batches, and the data checker call it, so none of them passes a vector another refuses. The vectors are a few
    hundred values each, so reading them whole at load time costs what reading their headers did."""
    return item_files.load_spk_vec(spk_vec), item_files.load_emo_vec(emo_vec, limits)


def pair_facts(entry: PairEntry, limits: DataLimits) -> PairFacts:
    """What loading a 2.5 pair needs before training: the codes count from their header, the vectors checked by
    :func:`pair_vectors`."""
    num_codes, codes_size = item_files.declared_codes_count(entry.codes, entry.code_len)
    pair_vectors(entry.spk_vec, entry.emo_vec, limits)
    return PairFacts(num_codes, codes_size)
