"""The ingest run, resumable: each source's record (``sources/<id>.json``) is written atomically once all its
clips are on disk, so a rerun skips finished sources and redoes only the one a kill interrupted (its clips
have stable names and are rewritten identically). Transcription updates records source by source; the clip
index with the gate reasons is rebuilt at the end of every run.

Test hook (with ``STUDIO_TEST_HOOKS=1``): ``STUDIO_TEST_INGEST_KILL_AFTER_CLIPS=N`` SIGKILLs the process
right after its N-th clip file is written (a kill in the middle of a source).
"""

from __future__ import annotations

import errno
import os
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from data_tools.ingest.clips import clip_name, clip_path, read_json, write_clip, write_json, write_jsonl
from data_tools.ingest.gates import Duplicates, GateSettings, ModelLimits, audio_reasons, text_reasons
from data_tools.ingest.slicing import SliceSettings, Span, pad_cues, plan_vad_spans
from data_tools.ingest.sources import (
    Problem,
    Source,
    SourceError,
    audio_info,
    clip_rate,
    find_sources,
    stream_blocks,
)
from data_tools.ingest.subtitles import SubtitleError, read_cues, refine
from networks.generation_rule import generation_id

FORMAT = 1
KILL_AFTER_CLIPS_ENV = "STUDIO_TEST_INGEST_KILL_AFTER_CLIPS"
HOOKS_GUARD_ENV = "STUDIO_TEST_HOOKS"
Progress = Callable[[int, int], None]


class IngestError(ValueError):
    """The run cannot go on (bad settings, another run's folder, a full disk): one line."""


@dataclass(frozen=True)
class IngestSettings:
    input: Path
    out_dir: Path
    language: str | None = None
    speaker: str | None = None
    speaker_level: int = 1
    speaker_column: int | None = None
    slicing: SliceSettings = field(default_factory=SliceSettings)
    gates: GateSettings = field(default_factory=GateSettings)
    target_lufs: float | None = -20.0
    subtitle_encoding: str | None = None
    asr_model: str | None = None
    asr_language: str | None = None
    device: str = "auto"
    batch_size: int = 8
    tokenizer: Path | None = None
    config: Path | None = None

    def fixed(self) -> dict[str, Any]:
        """What the clips on disk depend on: a rerun into the same folder must use the same."""
        return {"format": FORMAT, "slicing": self.slicing.as_dict(), "target_lufs": self.target_lufs}


@dataclass
class IngestSummary:
    out_dir: str
    sources: int = 0
    sources_done_before: int = 0
    clips: int = 0
    rejected: int = 0
    transcribed: int = 0
    hours: float = 0.0
    left_out_fragments: int = 0
    problems: list[str] = field(default_factory=list)


class _KillHook:
    def __init__(self) -> None:
        value = os.environ.get(KILL_AFTER_CLIPS_ENV) if os.environ.get(HOOKS_GUARD_ENV) == "1" else None
        self.after = int(value) if value else None
        self.written = 0
        if self.after is not None:
            print(f"test hook: {KILL_AFTER_CLIPS_ENV}={self.after} (SIGKILL after that many clips)", file=sys.stderr)

    def clip_written(self) -> None:
        self.written += 1
        if self.after is not None and self.written >= self.after:
            os.kill(os.getpid(), signal.SIGKILL)


def run_ingest(settings: IngestSettings, transcriber: Any = None, progress: Progress | None = None,
               asr_progress: Progress | None = None, vad_model: Any = None) -> IngestSummary:
    """Slice, transcribe (with ``transcriber`` or ``settings.asr_model``) and gate; resumable.

    ``transcriber`` and ``vad_model`` replace the real models (tests): the first has ``transcribe(waves,
    sample_rate, batch_size)``, the second silero's call ``model(frame, 16000) -> probability`` and
    ``reset_states()``.
    """
    try:
        settings.slicing.check()
    except ValueError as exc:
        raise IngestError(str(exc)) from None
    out = Path(settings.out_dir)
    _claim_folder(out, settings)
    if transcriber is None and settings.asr_model:
        transcriber = load_transcriber(settings)  # a bad model is refused before hours of slicing
    try:
        sources, problems = find_sources(settings.input, settings.speaker, settings.speaker_level,
                                         settings.speaker_column)
    except SourceError as exc:
        raise IngestError(str(exc)) from None
    summary = IngestSummary(str(out), sources=len(sources))
    hook = _KillHook()
    vad_models: list[Any] = [] if vad_model is None else [vad_model]  # loaded on first need
    for done, source in enumerate(sources):
        if progress:
            progress(done, len(sources))
        record_path = out / "sources" / f"{source.id}.json"
        if _finished(read_json(record_path), source):
            summary.sources_done_before += 1
            continue
        try:
            record = _slice_source(source, settings, out, vad_models, hook, problems)
        except SourceError as exc:
            problems.append(Problem(str(source.audio), str(exc).removeprefix(f"{source.audio}: ")))
            continue
        except SubtitleError as exc:  # its message names the subtitle file and the cue
            problems.append(Problem("", str(exc)))
            continue
        except OSError as exc:
            raise _write_error(exc, out) from None
        _write(record_path, record, out)
    if progress:
        progress(len(sources), len(sources))
    if settings.asr_model or transcriber is not None:
        summary.transcribed = _transcribe(out, settings, transcriber, asr_progress)
    _finalize(out, settings, sources, problems, summary)
    return summary


