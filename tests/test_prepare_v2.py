"""IndexTTS2 data preparation (data_tools.prepare_v2 on data_tools.batch_prep).

- Against fixtures_indextts2_audio/dataprep_expected.pt: the base GPT's conditioning, emotion vector and its
  stages, per utterance and as the community's padded batch (atol/rtol 1e-4), with codes cut to true lengths.
- espeak-ng speech -> paired manifest the data checker calls clean and the trainer trains on.
- A run SIGKILLed mid-batch and rerun ends with the same files as an uninterrupted run.
- Bad items (corrupt, missing, silent audio, bad lines) are reported by name while the rest are prepared.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from data_tools.batch_prep import Planned, plan_batches
from data_tools.paired_prep import features_of, pad_features
from data_tools.preprocess_inputs import SourceItem
from generations.indextts2.data.prepare import ItemPreparer, build_pairs, prepare
from generations.indextts2.data.prepare_models import load_community_audio, load_models, run_models
from generations.indextts2.demo.build import DemoPaths as DemoV2Paths
from networks.frontends.resample import sinc_resample
from networks.w2v_bert import load_w2v_bert_state
from tests.conftest import require_tool, shared_file

REPO = Path(__file__).resolve().parents[1]
FIXTURES = ("reference", "fixtures_indextts2_audio")
TOL = {"atol": 1e-4, "rtol": 1e-4}
SENTENCES = REPO / "demo" / "assets" / "amharic_sentences.txt"
VOICES = ("am", "am+f2", "am+m3")


# --- the reference fixture ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def fixture_models(tmp_path_factory, demo_workspace):
    """The fixture's tiny networks, loaded the way a user's files are (w2v-BERT as a save_pretrained folder)."""
    folder = tmp_path_factory.mktemp("fixture_models")
    config = yaml.safe_load(shared_file(*FIXTURES, "tiny_audio_config.yaml").read_text(encoding="utf-8"))
    widths = config["fixture_widths"]
    config["gpt"].update(semantic_dim=widths["semantic_dim"], emo_perceiver_dim=widths["emo_perceiver_dim"])
    w2v = load_w2v_bert_state(config["fixture_w2v_bert"], shared_file(*FIXTURES, "tiny_w2v_bert.pth"))
    w2v.save_pretrained(folder / "w2v")
    from networks.frontends.seamless_features import build_feature_extractor

    build_feature_extractor(config["fixture_feature_extractor"]).save_pretrained(folder / "w2v")
    from data_tools.config import load_config, save_config

    save_config(config, folder / "config.yaml")
    return load_models(load_config(folder / "config.yaml"), gpt=shared_file(*FIXTURES, "tiny_gpt_v2_audio.pth"),
                       codec=shared_file(*FIXTURES, "tiny_semantic_codec.pth"), w2v_bert=str(folder / "w2v"),
                       w2v_stats=shared_file(*FIXTURES, "tiny_w2v_stats.pt"),
                       tokenizer=Path(demo_workspace.extended_tokenizer), device=torch.device("cpu"))


@pytest.fixture(scope="module")
def dataprep() -> dict:
    return torch.load(shared_file(*FIXTURES, "dataprep_expected.pt"), weights_only=True)


def _assert_codes(codes: torch.Tensor, utt_or_batch: dict, row: int | None = None) -> None:
    expected, second, margin = (utt_or_batch[k] for k in ("codes", "codes_second", "codes_margin"))
    if row is not None:
        expected, second, margin = expected[row], second[row], margin[row]
    else:
        expected, second, margin = expected[0], second[0], margin[0]
    frames = codes.shape[0]
    expected, second, margin = expected[:frames], second[:frames], margin[:frames]
    confident = margin > 1e-4
    assert torch.equal(codes[confident], expected[confident])
    assert bool(((codes == expected) | (codes == second)).all())


def test_conditioning_and_emotion_per_utterance(fixture_models, dataprep, tmp_path):
    soundfile = pytest.importorskip("soundfile")
    for index, utt in enumerate(dataprep["per_utt"]):
        wav = tmp_path / f"utt{index}.wav"
        soundfile.write(str(wav), utt["wav_24k"].numpy(), 24000, subtype="FLOAT")
        wave_24k, wave_16k = load_community_audio(wav)  # read back, 24 kHz -> 24 kHz (identity) -> 16 kHz
        assert np.array_equal(wave_24k, utt["wav_24k"].numpy())
        torch.testing.assert_close(torch.from_numpy(wave_16k), utt["wav_16k"], **TOL)
        features, frames = features_of(fixture_models.extractor, wave_16k)
        assert frames == int(utt["cond_lengths"][0])
        torch.testing.assert_close(torch.from_numpy(features)[None], utt["input_features"], **TOL)
        out = run_models(fixture_models, *pad_features(fixture_models.extractor, [(features, frames)]))
        assert out.lengths.tolist() == utt["cond_lengths"].tolist()
        for key in ("conditioning", "emo_perceiver_out", "emovec_layer_out", "emo_vec"):
            torch.testing.assert_close(getattr(out, key), utt[key], **TOL, msg=f"utterance {index} {key}")
        assert out.conditioning.shape == (1, 32, 64)
        _assert_codes(out.codes[0], utt)


def test_conditioning_and_emotion_as_the_padded_batch(fixture_models, dataprep):
    per_item = [features_of(fixture_models.extractor, sinc_resample(u["wav_24k"], 24000, 16000).numpy())
                for u in dataprep["per_utt"]]
    features, mask = pad_features(fixture_models.extractor, per_item)
    batch = dataprep["batch"]
    torch.testing.assert_close(features, batch["input_features"], **TOL)  # = the extractor's own padding
    assert torch.equal(mask.to(torch.int32), batch["attention_mask"])
    out = run_models(fixture_models, features, mask)
    torch.testing.assert_close(out.conditioning, batch["conditioning"], **TOL)
    torch.testing.assert_close(out.emo_vec, batch["emo_vec"], **TOL)
    assert out.lengths.tolist() == batch["cond_lengths"].tolist()
    for row, frames in enumerate(batch["cond_lengths"].tolist()):
        _assert_codes(out.codes[row, :frames], batch, row)


def test_compute_writes_true_lengths_never_the_batch_padding(fixture_models, dataprep):
    from dataclasses import replace

    preparer = ItemPreparer(models=replace(fixture_models, max_codes=75), fingerprint="x", min_duration=0.0,
                            max_duration=10.0)
    loaded = []
    for index, utt in enumerate(dataprep["per_utt"]):
        features, frames = features_of(fixture_models.extractor, utt["wav_16k"].numpy())
        item = SourceItem(f"u{index}", f"u{index}", Path(f"u{index}.wav"), "x", "s", None, f"list:{index + 1}")
        from generations.indextts2.data.prepare import LoadedItem

        loaded.append((item, LoadedItem(features=features, frames=frames, text_ids=np.arange(3, dtype=np.int32))))
    results = preparer.compute(loaded)
    assert dataprep["batch"]["cond_lengths"].tolist() == [79, 64, 74, 59]
    assert results[0].reason == "too long: 79 codes > gpt.max_mel_tokens 75"
    results = results[1:]
    assert [r.codes.size for r in results] == [64, 74, 59]
    assert all(r.codes.dtype == np.int32 and r.condition.shape == (32, 64) and r.emo_vec.shape == (64,)
               for r in results)
    # each item is computed alone (batch-invariant, issue 27): utterance 1's own fixture values
    torch.testing.assert_close(torch.from_numpy(results[0].condition), dataprep["per_utt"][1]["conditioning"][0], **TOL)


def test_every_prepared_value_is_the_same_whatever_the_batch_companions(fixture_models, dataprep):
    """Batches of 1, 2 and 64 (all four clips in one) give equal outputs: codes exactly, vectors within 1e-5."""
    from dataclasses import replace

    from generations.indextts2.data.prepare import LoadedItem

    preparer = ItemPreparer(models=replace(fixture_models, max_codes=1000), fingerprint="x", min_duration=0.0,
                            max_duration=10.0)
    loaded = []
    for index, utt in enumerate(dataprep["per_utt"]):
        features, frames = features_of(fixture_models.extractor, utt["wav_16k"].numpy())
        item = SourceItem(f"u{index}", f"u{index}", Path(f"u{index}.wav"), "x", "s", None, f"list:{index + 1}")
        loaded.append((item, LoadedItem(features=features, frames=frames, text_ids=np.arange(3, dtype=np.int32))))
    by_size = {size: [result for start in range(0, len(loaded), size)
                      for result in preparer.compute(loaded[start:start + size])] for size in (1, 2, 64)}
    alone = by_size.pop(1)
    for size, results in by_size.items():
        for one, batched in zip(alone, results, strict=True):
            assert np.array_equal(one.codes, batched.codes), size
            np.testing.assert_allclose(batched.condition, one.condition, atol=1e-5, rtol=0, err_msg=f"batch {size}")
            np.testing.assert_allclose(batched.emo_vec, one.emo_vec, atol=1e-5, rtol=0, err_msg=f"batch {size}")


# --- pieces ------------------------------------------------------------------------------------------------


def _item(name: str, speaker: str = "s") -> SourceItem:
    return SourceItem(name, name, Path(f"{name}.wav"), "text", speaker, None, f"list:{name}")


def test_batches_are_cut_by_padded_seconds_and_do_not_depend_on_input_order():
    planned = [Planned(_item(f"u{k}"), seconds) for k, seconds in enumerate([3.0, 1.0, 2.0, 1.0, 8.0, 2.5])]
    batches = plan_batches(planned, batch_seconds=6.0, max_batch_items=3)
    assert [[p.item.id for p in b] for b in batches] == [["u1", "u3", "u2"], ["u5", "u0"], ["u4"]]
    assert all(len(b) * max(p.seconds for p in b) <= 6.0 or len(b) == 1 for b in batches)
    again = plan_batches(list(reversed(planned)), batch_seconds=6.0, max_batch_items=3)
    assert [[p.item.id for p in b] for b in again] == [[p.item.id for p in b] for b in batches]


def test_pairs_same_speaker_seeded_and_never_self():
    utts = [{"id": f"{spk}{k}", "speaker": spk, "audio_path": "a", "condition_path": "c", "condition_len": 32,
             "emo_vec_path": "e", "duration": 1.0, "text": "t", "text_ids_path": "i", "text_len": 1,
             "codes_path": "k", "code_len": 50, "language": "am"}
            for spk, count in (("a", 4), ("b", 2), ("c", 1)) for k in range(count)]
    pairs, lonely = build_pairs(utts, pairs_per_target=2, seed=7)
    assert lonely == ["c"]
    assert len(pairs) == 4 * 2 + 2 * 1
    assert all(p["prompt_id"] != p["target_id"] and p["prompt_id"][0] == p["target_id"][0] for p in pairs)
    assert all(p["id"] == f"{p['target_id']}__{p['prompt_id']}" for p in pairs)
    assert build_pairs(utts, 2, 7)[0] == pairs
    assert build_pairs(utts, 2, 8)[0] != pairs
    without_a = build_pairs([u for u in utts if u["speaker"] != "a"], 2, 7)[0]
    assert without_a == [p for p in pairs if p["speaker"] == "b"]  # other speakers do not move a target's prompts


# --- end to end on the demo's tiny models ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def v2_ws(demo_workspace) -> DemoV2Paths:
    ws = DemoV2Paths.under(demo_workspace.root)
    assert ws.kit.exists() and ws.audio.is_dir()
    return ws


def prepare_argv(ws: DemoV2Paths, source: Path, out: Path, *extra: str) -> list[str]:
    return ["--input", str(source), "--out-dir", str(out), "--config", str(ws.config), "--codec", str(ws.kit.codec),
            "--w2v-bert", str(ws.kit.w2v_bert), "--tokenizer", str(ws.extended_tokenizer), "--language", "am",
            "--device", "cpu", "--quiet", *extra]


def run_prepare(ws: DemoV2Paths, source: Path, out: Path, **options):
    return prepare(source, out, ws.config, codec=ws.kit.codec, w2v_bert=str(ws.kit.w2v_bert),
                   tokenizer=ws.extended_tokenizer, language="am", device="cpu", **options)


def tree_bytes(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and ".prepare_v2" not in p.parts and p.name != "prepare_report.json"}


def cli(argv: list[str], **env: str) -> subprocess.CompletedProcess:
    """The CLI in a subprocess with one torch thread (same thread count, same float order: bitwise-equal runs)."""
    return subprocess.run([sys.executable, "-m", "data_tools.prepare_v2", *argv], cwd=REPO, capture_output=True,
                          text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1", **env})


def test_killed_mid_batch_then_rerun_gives_the_files_of_an_uninterrupted_run(v2_ws, tmp_path):
    whole = cli(prepare_argv(v2_ws, v2_ws.audio, tmp_path / "whole", "--batch-seconds", "4"))
    assert whole.returncode == 0, whole.stderr[-2000:]
    report = json.loads((tmp_path / "whole" / "prepare_report.json").read_text(encoding="utf-8"))
    assert report["utterances"] == 12 and report["batches"] >= 4 and not report["skipped"]

    out = tmp_path / "killed"
    argv = prepare_argv(v2_ws, v2_ws.audio, out, "--batch-seconds", "4")
    killed = cli(argv, STUDIO_TEST_HOOKS="1", STUDIO_TEST_PREP_KILL_IN_BATCH="3")
    assert killed.returncode == -9, killed.stderr[-2000:]
    assert "STUDIO_TEST_PREP_KILL_IN_BATCH=3 is active" in killed.stderr
    done = (out / ".prepare_v2" / "done.jsonl").read_text(encoding="utf-8").splitlines()
    assert 0 < len(done) < 12 and not (out / "pairs.jsonl").exists()
    assert len(list((out / "codes").glob("*.npy"))) == len(done) + 1  # the killed batch's first item was written

    resumed = cli(argv)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert f"{12 - len(done)} prepared now" in resumed.stdout and f"{len(done)} from an earlier run" in resumed.stdout
    assert tree_bytes(out) == tree_bytes(tmp_path / "whole")
    again = run_prepare(v2_ws, v2_ws.audio, out, batch_seconds=4.0)
    assert again.new == 0 and again.resumed == 12 and again.batches == 0
    other_codec = tmp_path / f"codec_copy{v2_ws.kit.codec.suffix}"
    shutil.copy(v2_ws.kit.codec, other_codec)  # another file: the finished items are not trusted for it
    changed = prepare(v2_ws.audio, out, v2_ws.config, codec=other_codec, w2v_bert=str(v2_ws.kit.w2v_bert),
                      tokenizer=v2_ws.extended_tokenizer, language="am", device="cpu", batch_seconds=4.0)
    assert changed.redone == 12 and changed.new == 12 and changed.resumed == 0
    assert "12 item(s) prepared earlier with other models or settings" in changed.summary()


def test_bad_items_are_reported_by_name_and_the_rest_prepared(v2_ws, tmp_path):
    audio = tmp_path / "audio"
    shutil.copytree(v2_ws.audio, audio)
    wavs = sorted(audio.rglob("*.wav"))
    corrupt, silent = wavs[0], wavs[1]
    corrupt.write_bytes(b"RIFF\x00\x00\x00\x00WAVEnot really audio")
    import soundfile

    soundfile.write(str(silent), np.zeros(24000, dtype=np.float32), 24000)
    rows = [{"audio": str(w), "text": w.with_suffix(".txt").read_text(encoding="utf-8").strip(),
             "speaker": w.parent.name, "id": f"{w.parent.name}_{w.stem}"} for w in wavs]
    rows.append({"audio": str(audio / "missing.wav"), "text": "ሰላም", "speaker": "x", "id": "missing"})
    listing = tmp_path / "list.jsonl"
    listing.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows) + "{not json\n",
                       encoding="utf-8")
    out = tmp_path / "out"
    result = cli(prepare_argv(v2_ws, listing, out))
    assert result.returncode == 0, result.stderr[-2000:]
    lines = [line for line in result.stderr.splitlines() if line.startswith("skipped ")]
    assert f"skipped {corrupt}: unreadable audio" in "\n".join(lines)
    assert any(line.startswith(f"skipped {silent}: silent audio") for line in lines)
    assert any(line.startswith(f"skipped {audio / 'missing.wav'}: missing audio") for line in lines)
    assert any(line.startswith(f"skipped {listing}:14: bad input: malformed JSON") for line in lines)
    assert len(lines) == 4
    report = json.loads((out / "prepare_report.json").read_text(encoding="utf-8"))
    assert report["utterances"] == 10 and len(report["skipped"]) == 4
    assert "10 utterances" in result.stdout


def test_refuses_a_codec_that_does_not_fit_in_one_line(v2_ws, tmp_path):
    from networks.semantic_codec import read_state_dict_file

    state = dict(read_state_dict_file(v2_ws.kit.codec))  # the demo's model.safetensors (a download folder's name)
    del state["quantizer.quantizers.0.codebook.weight"]
    broken = tmp_path / "codec.pth"
    torch.save({"model": state}, broken)
    argv = prepare_argv(v2_ws, v2_ws.audio, tmp_path / "o")
    argv[argv.index("--codec") + 1] = str(broken)
    result = cli(argv)
    assert result.returncode == 2
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "semantic codec" in errors[0] and "missing 1 key(s)" in errors[0], result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.slow
def test_espeak_speech_prepares_into_pairs_checked_clean_and_trains(v2_ws, tmp_path):
    espeak = require_tool("espeak-ng", "speaks the Amharic sentences of the IndexTTS2 preparation test")
    lines = [s for s in SENTENCES.read_text(encoding="utf-8").splitlines() if s.strip()]
    rows = []
    (tmp_path / "speech").mkdir()
    for k, sentence in enumerate(sorted(lines, key=len)[:12]):
        voice = VOICES[k % len(VOICES)]
        wav = tmp_path / "speech" / f"utt{k}.wav"
        subprocess.run([espeak, "-v", voice, "-s", "190", "-w", str(wav), sentence], check=True,
                       capture_output=True, timeout=60)
        rows.append({"audio": wav.name, "text": sentence, "speaker": voice.replace("+", "_"), "id": f"utt{k}"})
    listing = tmp_path / "speech" / "list.jsonl"
    listing.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")

    out = tmp_path / "prepared"
    report = run_prepare(v2_ws, listing, out, pairs_per_target=2, seed=3, batch_seconds=6.0)
    assert report.utterances == 12 and not report.skipped, report.summary()
    assert report.pairs == 24
    for utt in (json.loads(x) for x in (out / "utterances.jsonl").read_text(encoding="utf-8").splitlines()):
        codes = np.load(out / utt["codes_path"])
        # the true length: 50 codes per second less the fbank window's edge, never a batch neighbour's length
        assert codes.size == utt["code_len"] and 50 * utt["duration"] - 2 <= codes.size <= 50 * utt["duration"]

    from data_tools.check_data import check_manifests
    from data_tools.split import split_manifest

    split = split_manifest(out / "pairs.jsonl", tmp_path / "split", val_fraction=0.0, seed=0, held_out_speakers=1)
    assert split.val_count == 8 and split.train_count == 16, split.summary()
    for train, val in ((out / "pairs.jsonl", None), (split.train_path, split.val_path)):
        checked = check_manifests([train], [val] if val else [], tokenizer=v2_ws.extended_tokenizer,
                                  config=v2_ws.config, language="am", workers=1)
        assert checked.verdict == "clean", checked.summary_text()

    run = tmp_path / "run"
    argv = [sys.executable, "-m", "trainer.train", "--train-manifest", str(split.train_path), "--val-manifest",
            str(split.val_path), "--tokenizer", str(v2_ws.extended_tokenizer), "--config", str(v2_ws.config),
            "--base-checkpoint", str(v2_ws.base_checkpoint), "--output-dir", str(run), "--max-steps", "3",
            "--batch-size", "2", "--warmup-steps", "1", "--log-interval", "1", "--val-interval", "3",
            "--save-interval", "3", "--num-workers", "0", "--device", "cpu", "--amp", "off"]
    result = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=300,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    events = [json.loads(x) for x in (run / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [e["step"] for e in events if e["event"] == "train"] == [1, 2, 3]
    assert any(e["event"] == "val" for e in events) and (run / "latest.pth").is_file()


def test_layers_after_17_are_dropped_with_bitwise_equal_features(v2_ws, tmp_path):
    from data_tools.config import load_config
    from demo.feature_kit import W2V_BERT_SETTINGS
    from networks.frontends.seamless_features import build_feature_extractor
    from networks.w2v_bert import SemanticFeatureModel, SemanticStats, build_w2v_bert

    torch.manual_seed(5)
    full = build_w2v_bert({**W2V_BERT_SETTINGS, "num_hidden_layers": 24})  # w2v-BERT 2.0's depth
    full.save_pretrained(tmp_path / "w2v24")
    build_feature_extractor().save_pretrained(tmp_path / "w2v24")
    models = load_models(load_config(v2_ws.config), gpt=v2_ws.base_checkpoint, codec=v2_ws.kit.codec,
                         w2v_bert=str(tmp_path / "w2v24"), w2v_stats=v2_ws.kit.w2v_stats,
                         tokenizer=v2_ws.extended_tokenizer, device=torch.device("cpu"))
    assert len(models.semantic.model.encoder.layers) == 17
    wave = load_community_audio(sorted(v2_ws.audio.rglob("*.wav"))[0])[1]
    features, mask = pad_features(models.extractor, [features_of(models.extractor, wave)])
    with torch.no_grad():
        expected = SemanticFeatureModel(full, SemanticStats.from_file(v2_ws.kit.w2v_stats))(features, mask)
    assert torch.equal(run_models(models, features, mask).feat, expected)
