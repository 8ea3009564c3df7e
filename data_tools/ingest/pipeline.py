"""The ingest run, resumable: each source's record (``sources/<id>.json``) is written atomically once all its
clips are on disk, so a rerun skips finished sources and redoes only the one a kill interrupted (its clips
have stable names and are rewritten identically). Transcription updates records source by source; the clip
index with the gate reasons is rebuilt at the end of every run (both in ``data_tools.ingest.record_passes``).

Test hook (with ``STUDIO_TEST_HOOKS=1``): ``STUDIO_TEST_INGEST_KILL_AFTER_CLIPS=N`` SIGKILLs the process
right after its N-th clip file is written (a kill in the middle of a source).
"""

from __future__ import annotations

import errno
import os
import signal
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from data_tools.ingest.clips import clip_name, clip_path, read_json, write_clip
from data_tools.ingest.folder import check_folder, mark_folder
from data_tools.ingest.long_cues import aligner_of, split_long_cues
from data_tools.ingest.record_passes import (
    apply_dataset_loudness,
    embed_clip_speakers,
    speaker_device,
    transcribe_clips,
    write_clip_index,
    write_error,
    write_record,
)
from data_tools.ingest.settings import IngestError, IngestSettings, IngestSummary, Progress
from data_tools.ingest.slicing import Span, pad_cues, plan_vad_spans
from data_tools.ingest.sources import (
    CONTAINER_SUFFIXES,
    Problem,
    Source,
    SourceError,
    audio_info,
    clip_rate,
    find_sources,
    printable,
    stream_blocks,
    unique_sources,
)
from data_tools.ingest.subtitles import SubtitleError, check_within, read_cues, refine
from data_tools.model_limits import ClipLimits, LimitsError, clip_limits
from data_tools.ranks import Ranks, barrier, join, leave, own_device

