"""IndexTTS-2.5 audio networks number for number against indextts25/fixtures_audio (set A, or B where present).

Preparation (every stage of ``items``): prompt loading and resampling, SeamlessM4T features, w2v-BERT layer 17,
normalised features, the 2.5 codec (z_e, 25 Hz codes, margins), Kaldi fbank, CAM++ style, emotion vectors, the
stored training item. Synthesis (``synthesis``): codec decode -> S_infer, S2Mel without gpt_layer, the length
regulator with duration factors 1.0 / 1.25, the CFM from the stored noise, the estimator's first and last calls.
Real layouts: codec, S2Mel 2.5, CAMPPlus and w2v-BERT built on meta from the real config values carry exactly
the keys and shapes of indextts25_audio_state_dict_shapes.json. Tolerances are FIXTURES.md's: floats atol/rtol
1e-4 (2e-4 for w2v-BERT outputs); codes, ids, masks and lengths exact, except a code whose fixture margin is
under 1e-4, which may be the fixture's runner-up.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path

import pytest
import torch
import yaml

from networks.campplus import REAL_SIZES, CAMPPlus, load_campplus
from networks.codec25 import Codec25, Codec25Config, build_codec25, load_codec25
from networks.frontends.kaldi_fbank import kaldi_fbank, speaker_fbank
from networks.frontends.s2mel_mel import S2MelMelSettings, s2mel_log_mel
from networks.frontends.seamless_features import build_feature_extractor, extract_features
from networks.loading import StateDictMismatchError
from networks.prep25 import (
    Prep25Networks,
    Prepared25,
    SpeakerPrompt,
    codes_of,
    emotion_vector,
    load_emotion_prompt,
    load_speaker_prompt,
    prepare_audio,
    speaker_audio_16k,
    speaker_style,
)
from networks.s2mel import S2Mel, S2MelCheckpointError, load_s2mel, read_s2mel_net, target_mel_frames
from networks.synthesis25 import PromptCondition, segment_mel, speaker_prompt_condition
from networks.w2v_bert import SEMANTIC_LAYER, SemanticStats, build_w2v_bert, load_w2v_bert_state
from tests.conftest import shared_file
from tests.test_s2mel_fixtures import REAL_S2MEL_SECTION

FIXTURE_DIR = ("reference", "indextts25", "fixtures_audio")
FLOAT_TOL = {"atol": 1e-4, "rtol": 1e-4}
W2V_TOL = {"atol": 2e-4, "rtol": 2e-4}
CODE_MARGIN = 1e-4
# The real semantic_codec section (v2.0's, which 2.5 keeps: README_audio.md section 2.2).
REAL_CODEC_SECTION = {
    "codebook_size": 8192,
    "hidden_size": 1024,
    "codebook_dim": 8,
    "vocos_dim": 384,
    "vocos_intermediate_dim": 2048,
    "vocos_num_layers": 12,
}


def close(name: str, actual: torch.Tensor, expected: torch.Tensor, tol: dict = FLOAT_TOL) -> None:
    torch.testing.assert_close(actual, expected, **tol, msg=lambda m: f"{name}: {m}")


def fixture_path(name: str) -> Path:
    return shared_file(*FIXTURE_DIR, name)


@pytest.fixture(scope="module")
def config() -> dict:
    return yaml.safe_load(fixture_path("tiny_audio_config_v25.yaml").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def expected() -> dict:
    return torch.load(fixture_path("audio_expected_v25.pt"), weights_only=True)


@pytest.fixture(scope="module")
def codec(config: dict) -> Codec25:
    return load_codec25(fixture_path(config["fixture_codec_checkpoint"]), config["semantic_codec"])


@pytest.fixture(scope="module")
def campplus(config: dict) -> CAMPPlus:
    return load_campplus(fixture_path(config["fixture_campplus_checkpoint"]), **config["fixture_campplus"])


@pytest.fixture(scope="module")
def extractor(config: dict):
    return build_feature_extractor(config["fixture_feature_extractor"])


class BridgedFeatures(torch.nn.Module):
    """The fixture's w2v-BERT features: layer 17 of the tiny (32-wide) model tiled to 1024 channels, then
    normalised. The tiling (``fixture_width_bridge``) exists only in the fixtures; the real model is 1024
    wide and goes straight to the stats (networks.w2v_bert.SemanticFeatureModel)."""

    def __init__(self, config: dict) -> None:
        super().__init__()
        self.model = load_w2v_bert_state(
            config["fixture_w2v_bert"], fixture_path(config["fixture_w2v_bert_checkpoint"])
        )
        self.stats = SemanticStats.from_file(fixture_path(config["w2v_stat"]))
        self.width = int(config["fixture_width_bridge"]["tile_hidden_states_to"])

    def layer_output(self, input_features: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        output = self.model(
            input_features=input_features, attention_mask=attention_mask, output_hidden_states=True
        )
        return output.hidden_states[SEMANTIC_LAYER]

    def normalise(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.stats(hidden.repeat(1, 1, self.width // hidden.shape[-1]))

    def forward(self, input_features: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.normalise(self.layer_output(input_features, attention_mask))


@pytest.fixture(scope="module")
def features(config: dict) -> BridgedFeatures:
    return BridgedFeatures(config).eval()


@pytest.fixture(scope="module")
def gpt(config: dict):
    from networks.gpt_v25 import load_gpt_v25_file

    location = Path(config["fixture_gpt_checkpoint_location"])
    return load_gpt_v25_file(config, shared_file(*FIXTURE_DIR, *location.parts)).eval()


@pytest.fixture(scope="module")
def s2mel(config: dict) -> S2Mel:
    return load_s2mel(fixture_path(config["s2mel_checkpoint"]), config["s2mel"], with_gpt_layer=False)


@pytest.fixture(scope="module")
def prepared(expected: dict, extractor, features, codec, campplus, gpt):
    """prepare_audio of item i (speaker prompt + its separate 16 kHz emotion load), computed once per item."""
    nets = Prep25Networks(extractor=extractor, features=features, codec=codec, campplus=campplus, gpt=gpt)
    done: dict[int, Prepared25] = {}

    def of(index: int) -> Prepared25:
        if index not in done:
            item = expected["items"][index]
            prompt = SpeakerPrompt(item["audio_22k"], item["audio_16k"])
            done[index] = prepare_audio(nets, prompt, item["emo_audio_16k"])
        return done[index]

    return of


def item_ids(expected_items: int = 2) -> list[int]:
    return list(range(expected_items))


def assert_codes(
    codes: torch.Tensor, expected: torch.Tensor, runner_up: torch.Tensor, margins: torch.Tensor
) -> None:
    """Exact wherever the fixture's best-minus-second margin exceeds CODE_MARGIN; the fixture's code or our
    runner-up elsewhere (a float32 tie-level decision)."""
    assert codes.shape == expected.shape and codes.dtype == torch.int64
    confident = margins.reshape(expected.shape) > CODE_MARGIN
    assert torch.equal(codes[confident], expected[confident])
    assert bool(((codes == expected) | (runner_up == expected)).all())


# --- preparation: audio -> 2.5 training item -------------------------------------------------------------


@pytest.mark.parametrize("index", item_ids())
def test_prompt_files_load_and_resample_like_infer(expected: dict, index: int, tmp_path: Path) -> None:
    soundfile = pytest.importorskip("soundfile")
    item = expected["items"][index]
    path = tmp_path / "prompt.wav"
    soundfile.write(path, item["wav_int16"].numpy(), item["wav_sr"], subtype="PCM_16")
    prompt = load_speaker_prompt(path)
    close("audio_22k", prompt.audio_22k, item["audio_22k"])
    assert prompt.audio_16k.shape == item["audio_16k"].shape
    close("audio_16k", prompt.audio_16k, item["audio_16k"])
    close("speaker_audio_16k", speaker_audio_16k(item["audio_22k"]), item["audio_16k"])
    emo = load_emotion_prompt(path)
    assert emo.shape == item["emo_audio_16k"].shape
    close("emo_audio_16k", emo, item["emo_audio_16k"])


@pytest.mark.parametrize("index", item_ids())
def test_features_layer17_and_normalised_features(
    expected: dict, extractor, features, prepared, index: int
) -> None:
    item = expected["items"][index]
    for prefix, audio in (("", "audio_16k"), ("emo_", "emo_audio_16k")):
        input_features, mask = extract_features(extractor, item[audio][0])
        close(f"{prefix}input_features", input_features, item[f"{prefix}input_features"])
        assert torch.equal(mask.to(torch.int32), item[f"{prefix}attention_mask"])
    with torch.no_grad():
        raw = features.layer_output(item["input_features"], item["attention_mask"])
        close("w2v_hidden17_raw", raw, item["w2v_hidden17_raw"], W2V_TOL)
        close("spk_cond_emb (bridge)", features.normalise(raw), item["spk_cond_emb"], W2V_TOL)
    # The product chain (networks.prep25.semantic_features) from the 16 kHz audio, both prompts.
    close("spk_cond_emb", prepared(index).spk_cond_emb, item["spk_cond_emb"], W2V_TOL)
    close("emo_cond_emb", prepared(index).emo_cond_emb, item["emo_cond_emb"], W2V_TOL)


@pytest.mark.parametrize("index", item_ids())
def test_codec_latents_codes_and_margins(expected: dict, codec: Codec25, index: int) -> None:
    item = expected["items"][index]
    frames = item["spk_cond_emb"].shape[1]
    with torch.no_grad():
        close("codec_z_e", codec.latents(item["spk_cond_emb"]), item["codec_z_e"])
        search = codec.search(item["spk_cond_emb"])
    assert search.codes.shape == (1, (frames + 1) // 2)  # 25 Hz: ceil(T / 2), an odd last frame kept
    assert_codes(search.codes, item["codes"], search.second, item["code_margins"])
    close("code_margins", search.margin[0], item["code_margins"])
    codes = codes_of(codec, item["spk_cond_emb"])
    assert_codes(codes, item["codes"], search.second, item["code_margins"])
    assert torch.equal(codes, item["training_item"]["codes"][None])


def test_codec_batch_matches_items_alone(expected: dict, codec: Codec25) -> None:
    items = expected["items"]
    shortest = min(item["spk_cond_emb"].shape[1] for item in items)
    batch = torch.cat([item["spk_cond_emb"][:, :shortest] for item in items])
    with torch.no_grad():
        together = codec.quantize(batch)
        for row, item in enumerate(items):
            alone = codec.quantize(item["spk_cond_emb"][:, :shortest])
            assert torch.equal(together[0][row], alone[0][0])
            close("quantized", together[1][row], alone[1][0])
            close("quantized = vq2emb", alone[1], codec.embed_codes(alone[0]).transpose(1, 2))


@pytest.mark.parametrize("index", item_ids())
def test_fbank_and_campplus_style(expected: dict, campplus: CAMPPlus, index: int) -> None:
    item = expected["items"][index]
    close("fbank", kaldi_fbank(item["audio_16k"][0]), item["fbank"])
    close("fbank_centered", speaker_fbank(item["audio_16k"])[0], item["fbank_centered"])
    style = speaker_style(campplus, item["audio_16k"])
    close("style", style, item["style"])


@pytest.mark.parametrize("index", item_ids())
def test_emotion_vectors(expected: dict, gpt, index: int) -> None:
    item = expected["items"][index]
    spk, emo = item["spk_cond_emb"], item["emo_cond_emb"]
    width = torch.tensor([spk.shape[-1]])  # infer's quirk: the feature width 1024 as the length
    with torch.no_grad():
        close("emovec_merge", emotion_vector(gpt, spk, emo), item["emovec_merge"])
        close(
            "emovec_merge (width lengths)",
            emotion_vector(gpt, spk, emo, spk_lengths=width, emo_lengths=width),
            item["emovec_merge"],
        )
        close("emo_vec_get_emovec", gpt.get_emovec(emo.transpose(1, 2), width), item["emo_vec_get_emovec"])
        close("quirk_len1024", gpt.get_emovec(spk.transpose(1, 2), width), item["emo_vec_spk_quirk_len1024"])
        true_len = torch.tensor([spk.shape[1]])
        close("true_len", gpt.get_emovec(spk.transpose(1, 2), true_len), item["emo_vec_spk_true_len"])
        # no emotion prompt: the speaker sets it, and alpha 0 keeps the speaker's own vector
        close("no emotion prompt", emotion_vector(gpt, spk), item["emo_vec_spk_true_len"])
        close("alpha 0", emotion_vector(gpt, spk, emo, alpha=0.0), item["emo_vec_spk_true_len"])


@pytest.mark.parametrize("index", item_ids())
def test_prepare_audio_gives_the_training_item(expected: dict, prepared, index: int) -> None:
    item = expected["items"][index]
    stored = item["training_item"]
    made = prepared(index).training_item(item["text_ids"], item["lang_id"])
    assert sorted(made) == sorted(stored)
    assert torch.equal(made["codes"], stored["codes"])
    assert torch.equal(made["text_ids"], stored["text_ids"]) and made["lang"] == stored["lang"]
    close("spk_emb", made["spk_emb"], stored["spk_emb"])
    close("emo_vec", made["emo_vec"], stored["emo_vec"])
    close("style", prepared(index).style, item["style"])
    without_gpt = dataclasses.replace(prepared(index), emo_vec=None)
    with pytest.raises(ValueError, match="needs the emotion vector"):
        without_gpt.training_item(item["text_ids"], item["lang_id"])


# --- synthesis: codes -> S_infer -> S2Mel (2.5 layout) ---------------------------------------------------


def test_decode_gives_the_50hz_s2mel_input(expected: dict, codec: Codec25) -> None:
    synthesis = expected["synthesis"]
    codes = synthesis["codes"]
    assert torch.equal(codes, expected["items"][synthesis["codes_from_item"]]["codes"])
    with torch.no_grad():
        s_infer = codec.decode(codes)
        assert s_infer.shape == (1, 2 * codes.shape[1], codec.config.hidden_size)
        close("S_infer", s_infer, synthesis["S_infer"])
        pair = codec.decode(torch.cat([codes, codes.flip(1)]))  # a batch decodes row by row
        close("batch row 0", pair[:1], synthesis["S_infer"])
        close("batch row 1", pair[1:], codec.decode(codes.flip(1)))
    size = codec.config.codebook_size
    with pytest.raises(ValueError, match=rf"codes must lie in 0\.\.{size - 1}, got 0\.\.{size}"):
        codec.decode(torch.tensor([[0, size]]))
    with pytest.raises(ValueError, match="integer codes of shape"):
        codec.decode(codes.float())


def test_ref_mel_prompt_condition_and_duration_factor(expected: dict, config: dict, s2mel: S2Mel) -> None:
    synthesis = expected["synthesis"]
    prompt = expected["items"][synthesis["prompt_from_item"]]
    ref_mel = s2mel_log_mel(
        prompt["audio_22k"], S2MelMelSettings.from_preprocess_params(config["s2mel"]["preprocess_params"])
    )
    close("ref_mel", ref_mel, synthesis["ref_mel"])
    prompt_condition = s2mel.prompt_condition(
        prompt["spk_cond_emb"], ref_mel.shape[-1]
    )  # continuous features
    close("prompt_condition", prompt_condition, synthesis["prompt_condition"])
    frames = synthesis["S_infer"].shape[1]
    for key in ("df0", "df1"):
        case = synthesis[key]
        target = target_mel_frames(frames, case["duration_factor"])
        assert target == int(case["target_length"][0])
        with torch.no_grad():
            cond = s2mel.length_regulator(synthesis["S_infer"], torch.tensor([target]))
        close(f"{key}.cond", cond, case["cond"])
    assert (target_mel_frames(112), target_mel_frames(112, 1.25)) == (192, 240)


@pytest.fixture(scope="module")
def prompt(expected: dict, config: dict, s2mel: S2Mel) -> PromptCondition:
    item = expected["items"][expected["synthesis"]["prompt_from_item"]]
    settings = S2MelMelSettings.from_preprocess_params(config["s2mel"]["preprocess_params"])
    return speaker_prompt_condition(s2mel, item["audio_22k"], item["spk_cond_emb"], item["style"], settings)


@pytest.fixture(scope="module")
def cfm_run(
    expected: dict, codec: Codec25, s2mel: S2Mel, prompt: PromptCondition
) -> tuple[torch.Tensor, dict]:
    synthesis = expected["synthesis"]
    trace: dict = {}
    mel = segment_mel(
        codec,
        s2mel,
        synthesis["codes"],
        prompt,
        duration_factor=synthesis["df0"]["duration_factor"],
        steps=synthesis["n_timesteps"],
        cfg_rate=synthesis["inference_cfg_rate"],
        noise=synthesis["cfm_noise"].clone(),
        trace=trace,
    )
    return mel, trace


def test_s2mel_stage_by_stage_with_fixed_noise(expected: dict, cfm_run: tuple) -> None:
    synthesis = expected["synthesis"]
    mel, trace = cfm_run
    close("S_infer", trace["S_infer"], synthesis["S_infer"])
    assert trace["target_lengths"].tolist() == synthesis["df0"]["target_length"].tolist()
    close("cond", trace["cond"], synthesis["df0"]["cond"])
    close("cat_condition", trace["cat_condition"], synthesis["cat_condition"])
    close("est_t_all", trace["t_steps"], synthesis["est_t_all"])
    assert trace["t_steps"].shape[0] == synthesis["n_est_calls"]
    close("est_call0_x", trace["x_steps"][0], synthesis["est_call0_x"][:1])
    close("est_call0_out", trace["est_out_first"], synthesis["est_call0_out"])
    close("est_call24_out", trace["est_out_last"], synthesis["est_call24_out"])
    close("cfm_out", trace["cfm_out_full"], synthesis["cfm_out"])
    assert mel.shape == synthesis["vc_target"].shape
    close("vc_target", mel, synthesis["vc_target"])


def test_prompt_condition_and_style_are_the_stored_ones(expected: dict, prompt: PromptCondition) -> None:
    synthesis = expected["synthesis"]
    close("ref_mel", prompt.ref_mel, synthesis["ref_mel"])
    close("prompt_condition", prompt.condition, synthesis["prompt_condition"])
    close("style", prompt.style, synthesis["est_call0_style"][:1])


def test_duration_factor_stretches_only_the_mel(
    expected: dict, codec: Codec25, s2mel: S2Mel, prompt: PromptCondition
) -> None:
    synthesis = expected["synthesis"]
    case = synthesis["df1"]
    trace: dict = {}
    mel = segment_mel(
        codec,
        s2mel,
        synthesis["codes"],
        prompt,
        duration_factor=case["duration_factor"],
        steps=1,
        trace=trace,
    )
    assert mel.shape == (1, 80, int(case["target_length"][0]))
    close("df1.cond", trace["cond"], case["cond"])
    with pytest.raises(ValueError, match="duration_factor must be positive"):
        segment_mel(codec, s2mel, synthesis["codes"], prompt, duration_factor=0.0)


def test_e2e_segments_decode_to_their_s_infer(expected: dict, codec: Codec25) -> None:
    for index, segment in enumerate(expected["e2e"]["segments"]):
        with torch.no_grad():
            close(f"e2e segment {index} S_infer", codec.decode(segment["codes_raw"]), segment["S_infer"])


def test_cfm_noise_is_the_seeded_global_draw(expected: dict) -> None:
    synthesis = expected["synthesis"]
    generator = torch.Generator().manual_seed(synthesis["cfm_seed"])
    assert torch.equal(torch.randn(synthesis["cfm_noise"].shape, generator=generator), synthesis["cfm_noise"])


# --- S2Mel 2.5 loading ----------------------------------------------------------------------------------


def test_s2mel_25_layout_loads_without_gpt_layer_and_ignores_a_stored_one(
    config: dict, s2mel: S2Mel, tmp_path: Path
) -> None:
    path = fixture_path(config["s2mel_checkpoint"])
    net = read_s2mel_net(path)
    assert sorted(net) == ["cfm", "length_regulator"]
    assert s2mel.gpt_layer is None and s2mel.net_parts == ("cfm", "length_regulator")
    with pytest.raises(S2MelCheckpointError, match="no 'gpt_layer'"):
        load_s2mel(path, config["s2mel"], gpt_dim=config["gpt"]["model_dim"])  # the IndexTTS2 layout
    # The released 2.5 s2mel.pth still carries IndexTTS2's gpt_layer: read past, as upstream does.
    with torch.device("meta"):
        v2 = S2Mel.from_config(config["s2mel"], gpt_dim=1280)
    with_gpt_layer = {
        **net,
        "gpt_layer": {k: torch.zeros(v.shape) for k, v in v2.gpt_layer.state_dict().items()},
    }
    torch.save({"net": with_gpt_layer}, tmp_path / "s2mel.pth")
    reloaded = load_s2mel(tmp_path / "s2mel.pth", config["s2mel"], with_gpt_layer=False)
    for part in ("cfm", "length_regulator"):
        for key, value in getattr(reloaded, part).state_dict().items():
            assert torch.equal(value, getattr(s2mel, part).state_dict()[key]), key
    with pytest.raises(ValueError, match="no gpt_layer"):
        s2mel.infer(
            prompt_condition=torch.zeros(1, 4, 32),
            ref_mel=torch.zeros(1, 80, 4),
            style=torch.zeros(1, 192),
            gpt_latent=torch.zeros(1, 3, 64),
            code_embedding=torch.zeros(1, 1024, 3),
        )


def test_s2mel_25_config_that_does_not_fit_is_refused_by_key(config: dict) -> None:
    section = copy.deepcopy(config["s2mel"])
    channels = section["length_regulator"]["channels"]
    width = section["length_regulator"]["in_channels"]
    section["length_regulator"]["in_channels"] = width // 2
    with pytest.raises(StateDictMismatchError) as error:
        load_s2mel(fixture_path(config["s2mel_checkpoint"]), section, with_gpt_layer=False)
    message = str(error.value)
    assert "\n" not in message and "net.length_regulator" in message
    assert (
        f"content_in_proj.weight: checkpoint [{channels}, {width}] vs model [{channels}, {width // 2}]"
        in message
    )


# --- real layouts on the meta device, refusals -----------------------------------------------------------


@pytest.fixture(scope="module")
def real_shapes() -> dict:
    data = json.loads(
        shared_file("reference", "indextts25", "indextts25_audio_state_dict_shapes.json").read_text()
    )
    shapes = {short_name(name): value for name, value in data.items()}
    # "_counts_keys_elements_params" by the same short names: [keys, stored elements, parameters]
    shapes["counts"] = {
        short_name(name): value for name, value in shapes.pop("_counts_keys_elements_params").items()
    }
    return shapes


def short_name(name: str) -> str:
    """'codec (EnhancedCodec, codec.pth["model"])' -> 'codec'."""
    return name.split(" ")[0]


def layout(module: torch.nn.Module) -> list[tuple[str, list[int], str]]:
    return [
        (key, list(value.shape), str(value.dtype).removeprefix("torch."))
        for key, value in module.state_dict().items()
    ]


def expected_layout(shapes: dict) -> list[tuple[str, list[int], str]]:
    return [(key, shape, dtype) for key, (shape, dtype) in shapes.items()]


def assert_counts(module_state: dict, counts: list[int]) -> None:
    assert (len(module_state), sum(value.numel() for value in module_state.values())) == (
        counts[0],
        counts[1],
    )


def test_real_codec_layout_on_meta(real_shapes: dict) -> None:
    codec = build_codec25(REAL_CODEC_SECTION, device="meta")
    assert codec.config == Codec25Config() and codec.config.downsample_scale == 2
    assert layout(codec) == expected_layout(real_shapes["codec"])  # same keys, shapes, dtypes and order
    counts = real_shapes["counts"]["codec"]
    assert_counts(codec.state_dict(), counts)
    assert sum(p.numel() for p in codec.parameters()) == counts[2] == 50_583_312


def test_real_s2mel_25_layout_on_meta(real_shapes: dict) -> None:
    with torch.device("meta"):
        model = S2Mel.from_config(REAL_S2MEL_SECTION, with_gpt_layer=False)
        v2 = S2Mel.from_config(REAL_S2MEL_SECTION)
    net = model.net_state_dict()
    assert sorted(net) == ["cfm", "length_regulator"]
    counts = real_shapes["counts"]
    for part in ("cfm", "length_regulator"):
        shapes = real_shapes[f"s2mel.{part}"]
        assert {k: list(v.shape) for k, v in net[part].items()} == {k: s for k, (s, _) in shapes.items()}, (
            part
        )
        assert_counts(net[part], counts[f"s2mel.{part}"])
    assert layout(v2.gpt_layer) == expected_layout(real_shapes["s2mel.gpt_layer"])  # the part 2.5 skips


def test_real_campplus_and_w2v_bert_layouts_on_meta(real_shapes: dict) -> None:
    with torch.device("meta"):
        campplus = CAMPPlus(**REAL_SIZES)
    assert layout(campplus) == expected_layout(real_shapes["campplus"])
    counts = real_shapes["counts"]
    assert_counts(campplus.state_dict(), counts["campplus"])
    w2v = build_w2v_bert(device="meta")
    assert {k: list(v.shape) for k, v in w2v.state_dict().items()} == {
        k: s for k, (s, _) in real_shapes["w2v_bert_2"].items()
    }
    assert sum(p.numel() for p in w2v.parameters()) == counts["w2v_bert_2"][2]


def test_real_codec_layout_loads_and_one_wrong_shape_is_named(real_shapes: dict, tmp_path: Path) -> None:
    codec = build_codec25(REAL_CODEC_SECTION, device="meta")
    with torch.device("meta"):
        state = {key: torch.empty(shape) for key, (shape, _) in real_shapes["codec"].items()}
    codec.load_state_dict(state, strict=True, assign=True)  # exactly the real key set
    from networks.loading import load_strict

    bad = "encoder.0.convnext.5.pwconv1.weight"
    with torch.device("meta"):
        state[bad] = torch.empty(2048, 383)
    with pytest.raises(StateDictMismatchError) as error:
        load_strict(build_codec25(REAL_CODEC_SECTION, device="meta"), state, "codec.pth", assign=True)
    message = str(error.value)
    assert "\n" not in message and message.startswith("codec.pth does not fit Codec25:")
    assert f"{bad}: checkpoint [2048, 383] vs model [2048, 384]" in message


def test_codec_config_that_does_not_fit_the_weights_is_refused(config: dict, tmp_path: Path) -> None:
    path = fixture_path(config["fixture_codec_checkpoint"])
    dim = config["semantic_codec"]["vocos_dim"]
    wrong = {**config["semantic_codec"], "vocos_dim": dim + 8}
    with pytest.raises(StateDictMismatchError) as error:
        load_codec25(path, wrong)
    message = str(error.value)
    assert "\n" not in message
    assert message.split(": ", 1)[1].startswith(
        f"decoder.0.convnext.0.dwconv.bias: checkpoint [{dim}] vs model [{dim + 8}]"
    )
    layers = config["semantic_codec"]["vocos_num_layers"]
    deeper = {**config["semantic_codec"], "vocos_num_layers": layers + 1}
    with pytest.raises(
        StateDictMismatchError, match=rf"missing \d+ key\(s\): decoder\.0\.convnext\.{layers}\."
    ):
        load_codec25(path, deeper)
    state = torch.load(path, weights_only=True)["model"]
    v2_layout = {key: value for key, value in state.items() if not key.startswith(("down.", "up."))}
    torch.save(v2_layout, tmp_path / "repcodec.pth")  # IndexTTS2's RepCodec layout: no down / up
    with pytest.raises(
        StateDictMismatchError, match=r"missing 4 key\(s\): down\.bias, down\.weight, up\.bias"
    ):
        load_codec25(tmp_path / "repcodec.pth", config["semantic_codec"])
    with pytest.raises(ValueError, match="downsample_scale 2, got 1 and 1"):
        load_codec25(path, {**config["semantic_codec"], "downsample_scale": 1})
    with pytest.raises(ValueError, match="unknown key"):
        load_codec25(path, {**config["semantic_codec"], "vocos_width": 16})
    with pytest.raises(FileNotFoundError, match="codec weights not found"):
        load_codec25(tmp_path / "absent.pth", config["semantic_codec"])
    (tmp_path / "junk.pth").write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="cannot be read as weights only"):
        load_codec25(tmp_path / "junk.pth", config["semantic_codec"])
    with pytest.raises(ValueError, match=r"features \(batch, frames >= 1, 1024\)"):
        load_codec25(path, config["semantic_codec"]).quantize(torch.zeros(1, 10, 32))
