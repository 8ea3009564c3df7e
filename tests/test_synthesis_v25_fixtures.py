"""IndexTTS-2.5 synthesis number for number against indextts25/fixtures_audio (``generation``, ``synthesis``,
``e2e``), through the project's API on a tiny download folder (tests/indextts25_folder.py): ``SynthesizerV25``
over the generation loop shared with v1.5 and v2. Tolerances are FIXTURES.md's: codes exact, floats
atol = rtol = 1e-4 (2e-4 for w2v-BERT outputs), int16 within 2 LSB.
"""

from __future__ import annotations

import shutil

import pytest
import soundfile as sf
import torch
import yaml

from generations.indextts25.synthesis import MelSettings25
from networks.indextts25 import IndexTTS25FilesError, load_indextts25
from tests.indextts25_folder import (
    download_config,
    load_synthesizer,
    shared_download_folder,
    tiled_features,
)
from tests.indextts25_folder import (
    expected as load_expected,
)
from trainer.synthesis.errors import SynthesisError
from trainer.synthesis.generation import DecodeSettings, generate_codes, prefix_embeddings
from trainer.synthesis.s2mel_types import EmotionControl, VoicePrompt
from trainer.synthesis.wav import to_int16

TOL = {"atol": 1e-4, "rtol": 1e-4}
W2V_TOL = {"atol": 2e-4, "rtol": 2e-4}
MODES = {
    "greedy": DecodeSettings(mode="greedy", repetition_penalty=1.0, max_codes=20),
    "greedy_rep10": DecodeSettings(mode="greedy", repetition_penalty=10.0, max_codes=20),
    "beam3_rep10": DecodeSettings(mode="beam", num_beams=3, repetition_penalty=10.0, length_penalty=0.0,
                                  max_codes=20),
}
# infer_v2_5's deterministic setting: sampling forced on, one beam, top_k 1 (README_audio.md section 3).
INFER_GREEDY = DecodeSettings(mode="sample", num_beams=1, top_k=1, top_p=0.8, temperature=0.8,
                              repetition_penalty=10.0, length_penalty=0.0)


def close(name: str, actual: torch.Tensor, expected: torch.Tensor, tol: dict | None = None) -> None:
    torch.testing.assert_close(actual.float(), expected.float(), **(tol or TOL), msg=lambda m: f"{name}: {m}")


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return shared_download_folder(tmp_path_factory)


@pytest.fixture(scope="module")
def synth(folder):
    return load_synthesizer(folder, language="am")


@pytest.fixture(scope="module")
def want() -> dict:
    return load_expected()


@pytest.fixture(scope="module")
def prompt_file(tmp_path_factory, want):
    """Item 0's espeak recording (16-bit PCM at 22050 Hz), the prompt of ``synthesis`` and ``e2e``."""
    path = tmp_path_factory.mktemp("prompt25") / "item0.wav"
    item = want["items"][0]
    sf.write(path, item["wav_int16"].reshape(-1).numpy(), int(item["wav_sr"]), subtype="PCM_16")
    return path


@pytest.fixture(scope="module")
def voice(synth, prompt_file) -> VoicePrompt:
    return synth.prepare_voice(prompt_file)


# --- generation on the 2.5 prefix ----------------------------------------------------------------------------


def fixture_conds(synth, want) -> torch.Tensor:
    item = want["items"][0]
    return synth.model.build_conds(synth.model.speaker_latent(item["style"]), item["emovec_merge"])


def test_conditioning_block_and_prefix(synth, want):
    generation = want["generation"]
    conds = fixture_conds(synth, want)
    close("spk_latent", synth.model.speaker_latent(want["items"][0]["style"]), generation["spk_latent"])
    close("conds", conds, generation["conds"])
    embeds, mask = prefix_embeddings(synth.model, conds, generation["text_tokens"].long(), generation["lang"])
    close("prep_inputs_embeds", embeds[:, :-1], generation["prep_inputs_embeds"])
    assert mask.long().tolist() == generation["prep_attention_mask"].tolist()


