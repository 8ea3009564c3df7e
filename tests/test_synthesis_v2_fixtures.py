"""IndexTTS2 synthesis number for number against fixtures_indextts2_audio (generation and synthesis sets).

Everything runs through the project's own API on a tiny download folder (tests/indextts2_folder.py):
``S2MelSynthesizer`` (prompt front-end, emotion vectors, the latent pass, S2Mel, BigVGAN v2) and the one
generation loop shared with v1.5 (``generation.generate_codes``). Tolerances are FIXTURES.md's: codes exact,
scores / latents / S2Mel / BigVGAN floats atol = rtol = 1e-4, w2v features and log-mels atol 1e-3, int16 within
2 LSB.
"""

from __future__ import annotations

import numpy as np
import pytest
import soundfile as sf
import torch

from tests.indextts2_folder import fixture_path, load_synthesizer, shared_download_folder
from trainer.synthesis.generation import DecodeSettings, generate_codes
from trainer.synthesis.s2mel_types import EmotionControl, MelSettings, VoicePrompt, seeded_noise
from trainer.synthesis.wav import to_int16

TOL = {"atol": 1e-4, "rtol": 1e-4}
FEATURE_TOL = {"atol": 1e-3, "rtol": 0.0}
MODES = {
    "greedy": DecodeSettings(mode="greedy", repetition_penalty=1.0, max_codes=40),
    "greedy_rep10": DecodeSettings(mode="greedy", repetition_penalty=10.0, max_codes=40),
    "beam3_rep10": DecodeSettings(mode="beam", num_beams=3, repetition_penalty=10.0, length_penalty=0.0,
                                  top_p=0.8, top_k=30, temperature=0.8, max_codes=40),
}
# infer_v2's deterministic setting: do_sample forced True, one beam, top_k 1 (FIXTURES.md "infer_e2e").
INFER_GREEDY = DecodeSettings(mode="sample", num_beams=1, top_k=1, top_p=0.8, temperature=0.8,
                              repetition_penalty=10.0, length_penalty=0.0, max_codes=40)
EMOTIONS = {
    "plain": EmotionControl(),
    "emo_vector": EmotionControl(weights=(0.0, 0.3, 0.0, 0.0, 0.0, 0.0, 0.2, 0.0)),
    "emo_ref": EmotionControl(alpha=0.6),  # with the fixture's emo2 features
}


def close(name: str, actual: torch.Tensor, expected: torch.Tensor, tol: dict | None = None) -> None:
    torch.testing.assert_close(actual.float(), expected.float(), **(tol or TOL), msg=lambda m: f"{name}: {m}")


@pytest.fixture(scope="module")
def synth_v2(tmp_path_factory):
    return load_synthesizer(shared_download_folder(tmp_path_factory))


@pytest.fixture(scope="module")
def generation() -> dict:
    return torch.load(fixture_path("generation_expected.pt"), weights_only=True)


@pytest.fixture(scope="module")
def expected() -> dict:
    return torch.load(fixture_path("synthesis_expected.pt"), weights_only=True)


@pytest.fixture(scope="module")
def prompt_files(tmp_path_factory) -> dict:
    """The fixture's 24 kHz inputs as 32-bit float WAV files (read back bit-exactly), as upstream read them."""
    root = tmp_path_factory.mktemp("prompts")
    utterances = torch.load(fixture_path("dataprep_expected.pt"), weights_only=True)["per_utt"]
    files = {}
    for name, index in (("speaker", 0), ("emotion", 2)):
        files[name] = root / f"{name}.wav"
        sf.write(files[name], utterances[index]["wav_24k"].numpy(), 24000, subtype="FLOAT")
    return files


@pytest.fixture(scope="module")
def fixture_voice(synth_v2, generation) -> VoicePrompt:
    """A voice made of the generation fixture's own inputs (isolates the GPT from the audio front-end)."""
    inputs = generation["inputs"]
    unused = torch.empty(0)
    return VoicePrompt(
        audio_22k=unused, audio_16k=unused, features=inputs["spk_cond_emb"], semantic_ref=unused, ref_mel=unused,
        style=inputs["style"], prompt_condition=unused, speaker_latents=synth_v2.speaker_latents(inputs["spk_cond_emb"]),
        emotion_features=inputs["emo_cond_emb"],
    )


