"""Synthesis behaviour without reference fixtures: KV cache = recompute, private RNG, modes, demo vocoder."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from networks.unified_voice import build_model
from trainer.synthesis import DecodeSettings, SynthesisError, Synthesizer, generate_codes, load_vocoder
from trainer.synthesis.cached_decoder import CachedDecoder
from trainer.synthesis.demo_vocoder import build_demo_vocoder, demo_bigvgan_config, write_demo_vocoder
from trainer.synthesis.generation import prefix_embeddings

TINY_GPT = {
    "model_dim": 64, "max_mel_tokens": 40, "max_text_tokens": 24, "heads": 4, "layers": 2,
    "number_text_tokens": 100, "condition_num_latent": 8,
    "condition_module": {"output_size": 32, "linear_units": 64, "attention_heads": 4, "num_blocks": 1,
                         "input_layer": "conv2d2", "perceiver_mult": 2},
}


def tiny_gpt(seed: int = 3) -> torch.nn.Module:
    """A random tiny GPT whose code choices depend on text and history (sharpened like the fixtures)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = build_model(TINY_GPT)
        with torch.no_grad():
            for name, param in model.named_parameters():
                if "embedding" in name:
                    param.mul_(20)
                elif name.startswith("mel_head") or (
                    name.startswith("gpt.h.") and name.endswith("weight") and "ln_" not in name
                ):
                    param.mul_(8)
            model.mel_head.bias[model.stop_mel_token] += 6
    return model.eval()


@pytest.fixture(scope="module")
def model():
    return tiny_gpt()


@pytest.fixture(scope="module")
def conds(model):
    mel = torch.sin(torch.arange(100 * 90, dtype=torch.float32).view(1, 100, 90) * 0.37) - 3
    with torch.no_grad():
        return model.get_conditioning(mel, torch.tensor([90]))


@pytest.fixture(scope="module")
def synth(model):
    return Synthesizer(model, build_demo_vocoder(demo_bigvgan_config(64), seed=1))


TEXT = torch.tensor([[5, 17, 42, 8, 99, 23, 64, 11, 7]])
PADDED = torch.tensor([[5, 17, 42, 8, 99, 23, 64, 11, 7], [30, 31, 2, 1, 1, 1, 1, 1, 1]])


@pytest.mark.parametrize("settings", [
    DecodeSettings(mode="greedy", repetition_penalty=1.0),
    DecodeSettings(mode="greedy", repetition_penalty=10.0),
    DecodeSettings(mode="beam", num_beams=3),
    DecodeSettings(mode="sample", num_beams=1, seed=7, top_k=0, top_p=1.0),
    DecodeSettings(mode="sample", num_beams=1, seed=11, temperature=0.8, top_k=50, top_p=0.9),
    DecodeSettings(mode="sample", num_beams=3, seed=5),
], ids=["greedy", "greedy_rep10", "beam3", "sample", "sample_topk_topp", "beam_sample"])
@pytest.mark.parametrize("text", [TEXT, PADDED], ids=["one", "batch_left_padded"])
def test_kv_cache_gives_the_codes_of_full_recompute(model, conds, settings, text):
    settings = DecodeSettings(**{**settings.__dict__, "max_codes": 16})
    cached = generate_codes(model, conds, text, settings, use_cache=True)
    full = generate_codes(model, conds, text, settings, use_cache=False)
    assert torch.equal(cached.codes, full.codes)
    assert cached.steps == full.steps
    assert cached.codes.size(1) >= 2


@pytest.mark.parametrize("moves", [[0, 1, 2], [2, 0, 0], [1, 1, 2], [0, 2, 1]],
                         ids=["identity", "fan_out", "partial", "swap"])
def test_cache_reorder_copies_only_filled_moved_rows(model, conds, moves):
    text = PADDED[[0, 1, 1]]  # rows of different padding, so the key mask moves with the rows too
    prefix, mask = prefix_embeddings(model, conds, text)
    rows = torch.tensor(moves)
    tokens = torch.tensor([3, 9, 27])
    cached, full = CachedDecoder(model, use_cache=True), CachedDecoder(model, use_cache=False)
    with torch.no_grad():
        for decoder in (cached, full):
            decoder.start(prefix, mask, prefix.size(1) + 4)
            decoder.step(tokens, 2)
        before = [k.clone() for k in cached.keys]
        for k in cached.keys:
            k[:, :, cached.length :] = float("nan")  # unfilled capacity: must be neither read nor copied
        for decoder in (cached, full):
            decoder.reorder(rows)
        for k, old in zip(cached.keys, before):
            assert torch.equal(k[:, :, : cached.length], old[rows, :, : cached.length])
        after = [decoder.step(tokens, 3) for decoder in (cached, full)]
    torch.testing.assert_close(after[0], after[1], rtol=1e-4, atol=1e-4)


