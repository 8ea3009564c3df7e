"""Speaker embeddings and cosine similarity through the real loading path: a tiny WavLMForXVector folder."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from data_tools.audio import resample
from data_tools.speaker_similarity import SpeakerModelError, load_speaker_model
from tests.speech_model_factory import SAMPLE_RATE, build_ctc_model, build_xvector_model, noise_clips

pytest.importorskip("transformers")
# WavLM's attention (inside transformers) mixes mask types; not this module's concern
pytestmark = pytest.mark.filterwarnings("ignore:Support for mismatched key_padding_mask:UserWarning")


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


def _assert_same_rows(a, b, tolerance: float = 1e-5) -> None:
    relative = ((a - b).norm(dim=1) / b.norm(dim=1)).max()
    assert relative < tolerance, f"rows differ by {relative:.2e} of their size"


def test_batched_equals_one_at_a_time(embedder):
    import torch

    # lengths far apart, so the short clips sit beside a lot of padding
    clips = noise_clips([0.5, 1.6, 0.25, 0.9, 0.7], seed=8)
    batched = embedder.embed(clips, SAMPLE_RATE, batch_size=3)
    alone = torch.cat([embedder.embed([clip], SAMPLE_RATE) for clip in clips])
    assert batched.shape == (5, embedder.model.config.xvector_output_dim)
    assert batched.dtype == torch.float32 and batched.device.type == "cpu"
    assert alone.norm(dim=1).min() > 0.1  # of order one, so the comparison below means something
    _assert_same_rows(batched, alone)
    assert embedder.embed([], SAMPLE_RATE).shape == (0, embedder.model.config.xvector_output_dim)


def test_single_clip_embedding_is_the_models_own(embedder):
    import torch

    clip = noise_clips([0.7], seed=10)[0]
    inputs = embedder.feature_extractor([clip], sampling_rate=SAMPLE_RATE, return_attention_mask=True,
                                        return_tensors="pt")
    with torch.no_grad():
        reference = embedder.model(**inputs).embeddings
    _assert_same_rows(embedder.embed([clip], SAMPLE_RATE), reference, 1e-6)


def test_transformers_batched_pooling_differs_which_is_why_ours_exists(embedder):
    import torch

    # guards the reason for running the head ourselves: if transformers ever counts dilated frames
    # correctly, this fails and xvector_embeddings can go back to model(**inputs).embeddings
    short, long = noise_clips([0.25, 1.6], seed=11)
    inputs = embedder.feature_extractor([long, short], sampling_rate=SAMPLE_RATE, padding=True,
                                        return_attention_mask=True, return_tensors="pt")
    with torch.no_grad():
        theirs = embedder.model(**inputs).embeddings[1:]
    alone = embedder.embed([short], SAMPLE_RATE)
    assert ((theirs - alone).norm() / alone.norm()) > 1e-4


def test_group_norm_models_embed_one_clip_at_a_time(tmp_path):
    import torch

    embedder = load_speaker_model(str(build_xvector_model(tmp_path / "group", feat_extract_norm="group")),
                                  device="cpu")
    assert not embedder.batches_exactly
    clips = noise_clips([0.5, 1.6, 0.25], seed=12)
    _assert_same_rows(embedder.embed(clips, SAMPLE_RATE, batch_size=3),
                      torch.cat([embedder.embed([clip], SAMPLE_RATE) for clip in clips]))


def test_resampled_to_the_extractor_rate(embedder):
    import torch

    clip = noise_clips([0.6], seed=9, sample_rate=22_050)[0]
    torch.testing.assert_close(embedder.embed([clip], 22_050),
                               embedder.embed([resample(clip, 22_050, SAMPLE_RATE)], SAMPLE_RATE))


def test_bad_input_refused_in_one_line(embedder):
    # 16 encoder frames (2 for a standard deviation + 14 the TDNN consumes): the tiny encoder's convolutions
    # (kernel 10 stride 5, kernel 8 stride 4, kernel 4 stride 4) need 260, 64 then 16 frames: 5 x 259 + 10 samples
    assert embedder.min_samples == 1305
    assert np.isfinite(embedder.embed(noise_clips([1305 / SAMPLE_RATE]), SAMPLE_RATE).numpy()).all()
    with pytest.raises(SpeakerModelError, match=r"^clip 0: 0\.081 s is too short to embed a speaker \(this model "
                                                r"needs at least 0\.082 s\)$"):
        embedder.embed([np.zeros(1300, np.float32)], SAMPLE_RATE)
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


def test_weights_missing_the_embedding_layer_refused(folder, tmp_path):
    import shutil

    import torch
    from safetensors.torch import load_file, save_file

    broken = tmp_path / "no-embedding"
    shutil.copytree(folder, broken)
    weights = load_file(str(broken / "model.safetensors"))
    save_file({k: v for k, v in weights.items() if not k.startswith("feature_extractor.")},
              str(broken / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(SpeakerModelError, match=r"the weights lack feature_extractor\.bias and 1 more key"):
        load_speaker_model(str(broken))
    # the speaker classifier and its loss come after the embedding: a checkpoint without them still embeds
    save_file({k: v for k, v in weights.items() if not k.startswith(("classifier.", "objective."))},
              str(broken / "model.safetensors"), metadata={"format": "pt"})
    clip = noise_clips([0.5], seed=3)
    torch.testing.assert_close(load_speaker_model(str(broken), device="cpu").embed(clip, SAMPLE_RATE),
                               load_speaker_model(str(folder), device="cpu").embed(clip, SAMPLE_RATE))
