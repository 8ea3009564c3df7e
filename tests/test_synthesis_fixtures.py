"""IndexTTS v1.5 synthesis against the reference fixtures (fixtures_indextts15_infer, FIXTURES.md tolerances).

Codes must be equal; floats within atol 1e-4 / rtol 1e-4; final int16 samples within 2 LSB.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from data_tools.config import load_config
from networks.bigvgan import VocoderSpec, build_bigvgan, kaiser_sinc_filter
from tests.conftest import shared_file
from trainer.synthesis import (
    DecodeSettings,
    SynthesisError,
    Synthesizer,
    generate_codes,
    load_gpt,
    load_vocoder,
    remove_long_silence,
    to_int16,
)
from trainer.synthesis.cached_decoder import CachedDecoder
from trainer.synthesis.generation import prefix_embeddings

FIXTURE_DIR = ("reference", "fixtures_indextts15_infer")
TOL = {"atol": 1e-4, "rtol": 1e-4}
MODES = {
    "greedy": DecodeSettings(mode="greedy", repetition_penalty=1.0, max_codes=40),
    "greedy_rep10": DecodeSettings(mode="greedy", repetition_penalty=10.0, max_codes=40),
    # infer.py's arguments with sampling off: 3 beams, penalty 10, length penalty 0 (DecodeSettings' defaults).
    "beam3_rep10": DecodeSettings(mode="beam", max_codes=40),
}


def fixture(name: str):
    return shared_file(*FIXTURE_DIR, name)


@pytest.fixture(scope="module")
def config() -> dict:
    loaded = load_config(fixture("tiny_infer_config.yaml"))
    # The fixture's shrunk ECAPA widths live in a fixture-only section; ours is bigvgan.speaker_encoder.
    loaded["bigvgan"]["speaker_encoder"] = loaded["fixture_speaker_encoder"]
    return loaded


@pytest.fixture(scope="module")
def expected() -> dict:
    return torch.load(fixture("generation_expected.pt"), weights_only=True)


@pytest.fixture(scope="module")
def gpt(config):
    return load_gpt(fixture("tiny_gpt_infer.pth"), config, fixture("tiny_infer_config.yaml"))


@pytest.fixture(scope="module")
def vocoder(config):
    return load_vocoder(fixture("tiny_bigvgan.pth"), config)


@pytest.fixture(scope="module")
def conds(gpt, expected):
    with torch.no_grad():
        return gpt.get_conditioning(expected["cond_mel"], expected["cond_mel_lengths"])


# ----- BigVGAN --------------------------------------------------------------------------------------------


def test_real_bigvgan_layout_on_meta_device():
    shapes = json.loads(fixture("indextts15_bigvgan_state_dict_shapes.json").read_text())
    model = build_bigvgan(VocoderSpec.from_config({"bigvgan": shapes["config"]}), "meta")
    actual = {name: list(t.shape) for name, t in model.state_dict().items()}
    assert list(actual) == list(shapes["keys"])  # same keys, same order
    assert actual == shapes["keys"]
    assert sum(p.numel() for p in model.parameters()) == shapes["num_parameters"]
    model.fold_weight_norm()
    folded = model.state_dict()
    assert len(folded) == shapes["after_remove_weight_norm"]["num_keys"]
    assert sum(p.numel() for p in model.parameters()) == shapes["after_remove_weight_norm"]["num_parameters"]


def test_anti_aliasing_filter_taps():
    taps = [0.0020290, 0.0093895, -0.0255435, -0.0576574, 0.1285726, 0.4432098]
    torch.testing.assert_close(kaiser_sinc_filter().flatten(), torch.tensor(taps + taps[::-1]), atol=1e-6, rtol=0)
    stored = torch.load(fixture("tiny_bigvgan.pth"), weights_only=True)["model"]
    torch.testing.assert_close(kaiser_sinc_filter(), stored["activation_post.upsample.filter"], atol=1e-7, rtol=0)


def test_bigvgan_matches_reference(vocoder):
    ref = torch.load(fixture("bigvgan_expected.pt"), weights_only=True)
    with torch.no_grad():
        speaker = vocoder.speaker_embedding(ref["mel_ref"].transpose(1, 2))
        torch.testing.assert_close(speaker, ref["speaker_embedding"], **TOL)
        s = ref["speaker_embedding"].transpose(1, 2)
        conv_pre = vocoder.conv_pre(ref["latent"].transpose(1, 2))
        torch.testing.assert_close(conv_pre, ref["conv_pre_out"], **TOL)
        torch.testing.assert_close(vocoder.cond_layer(s), ref["cond_layer_out"], **TOL)
        block = vocoder.resblocks[0]
        torch.testing.assert_close(block.activations[0](ref["act1d_in"]), ref["act1d_out"], **TOL)
        torch.testing.assert_close(block(ref["resblock0_in"]), ref["resblock0_out"], **TOL)
        stage_inputs = [conv_pre + ref["cond_layer_out"], ref["stage_out_0"], ref["stage_out_1"]]
        for i, (stage, x) in enumerate(zip(vocoder.ups, stage_inputs)):
            torch.testing.assert_close(stage[0](x), ref[f"ups_out_{i}"], **TOL)
            torch.testing.assert_close(vocoder.conds[i](s), ref[f"conds_out_{i}"], **TOL)
        torch.testing.assert_close(vocoder.activation_post(ref["stage_out_2"]), ref["activation_post_out"], **TOL)
        torch.testing.assert_close(vocoder.conv_post(ref["activation_post_out"]), ref["conv_post_out"], **TOL)
        wav = vocoder(ref["latent"], ref["mel_ref"].transpose(1, 2))
    torch.testing.assert_close(wav, ref["wav"], **TOL)
    scaled = to_int16(wav.squeeze(1).numpy()).astype(np.int32)
    assert np.abs(scaled - np.trunc(ref["wav_scaled"].numpy()).astype(np.int32)).max() <= 2


def test_real_file_layout_is_required(tmp_path, config):
    """{"generator": ...} (the real file) and {"model": ...} (fixture) load; anything else is refused."""
    state = torch.load(fixture("tiny_bigvgan.pth"), weights_only=True)["model"]
    real = tmp_path / "bigvgan_generator.pth"
    torch.save({"generator": state}, real)
    load_vocoder(real, config)
    wrong = tmp_path / "wrong.pth"
    torch.save({"generator": {k: v for k, v in state.items() if "weight_g" not in k}}, wrong)
    norms = sum(1 for k in state if "weight_g" in k)
    with pytest.raises(SynthesisError, match=f"missing {norms} key"):
        load_vocoder(wrong, config)
    with pytest.raises(SynthesisError, match="not a BigVGAN generator file"):
        load_vocoder(fixture("tiny_gpt_infer.pth").parent / "generation_expected.pt", config)


# ----- GPT generation -------------------------------------------------------------------------------------


def test_conditioning_and_prefix(gpt, conds, expected):
    torch.testing.assert_close(conds, expected["conds_latent"], **TOL)
    for text, prep in zip(expected["texts"], expected["prep"]):
        embeds, mask = prefix_embeddings(gpt, conds, text)
        torch.testing.assert_close(embeds[:, :-1], prep["inputs_embeds"], **TOL)
        assert torch.equal(mask.long(), prep["attention_mask"])
    batched = expected["batched"]
    embeds, mask = prefix_embeddings(gpt, conds, batched["text_tokens"])
    torch.testing.assert_close(embeds[:, :-1], batched["prep_inputs_embeds"], **TOL)
    assert torch.equal(mask.long(), batched["prep_attention_mask"])


def test_first_step_logits(gpt, conds, expected):
    text = expected["texts"][0]
    codes = expected["greedy"][0]["codes_raw"][0]
    embeds, mask = prefix_embeddings(gpt, conds, text)
    decoder = CachedDecoder(gpt)
    with torch.no_grad():
        logits = [decoder.start(embeds, mask, embeds.size(1) + 3)]
        for step in range(2):
            logits.append(decoder.step(codes[step : step + 1], step + 2))
    torch.testing.assert_close(torch.cat(logits), expected["greedy"][0]["step_logits_first3"], **TOL)


@pytest.mark.parametrize("mode", list(MODES))
def test_generated_codes_equal_reference(gpt, conds, expected, mode):
    for index, text in enumerate(expected["texts"]):
        want = expected[mode][index]
        out = generate_codes(gpt, conds, text, MODES[mode])
        assert torch.equal(out.codes, want["codes_raw"]), f"{mode} text {index}"
        codes, lengths = remove_long_silence(out.codes)
        assert torch.equal(codes, want["codes"]) and torch.equal(lengths, want["code_lens"])
        if mode.startswith("beam"):
            torch.testing.assert_close(out.sequence_scores, want["sequence_score"], **TOL)


def test_batched_generation_equals_reference(gpt, conds, expected):
    batched = expected["batched"]
    for mode in ("greedy", "beam3_rep10"):
        out = generate_codes(gpt, conds, batched["text_tokens"], MODES[mode])
        assert torch.equal(out.codes, batched[f"codes_raw_{mode}"]), mode


def test_start_and_stop_ids_are_stripped_from_the_text(gpt, conds, expected):
    case = expected["strip_case"]
    out = generate_codes(gpt, conds, case["text"], MODES["greedy"])
    assert torch.equal(out.codes, case["codes_raw_greedy"])


def test_remove_long_silence_cases(expected):
    for case in expected["silence_cases"]:
        codes, lengths = remove_long_silence(case["codes_in"])
        assert torch.equal(codes, case["codes_out"]), case["name"]
        assert torch.equal(lengths, case["code_lens"]), case["name"]


# ----- the whole path -------------------------------------------------------------------------------------


def test_latents_and_waveforms_through_the_synthesizer(gpt, vocoder, expected):
    synth = Synthesizer(gpt, vocoder)
    reference = synth.prepare_reference(expected["cond_mel"])
    for mode in ("greedy", "beam3_rep10"):
        for index, text in enumerate(expected["texts"]):
            want = expected[mode][index]
            result = synth.synthesize_ids(text[0].tolist(), reference, MODES[mode])
            assert np.array_equal(result.codes, want["codes"][0].numpy())
            torch.testing.assert_close(torch.from_numpy(result.waveform), want["wav"][0], **TOL)
            assert result.hit_stop == want["hit_stop"]
            if mode == "beam3_rep10":
                e2e = expected["infer_e2e"][index]["wav_int16"][0].numpy().astype(np.int32)
                assert np.abs(to_int16(result.waveform).astype(np.int32) - e2e).max() <= 2
    latent_case = expected["greedy_rep10"][0]
    with torch.no_grad():
        latent = gpt.latent_with_conds(
            reference.conds, expected["texts"][0].long(), torch.tensor([expected["texts"][0].size(1)]),
            latent_case["codes"], latent_case["code_lens"])
    torch.testing.assert_close(latent, latent_case["latent"], **TOL)


def test_reference_audio_gives_the_fixture_mel(tmp_path, gpt, vocoder, expected):
    """The prompt wav through the same features as training reproduces the fixture's conditioning mel."""
    import soundfile as sf

    path = tmp_path / "prompt.wav"
    sf.write(path, expected["prompt_wav"][0].numpy(), 24000, subtype="FLOAT")
    mel = Synthesizer(gpt, vocoder).reference_mel(path)
    torch.testing.assert_close(mel, expected["cond_mel"], **TOL)
