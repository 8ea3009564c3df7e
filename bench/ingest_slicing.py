"""Ingest slicing speed against a bare voice-activity loop over the same audio (CPU).

    .venv/bin/python bench/ingest_slicing.py [--minutes 3] [--rate 48000] [--repeats 2] [--load 2]

Builds one long recording (espeak-ng Amharic sentences with pauses, 48 kHz) in a temp folder, then times, side by
side and in turn: a bare loop that reads the file, resamples it to 16 kHz and runs silero-vad on every
32 ms frame (the least any slicer must do), and the whole ingest slicing (``run_ingest`` without ASR:
streaming VAD, cutting, writing the clips with their measurements and loudness, records and index).
Prints hours of audio per hour of wall time for each, and the ratio ingest / bare (goal: >= 0.8).
The two are timed in pairs, ``--repeats`` times (a fresh output folder each time), and the median of the
pairs' ratios is kept: on a shared machine a burst of load then hits one pair, not one side. The ratio of
CPU time (process time) is printed beside it: the model's calls are nearly all of both, and load cannot move it.

The bare loop is also timed at torch's default thread count (what the slicer did before it ran the per-frame
model at one thread), and ``--load N`` repeats everything with N busy-looping processes beside it (a shared
machine), so the one-thread gain shows where it matters.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
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

SENTENCES = Path(__file__).resolve().parents[1] / "demo" / "assets" / "amharic_sentences.txt"


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


def bare_vad_loop(path: Path, model, threads: int = 1) -> int:
    """Read, resample to 16 kHz, and one silero call per 512-sample frame at ``threads`` torch threads;
    returns the frames run."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        return _bare_loop(path, model)
    finally:
        torch.set_num_threads(before)


def _bare_loop(path: Path, model) -> int:
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
    parser.add_argument("--load", type=int, default=0, help="also time with this many busy processes beside (0)")
    args = parser.parse_args()
    model = load_vad()
    default_threads = torch.get_num_threads()
    with tempfile.TemporaryDirectory(prefix="ingest-bench-") as tmp:
        folder = Path(tmp) / "in"
        folder.mkdir()
        seconds = build_recording(folder / "long.wav", args.minutes, args.rate)
        print(f"recording: {seconds / 60:.1f} min at {args.rate} Hz; torch default threads {default_threads}")
        ratio = cpu_ratio = 0.0
        clips = 0
        for load in sorted({0, max(0, args.load)}):
            with busy_processes(load):
                ratio, cpu_ratio, clips = _time_side_by_side(folder, Path(tmp) / f"load{load}", model, seconds,
                                                            args.repeats, default_threads, load)
            if load == 0:
                idle = (ratio, cpu_ratio, clips)
        ratio, cpu_ratio, clips = idle
    headline("ingest_slicing", "ingest slicing / bare VAD loop, hours of audio per hour", ratio, "x", ">= 0.8",
             ratio >= 0.8, f"{seconds / 60:.0f} min at {args.rate // 1000} kHz, {clips} clips, median of "
                           f"{max(1, args.repeats)} pairs; CPU-time ratio {cpu_ratio:.2f}")
    return 0


def _time_side_by_side(folder: Path, outs: Path, model, seconds: float, repeats: int, default_threads: int,
                       load: int) -> tuple[float, float, int]:
    samples: dict[str, list[float]] = {"bare": [], "bare_default": [], "ingest": []}
    cpu: dict[str, list[float]] = {"bare": [], "ingest": []}
    clips = 0
    for repeat in range(max(1, repeats)):
        start, start_cpu = time.perf_counter(), time.process_time()
        bare_vad_loop(folder / "long.wav", model, threads=1)
        samples["bare"].append(time.perf_counter() - start)
        cpu["bare"].append(time.process_time() - start_cpu)
        start = time.perf_counter()
        bare_vad_loop(folder / "long.wav", model, threads=default_threads)
        samples["bare_default"].append(time.perf_counter() - start)
        start, start_cpu = time.perf_counter(), time.process_time()
        summary = run_ingest(IngestSettings(folder, outs / f"out{repeat}"), vad_model=model)
        samples["ingest"].append(time.perf_counter() - start)
        cpu["ingest"].append(time.process_time() - start_cpu)
        clips = summary.clips
    medians = {name: statistics.median(values) for name, values in samples.items()}
    pairs = [bare / ingest for bare, ingest in zip(samples["bare"], samples["ingest"], strict=True)]
    ratio = statistics.median(pairs)
    cpu_ratio = statistics.median(b / i for b, i in zip(cpu["bare"], cpu["ingest"], strict=True))
    print(f"-- {load} busy process(es) beside; load average {_load()}; {clips} clips")
    for name, label in (("bare", "bare VAD loop, 1 thread"), ("bare_default", f"bare VAD loop, {default_threads} "
                                                                                f"threads"), ("ingest", "ingest slicing")):
        print(f"{label:28}: {seconds / medians[name]:7.1f} h of audio per hour ({medians[name]:.1f} s)")
    print(f"pair ratios ingest/bare-1-thread (wall): {', '.join(f'{r:.2f}' for r in pairs)}; CPU-time ratio "
          f"{cpu_ratio:.2f}; ingest vs bare at default threads {medians['bare_default'] / medians['ingest']:.2f}x")
    return ratio, cpu_ratio, clips


@contextlib.contextmanager
def busy_processes(count: int, limit_s: float = 900.0):
    """``count`` processes spinning on a CPU each (a busy shared machine); each ends by itself after
    ``limit_s`` and is stopped by its pid when the block ends."""
    workers = [subprocess.Popen([sys.executable, "-c", f"import time\nend = time.time() + {limit_s}\n"
                                 "while time.time() < end: pass"]) for _ in range(count)]
    try:
        yield
    finally:
        for worker in workers:
            worker.terminate()
        for worker in workers:
            try:
                worker.wait(timeout=10)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait(timeout=10)


def _load() -> str:
    try:
        return " ".join(f"{value:.1f}" for value in os.getloadavg())
    except OSError:
        return "unknown"


if __name__ == "__main__":
    raise SystemExit(main())