def test_generation_depends_on_text_and_stops(model, conds):
    settings = DecodeSettings(mode="greedy", repetition_penalty=10.0)
    a = generate_codes(model, conds, TEXT, settings).codes
    b = generate_codes(model, conds, TEXT[:, :4], settings).codes
    assert not torch.equal(a, b)
    assert (a == model.stop_mel_token).any() or a.size(1) == TINY_GPT["max_mel_tokens"]


def test_sampling_follows_its_seed_only(model, conds):
    settings = DecodeSettings(mode="sample", num_beams=1, seed=1, top_k=0, top_p=1.0, repetition_penalty=1.0)
    first = generate_codes(model, conds, TEXT, settings).codes
    torch.manual_seed(12345)  # the global stream is not used
    again = generate_codes(model, conds, TEXT, settings).codes
    other = generate_codes(model, conds, TEXT, DecodeSettings(**{**settings.__dict__, "seed": 2})).codes
    assert torch.equal(first, again)
    assert not torch.equal(first, other)


def _global_rng_states() -> tuple:
    return random.getstate(), np.random.get_state(), torch.get_rng_state()


def _same_states(a: tuple, b: tuple) -> bool:
    (py_a, np_a, torch_a), (py_b, np_b, torch_b) = a, b
    return (py_a == py_b and np_a[0] == np_b[0] and np.array_equal(np_a[1], np_b[1]) and np_a[2:] == np_b[2:]
            and torch.equal(torch_a, torch_b))


@pytest.mark.parametrize("mode,beams", [("sample", 1), ("sample", 3), ("beam", 3)])
def test_synthesis_leaves_global_rng_streams_alone(synth, mode, beams):
    random.seed(1)
    np.random.seed(2)
    torch.manual_seed(3)
    before = _global_rng_states()
    mel = torch.randn(100, 60, generator=torch.Generator().manual_seed(0)) - 4
    results = synth.synthesize_ids([5, 6, 7, 8], mel, DecodeSettings(mode=mode, num_beams=beams, seed=9, max_codes=12))
    assert results.waveform.size > 0
    assert _same_states(before, _global_rng_states())
    if torch.cuda.is_available():  # pragma: no cover - GPU machines
        cuda_before = torch.cuda.get_rng_state_all()
        synth.synthesize_ids([5, 6, 7, 8], mel, DecodeSettings(mode=mode, num_beams=beams, seed=9, max_codes=12))
        assert all(torch.equal(x, y) for x, y in zip(cuda_before, torch.cuda.get_rng_state_all()))


def test_train_and_eval_flags_are_restored(synth):
    model, vocoder = synth.model, synth.vocoder
    model.train()
    model.conditioning_encoder.eval()  # a mixed state must come back exactly as it was
    flags = {name: m.training for name, m in model.named_modules()}
    vocoder.train()
    mel = torch.zeros(100, 40) - 5
    try:
        result = synth.synthesize_ids([9, 10], mel, DecodeSettings(mode="greedy", max_codes=6))
        again = synth.synthesize_ids([9, 10], mel, DecodeSettings(mode="greedy", max_codes=6))
        assert {name: m.training for name, m in model.named_modules()} == flags
        assert all(m.training for m in vocoder.modules())
        np.testing.assert_array_equal(result.waveform, again.waveform)  # dropout was off inside
    finally:
        model.eval()
        vocoder.eval()


def test_result_fields(synth):
    mel = torch.zeros(1, 100, 50) - 5
    result = synth.synthesize_ids([9, 10, 11], mel, DecodeSettings(mode="greedy", max_codes=10))
    assert result.sample_rate == 24000
    assert result.waveform.dtype == np.float32 and result.waveform.ndim == 1
    assert result.waveform.size == result.codes.size * 1024
    assert result.audio_seconds == pytest.approx(result.codes.size * 1024 / 24000)
    assert result.seconds > 0
    assert result.real_time_factor == pytest.approx(result.seconds / result.audio_seconds)
    assert np.abs(result.waveform).max() <= 1.0
    summary = result.to_dict()
    assert summary["codes"] == result.codes.size and "waveform" not in summary


