"""Slicing: espeak-ng Amharic sentences with known silences -> clips whose edges fall on the sentence edges."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from data_tools.ingest.slicing import SliceSettings, plan_vad_spans
from data_tools.ingest.sources import audio_info, stream_blocks
from data_tools.ingest.vad import FRAME_SECONDS, StreamingVad, load_vad, speech_probabilities
from tests.conftest import require_tool
from tests.ingest_factory import EnergyVad, amharic_sentences, build_recording, tone_recording

TOLERANCE = 0.150


@pytest.fixture(scope="module")
def silero():
    return load_vad()


def _near(times: list[float], truth: list[float]) -> float:
    return float(np.mean([min(abs(t - edge) for edge in truth) <= TOLERANCE for t in times]))


def test_load_vad_keeps_torch_thread_count() -> None:
    before = torch.get_num_threads()
    load_vad()
    assert torch.get_num_threads() == before


class _ThreadSpy(EnergyVad):
    """Records torch's thread count at each per-frame call."""

    def __init__(self) -> None:
        super().__init__()
        self.threads: set[int] = set()

    def __call__(self, frame, rate: int) -> float:
        self.threads.add(torch.get_num_threads())
        return super().__call__(frame, rate)


def test_the_per_frame_model_runs_at_one_thread_and_the_setting_is_restored() -> None:
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        spy = _ThreadSpy()
        probs = speech_probabilities(spy, [np.zeros(48000, np.float32)] * 3, 48000)
        assert len(probs) == 3 * 48000 // 3 // 512 + 1 and spy.threads == {1}
        assert torch.get_num_threads() == 2
        with pytest.raises(RuntimeError):  # restored even when the model fails mid-file
            StreamingVad(_Failing(), 16000).feed(np.zeros(4096, np.float32))
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


class _Failing(EnergyVad):
    def __call__(self, frame, rate: int) -> float:
        raise RuntimeError("broken model")


def test_espeak_sentences_cut_at_their_boundaries(tmp_path: Path, silero) -> None:
    espeak = require_tool("espeak-ng", "speaks the Amharic sentences of the slicing test")
    texts = amharic_sentences(14, start=20)
    # sentences 0-5 apart (0.6-1.2 s of silence); 6-13 one passage with 0.3 s breaths, longer than aim-max
    gaps = [0.6, 1.2, 0.8, 0.9, 0.7, 1.0, 0.3, 0.35, 0.3, 0.4, 0.3, 0.35, 0.3, 0.8]
    rec = build_recording(espeak, tmp_path / "long.wav", texts, gaps)
    info = audio_info(rec.path)
    settings = SliceSettings()
    probs = speech_probabilities(silero, stream_blocks(rec.path, block_seconds=4.0), info.rate)
    spans, left_out = plan_vad_spans(probs, info.seconds, settings)

    assert not left_out
    assert all(settings.min_seconds <= span.seconds <= settings.max_seconds for span in spans), spans
    passage = rec.sentences[6][0], rec.sentences[13][1]
    assert passage[1] - passage[0] > settings.aim_max  # so the passage had to be cut at its pauses
    assert sum(1 for s in spans if passage[0] - 0.5 < s.speech_start < passage[1]) >= 2
    clip_edges = [t for span in spans for t in (span.speech_start, span.speech_end)]
    assert _near(clip_edges, rec.edges) >= 0.95, (clip_edges, rec.edges)  # every cut is at a sentence edge
    separated = [t for k, (start, end, _) in enumerate(rec.sentences)
                 for t, gap in ((start, gaps[k - 1] if k else 1.0), (end, gaps[k])) if gap >= 0.6]
    assert _near(separated, clip_edges) >= 0.95  # every long silence ends a clip


def test_streamed_probabilities_equal_whole_file(tmp_path: Path) -> None:
    rec = tone_recording(tmp_path / "a.wav", [2.0, 3.0], [1.0], rate=44100)
    info = audio_info(rec.path)
    whole = speech_probabilities(EnergyVad(), stream_blocks(rec.path, block_seconds=100), info.rate)
    pieces = speech_probabilities(EnergyVad(), stream_blocks(rec.path, block_seconds=0.37), info.rate)
    assert len(whole) == len(pieces) == int(np.ceil(info.seconds / FRAME_SECONDS)) or abs(len(whole) - len(pieces)) <= 1
    assert np.array_equal(whole[:len(pieces)], pieces[:len(whole)])


def test_long_speech_cut_at_longest_pause_recursively() -> None:
    # 40 s of speech with pauses of 0.2 s at 10 s and 30 s and 0.35 s at 20 s; nothing else
    probs = np.ones(int(45 / FRAME_SECONDS), dtype=np.float32)
    probs[: int(2 / FRAME_SECONDS)] = 0
    probs[int(42 / FRAME_SECONDS):] = 0
    for at, length in ((12.0, 0.2), (22.0, 0.35), (32.0, 0.2)):
        probs[int(at / FRAME_SECONDS): int((at + length) / FRAME_SECONDS)] = 0
    spans, _ = plan_vad_spans(probs, 45.0, SliceSettings())
    cuts = [round(s.speech_start) for s in spans]
    assert cuts == [2, 12, 22, 32]
    assert all(s.seconds <= 15 for s in spans)


def test_speech_without_pauses_is_cut_anyway_and_fragments_are_counted() -> None:
    probs = np.zeros(int(60 / FRAME_SECONDS), dtype=np.float32)
    probs[int(1 / FRAME_SECONDS): int(41 / FRAME_SECONDS)] = 0.9  # 40 s, no pause
    probs[int(50 / FRAME_SECONDS): int(50.4 / FRAME_SECONDS)] = 0.9  # a cough
    spans, left_out = plan_vad_spans(probs, 60.0, SliceSettings())
    assert all(1.0 <= s.seconds <= 15.0 for s in spans) and len(spans) >= 3
    assert len(left_out) == 1 and abs(left_out[0][0] - 50.0) < 0.1


def test_streaming_vad_state_carries_across_blocks() -> None:
    vad = StreamingVad(EnergyVad(), 16000)
    vad.feed(np.full(700, 0.5, dtype=np.float32))
    vad.feed(np.zeros(400, dtype=np.float32))
    assert list(vad.finish()) == [1.0, 1.0, 0.0]  # 1100 samples -> frames of 512: loud, mixed, silent tail


def test_settings_refuse_inconsistent_lengths() -> None:
    with pytest.raises(ValueError, match="aim-min"):
        SliceSettings(aim_min=0.5).check()
