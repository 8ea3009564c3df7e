"""IndexTTS2 data-preparation front half against fixtures_indextts2_audio (number for number).

Resampling (torchaudio sinc, librosa soxr_hq), SeamlessM4T features, w2v-BERT layer 17 + stats, the semantic
codec (encoder, z_e, codes, S, vq2emb), for the community preprocessing recipe (dataprep_expected.pt, each
utterance alone and the padded batch) and for inference's prompt front-end (synthesis_expected.pt).
Tolerances are FIXTURES.md's: floats atol/rtol 1e-4, w2v hidden_states_17 / feat atol 1e-3, masks exact,
codes exact where the fixture's best-minus-second margin exceeds 1e-4 and top-1 or runner-up elsewhere.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from networks.frontends.resample import load_audio_like_librosa, sinc_resample, soxr_resample
from networks.frontends.seamless_features import (
    build_feature_extractor,
    extract_features,
    load_feature_extractor,
)
from networks.loading import StateDictMismatchError
from networks.semantic_codec import SemanticCodec, SemanticCodecConfig, load_semantic_codec
from networks.w2v_bert import (
    SemanticFeatureModel,
    SemanticStats,
    build_w2v_bert,
    load_w2v_bert_pretrained,
    load_w2v_bert_state,
)
from tests.conftest import shared_file

FIXTURE_DIR = ("reference", "fixtures_indextts2_audio")
FLOAT_TOL = {"atol": 1e-4, "rtol": 1e-4}
W2V_TOL = {"atol": 1e-3, "rtol": 0.0}
CODE_MARGIN = 1e-4


def fixture_path(name: str) -> Path:
    return shared_file(*FIXTURE_DIR, name)


@pytest.fixture(scope="module")
def audio_config() -> dict:
    return yaml.safe_load(fixture_path("tiny_audio_config.yaml").read_text())


@pytest.fixture(scope="module")
def dataprep() -> dict:
    return torch.load(fixture_path("dataprep_expected.pt"), weights_only=True)


@pytest.fixture(scope="module")
def synthesis() -> dict:
    return torch.load(fixture_path("synthesis_expected.pt"), weights_only=True)["synthesis"]


@pytest.fixture(scope="module")
def extractor(audio_config):
    return build_feature_extractor(audio_config["fixture_feature_extractor"])


@pytest.fixture(scope="module")
def semantic_model(audio_config) -> SemanticFeatureModel:
    model = load_w2v_bert_state(audio_config["fixture_w2v_bert"], fixture_path("tiny_w2v_bert.pth"))
    return SemanticFeatureModel(model, SemanticStats.from_file(fixture_path("tiny_w2v_stats.pt")))


@pytest.fixture(scope="module")
def codec(audio_config) -> SemanticCodec:
    return load_semantic_codec(fixture_path("tiny_semantic_codec.pth"), audio_config["semantic_codec"])


def assert_codes(
    codes: torch.Tensor, expected: torch.Tensor, second: torch.Tensor, margin: torch.Tensor
) -> None:
    assert codes.shape == expected.shape and codes.dtype == torch.int64
    confident = margin > CODE_MARGIN
    assert torch.equal(codes[confident], expected[confident])
    assert bool(((codes == expected) | (codes == second)).all())


# --- resampling -------------------------------------------------------------------------------------------


def test_sinc_resample_24k_to_16k_matches_torchaudio_functional(dataprep):
    for utt in dataprep["per_utt"]:
        wav_16k = sinc_resample(utt["wav_24k"], 24000, 16000)
        assert wav_16k.shape == utt["wav_16k"].shape
        torch.testing.assert_close(wav_16k, utt["wav_16k"], **FLOAT_TOL)


def test_prompt_resampling_matches_librosa_then_torchaudio_transform(dataprep, synthesis):
    speaker = dataprep["per_utt"][0]["wav_24k"].numpy()
    audio_22k = torch.from_numpy(soxr_resample(speaker, 24000, 22050))[None]
    assert audio_22k.shape == synthesis["prompt_audio_22k"].shape
    torch.testing.assert_close(audio_22k, synthesis["prompt_audio_22k"], **FLOAT_TOL)
    assert sinc_resample(audio_22k, 22050, 22050) is audio_22k
    audio_16k = sinc_resample(audio_22k, 22050, 16000, kernel_dtype="float64")
    assert audio_16k.shape == synthesis["prompt_audio_16k"].shape
    torch.testing.assert_close(audio_16k, synthesis["prompt_audio_16k"], **FLOAT_TOL)
    for index, key in ((0, "emo_audio_16k"), (2, "emo2_audio_16k")):
        direct = soxr_resample(dataprep["per_utt"][index]["wav_24k"].numpy(), 24000, 16000)
        torch.testing.assert_close(torch.from_numpy(direct)[None], synthesis[key], **FLOAT_TOL)


def test_load_audio_like_librosa_reads_resamples_and_cuts(dataprep, synthesis, tmp_path):
    soundfile = pytest.importorskip("soundfile")
    path = tmp_path / "prompt.wav"
    soundfile.write(path, dataprep["per_utt"][0]["wav_24k"].numpy(), 24000, subtype="FLOAT")
    torch.testing.assert_close(
        torch.from_numpy(load_audio_like_librosa(path))[None], synthesis["prompt_audio_22k"], **FLOAT_TOL
    )
    emo = load_audio_like_librosa(path, sr=16000)
    torch.testing.assert_close(torch.from_numpy(emo)[None], synthesis["emo_audio_16k"], **FLOAT_TOL)
    assert load_audio_like_librosa(path, sr=16000, max_seconds=0.5).shape == (8000,)
    stereo = tmp_path / "stereo.wav"
    wave = dataprep["per_utt"][1]["wav_24k"].numpy()
    soundfile.write(stereo, np.stack([wave, 0.5 * wave], axis=1), 24000, subtype="FLOAT")
    mixed = load_audio_like_librosa(stereo, sr=24000)
    np.testing.assert_allclose(mixed, 0.75 * wave, atol=1e-6)
    with pytest.raises(ValueError, match="cannot read audio"):
        (tmp_path / "broken.wav").write_bytes(b"not audio")
        load_audio_like_librosa(tmp_path / "broken.wav")


# --- SeamlessM4T features ---------------------------------------------------------------------------------


def test_features_per_utterance_and_padded_batch(dataprep, extractor):
    for utt in dataprep["per_utt"]:
        features, mask = extract_features(extractor, utt["wav_16k"])
        torch.testing.assert_close(features, utt["input_features"], **FLOAT_TOL)
        assert torch.equal(mask.to(torch.int32), utt["attention_mask"])
    batch = dataprep["batch"]
    features, mask = extract_features(extractor, [utt["wav_16k"] for utt in dataprep["per_utt"]])
    torch.testing.assert_close(features, batch["input_features"], **FLOAT_TOL)
    assert torch.equal(mask.to(torch.int32), batch["attention_mask"])
    assert mask.sum(1).tolist() == batch["cond_lengths"].tolist()
    assert bool((features[1, mask[1] == 0] == 1.0).all())  # padding value 1.0


def test_feature_extractor_from_local_folder(dataprep, extractor, tmp_path):
    extractor.save_pretrained(tmp_path / "w2v")
    loaded = load_feature_extractor(tmp_path / "w2v", local_files_only=True)
    assert loaded.to_dict() == extractor.to_dict()
    assert build_feature_extractor().to_dict() == extractor.to_dict()  # fixture settings = w2v-bert-2.0's
    utt = dataprep["per_utt"][2]
    assert torch.equal(
        extract_features(loaded, utt["wav_16k"])[0], extract_features(extractor, utt["wav_16k"])[0]
    )
    with pytest.raises(FileNotFoundError, match="not found"):
        load_feature_extractor(tmp_path / "missing", local_files_only=True)


def test_features_refuse_wrong_rate_and_bad_shapes(extractor):
    with pytest.raises(ValueError, match="16000 Hz"):
        extract_features(extractor, np.zeros(16000, dtype=np.float32), sampling_rate=22050)
    with pytest.raises(ValueError, match="1-D"):
        extract_features(extractor, [np.zeros((2, 100), dtype=np.float32)])
    with pytest.raises(ValueError, match="empty"):
        extract_features(extractor, [np.zeros(0, dtype=np.float32)])


# --- w2v-BERT ----------------------------------------------------------------------------------------------


def test_w2v_bert_hidden_states_and_normalised_features(dataprep, semantic_model):
    with torch.no_grad():
        for utt in dataprep["per_utt"]:
            states = semantic_model.hidden_states(utt["input_features"], utt["attention_mask"])
            torch.testing.assert_close(states[0], utt["hidden_states_0"], **FLOAT_TOL)
            torch.testing.assert_close(states[1], utt["hidden_states_1"], **FLOAT_TOL)
            torch.testing.assert_close(states[17], utt["hidden_states_17"], **W2V_TOL)
            feat = semantic_model(utt["input_features"], utt["attention_mask"])
            torch.testing.assert_close(feat, utt["feat"], **W2V_TOL)
        batch = dataprep["batch"]
        h17 = semantic_model.layer_output(batch["input_features"], batch["attention_mask"])
        torch.testing.assert_close(h17, batch["hidden_states_17"], **W2V_TOL)
        torch.testing.assert_close(semantic_model.stats(h17), batch["feat"], **W2V_TOL)


def test_stats_must_fit_the_model(audio_config):
    model = build_w2v_bert(audio_config["fixture_w2v_bert"])
    with pytest.raises(ValueError, match="stats width 8"):
        SemanticFeatureModel(model, SemanticStats(torch.zeros(8), torch.ones(8)))
    with pytest.raises(ValueError, match="at least 17 layers"):
        build_w2v_bert({**audio_config["fixture_w2v_bert"], "num_hidden_layers": 4})


def test_w2v_bert_from_pretrained_folder_loads_strictly(audio_config, dataprep, semantic_model, tmp_path):
    from safetensors.torch import load_file, save_file

    semantic_model.model.save_pretrained(tmp_path / "w2v")
    loaded = load_w2v_bert_pretrained(tmp_path / "w2v", local_files_only=True)
    utt = dataprep["per_utt"][3]
    with torch.no_grad():
        expected = semantic_model.layer_output(utt["input_features"], utt["attention_mask"])
        got = SemanticFeatureModel(loaded, semantic_model.stats).layer_output(
            utt["input_features"], utt["attention_mask"]
        )
    assert torch.equal(got, expected)

    weights = tmp_path / "w2v" / "model.safetensors"
    state = load_file(weights)
    state["encoder.layers.2.ffn1.output_dense.bias"] = torch.zeros(5)
    save_file(state, weights, metadata={"format": "pt"})
    with pytest.raises(StateDictMismatchError) as error:
        load_w2v_bert_pretrained(tmp_path / "w2v", local_files_only=True)
    assert "encoder.layers.2.ffn1.output_dense.bias: checkpoint [5] vs model [96]" in str(error.value)
    assert "\n" not in str(error.value)
    del state["encoder.layers.2.ffn1.output_dense.bias"]
    save_file(state, weights, metadata={"format": "pt"})
    with pytest.raises(
        StateDictMismatchError, match=r"missing 1 key\(s\): encoder.layers.2.ffn1.output_dense.bias"
    ):
        load_w2v_bert_pretrained(tmp_path / "w2v", local_files_only=True)
    with pytest.raises(FileNotFoundError, match="not found"):
        load_w2v_bert_pretrained(tmp_path / "missing", local_files_only=True)


# --- semantic codec ----------------------------------------------------------------------------------------


def test_codec_stages_codes_and_s_per_utterance(dataprep, codec):
    with torch.no_grad():
        for utt in dataprep["per_utt"]:
            torch.testing.assert_close(codec.encode(utt["feat"]), utt["codec_encoder_out"], **FLOAT_TOL)
            torch.testing.assert_close(codec.latents(utt["feat"]), utt["codec_z_e"], **FLOAT_TOL)
            codes, dequantised = codec.quantize(utt["feat"])
            assert_codes(codes, utt["codes"], utt["codes_second"], utt["codes_margin"])
            torch.testing.assert_close(dequantised, utt["S"], **FLOAT_TOL)
            search = codec.search(utt["feat"])
            assert torch.equal(search.codes, codes)
            torch.testing.assert_close(search.margin, utt["codes_margin"], atol=1e-5, rtol=0.0)


def test_codec_batch(dataprep, codec):
    batch = dataprep["batch"]
    with torch.no_grad():
        codes, dequantised = codec.quantize(batch["feat"])
    assert_codes(codes, batch["codes"], batch["codes_second"], batch["codes_margin"])
    torch.testing.assert_close(dequantised, batch["S"], **FLOAT_TOL)


def test_audio_to_codes_chain(dataprep, extractor, semantic_model, codec):
    """Our own numbers all the way: 24 kHz waveform -> 16 kHz -> features -> w2v -> codes (batch and alone)."""
    waves = [sinc_resample(utt["wav_24k"], 24000, 16000) for utt in dataprep["per_utt"]]
    with torch.no_grad():
        for wave, utt in zip(waves, dataprep["per_utt"], strict=True):
            features, mask = extract_features(extractor, wave)
            codes, _ = codec.quantize(semantic_model(features, mask))
            assert_codes(codes, utt["codes"], utt["codes_second"], utt["codes_margin"])
        batch = dataprep["batch"]
        features, mask = extract_features(extractor, waves)
        codes, _ = codec.quantize(semantic_model(features, mask))
    assert_codes(codes, batch["codes"], batch["codes_second"], batch["codes_margin"])


def test_vq2emb_matches_s2mel_input(synthesis, codec):
    with torch.no_grad():
        torch.testing.assert_close(codec.vq2emb(synthesis["codes"]), synthesis["vq2emb"], **FLOAT_TOL)


def test_prompt_front_end_of_inference(dataprep, synthesis, extractor, semantic_model, codec):
    speaker = dataprep["per_utt"][0]["wav_24k"].numpy()
    audio_22k = torch.from_numpy(soxr_resample(speaker, 24000, 22050))[None]
    audio_16k = sinc_resample(audio_22k, 22050, 16000, kernel_dtype="float64")
    with torch.no_grad():
        features, mask = extract_features(extractor, audio_16k)
        torch.testing.assert_close(features, synthesis["prompt_input_features"], **FLOAT_TOL)
        assert torch.equal(mask.to(torch.int32), synthesis["prompt_attention_mask"])
        spk_cond_emb = semantic_model(features, mask)
        torch.testing.assert_close(spk_cond_emb, synthesis["spk_cond_emb"], **W2V_TOL)
        codes, _ = codec.quantize(spk_cond_emb)
        assert_codes(
            codes,
            synthesis["prompt_codes"],
            synthesis["prompt_codes_second"],
            synthesis["prompt_codes_margin"],
        )
        codes, s_ref = codec.quantize(synthesis["spk_cond_emb"])
        assert torch.equal(codes, synthesis["prompt_codes"])
        torch.testing.assert_close(s_ref, synthesis["S_ref"], **FLOAT_TOL)
        for index, audio_key, emb_key in (
            (0, "emo_audio_16k", "emo_cond_emb"),
            (2, "emo2_audio_16k", "emo2_cond_emb"),
        ):
            direct = torch.from_numpy(
                soxr_resample(dataprep["per_utt"][index]["wav_24k"].numpy(), 24000, 16000)
            )
            torch.testing.assert_close(direct[None], synthesis[audio_key], **FLOAT_TOL)
            emo = semantic_model(*extract_features(extractor, direct))
            torch.testing.assert_close(emo, synthesis[emb_key], **W2V_TOL)
    assert not torch.equal(synthesis["emo_cond_emb"], synthesis["spk_cond_emb"])  # README 0.8: separate loads


# --- real layouts and strict loading -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def real_shapes() -> dict:
    return json.loads(shared_file("reference", "indextts2_audio_state_dict_shapes.json").read_text())


def _shapes(module: torch.nn.Module) -> dict[str, list[int]]:
    return {name: list(tensor.shape) for name, tensor in module.state_dict().items()}


def test_real_semantic_codec_layout_on_meta(real_shapes):
    section = {
        "codebook_size": 8192,
        "hidden_size": 1024,
        "codebook_dim": 8,
        "vocos_dim": 384,
        "vocos_intermediate_dim": 2048,
        "vocos_num_layers": 12,
    }
    with torch.device("meta"):
        codec = SemanticCodec(SemanticCodecConfig.from_section(section))
    assert _shapes(codec) == real_shapes["semantic_codec"]
    assert SemanticCodecConfig() == SemanticCodecConfig.from_section(section)


def test_real_w2v_bert_layout_on_meta(real_shapes):
    model = build_w2v_bert(None, device="meta")
    assert {tensor.device.type for tensor in model.state_dict().values()} == {"meta"}
    assert _shapes(model) == real_shapes["w2v_bert_2"]


def test_codec_accepts_flat_files_and_refuses_wrong_sizes(audio_config, dataprep, codec, tmp_path):
    from safetensors.torch import save_file

    state = torch.load(fixture_path("tiny_semantic_codec.pth"), weights_only=True)["model"]
    feat = dataprep["per_utt"][1]["feat"]
    with torch.no_grad():
        expected = codec.quantize(feat)
        save_file({k: v.contiguous() for k, v in state.items()}, tmp_path / "model.safetensors")
        torch.save(state, tmp_path / "flat.pth")
        for name in ("model.safetensors", "flat.pth"):
            loaded = load_semantic_codec(tmp_path / name, audio_config["semantic_codec"])
            codes, dequantised = loaded.quantize(feat)
            assert torch.equal(codes, expected[0]) and torch.equal(dequantised, expected[1])

    wrong = {**audio_config["semantic_codec"], "vocos_intermediate_dim": 48}
    with pytest.raises(StateDictMismatchError) as error:
        load_semantic_codec(fixture_path("tiny_semantic_codec.pth"), wrong)
    message = str(error.value)
    assert "\n" not in message
    assert message.split(": ", 1)[1].startswith(
        "decoder.0.convnext.0.pwconv1.bias: checkpoint [32] vs model [48]"
    )
    with pytest.raises(ValueError, match="unknown key"):
        SemanticCodecConfig.from_section({**audio_config["semantic_codec"], "vocos_layers": 2})
    with pytest.raises(ValueError, match="features"):
        codec.quantize(torch.zeros(1, 5, 7))
