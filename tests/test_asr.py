"""CTC transcription through the real loading path: tiny random models saved as local folders."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from data_tools.asr import SUGGESTED_AMHARIC_MODELS, AsrError, Transcript, load_ctc_asr
from data_tools.audio import resample
from tests.speech_model_factory import (
    LETTERS,
    SAMPLE_RATE,
    build_ctc_model,
    build_mms_style_model,
    build_xvector_model,
    noise_clips,
)

pytest.importorskip("transformers")
REPO = Path(__file__).resolve().parents[1]
MMS_LETTERS = {"eng": "abcde", "amh": "fghijklmn"}


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("asr-models")
    return {"ctc": build_ctc_model(root / "ctc"), "mms": build_mms_style_model(root / "mms", MMS_LETTERS),
            "root": root}


@pytest.fixture(scope="module")
def asr(models):
    return load_ctc_asr(str(models["ctc"]), device="cpu")


def _same(batched: list[Transcript], alone: list[Transcript]) -> None:
    assert [t.text for t in batched] == [t.text for t in alone]
    assert [t.confidence for t in batched] == pytest.approx([t.confidence for t in alone], abs=1e-5)


def test_batched_equals_one_at_a_time(asr):
    clips = noise_clips([0.5, 1.1, 0.3, 0.8, 0.45, 0.9, 0.6], seed=1)
    batched = asr.transcribe(clips, SAMPLE_RATE, batch_size=3)
    alone = [asr.transcribe([clip], SAMPLE_RATE, batch_size=1)[0] for clip in clips]
    _same(batched, alone)
    assert all(t.text for t in batched), "the sharpened random head emits letters"
    assert set("".join(t.text for t in batched)) <= set(LETTERS) | {" "}
    assert all(0.0 <= t.confidence <= 1.0 for t in batched)


def test_models_that_cannot_ignore_padding_transcribe_one_clip_at_a_time(asr, tmp_path):
    assert asr.batches_exactly
    base_style = load_ctc_asr(str(build_ctc_model(tmp_path / "base-style", base_style=True)), device="cpu")
    assert not base_style.batches_exactly
    clips = noise_clips([0.5, 1.1, 0.3], seed=6)
    batched = base_style.transcribe(clips, SAMPLE_RATE, batch_size=3)
    assert batched == [base_style.transcribe([clip], SAMPLE_RATE)[0] for clip in clips]


def test_order_kept_and_batch_size_does_not_matter(asr):
    clips = noise_clips([0.3, 0.9, 0.5, 0.7], seed=2)
    reference = asr.transcribe(clips, SAMPLE_RATE, batch_size=4)
    _same(asr.transcribe(clips, SAMPLE_RATE, batch_size=2), reference)
    _same(asr.transcribe(clips[::-1], SAMPLE_RATE)[::-1], reference)


def test_resampled_to_the_processor_rate(asr):
    clips = noise_clips([0.6, 0.4], seed=3, sample_rate=24_000)
    at_model_rate = [resample(clip, 24_000, SAMPLE_RATE) for clip in clips]
    _same(asr.transcribe(clips, 24_000), asr.transcribe(at_model_rate, SAMPLE_RATE))


def test_empty_list_and_clips_too_short_for_the_model(asr):
    # 30 samples make no frame of the tiny conv stack (kernel 10 stride 5, then kernel 8 stride 4)
    assert asr.transcribe([], SAMPLE_RATE) == []
    out = asr.transcribe([np.zeros(0, np.float32), np.zeros(30, np.float32), *noise_clips([0.4])], SAMPLE_RATE)
    assert out[:2] == [Transcript("", 0.0), Transcript("", 0.0)]
    assert out[2].text


def test_confidence_is_the_mean_top_probability_of_emitting_frames(asr):
    import torch

    clip = noise_clips([0.5], seed=4)[0]
    inputs = asr.processor.feature_extractor([clip], sampling_rate=SAMPLE_RATE, return_tensors="pt")
    with torch.no_grad():
        probabilities = asr.model(**inputs).logits[0].softmax(-1)
    top, ids = probabilities.max(-1)
    expected = float(top[ids != asr.blank_id].mean())
    assert asr.transcribe([clip], SAMPLE_RATE)[0].confidence == pytest.approx(expected, abs=1e-6)


def test_doubled_letters_survive_the_ctc_collapse(asr):
    import torch

    vocab = asr.processor.tokenizer.get_vocab()
    a, b, blank, bar = vocab["a"], vocab["b"], asr.blank_id, vocab["|"]
    path = torch.tensor([a, a, blank, a, b, b, bar, b, vocab["<s>"], blank])
    ids = asr._collapse(path)
    assert asr.processor.tokenizer.batch_decode([ids], group_tokens=False) == ["aab b"]


def test_bad_clips_refused_in_one_line(asr):
    with pytest.raises(AsrError, match=r"^clip 1: expected mono samples \(1-D\), got shape \(2, 100\)$"):
        asr.transcribe([np.zeros(800, np.float32), np.zeros((2, 100), np.float32)], SAMPLE_RATE)
    with pytest.raises(AsrError, match=r"^clip 0: NaN or infinite samples$"):
        asr.transcribe([np.full(800, np.nan, np.float32)], SAMPLE_RATE)
    with pytest.raises(AsrError, match="sample rate 0"):
        asr.transcribe([np.zeros(800, np.float32)], 0)
    with pytest.raises(AsrError, match="batch size 0"):
        asr.transcribe([np.zeros(800, np.float32)], SAMPLE_RATE, batch_size=0)


def test_mms_adapter_selected_by_target_lang(models):
    clips = noise_clips([0.5, 0.7], seed=5)
    amharic = load_ctc_asr(str(models["mms"]), target_lang="amh", device="cpu")
    english = load_ctc_asr(str(models["mms"]), target_lang="eng", device="cpu")
    amh_out, eng_out = amharic.transcribe(clips, SAMPLE_RATE), english.transcribe(clips, SAMPLE_RATE)
    assert amh_out != eng_out
    # each language decodes with its own vocabulary, through a head sized to it by its adapter
    assert set("".join(t.text for t in amh_out)) <= set(MMS_LETTERS["amh"]) | {" "}
    assert set("".join(t.text for t in eng_out)) <= set(MMS_LETTERS["eng"]) | {" "}
    assert amharic.model.lm_head.out_features == 5 + len(MMS_LETTERS["amh"])
    assert amharic.target_lang == "amh"
    _same(amharic.transcribe(clips, SAMPLE_RATE, batch_size=2),
          [amharic.transcribe([clip], SAMPLE_RATE)[0] for clip in clips])


def test_mms_language_errors(models, tmp_path):
    mms = str(models["mms"])
    with pytest.raises(AsrError, match=r"multilingual model \(2 languages\): choose target_lang \(e.g. amh, eng\)"):
        load_ctc_asr(mms)
    with pytest.raises(AsrError, match="no vocabulary for language 'xyz'"):
        load_ctc_asr(mms, target_lang="xyz")
    with pytest.raises(AsrError, match="has no language adapters, so target_lang 'amh' does not apply"):
        load_ctc_asr(str(models["ctc"]), target_lang="amh")
    import shutil

    partial = tmp_path / "mms-no-amh-adapter"
    shutil.copytree(models["mms"], partial)
    (partial / "adapter.amh.safetensors").unlink()
    with pytest.raises(AsrError, match=r"no adapter for language 'amh' \(adapter.amh.safetensors"):
        load_ctc_asr(str(partial), target_lang="amh")


def _one_line(error: pytest.ExceptionInfo) -> str:
    message = str(error.value)
    assert "\n" not in message
    return message


def test_folders_that_are_not_ctc_models_refused(models, tmp_path):
    from transformers import BertConfig, Wav2Vec2Config, Wav2Vec2Model

    xvector = build_xvector_model(tmp_path / "xvector")
    with pytest.raises(AsrError) as error:
        load_ctc_asr(str(xvector))
    assert _one_line(error) == f"{xvector}: a WavLMForXVector model, not a CTC speech recogniser (needs a *ForCTC model)"

    encoder = tmp_path / "encoder"
    Wav2Vec2Model(Wav2Vec2Config(hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
                                 conv_dim=(8,), conv_stride=(5,), conv_kernel=(10,), num_conv_pos_embeddings=4,
                                 num_conv_pos_embedding_groups=2)).save_pretrained(encoder)
    with pytest.raises(AsrError, match="a Wav2Vec2Model model, not a CTC speech recogniser"):
        load_ctc_asr(str(encoder))

    text_model = tmp_path / "bert"
    BertConfig(hidden_size=16, num_hidden_layers=1, num_attention_heads=2).save_pretrained(text_model)
    with pytest.raises(AsrError, match="a 'bert' model, not a CTC speech recogniser"):
        load_ctc_asr(str(text_model))

    with pytest.raises(AsrError) as error:
        load_ctc_asr(str(models["root"]))
    assert _one_line(error) == f"{models['root']}: not a transformers model folder (no config.json)"

    no_tokenizer = tmp_path / "no-tokenizer"
    import shutil

    shutil.copytree(models["ctc"], no_tokenizer)
    for name in ("vocab.json", "tokenizer_config.json", "special_tokens_map.json"):
        (no_tokenizer / name).unlink(missing_ok=True)
    with pytest.raises(AsrError) as error:
        load_ctc_asr(str(no_tokenizer))
    assert _one_line(error) == f"{no_tokenizer}: no tokenizer (vocab.json) beside the model, so its outputs " \
                               "cannot be turned into text"


def test_missing_folder_or_bad_id_refused_in_one_line(tmp_path):
    for model in (str(tmp_path / "missing"), "./nope", "a/b/c", "~/models/x/y"):
        with pytest.raises(AsrError) as error:
            load_ctc_asr(model)
        assert _one_line(error).endswith("no such model folder (and not a model id like owner/name)")
    with pytest.raises(AsrError, match="no model given"):
        load_ctc_asr("  ")
    file = tmp_path / "weights.bin"
    file.write_bytes(b"x")
    with pytest.raises(AsrError, match="a file, not a model folder"):
        load_ctc_asr(str(file))


def test_model_id_that_does_not_resolve_refused_in_one_line(monkeypatch):
    import transformers

    def offline(*_args, **_kwargs):
        raise OSError("We couldn't connect to 'https://huggingface.co' to load the files.\nCheck your connection.")

    monkeypatch.setattr(transformers.AutoConfig, "from_pretrained", offline)
    with pytest.raises(AsrError) as error:
        load_ctc_asr("someone/amharic-ctc")
    assert _one_line(error) == ("someone/amharic-ctc: no such model folder, and it could not be loaded as a model "
                                "id (We couldn't connect to 'https://huggingface.co' to load the files.)")


def test_device_choice(models):
    import torch

    with pytest.raises(AsrError, match="expected auto, cpu, cuda or cuda:N"):
        load_ctc_asr(str(models["ctc"]), device="tpu")
    if not torch.cuda.is_available():
        with pytest.raises(AsrError, match="no CUDA GPU is visible"):
            load_ctc_asr(str(models["ctc"]), device="cuda")
        assert load_ctc_asr(str(models["ctc"])).device.type == "cpu"


def test_suggested_models_table():
    ids = [entry.model for entry in SUGGESTED_AMHARIC_MODELS]
    assert ids[0] == "facebook/mms-1b-all"
    assert SUGGESTED_AMHARIC_MODELS[0].target_lang == "amh"
    assert "CC-BY-NC-4.0" in SUGGESTED_AMHARIC_MODELS[0].licence
    assert all(entry.licence and entry.note for entry in SUGGESTED_AMHARIC_MODELS)


def test_import_stays_free_of_transformers():
    code = ("import sys, data_tools.asr, data_tools.speaker_similarity, data_tools.scoring; "
            "print('transformers' in sys.modules, 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120,
                         check=True)
    assert out.stdout.split() == ["False", "False"]


def test_weights_missing_a_layer_refused_naming_the_key(models, tmp_path):
    import shutil

    from safetensors.torch import load_file, save_file

    folder = tmp_path / "headless"
    shutil.copytree(models["ctc"], folder)
    weights = load_file(str(folder / "model.safetensors"))
    save_file({k: v for k, v in weights.items() if not k.startswith("lm_head")}, str(folder / "model.safetensors"),
              metadata={"format": "pt"})
    with pytest.raises(AsrError) as error:
        load_ctc_asr(str(folder))
    assert _one_line(error) == (f"{folder}: the weights lack lm_head.bias and 1 more key(s): not a complete "
                                "CTC speech recogniser")
    # masked_spec_embed is only used in training: a checkpoint without it still loads
    save_file({k: v for k, v in weights.items() if "masked_spec_embed" not in k}, str(folder / "model.safetensors"),
              metadata={"format": "pt"})
    assert load_ctc_asr(str(folder), device="cpu").transcribe(noise_clips([0.3]), SAMPLE_RATE)[0].text