@pytest.mark.parametrize("mode", list(MODES))
def test_generation_codes_in_every_mode(synth, want, mode):
    generation = want["generation"]
    seen: list[torch.Tensor] = []
    out = generate_codes(synth.model, fixture_conds(synth, want), generation["text_tokens"].long(), MODES[mode],
                         langs=generation["lang"], observe=lambda _, scores: seen.append(scores[0]))
    assert torch.equal(out.codes, generation[mode]["codes"]), mode
    if mode == "greedy":  # no penalty: the observed scores are the raw mel-head logits
        close("step_logits", torch.stack(seen), generation["greedy"]["step_logits"])


def test_infer_setting_and_seeded_sampling(synth, want):
    generation = want["generation"]
    conds, text, langs = fixture_conds(synth, want), generation["text_tokens"].long(), generation["lang"]
    greedy = generate_codes(synth.model, conds, text, INFER_GREEDY.__class__(**{**vars(INFER_GREEDY), "max_codes": 20}),
                            langs=langs)
    assert torch.equal(greedy.codes, generation["greedy_rep10"]["codes"])
    sample = DecodeSettings(mode="sample", num_beams=1, temperature=1.0, top_k=30, top_p=0.8, seed=7, max_codes=12)
    first = generate_codes(synth.model, conds, text, sample, langs=langs).codes
    again = generate_codes(synth.model, conds, text, sample, langs=langs).codes
    other = generate_codes(synth.model, conds, text, DecodeSettings(**{**vars(sample), "seed": 8}), langs=langs).codes
    assert torch.equal(first, again) and not torch.equal(first, other)


# --- synthesis stage by stage --------------------------------------------------------------------------------


def test_voice_front_end_from_the_file(synth, voice, want):
    item, stages = want["items"][0], want["synthesis"]
    close("audio_16k", voice.audio_16k, item["audio_16k"])
    close("spk_cond_emb", voice.features, item["spk_cond_emb"], W2V_TOL)
    close("style", voice.style, item["style"])
    close("ref_mel", voice.ref_mel, stages["ref_mel"])
    close("prompt_condition", voice.prompt_condition, stages["prompt_condition"])
    close("emo_cond_emb", voice.emotion_features, item["emo_cond_emb"], W2V_TOL)
    close("emovec_merge", synth.emotion_vector(voice, EmotionControl()), item["emovec_merge"])


def test_codes_to_waveform_every_stage(synth, voice, want):
    stages = want["synthesis"]
    trace: dict = {}
    mel = MelSettings25(steps=int(stages["n_timesteps"]), cfg_rate=float(stages["inference_cfg_rate"]))
    wav = synth.vocalize(stages["codes"], voice, mel, noise=lambda index, shape: stages["cfm_noise"], trace=trace)
    close("S_infer", trace["S_infer"], stages["S_infer"])
    assert trace["target_lengths"].tolist() == stages["df0"]["target_length"].tolist()
    close("cond", trace["cond"], stages["df0"]["cond"])
    close("cat_condition", trace["cat_condition"], stages["cat_condition"])
    close("cfm_out", trace["cfm_out_full"], stages["cfm_out"])
    close("vc_target", trace["mel"], stages["vc_target"])
    close("wav", wav.reshape(1, -1), stages["wav"])
    difference = (to_int16(wav.reshape(-1).numpy()).astype(int) - stages["wav_int16"][0].numpy().astype(int))
    assert abs(difference).max() <= 2


