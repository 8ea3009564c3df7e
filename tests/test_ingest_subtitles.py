"""Subtitled recordings: exactly their cues become clips, with their texts and edges moved onto the speech."""

from __future__ import annotations

from pathlib import Path

import pytest

from data_tools.ingest.clips import read_jsonl
from data_tools.ingest.pipeline import IngestSettings, run_ingest
from data_tools.ingest.subtitles import Cue, SubtitleError, merge_repeats, read_cues
from tests.conftest import require_tool
from tests.ingest_factory import EnergyVad, amharic_sentences, build_recording, write_srt, write_vtt


@pytest.fixture(scope="module")
def spoken(tmp_path_factory: pytest.TempPathFactory):
    espeak = require_tool("espeak-ng", "speaks the Amharic sentences of the subtitle test")
    folder = tmp_path_factory.mktemp("subs")
    return build_recording(espeak, folder / "talk.wav", amharic_sentences(5, start=3), [0.8, 1.1, 0.9])


def _off_cues(rec) -> list[tuple[float, float, str]]:
    """The truth, each edge moved 0.1-0.35 s away (as subtitles are timed by hand)."""
    offsets = [(-0.3, 0.2), (0.15, -0.25), (-0.1, 0.35), (0.25, 0.1), (-0.35, -0.15)]
    return [(s + a, e + b, t) for (s, e, t), (a, b) in zip(rec.sentences, offsets, strict=True)]


@pytest.mark.parametrize("kind", ["srt", "vtt"])
def test_cues_become_clips_with_refined_edges(tmp_path: Path, spoken, kind: str) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "talk.wav").write_bytes(spoken.path.read_bytes())
    (write_srt if kind == "srt" else write_vtt)(folder / f"talk.{kind}", _off_cues(spoken))
    summary = run_ingest(IngestSettings(folder, tmp_path / "out", language="am"))
    rows = read_jsonl(tmp_path / "out" / "clips.jsonl")
    assert summary.problems == []
    assert [row["given_text"] for row in rows] == [text for _, _, text in spoken.sentences]
    assert all(row["given_kind"] == "subtitle" and row["text"] == row["given_text"] for row in rows)
    for row, (start, end, _) in zip(rows, spoken.sentences, strict=True):
        assert abs(row["speech_start"] - start) <= 0.15 and abs(row["speech_end"] - end) <= 0.15, (row, start, end)
        assert row["start"] <= row["speech_start"] and row["end"] >= row["speech_end"]  # padded


def test_legacy_encoding_is_refused_in_one_line_and_read_when_named(tmp_path: Path) -> None:
    path = tmp_path / "old.srt"
    write_srt(path, [(1.0, 2.0, "café crème"), (3.0, 4.0, "déjà vu")], encoding="cp1252")
    with pytest.raises(SubtitleError, match=r"old\.srt: not UTF-8 .*--subtitle-encoding") as error:
        read_cues(path)
    assert "\n" not in str(error.value)
    assert [c.text for c in read_cues(path, "cp1252")] == ["café crème", "déjà vu"]


@pytest.mark.parametrize("content, message", [
    ("1\nnot a time\nhello\n", "broken SRT"),
    ("1\n00:00:01,000 --> 00:00:0x,000\nhello\n", "cue 1: broken SRT timestamp"),
    ("1\n00:00:01,000 --> 00:00:02,000\nhello\n\n2\n00:0a:01,000 --> 00:00:02,000\nx\n", "cue 1: broken SRT timestamp"),
    ("1\n00:00:03,000 --> 00:00:02,000\nhello\n", "cue 1: ends"),
    ("1\n00:00:01,000 --> 00:00:03,000\nhello\n\n2\n00:00:02,000 --> 00:00:04,000\nworld\n", "overlapping"),
])
def test_broken_or_overlapping_timestamps_are_refused_by_cue(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.srt"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(SubtitleError, match=message) as error:
        read_cues(path)
    assert str(path) in str(error.value)


def test_broken_vtt_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "bad.vtt"
    path.write_text("WEBVTT\n\n00:01.000 --> 00:0x.000\nhello\n", encoding="utf-8")
    with pytest.raises(SubtitleError, match="broken WebVTT"):
        read_cues(path)


def test_rolling_captions_are_merged() -> None:
    cues = [Cue(0.0, 2.0, "ሰላም ለዓለም", "c1"), Cue(2.0, 4.0, "ሰላም ለዓለም\nእንዴት ናችሁ", "c2"),
            Cue(4.0, 5.0, "እንዴት ናችሁ", "c3"), Cue(6.0, 8.0, "ደህና ሁኑ", "c4")]
    merged = merge_repeats(cues)
    assert [(c.start, c.end, c.text) for c in merged] == [(0.0, 2.0, "ሰላም ለዓለም"), (2.0, 5.0, "እንዴት ናችሁ"),
                                                          (6.0, 8.0, "ደህና ሁኑ")]


def test_a_bad_subtitle_file_leaves_its_recording_out_and_the_others_go_on(tmp_path: Path) -> None:
    from tests.ingest_factory import tone_recording

    folder = tmp_path / "in"
    good = tone_recording(folder / "good.wav", [2.0, 2.5], [1.0])
    tone_recording(folder / "bad.wav", [2.0], [1.0])
    (folder / "bad.srt").write_text("1\n00:00:01,000 --> 00:00:0x,000\nhello\n", encoding="utf-8")
    write_srt(folder / "good.srt", [(s, e, f"line {k}") for k, (s, e, _) in enumerate(good.sentences)])
    summary = run_ingest(IngestSettings(folder, tmp_path / "out"), vad_model=EnergyVad())
    assert len(summary.problems) == 1 and summary.problems[0].endswith("bad.srt cue 1: broken SRT timestamp line")
    assert summary.clips == 2
    again = run_ingest(IngestSettings(folder, tmp_path / "out"), vad_model=EnergyVad())
    assert again.sources_done_before == 1 and len(again.problems) == 1  # the bad one is tried again, not lost


def test_refined_cues_never_overlap() -> None:
    from data_tools.ingest.subtitles import refine

    cues = [Cue(1.0, 2.1, "a", "c1"), Cue(1.5, 3.0, "b", "c2")]  # c2 would snap back to 1.05
    refined = refine(cues, [(1.05, 1.95), (2.0, 2.9)], snap=0.5)
    assert refined[0][1] <= refined[1][0] and [r[2] for r in refined] == ["a", "b"]