def test_bad_input_is_refused(synth):
    mel = torch.zeros(100, 50) - 5
    with pytest.raises(SynthesisError, match="too long: 25 tokens"):
        synth.synthesize_ids(list(range(2, 27)), mel)
    with pytest.raises(SynthesisError, match="empty"):
        synth.synthesize_ids([], mel)
    with pytest.raises(SynthesisError, match="max_codes 41 exceeds"):
        synth.synthesize_ids([3], mel, DecodeSettings(max_codes=41))
    with pytest.raises(SynthesisError, match="reference mel must be"):
        synth.synthesize_ids([3], torch.zeros(80, 50))
    # The speaker encoder's widest reflect padding is 4 frames (kernel 3, dilation 4): 4 frames are too few.
    with pytest.raises(SynthesisError, match="reference is too short: 4 mel frames, at least 5 needed"):
        synth.prepare_reference(torch.zeros(100, 4) - 5)
    assert synth.prepare_reference(torch.zeros(100, 5) - 5).conds.shape[0] == 1
    with pytest.raises(SynthesisError, match="top_p"):
        synth.synthesize_ids([3], mel, DecodeSettings(top_p=0.0))
    with pytest.raises(SynthesisError, match="no tokenizer"):
        synth.synthesize(["hello"], mel)


def test_vocoder_must_fit_the_gpt(model):
    with pytest.raises(SynthesisError, match="model_dim is 64"):
        Synthesizer(model, build_demo_vocoder(demo_bigvgan_config(gpt_dim=32)))


def test_demo_vocoder_is_small_deterministic_and_loads(tmp_path):
    state = torch.get_rng_state()
    first = write_demo_vocoder(tmp_path / "a" / "bigvgan_generator.pth")
    second = write_demo_vocoder(tmp_path / "b" / "bigvgan_generator.pth")
    assert torch.equal(state, torch.get_rng_state())
    assert first.stat().st_size < 2_000_000
    a = torch.load(first, weights_only=True)
    b = torch.load(second, weights_only=True)
    assert list(a) == ["generator"]
    assert a["generator"].keys() == b["generator"].keys()
    assert all(torch.equal(a["generator"][k], b["generator"][k]) for k in a["generator"])
    vocoder = load_vocoder(first, {"bigvgan": demo_bigvgan_config()})
    with torch.no_grad():
        wav = vocoder(torch.randn(1, 5, 64), torch.randn(1, 60, 100) - 4)
    assert wav.shape == (1, 1, 5 * 1024)
    assert 0.01 < float(wav.std()) < 0.5  # audible noise, not silence, not clipping


def test_load_gpt_takes_any_checkpoint_kind(tmp_path):
    """Ours (its model_config, a grown vocabulary), a bare gpt.pth (rows from the weights), fp16 exports."""
    from tests.checkpoint_factory import make_checkpoint, tiny_gpt_config, trained_state
    from trainer.synthesis import load_gpt

    base = {"gpt": tiny_gpt_config(number_text_tokens=40)}
    grown = tiny_gpt_config(number_text_tokens=60)
    with torch.random.fork_rng(devices=[]):
        model, optimizer, scheduler = trained_state(grown)
    ours = tmp_path / "latest.pth"
    torch.save(make_checkpoint(gpt=grown, state=(model, optimizer, scheduler)), ours)
    bare = tmp_path / "gpt.pth"
    torch.save({"model": {k: v.half() for k, v in model.state_dict().items()}}, bare)
    for path, tol in ((ours, 0.0), (bare, 1e-3)):
        loaded = load_gpt(path, base, "config.yaml")
        assert loaded.gpt_config["number_text_tokens"] == 60 and not loaded.training
        for name, value in model.state_dict().items():
            got = loaded.state_dict()[name]
            assert got.dtype == value.dtype
            torch.testing.assert_close(got, value, atol=tol, rtol=tol)
    junk = tmp_path / "junk.pth"
    torch.save({"step": 3}, junk)
    with pytest.raises(SynthesisError, match="holds no IndexTTS GPT weights"):
        load_gpt(junk, base)


def test_from_state_makes_a_private_copy(model):
    vocoder = build_demo_vocoder(demo_bigvgan_config(64))
    synth = Synthesizer.from_state(model.gpt_config, model.state_dict(), vocoder)
    assert synth.model is not model
    assert synth.model.mel_head.weight.data_ptr() != model.mel_head.weight.data_ptr()
    mel = torch.zeros(100, 40) - 5
    settings = DecodeSettings(mode="greedy", max_codes=5)
    copy_result = synth.synthesize_ids([4, 5], mel, settings)
    live_result = Synthesizer(model, vocoder).synthesize_ids([4, 5], mel, settings)
    np.testing.assert_array_equal(copy_result.codes, live_result.codes)