def test_duration_factor_stretches_only_the_mel(synth, voice, want):
    stages = want["synthesis"]["df1"]
    trace: dict = {}
    mel = MelSettings25(steps=1, duration_factor=float(stages["duration_factor"]))
    wav = synth.vocalize(want["synthesis"]["codes"], voice, mel, trace=trace)
    assert trace["target_lengths"].tolist() == stages["target_length"].tolist() == [240]
    close("cond df 1.25", trace["cond"], stages["cond"])
    assert wav.shape[-1] == 240 * 256
    with pytest.raises(SynthesisError, match="duration_factor"):
        synth.vocalize(want["synthesis"]["codes"], voice, MelSettings25(duration_factor=0.0))


def test_e2e_int16_within_2_lsb(synth, voice, want):
    e2e = want["e2e"]
    segments = e2e["segments"]
    trace: list[dict] = []
    settings = DecodeSettings(**{**vars(INFER_GREEDY), "max_codes": int(e2e["max_mel_tokens"])})
    result = synth.synthesize_ids(
        [segment["text_tokens"][0].tolist() for segment in segments], voice, None, settings,
        MelSettings25(steps=25, cfg_rate=0.7), noise=lambda index, shape: segments[index]["cfm_x0"], trace=trace,
        language=e2e["lang"])
    for index, (stage, segment) in enumerate(zip(trace, segments)):
        assert torch.equal(stage["codes_raw"], segment["codes_raw"]), f"segment {index}"
        assert stage["langs"].tolist() == segment["lang"].tolist()
        close(f"S_infer {index}", stage["S_infer"], segment["S_infer"])
    assert result.sample_rate == e2e["sampling_rate"] == 22050
    pcm = to_int16(result.waveform)
    reference = e2e["wav_int16"][0].numpy()
    assert pcm.shape == reference.shape
    assert abs(pcm.astype(int) - reference.astype(int)).max() <= 2
    assert not result.hit_stop and len(result.notes) == 3  # the random GPT never stops


def test_segments_cut_at_ethiopic_sentence_ends(synth, want):
    """Upstream cuts the e2e text mid-word (3 segments of 30 text tokens); here the cuts fall at ``።`` first, a
    sentence over the budget (36 tokens) between words, and whole words are packed while they fit."""
    text = want["e2e"]["text"]
    found = synth.segments(text)
    assert [segment.text for segment in found] == ["ሰላም ለዓለም። ይህ", "የሙከራ ድምፅ ነው።", "እንኳን ደህና መጡ!"]
    assert " ".join(segment.text for segment in found).split() == text.split()  # no word is cut
    for segment in found:
        assert segment.ids[0] == 58913 and len(segment.ids) <= 32  # <|am|>, the tiny GPT's max_text_tokens
        assert segment.ids == synth.tokenizer.encode(segment.text, "am")[:1] + synth.tokenizer.encode_text_only(
            segment.text, "am")
    assert synth.segments("ሰላም ለዓለም።")[0].ids == want["generation"]["text_tokens"][0, :-1].tolist()


# --- loading the download folder -----------------------------------------------------------------------------


def copy_folder(folder, tmp_path):
    target = tmp_path / "IndexTTS-2.5"
    shutil.copytree(folder, target, symlinks=True)
    return target


def test_missing_files_are_named_in_one_line(folder, tmp_path):
    target = copy_folder(folder, tmp_path)
    (target / "codec.pth").unlink()
    (target / "multilingual_zh_ja_yue_char_del.tiktoken").unlink()
    with pytest.raises(IndexTTS25FilesError) as caught:
        load_indextts25(target, local_files_only=True)
    message = str(caught.value)
    assert "\n" not in message and "codec.pth" in message and ".tiktoken" in message


