"""IndexTTS-2.5 data preparation (data_tools.prepare_v25 on data_tools.batch_prep), on tiny random networks.

- espeak-ng speech -> 2.5 paired manifest the data checker calls clean (whole and split) and the trainer trains
  on; the files are what the 2.5 steps give (25 Hz codes of the true length, CAM++ [192], emotion [dim], ids of
  the 2.5 tokenizer with the language prefix).
- A run SIGKILLed mid-batch and rerun ends with the same files as an uninterrupted run.
- Bad audio is reported by name while the rest are prepared; clips over the text or code limits are flagged
  by the shared shape rule; a codec that does not fit is refused in one line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import soundfile
import torch

from data_tools.config import load_config
from data_tools.paired_prep import features_of
from data_tools.preprocess_inputs import SourceItem
from data_tools.shape_rules import DataLimits
from demo.voices import SAMPLE_RATE, synthetic_voice, write_demo_audio
from generations.indextts25.data.prepare import ItemPreparer, LoadedItem, prepare
from generations.indextts25.data.prepare_models import load_audio_16k, load_models
from generations.indextts25.data.text_table import DEFAULT_MERGES, DEFAULT_TABLE, TextTable
from generations.indextts25.demo.prep_kit import PrepKit, write_prep_kit
from tests.conftest import require_tool

REPO = Path(__file__).resolve().parents[1]
SENTENCES = REPO / "demo" / "assets" / "amharic_sentences.txt"
VOICES = ("am", "am+f2", "am+m3")
MAX_TEXT_TOKENS, MAX_CODES = 60, 250  # the kit's limits: 60 ids, 10 s of 25 Hz codes


def sentences() -> list[str]:
    return [s for s in SENTENCES.read_text(encoding="utf-8").splitlines() if s.strip()]


@pytest.fixture(scope="module")
def kit(tmp_path_factory) -> PrepKit:
    return write_prep_kit(tmp_path_factory.mktemp("kit25"), seed=0, max_text_tokens=MAX_TEXT_TOKENS,
                          max_mel_tokens=MAX_CODES)


@pytest.fixture(scope="module")
def audio(tmp_path_factory) -> Path:
    """12 synthetic utterances of 3 speakers (speaker folders of audio + .txt)."""
    folder = tmp_path_factory.mktemp("audio25")
    write_demo_audio(folder, sentences(), ("spk_a", "spk_b", "spk_c"))
    return folder


def prepare_argv(kit: PrepKit, source: Path, out: Path, *extra: str) -> list[str]:
    return ["--input", str(source), "--out-dir", str(out), "--config", str(kit.config), "--w2v-bert",
            str(kit.w2v_bert), "--language", "am", "--device", "cpu", "--quiet", *extra]


def run_prepare(kit: PrepKit, source: Path, out: Path, **options):
    return prepare(source, out, kit.config, w2v_bert=str(kit.w2v_bert), language="am", device="cpu", **options)


def cli(argv: list[str], **env: str) -> subprocess.CompletedProcess:
    """The CLI in a subprocess with one torch thread (same thread count, same float order: bitwise-equal runs)."""
    return subprocess.run([sys.executable, "-m", "data_tools.prepare_v25", *argv], cwd=REPO, capture_output=True,
                          text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1", **env})


def tree_bytes(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and ".prepare_v25" not in p.parts and p.name != "prepare_report.json"}


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.mark.slow
def test_espeak_speech_prepares_into_a_manifest_checked_clean_that_trains(kit, tmp_path):
    espeak = require_tool("espeak-ng", "speaks the Amharic sentences of the IndexTTS-2.5 preparation test")
    rows = []
    (tmp_path / "speech").mkdir()
    for k, sentence in enumerate(sorted(sentences(), key=len)[:12]):
        voice = VOICES[k % len(VOICES)]
        wav = tmp_path / "speech" / f"utt{k}.wav"
        subprocess.run([espeak, "-v", voice, "-s", "190", "-w", str(wav), sentence], check=True,
                       capture_output=True, timeout=60)
        rows.append({"audio": wav.name, "text": sentence, "speaker": voice.replace("+", "_"), "id": f"utt{k}"})
    listing = tmp_path / "speech" / "list.jsonl"
    listing.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")

    out = tmp_path / "prepared"
    report = run_prepare(kit, listing, out, pairs_per_target=2, seed=3, batch_seconds=6.0)
    assert report.utterances == 12 and not report.skipped, report.summary()
    assert report.pairs == 24 and report.batches >= 3
    tokenizer = TextTable(DEFAULT_TABLE, scheme="merges", merges=DEFAULT_MERGES)
    for utt in read_jsonl(out / "utterances.jsonl"):
        codes = np.load(out / utt["codes_path"])
        # 25 codes per second of the true length (the fbank window's edge aside), never a batch neighbour's
        assert codes.dtype == np.int32 and codes.size == utt["code_len"]
        assert 25 * utt["duration"] - 2 <= codes.size <= 25 * utt["duration"] + 1
        assert codes.min() >= 0 and codes.max() < 8192
        ids = np.load(out / utt["text_ids_path"])
        assert ids.tolist() == tokenizer.encode(utt["text"], "am") and utt["text_scheme"] == "merges"
        spk, emo = np.load(out / utt["spk_vec_path"]), np.load(out / utt["emo_vec_path"])
        assert spk.shape == (192,) and emo.shape == (32,) and spk.dtype == emo.dtype == np.float32
        assert np.isfinite(spk).all() and np.isfinite(emo).all()
    pairs = read_jsonl(out / "pairs.jsonl")
    assert all(p["prompt_id"] != p["target_id"] and p["language"] == "am" for p in pairs)

    from data_tools.check_data import check_manifests
    from data_tools.split import split_manifest

    split = split_manifest(out / "pairs.jsonl", tmp_path / "split", val_fraction=0.0, seed=0, held_out_speakers=1)
    assert split.val_count == 8 and split.train_count == 16, split.summary()
    for train, val in ((out / "pairs.jsonl", None), (split.train_path, split.val_path)):
        checked = check_manifests([train], [val] if val else [], tokenizer=DEFAULT_TABLE, config=kit.config,
                                  language="am", workers=1, text_scheme="merges")
        assert checked.verdict == "clean", checked.summary_text()

    run = tmp_path / "run"
    argv = [sys.executable, "-m", "trainer.train", "--train-manifest", str(split.train_path), "--val-manifest",
            str(split.val_path), "--tokenizer", str(DEFAULT_TABLE), "--text-scheme", "merges", "--config",
            str(kit.config), "--base-checkpoint", str(kit.gpt), "--output-dir", str(run), "--max-steps", "3",
            "--batch-size", "2", "--warmup-steps", "1", "--log-interval", "1", "--val-interval", "3",
            "--save-interval", "3", "--num-workers", "0", "--device", "cpu", "--amp", "off"]
    result = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=300,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "16 items kept, 0 dropped (an IndexTTS-2.5 paired manifest)" in result.stdout
    events = read_jsonl(run / "metrics.jsonl")
    assert [e["step"] for e in events if e["event"] == "train"] == [1, 2, 3]
    assert any(e["event"] == "val" for e in events) and (run / "latest.pth").is_file()


def test_killed_mid_batch_then_rerun_gives_the_files_of_an_uninterrupted_run(kit, audio, tmp_path):
    whole = cli(prepare_argv(kit, audio, tmp_path / "whole", "--batch-seconds", "4"))
    assert whole.returncode == 0, whole.stderr[-2000:]
    report = json.loads((tmp_path / "whole" / "prepare_report.json").read_text(encoding="utf-8"))
    assert report["utterances"] == 12 and report["batches"] >= 4 and not report["skipped"]

    out = tmp_path / "killed"
    argv = prepare_argv(kit, audio, out, "--batch-seconds", "4")
    killed = cli(argv, STUDIO_TEST_HOOKS="1", STUDIO_TEST_PREP_KILL_IN_BATCH="3")
    assert killed.returncode == -9, killed.stderr[-2000:]
    done = (out / ".prepare_v25" / "done.jsonl").read_text(encoding="utf-8").splitlines()
    assert 0 < len(done) < 12 and not (out / "pairs.jsonl").exists()
    assert len(list((out / "codes").glob("*.npy"))) == len(done) + 1  # the killed batch's first item was written

    resumed = cli(argv)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert f"{12 - len(done)} prepared now" in resumed.stdout and f"{len(done)} from an earlier run" in resumed.stdout
    assert tree_bytes(out) == tree_bytes(tmp_path / "whole")
    again = run_prepare(kit, audio, out, batch_seconds=4.0)
    assert again.new == 0 and again.resumed == 12 and again.batches == 0
    bytes_scheme = run_prepare(kit, audio, out, batch_seconds=4.0, text_scheme="bytes")
    assert bytes_scheme.redone == 12 and bytes_scheme.new == 12  # other ids: nothing finished is trusted


def test_bad_audio_is_reported_by_name_and_the_rest_prepared(kit, audio, tmp_path):
    wavs = sorted(audio.rglob("*.wav"))
    corrupt, silent = tmp_path / "corrupt.wav", tmp_path / "silent.wav"
    corrupt.write_bytes(b"RIFF\x00\x00\x00\x00WAVEnot really audio")
    soundfile.write(str(silent), np.zeros(SAMPLE_RATE, dtype=np.float32), SAMPLE_RATE)
    rows = [{"audio": str(w), "text": w.with_suffix(".txt").read_text(encoding="utf-8").strip(),
             "speaker": w.parent.name, "id": f"{w.parent.name}_{w.stem}"} for w in wavs]
    rows += [{"audio": str(corrupt), "text": "ሰላም", "speaker": "x", "id": "corrupt"},
             {"audio": str(silent), "text": "ሰላም", "speaker": "x", "id": "silent"},
             {"audio": str(tmp_path / "missing.wav"), "text": "ሰላም", "speaker": "x", "id": "missing"}]
    listing = tmp_path / "list.jsonl"
    listing.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows) + "{not json\n",
                       encoding="utf-8")
    result = cli(prepare_argv(kit, listing, tmp_path / "out"))
    assert result.returncode == 0, result.stderr[-2000:]
    lines = [line for line in result.stderr.splitlines() if line.startswith("skipped ")]
    assert any(line.startswith(f"skipped {corrupt}: unreadable audio") for line in lines), lines
    assert any(line.startswith(f"skipped {silent}: silent audio") for line in lines), lines
    assert any(line.startswith(f"skipped {tmp_path / 'missing.wav'}: missing audio") for line in lines), lines
    assert any(line.startswith(f"skipped {listing}:16: bad input: malformed JSON") for line in lines), lines
    assert len(lines) == 4 and "Traceback" not in result.stderr
    report = json.loads((tmp_path / "out" / "prepare_report.json").read_text(encoding="utf-8"))
    assert report["utterances"] == 12 and len(report["skipped"]) == 4


def test_clips_over_the_text_or_code_limits_are_flagged(kit, audio, tmp_path):
    tokenizer = TextTable(DEFAULT_TABLE, scheme="merges", merges=DEFAULT_MERGES)
    wav = sorted(audio.rglob("*.wav"))[0]
    long_text = " ".join(sentences()[:12])
    tokens = len(tokenizer.encode(long_text, "am"))
    assert tokens > MAX_TEXT_TOKENS
    long_wav = tmp_path / "long.wav"
    soundfile.write(str(long_wav), synthetic_voice("spk_a", "ሰላም ለዓለም", 10.5), SAMPLE_RATE)
    rows = [{"audio": str(wav), "text": "ሰላም ለዓለም", "speaker": "s", "id": "fits"},
            {"audio": str(wav), "text": long_text, "speaker": "s", "id": "wordy"},
            {"audio": str(long_wav), "text": "ሰላም ለዓለም", "speaker": "s", "id": "lengthy"}]
    listing = tmp_path / "list.jsonl"
    listing.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    skipped = []
    report = run_prepare(kit, listing, tmp_path / "out", on_skip=skipped.append)
    reasons = {s.id: s.reason for s in skipped}
    assert report.utterances == 1 and set(reasons) == {"wordy", "lengthy"}
    assert reasons["wordy"] == (f"text too long: {tokens} tokens > gpt.max_text_tokens {MAX_TEXT_TOKENS} (the "
                                "'merges' text scheme, language prefix included)")
    assert reasons["lengthy"] == f"too long: 10.50 s > 10.00 s (gpt.max_mel_tokens {MAX_CODES} codes at 25 Hz)"

    # the exact code count, after the models: the same shared rule on the codes the clip gives
    models = load_models(load_config(kit.config), gpt=kit.gpt, codec=kit.codec, campplus=kit.campplus,
                         w2v_bert=str(kit.w2v_bert), w2v_stats=kit.w2v_stats, table=DEFAULT_TABLE,
                         text_scheme="merges", text_merges=None, device=torch.device("cpu"))
    wave = load_audio_16k(wav)
    features, frames = features_of(models.extractor, wave)
    loaded = LoadedItem(audio_16k=wave, features=features, frames=frames, text_ids=np.arange(3, dtype=np.int32))
    item = SourceItem("x", "x", wav, "ሰላም", "s", "am", "list:1")
    codes = -(-features.shape[0] // 2)  # every feature row the item has, as inference codes it
    tight = replace(models, limits=DataLimits(max_text_tokens=MAX_TEXT_TOKENS, max_codes=codes - 1))
    preparer = ItemPreparer(models=tight, fingerprint="x", min_duration=0.0, max_duration=100.0)
    (result,) = preparer.compute([(item, loaded)])
    assert result.reason == f"too long: {codes} codes > gpt.max_mel_tokens {codes - 1}"
    (fits,) = ItemPreparer(models=models, fingerprint="x", min_duration=0.0, max_duration=100.0).compute(
        [(item, loaded)])
    assert fits.codes.size == codes and fits.spk_vec.shape == (192,)


def test_refuses_a_codec_that_does_not_fit_in_one_line(kit, audio, tmp_path):
    state = torch.load(kit.codec, weights_only=True)["model"]
    del state[next(iter(state))]
    broken = tmp_path / "codec.pth"
    torch.save({"model": state}, broken)
    result = cli(prepare_argv(kit, audio, tmp_path / "o", "--codec", str(broken)))
    assert result.returncode == 2
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "IndexTTS-2.5 codec" in errors[0] and "missing 1 key(s)" in errors[0], result.stderr
    assert "Traceback" not in result.stderr


def test_items_without_a_language_are_flagged(kit, audio, tmp_path):
    skipped = []
    report = prepare(audio, tmp_path / "out", kit.config, w2v_bert=str(kit.w2v_bert), device="cpu",
                     on_skip=skipped.append)
    assert report.utterances == 0 and len(skipped) == 12
    assert all(s.reason.startswith("no language: IndexTTS-2.5 needs each item's language") for s in skipped)


def test_data_tab_runs_the_preparation_supervised_and_refuses_bad_forms(kit, audio, tmp_path):
    from generations.indextts25.ui import prepare_section as section
    from webui.context import StudioContext
    from webui.jobs.process_tools import wait_until

    ctx = StudioContext.create(tmp_path)
    form = replace(section.default_form(tmp_path), input=str(audio), out_dir="prepared", config=str(kit.config),
                   w2v_bert=str(kit.w2v_bert), device="cpu", batch_seconds=6)
    for change, expected in (({"codec": "missing.pth"}, "2.5 codec not found"),
                             ({"input": "no/such"}, "input not found"),
                             ({"language": "any"}, "IndexTTS-2.5 needs the language"),
                             ({"text_scheme": "bpe"}, "text scheme must be one of")):
        message, view = section.start(ctx, replace(form, **change))
        assert expected in message and not view.running
    assert not (tmp_path / "jobs" / "prepare_v25" / "run.json").exists()

    message, view = section.start(ctx, form)
    assert "STARTED" in message and "IndexTTS-2.5" in message, message
    assert wait_until(lambda: not section.poll(ctx).running, 240, interval_s=0.2)
    view = section.poll(ctx)
    assert "FINISHED" in view.status, view.log
    assert 'data-done="12" data-total="12"' in view.progress
    assert "data_tools.prepare_v25" in view.log and "pairs:" in view.log
    pairs = read_jsonl(tmp_path / "prepared" / "pairs.jsonl")
    assert len(pairs) == 24 and all("prompt_spk_vec_path" in p and p["text_scheme"] == "merges" for p in pairs)


def test_an_item_alone_gives_what_the_2_5_inference_steps_give(kit, audio):
    """A batch of one = networks.prep25.prepare_audio of the clip as inference loads its speaker prompt."""
    from networks.prep25 import load_speaker_prompt, prepare_audio

    models = load_models(load_config(kit.config), gpt=kit.gpt, codec=kit.codec, campplus=kit.campplus,
                         w2v_bert=str(kit.w2v_bert), w2v_stats=kit.w2v_stats, table=DEFAULT_TABLE,
                         text_scheme="merges", text_merges=None, device=torch.device("cpu"))
    preparer = ItemPreparer(models=models, fingerprint="x", min_duration=0.0, max_duration=100.0)
    wav = sorted(audio.rglob("*.wav"))[3]
    item = SourceItem("x", "x", wav, wav.with_suffix(".txt").read_text(encoding="utf-8").strip(), "s", "am", "l:1")
    (result,) = preparer.compute([(item, preparer.load(item))])
    expected = prepare_audio(models.networks(), load_speaker_prompt(wav))
    assert np.array_equal(result.codes, expected.codes[0].numpy())
    torch.testing.assert_close(torch.from_numpy(result.spk_vec), expected.style[0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(torch.from_numpy(result.emo_vec), expected.emo_vec[0], atol=1e-5, rtol=1e-5)
    assert result.text_ids.tolist() == models.tokenizer.encode(item.text, "am")


def test_every_prepared_value_is_the_same_whatever_the_batch_companions(kit, audio):
    """Batches of 1, 2 and 64 (all 12 clips in one) give equal outputs: codes exactly, vectors within 1e-5."""
    models = load_models(load_config(kit.config), gpt=kit.gpt, codec=kit.codec, campplus=kit.campplus,
                         w2v_bert=str(kit.w2v_bert), w2v_stats=kit.w2v_stats, table=DEFAULT_TABLE,
                         text_scheme="merges", text_merges=None, device=torch.device("cpu"))
    preparer = ItemPreparer(models=models, fingerprint="x", min_duration=0.0, max_duration=100.0)
    loaded = []
    for index, wav in enumerate(sorted(audio.rglob("*.wav"))):
        item = SourceItem(f"u{index}", f"u{index}", wav, wav.with_suffix(".txt").read_text(encoding="utf-8").strip(),
                          "s", "am", f"l:{index}")
        loaded.append((item, preparer.load(item)))
    by_size = {size: [result for start in range(0, len(loaded), size)
                      for result in preparer.compute(loaded[start:start + size])] for size in (1, 2, 64)}
    alone = by_size.pop(1)
    for size, results in by_size.items():
        for one, batched in zip(alone, results, strict=True):
            assert np.array_equal(one.codes, batched.codes), size
            assert one.text_ids.tolist() == batched.text_ids.tolist()
            np.testing.assert_allclose(batched.spk_vec, one.spk_vec, atol=1e-5, rtol=0, err_msg=f"batch {size}")
            np.testing.assert_allclose(batched.emo_vec, one.emo_vec, atol=1e-5, rtol=0, err_msg=f"batch {size}")


def test_one_clip_per_speaker_writes_no_empty_pairs_and_a_rerun_sweeps_temp_files(kit, audio, tmp_path, capsys):
    from generations.indextts25.data.prepare import main

    first = sorted(audio.rglob("*.wav"))
    lonely = [next(w for w in first if w.parent.name == name) for name in ("spk_a", "spk_b")]
    rows = [{"audio": str(w), "text": w.with_suffix(".txt").read_text(encoding="utf-8").strip(),
             "speaker": w.parent.name, "id": w.parent.name} for w in lonely]
    listing = tmp_path / "list.jsonl"
    listing.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    out = tmp_path / "out"
    assert main(prepare_argv(kit, listing, out)) == 1
    said = capsys.readouterr()
    errors = [line for line in said.err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "no pair could be drawn" in errors[0], said.err
    assert "no pairs.jsonl was written" in said.out
    assert not (out / "pairs.jsonl").exists() and len(read_jsonl(out / "utterances.jsonl")) == 2

    # What a kill while writing leaves: a half-written feature and manifest; a rerun removes them.
    stale = [out / "codes" / ".spk_a.npy.999999999.tmp", out / ".pairs.jsonl.k3j_x9a2.tmp",
             out / ".utterances.jsonl.0a1b2c3d.tmp"]
    for path in stale:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"half")
    assert main(prepare_argv(kit, listing, out)) == 1
    assert not [p for p in out.rglob("*.tmp")]


def test_items_in_an_unknown_language_are_flagged(kit, audio, tmp_path):
    skipped = []
    report = prepare(audio, tmp_path / "out", kit.config, w2v_bert=str(kit.w2v_bert), device="cpu",
                     language="amh", on_skip=skipped.append)
    assert report.utterances == 0 and len(skipped) == 12
    assert all(s.reason.startswith("unknown language: language 'amh' is not a code") for s in skipped), skipped[0]


def test_prepared_clips_carry_the_s2mel_files_and_a_rerun_adds_only_missing_ones(kit, audio, tmp_path):
    from data_tools.config import load_config, save_config
    from tests.conftest import shared_file

    fixture = load_config(shared_file("reference", "indextts25", "fixtures_audio", "tiny_audio_config_v25.yaml"))
    config = load_config(kit.config)
    config["s2mel"] = {"preprocess_params": fixture["s2mel"]["preprocess_params"]}
    with_s2mel = kit.config.with_name("config_s2mel.yaml")  # beside the kit's files, which preparation resolves
    save_config(config, with_s2mel)
    out = tmp_path / "prep"

    def run_prepare(kit, source, out):
        return prepare(source, out, with_s2mel, w2v_bert=str(kit.w2v_bert), language="am", device="cpu")

    run_prepare(kit, audio, out)
    mels = sorted((out / "s2mel_mel").glob("*.npy"))
    assert len(mels) == 12 and len(list((out / "s2mel_style").glob("*.npy"))) == 12
    before = {p.name: p.stat().st_mtime_ns for p in mels}
    mels[0].unlink()
    run_prepare(kit, audio, out)
    after = {p.name: p.stat().st_mtime_ns for p in (out / "s2mel_mel").glob("*.npy")}
    assert after.keys() == before.keys()
    assert [name for name in after if after[name] != before[name]] == [mels[0].name]
