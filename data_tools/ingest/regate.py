"""The gates of an ingest folder, saved at import (``gates.json``) so a proofreading edit re-runs them.

The import writes what its gates applied (thresholds, accepted clip lengths, the model's limits and tokenizer);
``reasons_now`` applies the same ``GateContext.clip_reasons`` to a clip whose transcript was edited, so a clip
rejected for "no transcript" is accepted once one is typed, and a text too long for the model is flagged.
Torch-free: the proofreading store runs inside the studio's page process.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from data_tools.ingest.gates import Duplicates, GateContext, GateSettings, ModelLimits
from data_tools.ingest.jsonfiles import read_json, write_json
from data_tools.shape_rules import DataLimits

CONTEXT_FILE = "gates.json"


def context_record(context: GateContext, model: Mapping[str, Any] | None) -> dict[str, Any]:
    """What ``gates.json`` holds: the settings, and the model as ``model_record`` describes it."""
    return {"settings": context.settings.as_dict(), "min_seconds": context.min_seconds,
            "max_seconds": context.max_seconds, "model": dict(model) if model else None}


def model_record(generation: str, max_codes: int, max_text_tokens: int, codes_per_second: float,
                 config: Path, tokenizer: Path | None) -> dict[str, Any]:
    return {"generation": generation, "max_codes": max_codes, "max_text_tokens": max_text_tokens,
            "codes_per_second": codes_per_second, "config": str(config),
            "tokenizer": str(tokenizer) if tokenizer is not None else None}


def save_context(folder: Path, record: Mapping[str, Any]) -> None:
    write_json(Path(folder) / CONTEXT_FILE, dict(record))


_loaded: dict[tuple[str, int, str | None], GateContext] = {}  # the page opens a store per view: load tokenizers once


def load_context(folder: Path, language: str | None) -> GateContext:
    """The folder's gates as its import applied them. A folder made before ``gates.json`` gets the default
    thresholds and the clip lengths of its ``ingest.json``; a tokenizer that cannot be loaded now leaves the
    text length unchecked (the codes are still checked)."""
    path = Path(folder) / CONTEXT_FILE
    try:
        key = (str(path.resolve()), path.stat().st_mtime_ns, language)
    except OSError:
        return _read_context(folder, language)
    if key not in _loaded:
        _loaded.clear()  # one folder at a time is proofread; an import rewrites gates.json (a new mtime)
        _loaded[key] = _read_context(folder, language)
    return _loaded[key]


def _read_context(folder: Path, language: str | None) -> GateContext:
    record = read_json(Path(folder) / CONTEXT_FILE)
    if not isinstance(record, dict):
        slicing = (read_json(Path(folder) / "ingest.json") or {}).get("slicing", {})
        return GateContext(GateSettings(), float(slicing.get("min_seconds", 1.0)),
                           float(slicing.get("max_seconds", 20.0)))
    known = set(GateSettings.__dataclass_fields__)
    settings = GateSettings(**{k: v for k, v in (record.get("settings") or {}).items() if k in known})
    return GateContext(settings, float(record["min_seconds"]), float(record["max_seconds"]),
                       _limits_of(record.get("model"), language))


def _limits_of(model: Any, language: str | None) -> ModelLimits | None:
    if not isinstance(model, dict):
        return None
    from data_tools.model_limits import LimitsError, load_text_tokenizer

    tokenizer = None
    if model.get("tokenizer"):
        try:
            tokenizer = load_text_tokenizer(model["tokenizer"], model["generation"], language)
        except LimitsError:
            tokenizer = None
    limits = DataLimits(max_text_tokens=int(model["max_text_tokens"]), max_codes=int(model["max_codes"]))
    return ModelLimits(limits, float(model["codes_per_second"]), tokenizer)


def reasons_now(rows: Sequence[Mapping[str, Any]], texts: Mapping[str, str], clip_ids: Iterable[str],
                context: GateContext) -> dict[str, list[str]]:
    """The gate reasons of ``clip_ids`` with the transcripts as they stand (``texts``: clip id -> text), in one
    pass over ``rows`` in the index's order, so duplicates name the earlier clip as the import did."""
    wanted = set(clip_ids)
    duplicates = Duplicates(context.settings)
    found: dict[str, list[str]] = {}
    for row in rows:
        text = texts.get(row["id"], row.get("text") or "")
        speaker = row.get("speaker_given") or row.get("speaker") or ""
        if row["id"] in wanted:
            found[row["id"]] = context.clip_reasons(row, text, row.get("language"), speaker, duplicates)
        else:
            duplicates.reasons(row["id"], row["audio_sha1"], speaker, text)
    return found