def _claim_folder(out: Path, settings: IngestSettings) -> None:
    marker = out / "ingest.json"
    recorded = read_json(marker)
    if recorded is not None and recorded != settings.fixed():
        changed = [k for k, v in settings.fixed()["slicing"].items() if recorded.get("slicing", {}).get(k) != v]
        what = ", ".join(changed) or "loudness target or format"
        raise IngestError(f"{out} was made with other settings ({what}); use a new --out-dir or the same settings")
    for folder in ("clips", "sources", "manifests", "."):  # temp files of writes a kill cut short
        for stale in (out / folder).rglob(".*.tmp") if folder != "." else out.glob(".*.tmp"):
            stale.unlink(missing_ok=True)
    if recorded is None:
        try:
            out.mkdir(parents=True, exist_ok=True)
            write_json(marker, settings.fixed())
        except OSError as exc:
            raise _write_error(exc, out) from None


def _finished(record: Any, source: Source) -> bool:
    return isinstance(record, dict) and record.get("audio") == str(source.audio) and "clips" in record


def _write_error(exc: OSError, out: Path) -> IngestError:
    if exc.errno == errno.ENOSPC:
        return IngestError(f"disk full while writing into {out}: finished sources are kept, rerun to continue")
    return IngestError(f"cannot write into {out}: {exc.strerror or exc}")


def _write(path: Path, value: Any, out: Path) -> None:
    try:
        write_json(path, value)
    except OSError as exc:
        raise _write_error(exc, out) from None


def _slice_source(source: Source, settings: IngestSettings, out: Path, vad_model: list[Any], hook: _KillHook,
                  problems: list[Problem]) -> dict[str, Any]:
    info = audio_info(source.audio)
    out_rate = clip_rate(info.rate)
    left_out: list[tuple[float, float]] = []
    if source.kind == "transcribed":
        if info.seconds > settings.slicing.max_seconds:
            raise SourceError(f"{info.seconds:.1f} s with one transcript is longer than a clip may be "
                              f"({settings.slicing.max_seconds:g} s); remove its .txt to have it sliced")
        spans = [Span(0.0, info.seconds, 0.0, info.seconds, source.text)]
        duration = info.seconds
    else:
        cues = read_cues(source.subtitles, settings.subtitle_encoding) if source.kind == "subtitled" else None
        if not vad_model:
            from data_tools.ingest.vad import load_vad

            vad_model.append(load_vad())
        from data_tools.ingest.vad import FRAME_SECONDS, speech_probabilities, speech_regions

        probs = speech_probabilities(vad_model[0], stream_blocks(source.audio), info.rate)
        duration = min(info.seconds, len(probs) * FRAME_SECONDS)
        if info.seconds - len(probs) * FRAME_SECONDS > 1.0:
            problems.append(Problem(str(source.audio), f"truncated: {duration:.1f} of {info.seconds:.1f} s "
                                                       "readable; the readable part was used"))
        if cues is None:
            spans, left_out = plan_vad_spans(probs, duration, settings.slicing)
        else:
            regions = speech_regions(probs, settings.slicing.threshold, min_pause=0.1)
            spans = pad_cues(refine(cues, regions, settings.slicing.snap), duration, settings.slicing)
    clips = []
    for span in spans:
        name = clip_name(source.id, None if source.kind == "transcribed" else span)
        target = clip_path(out, source.speaker, name)
        measured = write_clip(source.audio, info.rate, out_rate, span.start, span.end, target,
                              settings.target_lufs)
        hook.clip_written()
        clips.append({
            "id": name, "audio": target.relative_to(out).as_posix(), "start": span.start, "end": span.end,
            "speech_start": span.speech_start, "speech_end": span.speech_end, "sample_rate": out_rate,
            "given_text": span.text, "given_kind": {"transcribed": "transcript", "subtitled": "subtitle"}.get(
                source.kind), **measured})
    return {"source": source.id, "audio": str(source.audio), "kind": source.kind, "speaker": source.speaker,
            "language": settings.language, "source_rate": info.rate, "seconds": round(duration, 3),
            "left_out": [[round(s, 3), round(e, 3)] for s, e in left_out], "clips": clips}