# Under torchrun the other processes wait while the first one slices every recording (hours of audio may take
# hours), and the first waits for the others' share of the transcription.
INGEST_WAIT_S = 12 * 3600.0
DOWNLOADS = "downloads"  # what links fetched: media, subtitles, <name>.source.json, fetched/ (links.py)
SEPARATED = "separated"  # voice and rest stems of each recording, when separation is on (kept)
DECODED = "decoded"  # containers' audio as FLAC while their clips are cut (deleted once a source is done)
KILL_AFTER_CLIPS_ENV = "STUDIO_TEST_INGEST_KILL_AFTER_CLIPS"
HOOKS_GUARD_ENV = "STUDIO_TEST_HOOKS"


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

    Under torchrun (``data_tools.ranks``) the first process slices while the others wait; then every process
    transcribes its share of the sources (each on its own GPU), and the first one does the passes after it.
    The records are those of one process, byte for byte. Only the first process's summary is complete.
    """
    ranks = join(INGEST_WAIT_S)
    ended_together = False
    try:
        summary = _ingest(settings, transcriber, progress, asr_progress, vad_model, ranks)
        ended_together = True
    finally:
        leave(ranks, together=ended_together)
    return summary


def _ingest(settings: IngestSettings, transcriber: Any, progress: Progress | None, asr_progress: Progress | None,
            vad_model: Any, ranks: Ranks) -> IngestSummary:
    model = base_model(settings)
    if model is not None:  # the model's longest clip bounds the slicer before anything is cut
        settings = replace(settings, slicing=settings.slicing.fit_to(model.slicing_seconds))
    try:
        settings.slicing.check()
    except ValueError as exc:
        raise IngestError(str(exc) + (f" ({model.describe()})" if model is not None else "")) from None
    if settings.loudness_scope not in ("clip", "dataset"):
        raise IngestError(f"loudness scope {settings.loudness_scope!r}: 'clip' or 'dataset'")
    out = Path(settings.out_dir)
    try:
        claimed = check_folder(out, settings.fixed())
    except ValueError as exc:
        raise IngestError(str(exc)) from None
    if transcriber is None and settings.asr_model:  # models before the folder is marked: a refused one leaves
        transcriber = load_transcriber(settings)  # nothing behind, and is refused before hours of slicing
    if not ranks.is_main:  # the first process slices; this one transcribes its share of the sources after it
        barrier(ranks)
        transcribed = (transcribe_clips(out, settings, transcriber, asr_progress, ranks) if transcriber is not None
                       else 0)
        return IngestSummary(str(out), transcribed=transcribed)
    separator = load_separation(settings) if settings.separate else None
    try:
        mark_folder(out, settings.fixed(), claimed)
    except OSError as exc:
        raise write_error(exc, out) from None
    sources, problems = _all_sources(settings, out)
    summary = IngestSummary(str(out), sources=len(sources), model=model.describe() if model is not None else "",
                            longest_clip=settings.slicing.max_seconds)
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
            record = _slice_source(source, settings, out, vad_models, hook, problems, separator,
                                   aligner_of(transcriber))
        except SourceError as exc:
            where = printable(source.audio)
            problems.append(Problem(where, str(exc).removeprefix(f"{where}: ")))
            continue
        except SubtitleError as exc:  # its message names the subtitle file and the cue
            problems.append(Problem("", str(exc)))
            continue
        except OSError as exc:
            if _writing(exc, out):
                raise write_error(exc, out) from None
            problems.append(Problem(printable(source.audio), f"cannot read it ({exc.strerror or exc})"))
            continue
        except Exception as exc:  # one odd file (a decoder's surprise) must not stop the import
            reason = " ".join(str(exc).split())[:200]
            problems.append(Problem(printable(source.audio), f"cannot be sliced ({type(exc).__name__}: {reason})"))
            continue
        write_record(record_path, record, out)
        _drop_decoded(out, source)
    if progress:
        progress(len(sources), len(sources))
    barrier(ranks)
    if transcriber is not None:
        summary.transcribed = transcribe_clips(out, settings, transcriber, asr_progress, ranks)
    if settings.speaker_model:
        embed_clip_speakers(out, settings)
    if settings.loudness_scope == "dataset" and settings.target_lufs is not None:
        apply_dataset_loudness(out, settings)
    write_clip_index(out, settings, sources, problems, summary, model)
    return summary


def base_model(settings: IngestSettings) -> ClipLimits | None:
    """The limits of the base model the import is for (``settings.config``: a folder or its config.yaml)."""
    if settings.config is None:
        return None
    try:
        return clip_limits(settings.config)
    except LimitsError as exc:
        raise IngestError(str(exc)) from None


def _all_sources(settings: IngestSettings, out: Path) -> tuple[list[Source], list[Problem]]:
    """The input folder's sources and the links' (fetched into ``<out>/downloads`` first)."""
    if settings.input is None and not settings.urls:
        raise IngestError("nothing to import: give an input folder, a metadata.csv or links")
    sources: list[Source] = []
    problems: list[Problem] = []
    if settings.urls:
        from data_tools.ingest.links import fetch_links

        try:
            fetched = fetch_links(list(settings.urls), out / DOWNLOADS, settings.subtitle_language or
                                  settings.language, settings.licence)
        except OSError as exc:
            raise write_error(exc, out) from None
        problems += fetched.problems
        if any(p.is_file() for p in (out / DOWNLOADS).iterdir()):
            try:
                sources, more = find_sources(out / DOWNLOADS, settings.speaker, settings.speaker_level)
            except SourceError:
                more = []
            problems += more
    if settings.input is not None:
        try:
            found, more = find_sources(settings.input, settings.speaker, settings.speaker_level,
                                       settings.speaker_column)
        except SourceError as exc:
            if not settings.urls:
                raise IngestError(str(exc)) from None
            found, more = [], [Problem("", str(exc))]
        sources += found
        problems += more
    kept, clashes = unique_sources(sources)
    return kept, problems + clashes


def _finished(record: Any, source: Source) -> bool:
    return isinstance(record, dict) and record.get("audio") == str(source.audio) and "clips" in record


def _writing(exc: OSError, out: Path) -> bool:
    """Whether an OSError came from writing into the ingest folder (a full disk stops the run) rather than
    from reading one input (which leaves that input out)."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EROFS):
        return True
    name = getattr(exc, "filename", None)
    try:
        return name is not None and Path(os.fsdecode(name)).resolve().is_relative_to(out.resolve())
    except (OSError, ValueError):
        return False


def _decoded_path(out: Path, source: Source) -> Path:
    return out / DECODED / f"{source.id}.flac"


def _drop_decoded(out: Path, source: Source) -> None:
    """A container's decoded audio is only needed until its clips are written."""
    _decoded_path(out, source).unlink(missing_ok=True)


def _readable_audio(source: Source, out: Path) -> Path:
    """What the slicer reads: the file itself, or a container's audio decoded to FLAC (``media``)."""
    if source.audio.suffix.lower() not in CONTAINER_SUFFIXES:
        return source.audio
    from data_tools.ingest.media import decode_to_flac

    return decode_to_flac(source.audio, _decoded_path(out, source))


