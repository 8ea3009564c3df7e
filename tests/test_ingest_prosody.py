"""Clips that train prosody: long multi-sentence clips cut only at sentence ends, inner pauses capped, and one
loudness gain over the whole dataset (loud and soft clips keep their difference)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import soundfile as sf

from data_tools.ingest.clips import read_jsonl
from data_tools.ingest.loudness import integrated_loudness
from data_tools.ingest.pipeline import IngestSettings, run_ingest
from data_tools.ingest.slicing import SliceSettings
from tests.ingest_factory import EnergyVad, tone_recording, write_srt

LONG = SliceSettings(aim_min=10.0, aim_max=15.0, long_clips=True, max_inner_pause=0.4)


def _longest_silence(audio: np.ndarray, rate: int) -> float:
    frame = int(0.02 * rate)
    quiet = np.sqrt(np.mean(audio[: len(audio) // frame * frame].reshape(-1, frame) ** 2, axis=1)) < 0.003
    longest = length = 0
    for q in quiet:
        length = length + 1 if q else 0
        longest = max(longest, length)
    return longest * 0.02


def test_long_clips_join_sentences_cut_only_at_pauses_and_cap_inner_pauses(tmp_path: Path) -> None:
    rec = tone_recording(tmp_path / "in" / "talk.wav", [2.5, 3.0, 2.0, 2.8, 2.2, 3.1, 2.4, 2.6, 2.9, 2.3],
                         [0.9, 1.4, 0.7], seed=4)
    run_ingest(IngestSettings(tmp_path / "in", tmp_path / "out", slicing=LONG), vad_model=EnergyVad())
    rows = read_jsonl(tmp_path / "out" / "clips.jsonl")
    starts = [s for s, _, _ in rec.sentences]
    ends = [e for _, e, _ in rec.sentences]
    assert len(rows) >= 2
    for k, row in enumerate(rows):
        assert row["end"] - row["start"] <= 15.0 and (row["end"] - row["start"] >= 10.0 or k == len(rows) - 1), row
        assert min(abs(row["speech_start"] - s) for s in starts) < 0.1  # cut at sentence edges only
        assert min(abs(row["speech_end"] - e) for e in ends) < 0.1
        audio, rate = sf.read(str(tmp_path / "out" / row["audio"]), dtype="float32")
        inner = _longest_silence(audio[int(0.3 * rate):-int(0.3 * rate)], rate)
        assert inner <= 0.45, row["id"]  # the 0.7-1.4 s pauses inside are 0.4 s now
        assert row["seconds"] < row["end"] - row["start"] - 0.25  # shorter than the span it covers


def test_long_subtitled_clips_end_at_sentence_final_cues(tmp_path: Path) -> None:
    rec = tone_recording(tmp_path / "in" / "talk.wav", [1.8] * 9, [0.6], seed=2)
    texts = ["ሰላም", "ለዓለም።", "እንዴት", "ናችሁ", "ዛሬ", "ጥሩ", "ቀን", "ነው።", "ደህና ሁኑ።"]
    write_srt(tmp_path / "in" / "talk.srt", [(s, e, t) for (s, e, _), t in zip(rec.sentences, texts, strict=True)])
    run_ingest(IngestSettings(tmp_path / "in", tmp_path / "out", slicing=LONG), vad_model=EnergyVad())
    got = [r["given_text"] for r in read_jsonl(tmp_path / "out" / "clips.jsonl")]
    assert all(text.endswith("።") for text in got), got
    assert " ".join(got) == " ".join(texts)


def test_dataset_loudness_keeps_loud_and_soft_apart(tmp_path: Path) -> None:
    loud = tone_recording(tmp_path / "in" / "loud.wav", [3.0], [1.0], seed=1)
    audio, rate = sf.read(str(loud.path), dtype="float32")
    sf.write(str(tmp_path / "in" / "soft.wav"), audio * 0.25, rate, subtype="PCM_16")  # 12 dB softer

    def levels(out: str) -> dict[str, float]:
        rows = read_jsonl(tmp_path / out / "clips.jsonl")
        return {r["source"]: integrated_loudness(sf.read(str(tmp_path / out / r["audio"]), dtype="float32")[0],
                                                 rate) for r in rows}

    run_ingest(IngestSettings(tmp_path / "in", tmp_path / "per_clip"), vad_model=EnergyVad())
    per_clip = levels("per_clip")
    assert abs(per_clip["loud"] - per_clip["soft"]) < 0.5 and abs(per_clip["loud"] + 20) < 0.5
    settings = IngestSettings(tmp_path / "in", tmp_path / "dataset", loudness_scope="dataset")
    run_ingest(settings, vad_model=EnergyVad())
    dataset = levels("dataset")
    assert abs((dataset["loud"] - dataset["soft"]) - 12.04) < 0.5
    power = np.mean([10 ** (v / 10) for v in dataset.values()])
    assert abs(10 * np.log10(power) + 20) < 0.5  # the dataset as a whole at -20 LUFS
    files = {p.name: p.read_bytes() for p in (tmp_path / "dataset" / "clips").rglob("*.wav")}
    run_ingest(settings, vad_model=EnergyVad())
    assert {p.name: p.read_bytes() for p in (tmp_path / "dataset" / "clips").rglob("*.wav")} == files
