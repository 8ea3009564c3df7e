"""Import: folders (speaker by level), LJSpeech metadata (speaker by column), formats, streaming memory."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import numpy as np
import soundfile as sf

from data_tools.ingest.clips import read_jsonl
from data_tools.ingest.pipeline import IngestSettings, run_ingest
from data_tools.ingest.sources import clip_rate, find_sources, stream_blocks
from data_tools.ingest.vad import StreamingVad
from tests.ingest_factory import EnergyVad, FakeAsr, tone_recording, tone_speech, write_srt


def test_folder_speaker_from_a_level_or_a_name(tmp_path: Path) -> None:
    for who in ("ann", "bob"):
        tone_recording(tmp_path / "studio" / who / "day1" / "take.wav", [2.0], [1.0])
    sources, problems = find_sources(tmp_path, speaker_level=2)
    assert not problems and [s.speaker for s in sources] == ["ann", "bob"]
    assert [s.id for s in sources] == ["studio_ann_day1_take", "studio_bob_day1_take"]
    assert {s.speaker for s in find_sources(tmp_path, speaker="eve")[0]} == {"eve"}
    assert {s.speaker for s in find_sources(tmp_path, speaker_level=5)[0]} == {tmp_path.name}


def test_ljspeech_metadata_with_a_speaker_column(tmp_path: Path) -> None:
    wavs = tmp_path / "corpus" / "wavs"
    wavs.mkdir(parents=True)
    for k in range(3):
        sf.write(str(wavs / f"u{k}.wav"), np.concatenate([np.zeros(3000, np.float32), tone_speech(2.0, 22050, k)]),
                 22050)
    (tmp_path / "corpus" / "metadata.csv").write_text(
        "u0|ሰላም ለዓለም እንዴት ናችሁ|x|ann\nu1|ጤና ይስጥልኝ ዛሬ ጥሩ ቀን|x|bob\nu2|broken line without speaker\n",
        encoding="utf-8")
    sources, problems = find_sources(tmp_path / "corpus", speaker_column=3)
    assert [(s.id, s.speaker, s.kind) for s in sources] == [("u0", "ann", "transcribed"), ("u1", "bob", "transcribed")]
    assert len(problems) == 1 and problems[0].where.endswith("metadata.csv:3")
    summary = run_ingest(IngestSettings(tmp_path / "corpus" / "metadata.csv", tmp_path / "out", language="am",
                                        speaker_column=3))
    rows = read_jsonl(tmp_path / "out" / "clips.jsonl")
    assert summary.clips == 2 and [r["audio"] for r in rows] == ["clips/ann/u0.wav", "clips/bob/u1.wav"]
    assert all(r["text"] == r["given_text"] and not r["reasons"] for r in rows)


def test_ogg_and_mp3_are_sliced_and_clips_are_16_bit_mono(tmp_path: Path) -> None:
    rec = tone_recording(tmp_path / "src.wav", [2.0, 2.5], [1.0], rate=44100)
    audio, rate = sf.read(str(rec.path), dtype="float32")
    stereo = np.stack([audio, audio * 0.5], axis=1)
    (tmp_path / "in").mkdir()
    sf.write(str(tmp_path / "in" / "a.ogg"), stereo, rate, format="OGG", subtype="VORBIS")
    sf.write(str(tmp_path / "in" / "b.mp3"), stereo, rate, format="MP3")
    summary = run_ingest(IngestSettings(tmp_path / "in", tmp_path / "out"), vad_model=EnergyVad())
    assert summary.problems == [] and summary.clips == 4
    for row in read_jsonl(tmp_path / "out" / "clips.jsonl"):
        info = sf.info(str(tmp_path / "out" / row["audio"]))
        assert (info.channels, info.samplerate, info.subtype) == (1, 44100, "PCM_16")


def test_subtitled_clips_keep_their_text_and_get_the_asr_text_beside(tmp_path: Path) -> None:
    rec = tone_recording(tmp_path / "in" / "talk.wav", [2.0, 2.5], [1.0])
    write_srt(tmp_path / "in" / "talk.srt", [(s, e, f"ሰላም ቁጥር {k}") for k, (s, e, _) in enumerate(rec.sentences)])
    tone_recording(tmp_path / "in" / "plain.wav", [2.0], [1.0], seed=4)
    run_ingest(IngestSettings(tmp_path / "in", tmp_path / "out", language="am"), transcriber=FakeAsr(),
               vad_model=EnergyVad())
    rows = {r["id"]: r for r in read_jsonl(tmp_path / "out" / "clips.jsonl")}
    subbed = [r for r in rows.values() if r["source"] == "talk"]
    assert [r["text"] for r in subbed] == ["ሰላም ቁጥር 0", "ሰላም ቁጥር 1"] and all(r["asr_text"] for r in subbed)
    plain = [r for r in rows.values() if r["source"] == "plain"]
    assert len(plain) == 1 and plain[0]["text"] == plain[0]["asr_text"] and plain[0]["confidence"] == 0.9
    asr = FakeAsr()
    run_ingest(IngestSettings(tmp_path / "in", tmp_path / "out", language="am"), transcriber=asr,
               vad_model=EnergyVad())
    assert asr.calls == 0  # a rerun transcribes nothing twice


def test_clip_rates() -> None:
    assert [clip_rate(r) for r in (16000, 22050, 37800, 44056, 48000, 96000)] == [22050, 22050, 44100, 44100,
                                                                                    48000, 48000]


def test_a_long_recording_is_streamed_in_bounded_memory(tmp_path: Path) -> None:
    rate, minutes = 48000, 4
    path = tmp_path / "long.wav"
    with sf.SoundFile(str(path), "w", samplerate=rate, channels=1, subtype="PCM_16") as handle:
        for k in range(minutes * 6):
            handle.write(np.concatenate([tone_speech(8.0, rate, k), np.zeros(2 * rate, np.float32)]))
    whole_file = minutes * 60 * rate * 4  # float32 samples of the whole recording
    tracemalloc.start()
    try:
        vad = StreamingVad(EnergyVad(), rate)
        for block in stream_blocks(path, block_seconds=10.0):
            vad.feed(block)
        probs = vad.finish()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(probs) > minutes * 60 * 30
    assert peak < whole_file / 4, (peak, whole_file)  # a 10 s block and its resampling, never the file