def _slice_source(source: Source, settings: IngestSettings, out: Path, vad_model: list[Any], hook: _KillHook,
                  problems: list[Problem], separator: Any = None, aligner: Any = None) -> dict[str, Any]:
    audio = _readable_audio(source, out)
    if separator is not None:
        from data_tools.ingest.separate import separate_file

        audio = separate_file(separator, audio, out / SEPARATED, source.id, speaker_device(settings.device))
    info = audio_info(audio)
    if info.declared_frames is not None and info.declared_frames - info.frames > info.rate * 0.1:
        problems.append(Problem(printable(source.audio), f"truncated: its header declares "
                                f"{info.declared_frames / info.rate:.1f} s, the file holds {info.seconds:.1f} s; "
                                "the part present was sliced"))
    out_rate = clip_rate(info.rate)
    left_out: list[tuple[float, float]] = []
    if source.kind == "transcribed":  # kept whole: one longer than a clip may be is flagged by the gates
        spans = [Span(0.0, info.seconds, 0.0, info.seconds, source.text)]
        duration = info.seconds
    else:
        cues = read_cues(source.subtitles, settings.subtitle_encoding) if source.kind == "subtitled" else None
        if cues is not None:
            cues = check_within(cues, info.seconds, source.subtitles)
        if not vad_model:
            from data_tools.ingest.vad import load_vad

            vad_model.append(load_vad())
        from data_tools.ingest.vad import FRAME_SECONDS, speech_probabilities, speech_regions

        probs = speech_probabilities(vad_model[0], stream_blocks(audio), info.rate)
        duration = min(info.seconds, len(probs) * FRAME_SECONDS)
        if info.seconds - len(probs) * FRAME_SECONDS > 1.0:
            problems.append(Problem(printable(source.audio), f"truncated: {duration:.1f} of {info.seconds:.1f} s "
                                                       "readable; the readable part was used"))
        if cues is None:
            spans, left_out = plan_vad_spans(probs, duration, settings.slicing)
        else:
            regions = speech_regions(probs, settings.slicing.threshold, min_pause=0.1)
            spans = pad_cues(refine(cues, regions, settings.slicing.snap), duration, settings.slicing)
            spans = split_long_cues(spans, probs, duration, settings.slicing, aligner, audio, info.rate)
    clips = []
    for span in spans:
        name = clip_name(source.id, None if source.kind == "transcribed" else span)
        target = clip_path(out, source.speaker, name)
        measured = write_clip(audio, info.rate, out_rate, span.start, span.end, target,
                              None if settings.loudness_scope == "dataset" else settings.target_lufs,
                              span.kept(settings.slicing.max_inner_pause))
        hook.clip_written()
        clips.append({
            "id": name, "audio": target.relative_to(out).as_posix(), "start": span.start, "end": span.end,
            "speech_start": span.speech_start, "speech_end": span.speech_end, "sample_rate": out_rate,
            "given_text": span.text, "given_kind": {"transcribed": "transcript", "subtitled": "subtitle"}.get(
                source.kind), **measured})
    return {"source": source.id, "audio": str(source.audio), "kind": source.kind, "speaker": source.speaker,
            "origin_url": source.origin_url, "licence": source.licence,
            "sliced_from": audio.relative_to(out).as_posix() if audio.is_relative_to(out) else str(audio),
            "language": settings.language, "source_rate": info.rate, "seconds": round(duration, 3),
            "left_out": [[round(s, 3), round(e, 3)] for s, e in left_out], "clips": clips}


def load_separation(settings: IngestSettings) -> Any:
    """The demucs model of ``--separate`` (``separate``; imported here, so slicing never needs it)."""
    from data_tools.ingest.separate import SeparationError, load_separator

    try:
        return load_separator(settings.separate)
    except SeparationError as exc:
        raise IngestError(str(exc)) from None


def load_transcriber(settings: IngestSettings) -> Any:
    """The CTC recogniser of ``data_tools.asr`` (imported here, so slicing never needs it)."""
    try:
        from data_tools.asr import AsrError, load_ctc_asr
    except ImportError as exc:
        raise IngestError(f"--asr-model: the speech recogniser cannot be loaded ({exc})") from None

    try:
        return load_ctc_asr(settings.asr_model, target_lang=settings.asr_language, device=own_device(settings.device))
    except AsrError as exc:
        raise IngestError(str(exc)) from None


