"""Hostile folders: no single file stops an import or fools it. Each bad file gives one problem line naming it,
and every other file's clips are exactly those of a run without the bad files."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from data_tools.ingest.clips import read_jsonl
from data_tools.ingest.pipeline import IngestSettings, run_ingest
from tests.ingest_factory import EnergyVad, encode_media, tone_recording, tone_speech, write_srt


def _good_files(folder: Path) -> None:
    first = tone_recording(folder / "good.wav", [2.0, 2.5], [1.0])
    write_srt(folder / "good.srt", [(s, e, f"line {k}") for k, (s, e, _) in enumerate(first.sentences)])
    tone_recording(folder / "plain.wav", [2.2, 1.8, 2.4], [1.2], seed=3)
    encode_media(folder / "film.mp4", np.concatenate([np.zeros(12000, np.float32), tone_speech(2.5, 24000, 5),
                                                     np.zeros(24000, np.float32), tone_speech(2.0, 24000, 6),
                                                     np.zeros(12000, np.float32)]), 24000, video_seconds=1.0)


def _clips(out: Path, sources: set[str]) -> list[tuple]:
    return [(r["id"], r["audio_sha1"], r["start"], r["end"], r.get("given_text"))
            for r in read_jsonl(out / "clips.jsonl") if r["source"] in sources]


HOSTILE = {  # file -> what its one problem line must say
    "late.srt": "after the end of its audio",
    "backwards.srt": "before it starts",
    "blank.srt": "no cues in it",
    "caf\\xe9.wav": "not valid UTF-8",
    "cut.wav": "truncated: its header declares 50.0 s, the file holds 20.0 s",
    "zero.mp4": "empty file (0 bytes)",
    "silent_film.mp4": "no audio stream in it (it holds video only)",
}


def _hostile_files(folder: Path) -> None:
    late = tone_recording(folder / "late.wav", [2.0], [1.0], seed=7)
    write_srt(folder / "late.srt", [(*late.sentences[0][:2], "fine"), (60.0, 62.0, "after the end")])
    tone_recording(folder / "backwards.wav", [2.0], [1.0], seed=8)
    (folder / "backwards.srt").write_text("1\n00:00:02,000 --> 00:00:01,000\nbackwards\n", encoding="utf-8")
    tone_recording(folder / "blank.wav", [2.0], [1.0], seed=9)
    (folder / "blank.srt").write_bytes(b"")
    latin1 = os.fsencode(folder) + b"/caf\xe9.wav"
    shutil.copyfile(folder / "plain.wav", latin1)
    speech = [np.concatenate([tone_speech(3.0, 16000, 10 + k), np.zeros(16000 * 2, np.float32)]) for k in range(10)]
    sf.write(str(folder / "whole.wav"), np.concatenate(speech), 16000, subtype="PCM_16")  # 50 s
    data = (folder / "whole.wav").read_bytes()
    assert len(data) - 44 == 50 * 16000 * 2
    (folder / "cut.wav").write_bytes(data[:44 + 20 * 16000 * 2])
    (folder / "whole.wav").unlink()
    (folder / "zero.mp4").write_bytes(b"")
    encode_media(folder / "silent_film.mp4", None, 24000, video_seconds=1.0)


def test_hostile_files_are_one_line_each_and_the_others_are_untouched(tmp_path: Path) -> None:
    clean, hostile = tmp_path / "clean", tmp_path / "hostile"
    _good_files(clean)
    shutil.copytree(clean, hostile)
    _hostile_files(hostile)
    baseline = run_ingest(IngestSettings(clean, tmp_path / "out_clean"), vad_model=EnergyVad())
    assert baseline.problems == [] and baseline.clips == 7  # 2 cues + 3 pieces + 2 from the film's audio track

    summary = run_ingest(IngestSettings(hostile, tmp_path / "out_hostile"), vad_model=EnergyVad())
    for name, reason in HOSTILE.items():
        lines = [line for line in summary.problems if name in line]
        assert len(lines) == 1 and reason in lines[0], (name, summary.problems)
    assert len(summary.problems) == len(HOSTILE), summary.problems
    good = {"good", "plain", "film"}
    assert _clips(tmp_path / "out_hostile", good) == _clips(tmp_path / "out_clean", good)
    saved = (tmp_path / "out_hostile" / "problems.jsonl").read_text(encoding="utf-8")
    assert "caf\\\\xe9.wav" in saved  # written as text, never the undecodable bytes
    sources = {r["source"] for r in read_jsonl(tmp_path / "out_hostile" / "clips.jsonl")}
    assert sources == good | {"cut"}  # a truncated file's present part is still used, and said so
    assert not list((tmp_path / "out_hostile" / "decoded").glob("*"))  # decoded audio dropped once sliced


@pytest.mark.parametrize("suffix", [".mkv", ".webm", ".m4a", ".opus"])
def test_containers_are_decoded_with_pyav(tmp_path: Path, suffix: str) -> None:
    audio = np.concatenate([np.zeros(12000, np.float32), tone_speech(2.0, 24000, 1), np.zeros(24000, np.float32),
                            tone_speech(2.5, 24000, 2), np.zeros(12000, np.float32)])
    encode_media(tmp_path / "in" / f"talk{suffix}", audio, 24000)
    (tmp_path / "wav").mkdir()
    sf.write(str(tmp_path / "wav" / "talk.wav"), audio, 24000)
    summary = run_ingest(IngestSettings(tmp_path / "in", tmp_path / "out"), vad_model=EnergyVad())
    run_ingest(IngestSettings(tmp_path / "wav", tmp_path / "out_wav"), vad_model=EnergyVad())
    rows, truth = (read_jsonl(tmp_path / name / "clips.jsonl") for name in ("out", "out_wav"))
    assert summary.problems == [] and len(rows) == len(truth) == 2
    for row, same in zip(rows, truth, strict=True):  # the decoded track slices as the same audio in a WAV
        assert abs(row["speech_start"] - same["speech_start"]) < 0.05, (row, same, suffix)
        assert abs(row["speech_end"] - same["speech_end"]) < 0.05, (row, same, suffix)


def test_a_media_decoding_that_fails_midway_leaves_no_partial_file(tmp_path: Path) -> None:
    from data_tools.ingest.media import decode_to_flac
    from data_tools.ingest.sources import SourceError

    film = encode_media(tmp_path / "film.mkv", tone_speech(3.0, 24000), 24000)
    data = film.read_bytes()
    film.write_bytes(data[:200])
    with pytest.raises(SourceError, match=r"film\.mkv"):
        decode_to_flac(film, tmp_path / "d" / "film.flac")
    assert not (tmp_path / "d" / "film.flac").exists() and not list((tmp_path / "d").glob(".*.tmp"))
