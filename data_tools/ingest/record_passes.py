"""The passes over the source records once slicing is done: transcription, speaker embeddings and labels, one
loudness for the whole data set, and the clip index (``clips.jsonl`` with each clip's gate reasons, ``problems.jsonl``,
``gates.json``). Each record is rewritten atomically, so a kill between passes loses nothing.
"""

from __future__ import annotations

import errno
from pathlib import Path
from typing import Any

from data_tools.ingest.clips import read_json, regain_clip, write_json, write_jsonl
from data_tools.ingest.gates import Duplicates, GateContext, ModelLimits, gate_name
from data_tools.ingest.loudness import dataset_gain
from data_tools.ingest.settings import IngestError, IngestSettings, IngestSummary, Progress
from data_tools.ingest.sources import Problem, Source
from data_tools.model_limits import ClipLimits, LimitsError, load_text_tokenizer
from data_tools.ranks import ONE_PROCESS, Ranks, gather


def write_error(exc: OSError, out: Path) -> IngestError:
    """The one-line refusal for a failed write into the ingest folder (a full disk says a rerun continues)."""
    if exc.errno == errno.ENOSPC:
        return IngestError(f"disk full while writing into {out}: finished sources are kept, rerun to continue")
    return IngestError(f"cannot write into {out}: {exc.strerror or exc}")


def write_record(path: Path, value: Any, out: Path) -> None:
    """A source record written atomically; IngestError when the folder cannot take it."""
    try:
        write_json(path, value)
    except OSError as exc:
        raise write_error(exc, out) from None


def source_records(out: Path) -> list[tuple[Path, dict[str, Any]]]:
    """Every finished source's record (``sources/<id>.json`` with its clips) and its path, in name order."""
    found = []
    for path in sorted((out / "sources").glob("*.json")):
        record = read_json(path)
        if isinstance(record, dict) and "clips" in record:
            found.append((path, record))
    return found


def transcribe_clips(out: Path, settings: IngestSettings, transcriber: Any, progress: Progress | None,
                     ranks: Ranks = ONE_PROCESS) -> int:
    """ASR text and confidence for every clip that has none yet, record by record; the number transcribed (by
    every process). Under torchrun each process takes every N-th pending record (the batches of a record are
    those of one process) and all return when all are done."""
    import soundfile as sf

    pending = ranks.share([(path, record) for path, record in source_records(out)
                           if any(clip.get("asr_text") is None for clip in record["clips"])])
    total = sum(1 for _, record in pending for clip in record["clips"] if clip.get("asr_text") is None)
    done = 0
    for path, record in pending:
        todo = [clip for clip in record["clips"] if clip.get("asr_text") is None]
        for first in range(0, len(todo), max(1, settings.batch_size) * 4):
            batch = todo[first:first + max(1, settings.batch_size) * 4]
            waves = [sf.read(str(out / clip["audio"]), dtype="float32")[0] for clip in batch]
            try:
                results = transcriber.transcribe(waves, sample_rate=batch[0]["sample_rate"],
                                                 batch_size=settings.batch_size)
            except ValueError as exc:
                raise IngestError(f"transcription failed: {exc}") from None
            for clip, result in zip(batch, results, strict=True):
                clip["asr_text"] = " ".join(str(result.text).split())
                clip["confidence"] = round(float(result.confidence), 4)
            done += len(batch)
            if progress:
                progress(done, total)
        record["asr_model"] = settings.asr_model or type(transcriber).__name__
        write_record(path, record, out)
    return sum(gather(ranks, done))  # also: the first process reads the records once every process wrote its own


def embed_clip_speakers(out: Path, settings: IngestSettings) -> None:
    """Each clip's speaker embedding, kept in its source record with the model that made it (``speaker_cache``)."""
    from data_tools.ingest.speaker_cache import embed_speakers
    from data_tools.ingest.speakers import SpeakerError

    try:
        embed_speakers(out, source_records(out), settings.speaker_model, speaker_device(settings.device),
                       lambda path, record: write_record(path, record, out))
    except SpeakerError as exc:
        raise IngestError(str(exc)) from None