@pytest.fixture(scope="module")
def voice(synth_v2, prompt_files) -> VoicePrompt:
    return synth_v2.prepare_voice(prompt_files["speaker"])


def emotion_vector(synth_v2, fixture_voice, generation, name: str) -> torch.Tensor:
    extra = generation["inputs"]["emo2_cond_emb"] if name == "emo_ref" else None
    return synth_v2.emotion_vector(fixture_voice, EMOTIONS[name], emotion_features=extra)


# --- GPT side: conditioning, emotion vectors, codes, latents -------------------------------------------------


def test_emotion_vectors_of_every_variant(synth_v2, fixture_voice, generation):
    emotion = generation["emotion"]
    model = synth_v2.model
    spk = fixture_voice.features
    width = torch.tensor([spk.shape[-1]])
    assert generation["cond_lengths_passed"] == spk.shape[-1] == 96  # the feature width, upstream's quirk
    close("base_vec", model.get_emovec(spk.transpose(1, 2), width), emotion["base_vec"])
    close("emovec_plain", emotion_vector(synth_v2, fixture_voice, generation, "plain"), emotion["emovec_plain"])
    close("emovec_emo_ref", emotion_vector(synth_v2, fixture_voice, generation, "emo_ref"), emotion["emovec_emo_ref"])
    close("emovec_emo_vector", emotion_vector(synth_v2, fixture_voice, generation, "emo_vector"),
          emotion["emovec_emo_vector"])
    assert EMOTIONS["emo_vector"].weights == tuple(emotion["emo_vector"])


@pytest.mark.parametrize("case", ["greedy/plain", "greedy_rep10/plain", "beam3_rep10/plain",
                                  "greedy_rep10/emo_vector", "greedy_rep10/emo_ref"])
