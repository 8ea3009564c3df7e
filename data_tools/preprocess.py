"""Prepare training data: audio + transcripts -> DVAE codes, conditioning mels and a codes manifest.

CLI::

    python -m data_tools.preprocess --input X --out-dir D --config config.yaml [--dvae dvae.pth]
        [--workers N] [--min-duration 0.5] [--max-duration S] [--language am] [--speaker NAME]

``X`` is a JSONL list, an LJSpeech-style ``metadata.csv`` or a folder of audio with ``.txt`` transcripts
(see ``data_tools.preprocess_inputs``). For every item: any audio libsndfile reads -> mono -> 24 kHz
(soxr) -> IndexTTS's 100-band log-mel -> DVAE codes (``data_tools.preprocess_worker``). Output in ``D``:

- ``codes/<id>.npy``: int16 codes (int32 for codebooks over 32767 codes), shape [frames / 4];
- ``cond_mels/<id>.npy``: the utterance's own log-mel, float32 [100, frames];
- ``manifest.jsonl``: the codes manifest (``data_tools.manifest``), written atomically. Each entry's
  ``cond_mel`` is the mel of ANOTHER utterance of the same speaker (the next one in input order), so the
  prompt differs from the target and cannot leak into it; a speaker with one utterance uses its own;
- ``preprocess_report.json``: what was done and what was skipped, and why.

Text: the manifest stores the transcript as given (raw); the trainer runs the text front-end
(``normalize_text``) when it loads the data, like the data checker. Here the front-end only screens
out transcripts that normalise to nothing.

Resumable: finished items are logged in ``D/.preprocess/done.jsonl``; a rerun skips those whose audio
(path, size, mtime) is unchanged and whose files exist. Bad, silent, too short or too long audio is
reported and skipped, never a crash. Exit codes: 0 manifest written, 1 nothing could be prepared,
2 usage (one ``error: ...`` line), 130 interrupted (rerun to resume).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from data_tools.batch_prep import SkipCounts, Skipped
from data_tools.cli import OneLineErrorParser, progress_bar, run_refusing, usage_error
from data_tools.fileio import atomic_write_text
from data_tools.job_summary import summary_line
from data_tools.model_limits import longest_seconds
from data_tools.preprocess_inputs import InputError, SourceItem, read_inputs
from data_tools.preprocess_worker import WorkerSettings, run_items

STATE_DIR = ".preprocess"


class PreprocessError(ValueError):
    """Inputs preprocessing cannot start on (one-line message)."""


@dataclass
class PreprocessReport(SkipCounts):
    manifest: str
    entries: int  # lines in manifest.jsonl
    new: int  # prepared in this run
    resumed: int  # finished in an earlier run, skipped now
    skipped: list[Skipped] = field(default_factory=list)
    own_prompt_speakers: list[str] = field(default_factory=list)  # only one utterance: prompt == target
    hours: float = 0.0
    elapsed_s: float = 0.0

    def summary(self) -> str:
        lines = [f"manifest: {self.manifest} ({self.entries} entries, {self.hours:.2f} h; {self.new} prepared now, "
                 f"{self.resumed} from an earlier run) in {self.elapsed_s:.1f} s"]
        if self.skipped:
            lines.append(f"skipped {len(self.skipped)}:")
            for reason, count in sorted(self.skipped_by_reason.items(), key=lambda kv: -kv[1]):
                examples = [s for s in self.skipped if s.reason.split(":")[0] == reason][:3]
                shown = "; ".join(f"{s.where}: {s.reason.partition(': ')[2] or s.reason}" for s in examples)
                lines.append(f"  {reason}: {count} (e.g. {shown})")
        if self.own_prompt_speakers:
            lines.append(f"note: {len(self.own_prompt_speakers)} speaker(s) with a single utterance use it as their "
                         f"own prompt: {', '.join(self.own_prompt_speakers[:5])}")
        return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# The run


def _done_log(out_dir: Path) -> Path:
    return out_dir / STATE_DIR / "done.jsonl"


def _audio_signature(path: Path) -> tuple[int, int] | None:
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_size, stat.st_mtime_ns


def _load_done(out_dir: Path) -> dict[str, dict]:
    """Finished items of earlier runs, by stem (a torn last line of the log is ignored)."""
    done: dict[str, dict] = {}
    try:
        lines = _done_log(out_dir).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return done
    for raw in lines:
        try:
            record = json.loads(raw)
            done[record["stem"]] = record
        except (json.JSONDecodeError, KeyError, TypeError):
            continue
    return done


def _is_finished(item: SourceItem, record: dict | None, out_dir: Path) -> bool:
    if record is None or record.get("audio") != str(item.audio):
        return False
    if list(_audio_signature(item.audio) or ()) != record.get("signature"):
        return False
    return (out_dir / "codes" / f"{item.stem}.npy").is_file() and (out_dir / "cond_mels" / f"{item.stem}.npy").is_file()


def preprocess(
    input_path: str | Path,
    out_dir: str | Path,
    config: str | Path,
    dvae: str | Path | None = None,
    *,
    workers: int = 1,
    min_duration: float = 0.5,
    max_duration: float | None = None,
    language: str | None = None,
    speaker: str | None = None,
    device: str = "cpu",
    progress: Callable[[int, int], None] | None = None,
) -> PreprocessReport:
    """Prepare ``input_path`` into ``out_dir`` (see the module docstring); raises PreprocessError on bad inputs."""
    started = time.perf_counter()
    out = Path(out_dir).absolute()
    settings = _settings(out, Path(config), dvae, min_duration, max_duration, device)
    try:
        items, problems = read_inputs(Path(input_path), speaker=speaker, language=language)
    except InputError as exc:
        raise PreprocessError(str(exc)) from None
    skipped = [Skipped("", p.where, f"bad input: {p.reason}") for p in problems]
    items = _screen_texts(items, skipped)

    done = _load_done(out)
    finished = {item.stem: done[item.stem] for item in items if _is_finished(item, done.get(item.stem), out)}
    todo = [item for item in items if item.stem not in finished]
    by_stem = {item.stem: item for item in items}
    resumed = len(finished)
    new = 0
    log_path = _done_log(out)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "a", encoding="utf-8") as log:
        for count, outcome in enumerate(run_items(todo, settings, workers), 1):
            item = by_stem[outcome.stem]
            if outcome.ok:
                record = {"id": item.id, "stem": item.stem, "audio": str(item.audio),
                          "signature": list(_audio_signature(item.audio) or ()), "duration": outcome.duration,
                          "frames": outcome.frames, "codes": outcome.codes}
                log.write(json.dumps(record, ensure_ascii=False) + "\n")
                log.flush()
                finished[item.stem] = record
                new += 1
            else:
                skipped.append(Skipped(item.id, str(item.audio), outcome.reason))
            if progress is not None:
                progress(count, len(todo))
        os.fsync(log.fileno())

    report = _write_manifest(out, items, finished, skipped)
    report.new, report.resumed = new, resumed
    report.elapsed_s = round(time.perf_counter() - started, 2)
    atomic_write_text(out / "preprocess_report.json", json.dumps(report.to_json(), ensure_ascii=False, indent=1) + "\n")
    return report


def _settings(out: Path, config: Path, dvae: str | Path | None, min_duration: float, max_duration: float | None,
              device: str) -> WorkerSettings:
    from data_tools.config import ConfigError, load_config
    from networks import indextts15
    from networks.dvae import DVAEError
    from networks.generation_rule import generation_id

    try:
        cfg = load_config(config)
    except ConfigError as exc:
        raise PreprocessError(str(exc)) from None
    vqvae = cfg.get("vqvae")
    if not isinstance(vqvae, dict):
        raise PreprocessError(f"{config}: no 'vqvae:' section (the DVAE's settings)")
    if dvae is None:
        if not cfg.get("dvae_checkpoint"):
            raise PreprocessError(f"no --dvae given and {config} names no dvae_checkpoint")
        dvae = config.parent / str(cfg["dvae_checkpoint"])
    try:
        indextts15.load_dvae(dvae, vqvae)  # fail fast, in one line, before any worker starts
    except DVAEError as exc:
        raise PreprocessError(str(exc)) from None
    if min_duration < 0 or (max_duration is not None and max_duration <= min_duration):
        raise PreprocessError("need 0 <= --min-duration < --max-duration")
    max_codes = int(cfg["gpt"]["max_mel_tokens"])
    model_limit = longest_seconds(max_codes, generation_id(cfg))  # the rule the ingest slicer cuts clips to
    return WorkerSettings(out_dir=str(out), dvae=str(dvae), vqvae=dict(vqvae), device=device,
                          min_duration=float(min_duration),
                          max_duration=min(float(max_duration), model_limit) if max_duration else model_limit,
                          max_codes=max_codes, threads=None)


def _screen_texts(items: list[SourceItem], skipped: list[Skipped]) -> list[SourceItem]:
    """Drop items whose transcript the text front-end reduces to nothing."""
    from data_tools.text import normalize_text

    kept = []
    for item in items:
        if normalize_text(item.text, item.language):
            kept.append(item)
        else:
            skipped.append(Skipped(item.id, item.where, "empty text: nothing left after the text front-end"))
    return kept


def _write_manifest(out: Path, items: list[SourceItem], finished: dict[str, dict],
                    skipped: list[Skipped]) -> PreprocessReport:
    """manifest.jsonl in input order; each prompt is the next finished utterance of the same speaker."""
    ready = [item for item in items if item.stem in finished]
    by_speaker: dict[str, list[SourceItem]] = {}
    for item in ready:
        by_speaker.setdefault(item.speaker, []).append(item)
    prompt: dict[str, str] = {}
    for group in by_speaker.values():
        for k, item in enumerate(group):
            prompt[item.stem] = group[(k + 1) % len(group)].stem
    lines = []
    seconds = 0.0
    for item in ready:
        record = finished[item.stem]
        entry = {"id": item.id, "text": item.text, "codes": f"codes/{item.stem}.npy",
                 "cond_mel": f"cond_mels/{prompt[item.stem]}.npy", "speaker": item.speaker}
        if item.language:
            entry["language"] = item.language
        if item.source:  # the recording it was cut from: a split keeps every clip of it on one side
            entry["source"] = item.source
        entry["duration"] = round(float(record["duration"]), 3)
        seconds += float(record["duration"])
        lines.append(json.dumps(entry, ensure_ascii=False))
    manifest = out / "manifest.jsonl"
    atomic_write_text(manifest, "".join(line + "\n" for line in lines))
    own = sorted(speaker for speaker, group in by_speaker.items() if len(group) == 1)
    return PreprocessReport(manifest=str(manifest), entries=len(lines), new=0, resumed=0, skipped=skipped,
                            own_prompt_speakers=own, hours=round(seconds / 3600, 4))


# ---------------------------------------------------------------------------------------------
# CLI


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrorParser(prog="python -m data_tools.preprocess",
                                description="Audio + transcripts -> DVAE codes, conditioning mels and a codes manifest.")
    parser.add_argument("--input", required=True, type=Path,
                        help="JSONL list ({audio, text, speaker?, id?}), metadata.csv, or a folder of audio + .txt")
    parser.add_argument("--out-dir", required=True, type=Path, help="output folder (resumable)")
    parser.add_argument("--config", required=True, type=Path, help="IndexTTS config.yaml (vqvae and gpt sections)")
    parser.add_argument("--dvae", type=Path, help="dvae.pth (default: the config's dvae_checkpoint beside it)")
    parser.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 1) - 1), help="worker processes")
    parser.add_argument("--min-duration", type=float, default=0.5, help="skip shorter audio (seconds, 0.5)")
    parser.add_argument("--max-duration", type=float, default=None,
                        help="skip longer audio (seconds; default and upper bound: what gpt.max_mel_tokens fits)")
    parser.add_argument("--language", help="language of the transcripts, e.g. am (written to the manifest)")
    parser.add_argument("--speaker", help="speaker name for entries that name none (default: the input's name)")
    parser.add_argument("--device", default="cpu", help="torch device for the DVAE (cpu, cuda)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.workers < 1:
        return usage_error("--workers must be >= 1")

    def run() -> int:
        with progress_bar(args.quiet, "preparing", unit="item") as progress:
            report = preprocess(args.input, args.out_dir, args.config, args.dvae, workers=args.workers,
                                min_duration=args.min_duration, max_duration=args.max_duration,
                                language=args.language, speaker=args.speaker, device=args.device, progress=progress)
        print(report.summary())
        print(summary_line(report.entries, report.skipped_by_reason), flush=True)
        if report.entries == 0:
            print("error: no item could be prepared (see the reasons above)", file=sys.stderr)
            return 1
        return 0

    try:
        return run_refusing(run, (PreprocessError,), writing=args.out_dir)
    except KeyboardInterrupt:
        print("interrupted: finished items are kept; rerun the same command to resume", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
