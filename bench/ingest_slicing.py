"""Ingest slicing speed against a bare voice-activity loop over the same audio (CPU).

    .venv/bin/python bench/ingest_slicing.py [--minutes 3] [--rate 48000] [--repeats 2]

Builds one long recording (espeak-ng Amharic sentences with pauses, 48 kHz) in a temp folder, then times, side by
side and in turn: a bare loop that reads the file, resamples it to 16 kHz and runs silero-vad on every
32 ms frame (the least any slicer must do), and the whole ingest slicing (``run_ingest`` without ASR:
streaming VAD, cutting, writing the clips with their measurements and loudness, records and index).
Prints hours of audio per hour of wall time for each, and the ratio ingest / bare (goal: >= 0.8).
The two are timed in pairs, ``--repeats`` times (a fresh output folder each time), and the median of the
pairs' ratios is kept: on a shared machine a burst of load then hits one pair, not one side. The ratio of
CPU time (process time) is printed beside it: the model's calls are nearly all of both, and load cannot move it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import soundfile as sf
import soxr
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.report import headline
from data_tools.ingest.pipeline import IngestSettings, run_ingest
from data_tools.ingest.vad import FRAME, VAD_RATE, load_vad

SENTENCES = Path(__file__).resolve().parents[1] / "trainer" / "demo_assets" / "amharic_sentences.txt"


def build_recording(path: Path, minutes: float, rate: int, seed: int = 0) -> float:
    """espeak-ng Amharic sentences (silero must hear speech) with 0.2-1.5 s pauses, written block by block;
    returns the seconds written."""
    import shutil
    import subprocess

    espeak = shutil.which("espeak-ng")
    if espeak is None:
        raise SystemExit("bench/ingest_slicing.py needs espeak-ng (apt-get install espeak-ng)")
    sentences = [line.strip() for line in SENTENCES.read_text(encoding="utf-8").splitlines() if line.strip()][:40]
    voices = []
    with tempfile.TemporaryDirectory() as tmp:
        for k, text in enumerate(sentences):
            wav = Path(tmp) / f"{k}.wav"
            subprocess.run([espeak, "-v", "am", "-w", str(wav), text], check=True, capture_output=True, timeout=60)
            audio, source_rate = sf.read(str(wav), dtype="float32")
            voices.append(soxr.resample(audio, source_rate, rate))
    rng = np.random.default_rng(seed)
    total = int(minutes * 60 * rate)
    written = 0
    with sf.SoundFile(str(path), "w", samplerate=rate, channels=1, subtype="PCM_16") as handle:
        while written < total:
            piece = np.concatenate([voices[rng.integers(len(voices))], np.zeros(int(rng.uniform(0.2, 1.5) * rate))])
            piece = piece + rng.normal(0, 0.001, len(piece))
            handle.write(piece[: total - written].astype(np.float32))
            written += min(len(piece), total - written)
    return total / rate


def bare_vad_loop(path: Path, model) -> int:
    """Read, resample to 16 kHz, and one silero call per 512-sample frame; returns the frames run."""
    frames = 0
    model.reset_states()
    with sf.SoundFile(str(path)) as handle:
        resampler = soxr.ResampleStream(handle.samplerate, VAD_RATE, 1, dtype="float32", quality="HQ")
        pending = np.zeros(0, dtype=np.float32)
        while True:
            block = handle.read(30 * handle.samplerate, dtype="float32")
            last = not len(block)
            audio = np.concatenate([pending, resampler.resample_chunk(block, last=last)])
            whole = len(audio) // FRAME * FRAME
            pending = audio[whole:]
            with torch.inference_mode():
                for frame in torch.from_numpy(np.ascontiguousarray(audio[:whole])).view(-1, FRAME):
                    model(frame, VAD_RATE)
                    frames += 1
            if last:
                return frames


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=2.0, help="length of the recording (2)")
    parser.add_argument("--rate", type=int, default=48000, help="its sample rate (48000)")
    parser.add_argument("--repeats", type=int, default=3, help="timed pairs (the median ratio is kept)")
    args = parser.parse_args()
    model = load_vad()
    with tempfile.TemporaryDirectory(prefix="ingest-bench-") as tmp:
        folder = Path(tmp) / "in"
        folder.mkdir()
        seconds = build_recording(folder / "long.wav", args.minutes, args.rate)
        samples: dict[str, list[float]] = {"bare": [], "ingest": []}
        cpu: dict[str, list[float]] = {"bare": [], "ingest": []}
        clips = 0
        for repeat in range(max(1, args.repeats)):
            start, start_cpu = time.perf_counter(), time.process_time()
            bare_vad_loop(folder / "long.wav", model)
            samples["bare"].append(time.perf_counter() - start)
            cpu["bare"].append(time.process_time() - start_cpu)
            start, start_cpu = time.perf_counter(), time.process_time()
            summary = run_ingest(IngestSettings(folder, Path(tmp) / f"out{repeat}"), vad_model=model)
            samples["ingest"].append(time.perf_counter() - start)
            cpu["ingest"].append(time.process_time() - start_cpu)
            clips = summary.clips
    bare_s, ingest_s = (statistics.median(samples[name]) for name in ("bare", "ingest"))
    speed = {name: seconds / value for name, value in (("bare", bare_s), ("ingest", ingest_s))}
    pairs = [bare / ingest for bare, ingest in zip(samples["bare"], samples["ingest"], strict=True)]
    ratio = statistics.median(pairs)
    cpu_ratio = statistics.median(b / i for b, i in zip(cpu["bare"], cpu["ingest"], strict=True))
    print(f"recording: {seconds / 60:.1f} min at {args.rate} Hz; {clips} clips; torch threads "
          f"{torch.get_num_threads()}")
    print(f"bare VAD loop   : {speed['bare']:7.1f} h of audio per hour ({bare_s:.1f} s)")
    print(f"ingest slicing  : {speed['ingest']:7.1f} h of audio per hour ({ingest_s:.1f} s)")
    print(f"pair ratios (wall): {', '.join(f'{r:.2f}' for r in pairs)}; CPU-time ratio {cpu_ratio:.2f} "
          f"(what a busy machine's load cannot move); load average {_load()}")
    headline("ingest_slicing", "ingest slicing / bare VAD loop, hours of audio per hour", ratio, "x", ">= 0.8",
             ratio >= 0.8, f"{seconds / 60:.0f} min at {args.rate // 1000} kHz, {clips} clips, median of "
                           f"{max(1, args.repeats)} pairs; CPU-time ratio {cpu_ratio:.2f}")
    return 0


def _load() -> str:
    try:
        return " ".join(f"{value:.1f}" for value in os.getloadavg())
    except OSError:
        return "unknown"


if __name__ == "__main__":
    raise SystemExit(main())