def test_generation_codes_scores_and_latents(synth_v2, fixture_voice, generation, case):
    mode, variant = case.split("/")
    model = synth_v2.model
    emovec = emotion_vector(synth_v2, fixture_voice, generation, variant)
    conds = model.build_conds(fixture_voice.speaker_latents, emovec)
    for index, want in enumerate(generation["cases"][case]):
        text = generation["texts"][index].long()
        close("speech_conditioning_latent", fixture_voice.speaker_latents, want["speech_conditioning_latent"])
        seen: list[torch.Tensor] = []
        out = generate_codes(model, conds, text, MODES[mode], observe=lambda _, scores, seen=seen: seen.append(scores[0]))
        assert torch.equal(out.codes, want["codes_raw"]), f"{case} text {index}"
        if "step_top5_scores" in want:
            top = torch.stack(seen).topk(5, dim=-1)
            assert torch.equal(top.indices, want["step_top5_ids"].long())
            close(f"{case} step scores", top.values, want["step_top5_scores"])
        else:
            top = torch.stack(seen).topk(6, dim=-1)
            steps = top.values.shape[0]
            vocab = model.mel_vocab_size
            close(f"{case} beam candidates", top.values, want["beam_top6_scores"][:steps])
            assert torch.equal(top.indices % vocab, want["beam_top6_tokens"][:steps].long())
            assert torch.equal(top.indices // vocab, want["beam_top6_src_beam"][:steps].long())
            close(f"{case} sequence score", out.sequence_scores, want["sequence_score"])
        codes, count = want["codes"], int(want["code_lens"][0])
        latent = model.latent_with_conds(conds, text, torch.tensor([text.shape[1]]), codes, torch.tensor([count]))
        close(f"{case} latent", latent, want["latent"])


def test_infer_greedy_setting_samples_the_greedy_codes(synth_v2, fixture_voice, generation):
    """top_k 1 with sampling forced on (what infer does) picks exactly the greedy + penalty codes."""
    conds = synth_v2.model.build_conds(fixture_voice.speaker_latents,
                                       emotion_vector(synth_v2, fixture_voice, generation, "plain"))
    for index, want in enumerate(generation["cases"]["greedy_rep10/plain"]):
        out = generate_codes(synth_v2.model, conds, generation["texts"][index].long(), INFER_GREEDY)
        assert torch.equal(out.codes, want["codes_raw"])


# --- prompt front-end ---------------------------------------------------------------------------------------


def test_prompt_front_end_from_the_file(voice, expected):
    want = expected["synthesis"]
    close("prompt_audio_22k", voice.audio_22k, want["prompt_audio_22k"])
    close("prompt_audio_16k", voice.audio_16k, want["prompt_audio_16k"])
    close("spk_cond_emb", voice.features, want["spk_cond_emb"], FEATURE_TOL)
    close("S_ref", voice.semantic_ref, want["S_ref"])
    close("ref_mel", voice.ref_mel, want["ref_mel"], FEATURE_TOL)
    close("style", voice.style, want["style"])
    close("prompt_condition", voice.prompt_condition, want["prompt_condition"])
    close("emo_cond_emb", voice.emotion_features, want["emo_cond_emb"], FEATURE_TOL)


def test_emotion_reference_is_read_at_16k_directly(synth_v2, prompt_files, expected):
    close("emo2_cond_emb", synth_v2.emotion_features(prompt_files["emotion"]), expected["synthesis"]["emo2_cond_emb"],
          FEATURE_TOL)


def test_seeded_noise_is_upstreams_manual_seed_draw(expected):
    want = expected["synthesis"]
    noise = seeded_noise(want["cfm_seed"])(0, tuple(want["cfm_noise"].shape))
    assert torch.equal(noise, want["cfm_noise"])


# --- end to end ---------------------------------------------------------------------------------------------


def test_text0_every_stage_and_the_int16_waveform(synth_v2, voice, generation, expected):
    want = expected["synthesis"]
    text = [int(i) for i in expected["infer_e2e"]["text0"]["text"].split()]
    assert text == generation["texts"][0][0].tolist()
    trace: list[dict] = []
    result = synth_v2.synthesize_ids(
        [text], voice, None, INFER_GREEDY, MelSettings(steps=want["diffusion_steps"], cfg_rate=want["inference_cfg_rate"]),
        noise=lambda index, shape: want["cfm_noise"], trace=trace)
    (stage,) = trace
    assert torch.equal(stage["codes"], want["codes"])
    assert result.segments[0].codes.tolist() == want["codes"][0].tolist() and not result.hit_stop
    close("gpt_latent", stage["latent"], want["gpt_latent"])
    for name in ("gpt_layer_out", "S_infer", "cond", "cat_condition"):
        close(name, stage[name], want[name])
    assert stage["target_lengths"].tolist() == want["target_lengths"].tolist()
    assert stage["x_steps"].shape == want["cfm_x_steps"].shape
    for index in range(want["cfm_x_steps"].shape[0]):
        close(f"cfm_x_steps[{index}]", stage["x_steps"][index], want["cfm_x_steps"][index])
    close("mel", stage["mel"], want["mel"])
    close("wav", stage["wav"], want["wav"])
    assert result.sample_rate == expected["infer_e2e"]["text0"]["sampling_rate"] == 22050
    pcm = to_int16(result.waveform)
    for reference in (want["wav_int16"][0], expected["infer_e2e"]["text0"]["wav_int16"][0]):
        assert pcm.shape == tuple(reference.shape)
        assert int(np.abs(pcm.astype(np.int32) - reference.numpy().astype(np.int32)).max()) <= 2


@pytest.mark.parametrize("case", ["text0_emo_vector", "text0_emo_ref"])
def test_end_to_end_emotion_variants_within_2_lsb(synth_v2, voice, prompt_files, expected, case):
    """infer() with emo_vector, and with a separate emotion prompt at alpha 0.6; CFM noise from the same seed."""
    e2e = expected["infer_e2e"]
    text = [int(i) for i in e2e[case]["text"].split()]
    emotion = (EmotionControl(weights=EMOTIONS["emo_vector"].weights) if case == "text0_emo_vector"
               else EmotionControl(reference=prompt_files["emotion"], alpha=0.6))
    mel = MelSettings(seed=expected["synthesis"]["cfm_seed"])
    pcm = to_int16(synth_v2.synthesize_ids([text], voice, emotion, INFER_GREEDY, mel).waveform)
    reference = e2e[case]["wav_int16"][0].numpy()
    assert pcm.shape == reference.shape
    assert int(np.abs(pcm.astype(np.int32) - reference.astype(np.int32)).max()) <= 2
