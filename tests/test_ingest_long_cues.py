"""A subtitle cue longer than a clip may be: split at the pause inside it, its text split where a CTC
recogniser's forced alignment puts the words; without a recogniser it stays one clip, flagged as too long.
The Viterbi alignment itself is checked against emissions whose truth is known."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from data_tools.ingest.align import align_tokens, split_words, word_times
from data_tools.ingest.clips import read_jsonl
from data_tools.ingest.pipeline import IngestSettings, run_ingest
from data_tools.ingest.slicing import SliceSettings
from tests.ingest_factory import EnergyVad, tone_recording, write_srt

TEXT = "abc bad cab fig hij dead jade ice"
SLICING = SliceSettings(min_seconds=1.0, max_seconds=5.0, aim_min=2.0, aim_max=5.0)


def _emissions(truth: list[tuple[int, int, int]], frames: int, vocab: int = 8, blank: int = 0) -> np.ndarray:
    """Log-probabilities where token ``k`` is likely on frames ``[a, b]`` of each (k, a, b), blank elsewhere."""
    probs = np.full((frames, vocab), 0.02)
    probs[:, blank] = 0.9
    for token, first, last in truth:
        probs[first:last + 1, :] = 0.02
        probs[first:last + 1, token] = 0.9
    return np.log(probs / probs.sum(axis=1, keepdims=True))


def test_the_viterbi_path_finds_the_frames_each_token_was_spoken() -> None:
    truth = [(5, 2, 4), (6, 10, 12), (6, 15, 16), (7, 25, 27)]  # the repeated 6 needs the blank between
    spans = align_tokens(_emissions(truth, 32), [5, 6, 6, 7], blank=0)
    assert spans == [(first, last) for _, first, last in truth]
    assert align_tokens(_emissions([], 3), [5, 6, 6, 7], blank=0) is None  # too few frames for the tokens
    times = word_times(_emissions(truth, 32), [[5, 6], [], [6, 7]], blank=0, seconds_per_frame=0.02)
    assert times == [(0.04, 0.26), None, (0.30, 0.56)]
    assert split_words(["ab", "?", "cd"], times, [0.28]) == ["ab ?", "cd"]


def _long_cue(folder: Path) -> None:
    tone_recording(folder / "talk.wav", [3.0, 3.0], [1.0])  # speech 0.5-3.5 s and 4.5-7.5 s
    write_srt(folder / "talk.srt", [(0.4, 7.6, TEXT)])


def test_a_long_cue_is_split_at_its_pause_and_its_text_where_the_alignment_says(tmp_path: Path) -> None:
    from data_tools.asr import load_ctc_asr
    from tests.speech_model_factory import build_ctc_model

    _long_cue(tmp_path / "in")
    asr = load_ctc_asr(str(build_ctc_model(tmp_path / "ctc", seed=0)), device="cpu")
    summary = run_ingest(IngestSettings(tmp_path / "in", tmp_path / "out", slicing=SLICING), transcriber=asr,
                         vad_model=EnergyVad())
    rows = read_jsonl(tmp_path / "out" / "clips.jsonl")
    assert summary.clips == 2 and all(row["seconds"] <= SLICING.max_seconds for row in rows), rows
    first, second = rows
    assert 3.4 <= first["speech_end"] <= 3.6 and 4.4 <= second["speech_start"] <= 4.6  # cut in the pause
    assert not any(reason.startswith("duration") for row in rows for reason in row["reasons"])
    assert " ".join(row["given_text"] for row in rows) == TEXT and all(row["given_text"] for row in rows)

    audio, rate = sf.read(str(tmp_path / "in" / "talk.wav"), dtype="float32")  # the split the alignment gives
    start, end = first["speech_start"], second["speech_end"]
    log_probs, seconds_per_frame = asr.emissions(audio[round(start * rate):round(end * rate)], rate)
    tokens, delimiter = asr.word_tokens(TEXT)
    times = word_times(log_probs, tokens, asr.blank_id, seconds_per_frame, delimiter)
    cut = (first["speech_end"] + second["speech_start"]) / 2 - start
    assert [row["given_text"] for row in rows] == split_words(TEXT.split(), times, [cut])


@pytest.mark.parametrize("transcriber", [None, "fake"], ids=["no-recogniser", "cannot-align"])
def test_without_a_recogniser_that_aligns_a_long_cue_stays_one_flagged_clip(tmp_path: Path, transcriber) -> None:
    from tests.ingest_factory import FakeAsr

    _long_cue(tmp_path / "in")
    run_ingest(IngestSettings(tmp_path / "in", tmp_path / "out", slicing=SLICING),
               transcriber=FakeAsr() if transcriber else None, vad_model=EnergyVad())
    [row] = read_jsonl(tmp_path / "out" / "clips.jsonl")
    assert row["given_text"] == TEXT and row["seconds"] > SLICING.max_seconds
    assert any(reason.startswith("duration") for reason in row["reasons"])
