"""Speaker embeddings and cosine similarity through the real loading path: a tiny WavLMForXVector folder."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from data_tools.audio import resample
from data_tools.speaker_similarity import SpeakerModelError, load_speaker_model
from tests.speech_model_factory import SAMPLE_RATE, build_ctc_model, build_xvector_model, noise_clips

pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_xvector_model(tmp_path_factory.mktemp("sv") / "xvector")


@pytest.fixture(scope="module")
def embedder(folder):
    return load_speaker_model(str(folder), device="cpu")


def test_identical_audio_scores_one_and_different_audio_less(embedder):
    a, b = noise_clips([0.8, 0.8], seed=7)
    assert embedder.similarity(a, a.copy(), SAMPLE_RATE) == pytest.approx(1.0, abs=1e-5)
    assert embedder.similarity(a, b * np.linspace(0.2, 1.0, b.size, dtype=np.float32), SAMPLE_RATE) < 1.0 - 1e-4


def test_batched_equals_one_at_a_time(embedder):
    import torch

    clips = noise_clips([0.5, 1.2, 0.3, 0.9, 0.7], seed=8)
    batched = embedder.embed(clips, SAMPLE_RATE, batch_size=3)
    alone = torch.cat([embedder.embed([clip], SAMPLE_RATE) for clip in clips])
    assert batched.shape == (5, embedder.model.config.xvector_output_dim)
    assert batched.dtype == torch.float32 and batched.device.type == "cpu"
    torch.testing.assert_close(batched, alone, atol=1e-5, rtol=1e-4)
    assert embedder.embed([], SAMPLE_RATE).shape == (0, embedder.model.config.xvector_output_dim)


def test_resampled_to_the_extractor_rate(embedder):
    import torch

    clip = noise_clips([0.6], seed=9, sample_rate=22_050)[0]
    torch.testing.assert_close(embedder.embed([clip], 22_050),
                               embedder.embed([resample(clip, 22_050, SAMPLE_RATE)], SAMPLE_RATE))


def test_bad_input_refused_in_one_line(embedder):
    with pytest.raises(SpeakerModelError, match=r"^clip 0: 0.010 s is too short to embed a speaker"):
        embedder.embed([np.zeros(160, np.float32)], SAMPLE_RATE)
    with pytest.raises(SpeakerModelError, match=r"^clip 1: expected mono samples"):
        embedder.similarity(np.zeros(8000, np.float32), np.zeros((8000, 2), np.float32), SAMPLE_RATE)


def test_folder_that_is_not_an_xvector_model_refused(tmp_path):
    ctc = build_ctc_model(tmp_path / "ctc")
    with pytest.raises(SpeakerModelError) as error:
        load_speaker_model(str(ctc))
    message = str(error.value)
    assert message == (f"{ctc}: a Wav2Vec2ForCTC model, not a speaker-verification (x-vector) model "
                       "(needs a *ForXVector model)")
    with pytest.raises(SpeakerModelError, match="no such model folder"):
        load_speaker_model(str(tmp_path / "missing"))
    with pytest.raises(SpeakerModelError, match=r"no config\.json"):
        load_speaker_model(str(tmp_path))