@pytest.mark.parametrize("section, key, value, first_key", [
    ("gpt", "model_dim", 96, "emo_layer.bias: checkpoint [64] vs model [96]"),
    ("semantic_codec", "vocos_dim", 24, "decoder.0.convnext.0.dwconv.bias: checkpoint [16] vs model [24]"),
    ("s2mel", "DiT.depth", 4, "missing 13 key(s): estimator.transformer.layers.3.attention.wo.weight"),
])
def test_config_sizes_that_do_not_fit_the_weights_are_refused(folder, tmp_path, section, key, value, first_key):
    config = download_config()
    target = copy_folder(folder, tmp_path)
    part = config[section]
    *path, last = key.split(".")
    for name in path:
        part = part[name]
    part[last] = value
    (target / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    with tiled_features(), pytest.raises(IndexTTS25FilesError) as caught:
        load_indextts25(target, local_files_only=True)
    message = str(caught.value)
    assert "\n" not in message and first_key in message and section in message


def test_a_v2_gpt_checkpoint_is_refused_by_name(folder, tmp_path):
    from generations.indextts25.synthesis import load_gpt25_checkpoint

    state = torch.load(folder / "gpt.pth", weights_only=True)
    state = state.get("model", state)
    del state["lang_embedding.weight"]
    torch.save(state, tmp_path / "gpt_v2_like.pth")
    with pytest.raises(SynthesisError, match=r"lang_embedding\.weight"):
        load_gpt25_checkpoint(tmp_path / "gpt_v2_like.pth", download_config())


def test_a_merges_export_is_read_back_in_the_studio_row_order(folder, tmp_path):
    """An export's gpt.pth (no scheme recorded) holds its text rows in upstream's order; ours records its scheme
    and keeps the studio's order. Both speak with the same rows."""
    from generations.indextts25.data.text_table import TextTable

    tokenizer = TextTable(folder / "multilingual_zh_ja_yue_char_del.tiktoken", scheme="merges")
    state = torch.load(folder / "gpt.pth", weights_only=True)
    state = dict(state.get("model", state))
    added = tokenizer.added_tokens
    generator = torch.Generator().manual_seed(0)
    for key in ("text_embedding.weight", "text_head.weight", "text_head.bias"):
        extra = torch.randn((added, *state[key].shape[1:]), generator=generator)
        state[key] = torch.cat((state[key], extra))
    order = torch.tensor(tokenizer.tokenizer.upstream_id_order())
    export = {**state, **{key: state[key].index_select(0, order) for key in
                          ("text_embedding.weight", "text_head.weight", "text_head.bias")}}
    torch.save({"model": export}, tmp_path / "export_gpt.pth")
    gpt = {**download_config()["gpt"], "number_text_tokens": tokenizer.number_text_tokens}
    ours = {"model": state, "model_config": gpt, "tokenizer": {"text_scheme": {"scheme": "merges"}}}
    torch.save(ours, tmp_path / "ours.pth")
    with tiled_features():
        from generations.indextts25.synthesis import SynthesizerV25

        spoken = [SynthesizerV25.load(folder, checkpoint=tmp_path / name, local_files_only=True, **kwargs)
                  for name, kwargs in (("export_gpt.pth", {"scheme": "merges"}), ("ours.pth", {}))]
    for synth in spoken:
        assert synth.tokenizer.scheme == "merges"
        assert torch.equal(synth.model.text_embedding.weight, state["text_embedding.weight"])
        assert torch.equal(synth.model.text_head.bias, state["text_head.bias"])


def test_sampling_is_seeded_and_leaves_the_global_rng_alone(synth, voice):
    settings = DecodeSettings(mode="sample", num_beams=1, temperature=1.0, top_k=30, top_p=0.9, seed=3, max_codes=6)
    mel = MelSettings25(steps=1, seed=5)
    state = torch.get_rng_state()
    first = synth.synthesize("ሰላም ለዓለም።", voice, None, settings, mel)
    again = synth.synthesize("ሰላም ለዓለም።", voice, None, settings, mel)
    assert torch.equal(torch.get_rng_state(), state)
    assert first.codes.tolist() == again.codes.tolist() and (first.waveform == again.waveform).all()
    other = synth.synthesize("ሰላም ለዓለም።", voice, None, DecodeSettings(**{**vars(settings), "seed": 4}), mel)
    assert other.codes.tolist() != first.codes.tolist()
