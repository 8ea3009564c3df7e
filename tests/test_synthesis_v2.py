"""IndexTTS2 synthesis behaviour: segmentation at Ethiopic punctuation, the download-folder loader's refusals,
any v2 checkpoint kind, and ``python -m trainer.synthesize --model-dir`` (flags, output, one-line refusals)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch
import yaml

from networks.indextts2 import IndexTTS2FilesError, load_indextts2, resolve_files
from tests.checkpoint_factory import make_checkpoint, save, trained_state
from tests.indextts2_folder import download_config, load_synthesizer, shared_download_folder
from trainer.synthesis.errors import SynthesisError
from trainer.synthesis.generation import DecodeSettings
from trainer.synthesis.s2mel_types import EmotionControl, MelSettings
from trainer.synthesis.segments import split_segments
from trainer.synthesize import main

CORPUS = Path(__file__).resolve().parent / "fixtures" / "corpus"
AMHARIC = ("ሰላም ነው። እንዴት ነህ? ዛሬ ጥሩ ቀን ነው፣ ፀሐይ ታበራለች፣ ነፋሱም ቀዝቃዛ ነው፤ ወደ ገበያ እንሄዳለን! "
           "ትናንት ምን አደረግህ፧ መጽሐፍ አነበብኩ፨ በጣም ረጅም ዓረፍተ ነገር ያለ ምንም ሥርዓተ ነጥብ የሚቀጥል እና የሚቀጥል "
           "ብዙ ቃላትን የያዘ ጽሑፍ ይህ ነው።")
FAST = ["--steps", "1", "--max-codes", "4", "--decode", "greedy", "--device", "cpu"]


# --- segmentation -------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def amharic_tokenizer(tmp_path_factory):
    from data_tools.text_tokenizer import TextTokenizer
    from data_tools.tokenizer import train_tokenizer

    root = tmp_path_factory.mktemp("tok")
    return TextTokenizer(train_tokenizer([CORPUS / "amharic_train.txt"], root / "am", vocab_size=400, language="am"))


@pytest.mark.parametrize("limit", [4, 9, 16, 120, 1000])
def test_amharic_segments_keep_words_whole_and_fit_the_limit(amharic_tokenizer, limit):
    normalized = amharic_tokenizer.normalize(AMHARIC)
    segments = split_segments(normalized, amharic_tokenizer.encode_normalized, limit)
    assert all(0 < len(segment.ids) <= limit for segment in segments)
    # every word of the text lands whole in exactly one segment, in order, and the ids are the text's own
    assert " ".join(segment.text for segment in segments).split() == normalized.split()
    whole = [segment for segment in segments if segment.text]
    if all(len(amharic_tokenizer.encode_normalized(word)) <= limit for word in normalized.split()):
        for segment in whole:
            assert segment.ids == amharic_tokenizer.encode_normalized(segment.text)
    else:  # a word longer than the limit is cut between its tokens, its text kept with the first cut
        assert sum(len(s.ids) for s in segments) == len(amharic_tokenizer.encode_normalized(normalized))
    if len(amharic_tokenizer.encode_normalized(normalized)) <= limit:
        assert len(segments) == 1


def test_segments_end_at_sentence_marks_first_then_clause_marks():
    encode = lambda text: list(range(len(text.split())))  # noqa: E731 - one token per word
    text = "ሀ ለ ሐ። መ ሠ ረ? ሰ ሸ ቀ! በ ተ ቸ፧ ኀ ነ ኘ፨ አ ከ ኸ፣ ወ ዐ ዘ፤ ዠ የ ደ"
    sentences = [segment.text for segment in split_segments(text, encode, 3)]
    assert sentences == ["ሀ ለ ሐ።", "መ ሠ ረ?", "ሰ ሸ ቀ!", "በ ተ ቸ፧", "ኀ ነ ኘ፨", "አ ከ ኸ፣", "ወ ዐ ዘ፤", "ዠ የ ደ"]
    assert [s.text for s in split_segments(text, encode, 6)][:2] == ["ሀ ለ ሐ። መ ሠ ረ?", "ሰ ሸ ቀ! በ ተ ቸ፧"]
    # clause marks only matter inside a sentence longer than the limit
    assert [s.text for s in split_segments("አ ከ ኸ፣ ወ ዐ ዘ።", encode, 4)] == ["አ ከ ኸ፣", "ወ ዐ ዘ።"]
    assert [s.text for s in split_segments("አ ከ ኸ፣ ወ ዐ ዘ።", encode, 6)] == ["አ ከ ኸ፣ ወ ዐ ዘ።"]


def test_decimal_point_does_not_end_a_sentence_and_overlong_words_split_by_tokens():
    encode = lambda text: [ord(ch) for ch in text if ch != " "]  # noqa: E731 - one token per character
    assert [s.text for s in split_segments("PI IS 3.14. OK", encode, 10)] == ["PI IS 3.14.", "OK"]
    pieces = split_segments("ABCDEFGHIJ", encode, 4)
    assert [len(piece.ids) for piece in pieces] == [4, 4, 2] and [p.text for p in pieces] == ["ABCDEFGHIJ", "", ""]
    with pytest.raises(ValueError, match="at least 1"):
        split_segments("A", encode, 0)


# --- the download folder ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return shared_download_folder(tmp_path_factory)


@pytest.fixture(scope="module")
def synth(folder):
    return load_synthesizer(folder)


def linked_copy(folder: Path, target: Path) -> Path:
    """A folder of symlinks to ``folder``'s files (cheap to break one file at a time)."""
    for path in folder.rglob("*"):
        if path.is_file():
            link = target / path.relative_to(folder)
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(path.resolve())
    (target / "config.yaml").unlink()
    (target / "config.yaml").write_text((folder / "config.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    return target


def test_folder_loads_every_network_strictly(folder):
    nets = load_indextts2(folder, local_files_only=True)
    files = nets.files
    assert files.gpt.name == "gpt.pth" and files.s2mel.name == "s2mel.pth"
    assert files.semantic_codec == folder / "semantic_codec" / "model.safetensors"
    assert files.w2v_bert == str(folder / "w2v-bert-2.0") and files.tokenizer is None
    assert nets.sample_rate == 22050 and nets.emo_num == (2, 3, 1, 2, 1, 2, 2, 3)
    assert not any(module.training for net in (nets.gpt, nets.semantic, nets.codec, nets.campplus, nets.s2mel,
                                               nets.vocoder) for module in net.modules())


@pytest.mark.parametrize("missing", ["s2mel.pth", "feat1.pt", "semantic_codec/model.safetensors",
                                     "campplus_cn_common.bin", "bigvgan/config.json", "w2v-bert-2.0"])
def test_a_missing_file_is_named_in_one_line(folder, tmp_path, missing):
    broken = linked_copy(folder, tmp_path / "dl")
    path = broken / missing
    if path.is_dir():
        for child in path.iterdir():
            child.unlink()
        path.rmdir()
    else:
        path.unlink()
    with pytest.raises(IndexTTS2FilesError) as error:
        resolve_files(broken)
    assert missing in str(error.value) and "\n" not in str(error.value)
    with pytest.raises(SynthesisError, match=re.escape(missing)):
        load_synthesizer(broken)


def test_missing_config_keys_are_named(folder, tmp_path):
    broken = linked_copy(folder, tmp_path / "dl")
    config = download_config()
    del config["spk_matrix"], config["emo_num"]
    (broken / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    with pytest.raises(IndexTTS2FilesError, match=r"lacks key.*spk_matrix.*emo_num"):
        resolve_files(broken)


def test_a_file_of_the_wrong_layout_is_refused_naming_a_key(folder, tmp_path):
    broken = linked_copy(folder, tmp_path / "dl")
    (broken / "campplus_cn_common.bin").unlink()
    (broken / "campplus_cn_common.bin").symlink_to((folder / "s2mel.pth").resolve())
    with pytest.raises(SynthesisError) as error:
        load_synthesizer(broken)
    assert "campplus_cn_common.bin" in str(error.value) and "\n" not in str(error.value)


# --- checkpoints --------------------------------------------------------------------------------------------


def test_any_v2_checkpoint_kind_replaces_the_folders_gpt(folder, synth, tmp_path):
    gpt = download_config()["gpt"]
    model, optimizer, scheduler = trained_state(gpt)
    ours = save(make_checkpoint(gpt=gpt, state=(model, optimizer, scheduler)), tmp_path / "latest.pth")
    bare = save({k: v.clone() for k, v in model.state_dict().items()}, tmp_path / "gpt.pth")
    for path in (ours, bare):
        loaded = load_synthesizer(folder, checkpoint=path).model
        for name, tensor in model.state_dict().items():
            assert torch.equal(loaded.state_dict()[name], tensor), name
    v15 = save(make_checkpoint(), tmp_path / "v15.pth")
    with pytest.raises(SynthesisError, match=r"an IndexTTS-1\.5 GPT: an IndexTTS2 GPT is needed"):
        load_synthesizer(folder, checkpoint=v15)


# --- the pipeline's own rules -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def prompt(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("prompt") / "prompt.wav"
    t = np.arange(int(22050 * 1.2)) / 22050
    sf.write(path, (0.3 * np.sin(2 * np.pi * 170 * t) * (1 + 0.5 * np.sin(2 * np.pi * 3 * t))).astype(np.float32),
             22050)
    return path


@pytest.fixture(scope="module")
def voice(synth, prompt):
    return synth.prepare_voice(prompt)


def test_segments_are_joined_with_200_ms_of_silence(synth, voice):
    trace: list[dict] = []
    result = synth.synthesize_ids([[5, 6, 7], [8, 9]], voice, None, DecodeSettings(mode="greedy", max_codes=3),
                                  MelSettings(steps=1), trace=trace)
    first, second = (stage["wav"].reshape(-1).numpy() for stage in trace)
    assert [len(s.text_ids) for s in result.segments] == [3, 2] and result.sample_rate == 22050
    assert first.size == result.segments[0].mel_frames * 256 and second.size == result.segments[1].mel_frames * 256
    assert np.array_equal(result.waveform, np.concatenate([first, np.zeros(4410, np.float32), second]))
    assert all(s.codes.size == 3 and s.mel_frames == int(3 * 1.72) for s in result.segments)
    assert result.to_dict()["segments"][1]["text_tokens"] == 2


def test_same_seed_same_audio_and_the_global_rng_is_left_alone(synth, voice):
    settings = DecodeSettings(mode="sample", num_beams=1, seed=7, max_codes=3)
    state = torch.get_rng_state()
    a = synth.synthesize_ids([[5, 6, 7]], voice, None, settings, MelSettings(steps=1, seed=3))
    assert torch.equal(state, torch.get_rng_state())
    b = synth.synthesize_ids([[5, 6, 7]], voice, None, settings, MelSettings(steps=1, seed=3))
    c = synth.synthesize_ids([[5, 6, 7]], voice, None, settings, MelSettings(steps=1, seed=4))
    assert np.array_equal(a.waveform, b.waveform) and not np.array_equal(a.waveform, c.waveform)


def test_emotion_alpha_blends_a_reference_and_scales_weights(synth, voice, prompt):
    own = synth.emotion_vector(voice)
    other = synth.emotion_features(prompt)  # any features stand for "another" emotion prompt here
    shifted = other.flip(1)
    base = synth.emotion_vector(voice, EmotionControl(alpha=0.0), emotion_features=shifted)
    full = synth.emotion_vector(voice, EmotionControl(alpha=1.0), emotion_features=shifted)
    half = synth.emotion_vector(voice, EmotionControl(alpha=0.5), emotion_features=shifted)
    torch.testing.assert_close(half, (base + full) / 2, atol=1e-5, rtol=1e-5)
    assert not torch.allclose(base, full)
    weights = (0.0, 0.3, 0.0, 0.0, 0.0, 0.0, 0.2, 0.0)
    scaled = synth.emotion_vector(voice, EmotionControl(weights=weights, alpha=0.33333))
    torch.testing.assert_close(scaled, synth.emotion_vector(voice, EmotionControl(weights=(0, 0.0999, 0, 0, 0, 0,
                                                                                            0.0666, 0))))
    assert torch.equal(synth.emotion_vector(voice, EmotionControl(weights=(0.0,) * 8)), own)


@pytest.mark.parametrize(("emotion", "message"), [
    (EmotionControl(weights=(0.5,) * 3), "8 numbers"),
    (EmotionControl(weights=(1.5, 0, 0, 0, 0, 0, 0, 0)), r"must each lie in \[0, 1\]"),
    (EmotionControl(alpha=1.5), r"alpha must be in \[0, 1\]"),
    (EmotionControl(reference="x.wav", weights=(0.0,) * 8), "not both"),
])
def test_bad_emotion_settings_are_refused(synth, voice, emotion, message):
    with pytest.raises(SynthesisError, match=message):
        synth.synthesize_ids([[5, 6]], voice, emotion, DecodeSettings(mode="greedy", max_codes=3))


def test_bad_input_is_refused(synth, voice, tmp_path):
    with pytest.raises(SynthesisError, match="no tokenizer"):
        synth.synthesize("hello", voice)
    with pytest.raises(SynthesisError, match="outside the model's text vocabulary"):
        synth.synthesize_ids([[5, 500]], voice)
    with pytest.raises(SynthesisError, match="at most 32"):
        synth.synthesize_ids([[5] * 33], voice)
    with pytest.raises(SynthesisError, match="steps must be >= 1"):
        synth.synthesize_ids([[5]], voice, mel=MelSettings(steps=0))
    with pytest.raises(SynthesisError, match="file not found"):
        synth.prepare_voice(tmp_path / "nope.wav")
    (tmp_path / "junk.wav").write_bytes(b"not audio")
    with pytest.raises(SynthesisError, match="cannot read audio"):
        synth.prepare_voice(tmp_path / "junk.wav")


# --- the CLI ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def english_tokenizer(tmp_path_factory) -> Path:
    """A tokenizer small enough for the tiny GPT's 100 text tokens."""
    from data_tools.tokenizer import train_tokenizer

    root = tmp_path_factory.mktemp("entok")
    return train_tokenizer([CORPUS / "english_train.txt"], root / "en", vocab_size=90, language="en")


def refused(capsys, args: list[str]) -> str:
    code = main(args)
    err = capsys.readouterr().err
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    return lines[0]


def v2_args(folder: Path, prompt: Path, out: Path, *extra: str) -> list[str]:
    return ["--model-dir", str(folder), "--reference", str(prompt), "--out", str(out), *FAST, *extra]


def test_cli_speaks_with_an_indextts2_folder(folder, prompt, english_tokenizer, tmp_path, capsys):
    report = tmp_path / "report.json"
    out = tmp_path / "out.wav"
    args = v2_args(folder, prompt, out, "--tokenizer", str(english_tokenizer), "--json", str(report),
                   "--text", "Hello there. How are you today?", "--emotion-vector", "0,0.3,0,0,0,0,0.2,0",
                   "--emotion-alpha", "0.5", "--segment-tokens", "16")
    assert main(args) == 0, capsys.readouterr().err
    audio, rate = sf.read(out, dtype="int16")
    assert rate == 22050
    data = json.loads(report.read_text(encoding="utf-8"))
    assert data["s2mel"]["steps"] == 1 and data["emotion"]["weights"] == [0, 0.3, 0, 0, 0, 0, 0.2, 0]
    item = data["items"][0]
    segments = item["segments"]
    assert len(segments) == 2 and [s["text"] for s in segments] == ["HELLO THERE.", "HOW ARE YOU TODAY?"]
    assert audio.size == sum(s["mel_frames"] * 256 for s in segments) + 4410
    assert "real-time factor" in capsys.readouterr().out


def test_cli_emotion_reference_and_a_bare_checkpoint(folder, prompt, english_tokenizer, tmp_path, capsys):
    out = tmp_path / "ref.wav"
    gpt = folder / "gpt.pth"
    args = v2_args(folder, prompt, out, "--tokenizer", str(english_tokenizer), "--checkpoint", str(gpt),
                   "--text", "Good morning.", "--emotion-reference", str(prompt), "--emotion-alpha", "0.6")
    assert main(args) == 0, capsys.readouterr().err
    assert sf.info(out).samplerate == 22050


@pytest.mark.parametrize(("extra", "message"), [
    (["--emotion-vector", "1,2"], "8 numbers"),
    (["--emotion-vector", "a,b"], "8 comma-separated numbers"),
    (["--emotion-alpha", "2"], r"alpha must be in \[0, 1\]"),
    (["--emotion-reference", "nope.wav"], "--emotion-reference nope.wav: file not found"),
    (["--steps", "0"], "steps must be >= 1"),
    (["--segment-tokens", "0"], "--segment-tokens must be >= 1"),
    (["--config", "config.yaml"], "--config is for IndexTTS 1.5"),
    (["--w2v-bert", "/nonexistent/w2v"], "/nonexistent/w2v"),
])
def test_cli_refuses_bad_v2_input_in_one_line(folder, prompt, english_tokenizer, tmp_path, capsys, extra, message):
    args = v2_args(folder, prompt, tmp_path / "x.wav", "--tokenizer", str(english_tokenizer), "--text", "Hi.", *extra)
    assert re.search(message, refused(capsys, args))
    assert not (tmp_path / "x.wav").exists()


def test_cli_refuses_v2_flags_without_a_model_dir_and_missing_v15_files(capsys, tmp_path, prompt):
    base = ["--reference", str(prompt), "--out", str(tmp_path / "x.wav"), "--text", "hi"]
    assert "--emotion-vector need(s) --model-dir" in refused(capsys, [*base, "--emotion-vector", "0,0,0,0,0,0,0,0",
                                                                       "--checkpoint", "a", "--config", "b",
                                                                       "--tokenizer", "c"])
    assert "required: --checkpoint, --config, --tokenizer" in refused(capsys, base)
    line = refused(capsys, [*base, "--model-dir", str(tmp_path / "absent")])
    assert "folder not found" in line


def test_cli_without_any_tokenizer_says_so(folder, prompt, tmp_path, capsys):
    assert os.path.exists(folder / "config.yaml")
    line = refused(capsys, v2_args(folder, prompt, tmp_path / "x.wav", "--text", "Hi."))
    assert "pass --tokenizer" in line