def _records(out: Path) -> list[tuple[Path, dict[str, Any]]]:
    found = []
    for path in sorted((out / "sources").glob("*.json")):
        record = read_json(path)
        if isinstance(record, dict) and "clips" in record:
            found.append((path, record))
    return found


def _transcribe(out: Path, settings: IngestSettings, transcriber: Any, progress: Progress | None) -> int:
    import soundfile as sf

    pending = [(path, record) for path, record in _records(out)
               if any(clip.get("asr_text") is None for clip in record["clips"])]
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
        _write(path, record, out)
    return done


def load_transcriber(settings: IngestSettings) -> Any:
    """The CTC recogniser of ``data_tools.asr`` (imported here, so slicing never needs it)."""
    try:
        from data_tools.asr import AsrError, load_ctc_asr
    except ImportError as exc:
        raise IngestError(f"--asr-model: the speech recogniser cannot be loaded ({exc})") from None

    try:
        return load_ctc_asr(settings.asr_model, target_lang=settings.asr_language, device=settings.device)
    except AsrError as exc:
        raise IngestError(str(exc)) from None


def _model_limits(settings: IngestSettings) -> ModelLimits | None:
    if settings.config is None:
        return None
    from data_tools.config import ConfigError, load_config
    from data_tools.shape_rules import DataLimits
    from data_tools.text_tokenizer import TextTokenizer, TokenizerError

    try:
        gpt = load_config(settings.config)["gpt"]
        tokenizer = TextTokenizer(settings.tokenizer, settings.language) if settings.tokenizer else None
    except (ConfigError, TokenizerError) as exc:
        raise IngestError(str(exc)) from None
    version = generation_id(gpt)
    return ModelLimits(DataLimits.from_gpt(gpt), version, tokenizer)


def _finalize(out: Path, settings: IngestSettings, sources: list[Source], problems: list[Problem],
              summary: IngestSummary) -> None:
    """The clip index: every clip with its pipeline text and gate reasons; problems.jsonl beside it."""
    from data_tools.ingest.store import EDITS_FILE, load_edits

    edits = load_edits(out / EDITS_FILE)
    limits = _model_limits(settings)
    duplicates = Duplicates(settings.gates)
    rows = []
    for _, record in _records(out):
        summary.left_out_fragments += len(record.get("left_out", []))
        summary.hours += record.get("seconds", 0.0) / 3600
        for clip in record["clips"]:
            text = edits.get(clip["id"], {}).get("text") or clip.get("given_text") or clip.get("asr_text") or ""
            speech = max(clip["speech_end"] - clip["speech_start"], 1e-3)
            reasons = audio_reasons(clip, clip["seconds"], settings.gates, settings.slicing.min_seconds,
                                    settings.slicing.max_seconds)
            reasons += text_reasons(text, speech, record.get("language"), settings.gates)
            if limits is not None and text and (why := limits.reason(text, clip["seconds"], record["language"])):
                reasons.append(why)
            reasons += duplicates.reasons(clip["id"], clip["audio_sha1"], record["speaker"], text)
            rows.append({**clip, "source": record["source"], "speaker": record["speaker"],
                         "language": record.get("language"), "text": text, "reasons": reasons})
    summary.clips = len(rows)
    summary.rejected = sum(1 for row in rows if row["reasons"])
    summary.hours = round(summary.hours, 4)
    summary.problems = [problem.line() for problem in problems]
    try:
        write_jsonl(out / "clips.jsonl", rows)
        write_jsonl(out / "problems.jsonl", [{"where": p.where, "reason": p.reason} for p in problems])
    except OSError as exc:
        raise _write_error(exc, out) from None
