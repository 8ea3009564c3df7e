"""Emotion-matrix selection (IndexTTS2 ``emo_vector`` control) against generation_expected.pt ``emotion``."""

from __future__ import annotations

import pytest
import torch
import yaml

from networks.emotion_matrix import (
    REAL_EMO_NUM,
    closest_rows,
    emotion_matrix_vector,
    mix_with_emotion_matrix,
    scale_emotion_weights,
    select_emotion_vector,
)
from tests.conftest import shared_file

FIXTURE_DIR = ("reference", "fixtures_indextts2_audio")
TOL = {"atol": 1e-4, "rtol": 1e-4}


@pytest.fixture(scope="module")
def reference() -> dict:
    generation = torch.load(shared_file(*FIXTURE_DIR, "generation_expected.pt"), weights_only=True)
    config = yaml.safe_load(shared_file(*FIXTURE_DIR, "tiny_audio_config.yaml").read_text(encoding="utf-8"))
    return {
        "emotion": generation["emotion"],
        "style": generation["inputs"]["style"],
        "emo_num": list(config["emo_num"]),
        "spk_matrix": torch.load(shared_file(*FIXTURE_DIR, config["spk_matrix"]), weights_only=True),
        "emo_matrix": torch.load(shared_file(*FIXTURE_DIR, config["emo_matrix"]), weights_only=True),
    }


def test_rows_and_emovec_mat_match_fixture(reference: dict) -> None:
    emotion = reference["emotion"]
    row_index, emovec_mat = select_emotion_vector(
        reference["style"],
        emotion["emo_vector"],
        reference["spk_matrix"],
        reference["emo_matrix"],
        reference["emo_num"],
    )
    assert row_index.tolist() == emotion["emo_row_index"].tolist()
    assert emovec_mat.shape == emotion["emovec_mat"].shape == (1, 64)
    torch.testing.assert_close(emovec_mat, emotion["emovec_mat"], **TOL)
    mixed = mix_with_emotion_matrix(emovec_mat, emotion["emo_vector"], emotion["emovec_plain"])
    torch.testing.assert_close(mixed, emotion["emovec_emo_vector"], **TOL)


def test_choice_is_the_cosine_argmax_within_each_group() -> None:
    emo_num = [2, 3]
    spk_matrix = torch.tensor([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0], [10.0, 9.0], [0.5, 0.6]])
    style = torch.tensor([[0.0, 2.0]])
    # group 0: row 1 points the same way; group 1: [0.5, 0.6] is closer in angle than the longer [10, 9]
    assert closest_rows(style, spk_matrix, emo_num).tolist() == [1, 2]
    emo_matrix = torch.arange(10.0).reshape(5, 2)
    emovec_mat = emotion_matrix_vector([0.5, 2.0], torch.tensor([1, 2]), emo_matrix, emo_num)
    torch.testing.assert_close(emovec_mat, 0.5 * emo_matrix[1:2] + 2.0 * emo_matrix[4:5])


def test_weights_scaled_by_alpha_and_truncated() -> None:
    weights = [0.0, 0.3, 0.0, 0.0, 0.0, 0.0, 0.23456, 0.0]
    assert scale_emotion_weights(weights, 1.0) == weights
    assert scale_emotion_weights(weights, 1.7) == weights
    assert scale_emotion_weights(weights, 0.6) == [0.0, 0.18, 0.0, 0.0, 0.0, 0.0, 0.1407, 0.0]
    assert scale_emotion_weights(weights, -1.0) == [0.0] * 8


def test_mismatched_inputs_are_clear_errors() -> None:
    spk_matrix = torch.zeros(sum(REAL_EMO_NUM), 192)
    with pytest.raises(ValueError, match="spk_matrix has 73 rows but emo_num"):
        closest_rows(torch.ones(1, 192), spk_matrix, [1, 2])
    with pytest.raises(ValueError, match="style width 24 does not match spk_matrix width 192"):
        closest_rows(torch.ones(1, 24), spk_matrix, REAL_EMO_NUM)
    with pytest.raises(ValueError, match="one weight and one row index per emotion group"):
        emotion_matrix_vector([0.1] * 7, torch.zeros(8, dtype=torch.long), torch.zeros(73, 8), REAL_EMO_NUM)
