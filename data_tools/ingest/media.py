"""Audio in containers libsndfile cannot read (mp4, mkv, webm, m4a, opus, aac, ...): decoded with PyAV.

The first audio stream is decoded frame by frame, mixed to mono float32 at its own rate, and written block by
block to a FLAC file (24-bit) that the slicer then reads like any recording: a two-hour film never sits in
memory. The file appears atomically (temp name, fsync, rename), so one that exists is whole: a rerun reuses it.
"""

from __future__ import annotations

import os
from pathlib import Path

import soundfile as sf

from data_tools.fileio import fsync_dir
from data_tools.ingest.sources import SourceError, printable


def decode_to_flac(path: Path, target: Path) -> Path:
    """``path``'s first audio stream as mono FLAC at ``target`` (reused when already there); SourceError when the
    file has no audio stream, cannot be opened or breaks off."""
    import av

    if target.is_file():
        return target
    if path.is_file() and path.stat().st_size == 0:
        raise SourceError(f"{printable(path)}: empty file (0 bytes)")
    target.parent.mkdir(parents=True, exist_ok=True)
    temp = target.with_name(f".{target.name}.tmp")
    written = 0
    try:
        with av.open(str(path), metadata_errors="ignore") as container:
            streams = container.streams.audio
            if not streams:
                kinds = sorted({s.type for s in container.streams}) or ["nothing"]
                raise SourceError(f"{printable(path)}: no audio stream in it (it holds {', '.join(kinds)} only)")
            stream = streams[0]
            rate = stream.codec_context.sample_rate or stream.rate
            if not rate:
                raise SourceError(f"{printable(path)}: its audio stream declares no sample rate")
            resampler = av.AudioResampler(format="flt", layout="mono", rate=rate)
            with sf.SoundFile(str(temp), "w", samplerate=rate, channels=1, format="FLAC", subtype="PCM_24") as out:
                for frame in container.decode(stream):
                    for mono in resampler.resample(frame):
                        samples = mono.to_ndarray().reshape(-1)
                        out.write(samples)
                        written += len(samples)
                for mono in resampler.resample(None):
                    samples = mono.to_ndarray().reshape(-1)
                    out.write(samples)
                    written += len(samples)
    except SourceError:
        temp.unlink(missing_ok=True)
        raise
    except (av.FFmpegError, OSError, ValueError, sf.LibsndfileError) as exc:
        temp.unlink(missing_ok=True)
        reason = " ".join(str(getattr(exc, "strerror", None) or exc).split())[:200] or type(exc).__name__
        raise SourceError(f"{printable(path)}: cannot decode it ({reason})") from None
    if not written:
        temp.unlink(missing_ok=True)
        raise SourceError(f"{printable(path)}: its audio stream holds no samples")
    with open(temp, "rb") as handle:
        os.fsync(handle.fileno())
    os.replace(temp, target)
    fsync_dir(target.parent)
    return target