def apply_dataset_loudness(out: Path, settings: IngestSettings) -> None:
    """One gain for every clip (``loudness.dataset_gain``), applied to the clips that do not have it yet (a new
    source moves it a little: earlier clips are regained, never re-cut)."""
    records = source_records(out)
    gain = dataset_gain([(clip["seconds"], clip.get("lufs")) for _, record in records for clip in record["clips"]],
                        settings.target_lufs)
    for path, record in records:
        changed = [regain_clip(out / clip["audio"], clip, gain) for clip in record["clips"]]
        if any(changed):
            write_record(path, record, out)


def speaker_device(device: str) -> str:
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def _speaker_labels(out: Path, settings: IngestSettings) -> dict[str, str]:
    """Clip id -> clustered speaker label, over every clip with an embedding (none without --speaker-model)."""
    if not settings.speaker_model:
        return {}
    from data_tools.ingest.speaker_cache import speaker_labels
    from data_tools.ingest.speakers import SpeakerError

    try:
        return speaker_labels(source_records(out), settings.speaker_model, settings.speaker_threshold,
                              f"{settings.speaker}-" if settings.speaker else "spk")
    except SpeakerError as exc:
        raise IngestError(str(exc)) from None


def _gate_context(settings: IngestSettings, model: ClipLimits | None) -> tuple[GateContext, dict[str, Any] | None]:
    """The gates of this run, and the model as ``gates.json`` records it (``regate``)."""
    from data_tools.ingest.regate import model_record

    limits = record = None
    if model is not None:
        tokenizer_path = settings.tokenizer or model.tokenizer
        try:
            tokenizer = (load_text_tokenizer(tokenizer_path, model.generation, settings.language)
                         if tokenizer_path is not None else None)
        except LimitsError as exc:
            raise IngestError(str(exc)) from None
        limits = ModelLimits(model.data_limits, model.codes_per_second, tokenizer)
        record = model_record(model.generation, model.max_codes, model.max_text_tokens, model.codes_per_second,
                              model.config, Path(tokenizer_path).absolute() if tokenizer_path else None)
    context = GateContext(settings.gates, settings.slicing.min_seconds, settings.slicing.max_seconds, limits)
    return context, record


def write_clip_index(out: Path, settings: IngestSettings, sources: list[Source], problems: list[Problem],
              summary: IngestSummary, model: ClipLimits | None = None) -> None:
    """The clip index: every clip with its pipeline text and gate reasons; problems.jsonl and gates.json
    (what the gates applied, for re-running them on an edit) beside it."""
    from data_tools.ingest.regate import context_record, save_context
    from data_tools.ingest.store import EDITS_FILE, load_edits

    edits = load_edits(out / EDITS_FILE)
    context, model_entry = _gate_context(settings, model)
    duplicates = Duplicates(settings.gates)
    labels = _speaker_labels(out, settings)
    rows = []
    for _, record in source_records(out):
        summary.left_out_fragments += len(record.get("left_out", []))
        summary.hours += record.get("seconds", 0.0) / 3600
        for clip in record["clips"]:
            text = edits.get(clip["id"], {}).get("text") or clip.get("given_text") or clip.get("asr_text") or ""
            reasons = context.clip_reasons(clip, text, record.get("language"), record["speaker"], duplicates)
            row = {key: value for key, value in clip.items() if key != "speaker_embedding"}
            rows.append({**row, "source": record["source"], "speaker": labels.get(clip["id"], record["speaker"]),
                         "speaker_given": record["speaker"], "origin_url": record.get("origin_url"),
                         "licence": record.get("licence"),
                         "language": record.get("language"), "text": text, "reasons": reasons})
    summary.clips = len(rows)
    summary.rejected = sum(1 for row in rows if row["reasons"])
    if model is not None:
        summary.too_long = sum(1 for row in rows if row["seconds"] > settings.slicing.max_seconds or
                               any(gate_name(reason) == "too_long_for_model" for reason in row["reasons"]))
    summary.hours = round(summary.hours, 4)
    summary.problems = [problem.line() for problem in problems]
    try:
        write_jsonl(out / "clips.jsonl", rows)
        write_jsonl(out / "problems.jsonl", [{"where": p.where, "reason": p.reason} for p in problems])
        save_context(out, context_record(context, model_entry))
    except OSError as exc:
        raise write_error(exc, out) from None
