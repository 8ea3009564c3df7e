"""Preprocessing: audio of any format and rate -> codes + prompts + manifest; bad audio skipped; resumable."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch
import yaml

from data_tools.audio import load_audio
from data_tools.check_data import check_manifests
from data_tools.features import mel_spectrogram
from data_tools.preprocess import main, preprocess
from data_tools.preprocess_inputs import read_inputs, safe_stem
from networks.dvae import load_dvae

FIXTURES = Path(__file__).resolve().parent / "fixtures"
CONFIG = FIXTURES / "tiny_config.yaml"
DVAE = FIXTURES / "tiny_dvae.pth"
TEXTS = ["ሰላም ዓለም", "አዲስ አበባ", "ቋንቋ መማር", "ዛሬ ውሃ", "ነገ ትምህርት", "መጽሐፍ አነበብኩ"]


def voice(seconds: float, rate: int, pitch: float, seed: int) -> np.ndarray:
    """A speech-like test signal: a modulated harmonic tone with a little noise."""
    t = np.arange(int(seconds * rate)) / rate
    tone = sum(np.sin(2 * np.pi * pitch * h * t) / h for h in range(1, 4))
    envelope = 0.6 + 0.4 * np.sin(2 * np.pi * 3 * t)
    noise = np.random.default_rng(seed).standard_normal(t.size) * 0.01
    return (0.2 * tone * envelope + noise).astype(np.float32)


@pytest.fixture
def audio_list(tmp_path: Path) -> Path:
    """Six good clips in three formats/rates from two speakers, plus silent, corrupt, missing, short."""
    audio = tmp_path / "in" / "audio"
    audio.mkdir(parents=True)
    rows = []
    for k, text in enumerate(TEXTS):
        rate, ext = [(16_000, "wav"), (44_100, "flac"), (22_050, "ogg")][k % 3]
        signal = voice(0.9 + 0.1 * k, rate, 120 + 15 * k, k)
        if k == 1:
            signal = np.stack([signal, signal * 0.5], axis=1)  # stereo
        sf.write(audio / f"clip{k}.{ext}", signal, rate)
        rows.append({"audio": f"audio/clip{k}.{ext}", "text": text, "speaker": ["abebe", "selam"][k % 2]})
    sf.write(audio / "silent.wav", np.zeros(24_000, np.float32), 24_000)
    (audio / "corrupt.wav").write_bytes(b"RIFF\x00\x00\x00\x00WAVEjunk")
    sf.write(audio / "short.wav", voice(0.2, 24_000, 200, 9), 24_000)
    rows += [{"audio": "audio/silent.wav", "text": "ዝምታ", "id": "silent"},
             {"audio": "audio/corrupt.wav", "text": "የተበላሸ", "id": "corrupt"},
             {"audio": "audio/missing.wav", "text": "የጠፋ", "id": "missing"},
             {"audio": "audio/short.wav", "text": "አጭር", "id": "short"},
             {"audio": "audio/clip0.wav", "text": "\u200b\u200b", "id": "invisible_only"}]
    path = tmp_path / "in" / "list.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows) + "{not json\n", encoding="utf-8")
    return path


def read_manifest_rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_prepares_codes_prompts_and_manifest(audio_list: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    report = preprocess(audio_list, out, CONFIG, DVAE, workers=1, language="am")
    rows = read_manifest_rows(out / "manifest.jsonl")
    assert [r["id"] for r in rows] == [f"clip{k}" for k in range(6)]
    assert report.entries == 6 and report.new == 6 and report.resumed == 0
    reasons = {s.id or s.where.rsplit(":", 1)[-1]: s.reason.split(":")[0] for s in report.skipped}
    assert reasons == {"silent": "silent audio", "corrupt": "unreadable audio", "missing": "missing audio",
                       "short": "too short", "invisible_only": "empty text", "12": "bad input"}

    vqvae = yaml.safe_load(CONFIG.read_text(encoding="utf-8"))["vqvae"]
    dvae = load_dvae(DVAE, vqvae)
    for row in rows:
        codes = np.load(out / row["codes"])
        assert codes.dtype == np.int16 and codes.ndim == 1
        assert row["text"] in TEXTS and row["language"] == "am"
        # The prompt is another utterance of the same speaker.
        prompt_id = Path(row["cond_mel"]).stem
        assert prompt_id != row["id"]
        assert next(r for r in rows if r["id"] == prompt_id)["speaker"] == row["speaker"]
        mel = np.load(out / row["cond_mel"])
        assert mel.dtype == np.float32 and mel.shape[0] == 100
    # Codes are exactly the DVAE's codes of the 24 kHz mono log-mel.
    first = rows[1]  # the stereo 44.1 kHz FLAC
    samples = torch.from_numpy(load_audio(audio_list.parent / "audio" / "clip1.flac"))
    expected = dvae.get_codebook_indices(mel_spectrogram(samples).unsqueeze(0))[0].numpy()
    np.testing.assert_array_equal(np.load(out / first["codes"]), expected)
    assert abs(first["duration"] - 1.0) < 1e-3
    np.testing.assert_allclose(np.load(out / "cond_mels" / "clip1.npy"), mel_spectrogram(samples).numpy(), atol=1e-5)

    check = check_manifests([out / "manifest.jsonl"], config=CONFIG, language="am", workers=1)
    assert check.verdict == "clean", check.summary_text()
    saved = json.loads((out / "preprocess_report.json").read_text(encoding="utf-8"))
    assert saved["entries"] == 6 and saved["skipped_by_reason"]["silent audio"] == 1


def test_rerun_resumes_and_redoes_only_what_is_missing(audio_list: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    preprocess(audio_list, out, CONFIG, DVAE, workers=1)
    stamps = {p.name: p.stat().st_mtime_ns for p in (out / "codes").iterdir()}
    again = preprocess(audio_list, out, CONFIG, DVAE, workers=1)
    assert again.new == 0 and again.resumed == 6 and again.entries == 6
    assert {p.name: p.stat().st_mtime_ns for p in (out / "codes").iterdir()} == stamps

    (out / "codes" / "clip3.npy").unlink()  # an interrupted item
    os.utime(audio_list.parent / "audio" / "clip4.flac", ns=(1, 1))  # changed audio
    third = preprocess(audio_list, out, CONFIG, DVAE, workers=1)
    assert third.new == 2 and third.resumed == 4 and third.entries == 6
    assert (out / "codes" / "clip3.npy").is_file()


def test_parallel_workers_give_the_same_codes(audio_list: Path, tmp_path: Path) -> None:
    serial = preprocess(audio_list, tmp_path / "serial", CONFIG, DVAE, workers=1)
    parallel = preprocess(audio_list, tmp_path / "parallel", CONFIG, DVAE, workers=2)
    assert parallel.entries == serial.entries == 6
    assert (tmp_path / "parallel" / "manifest.jsonl").read_bytes() == (tmp_path / "serial" / "manifest.jsonl").read_bytes()
    for name in sorted(p.name for p in (tmp_path / "serial" / "codes").iterdir()):
        np.testing.assert_array_equal(np.load(tmp_path / "parallel" / "codes" / name),
                                      np.load(tmp_path / "serial" / "codes" / name))


def test_every_prepared_file_is_the_same_whatever_the_companions(audio_list: Path, tmp_path: Path) -> None:
    """IndexTTS-1.5 preprocessing computes each clip alone: the same clip prepared in runs of 1, 2 and all six
    (the batch sizes 1, 2 and 64 of the paired generations' tests) gives byte-equal codes and prompt mels."""
    rows = [line for line in audio_list.read_text(encoding="utf-8").splitlines()
            if "clip" in line and "\"id\"" not in line]  # the six good clips
    files: dict[int, dict[str, bytes]] = {}
    for size in (1, 2, 64):
        listing = audio_list.with_name(f"first_{size}.jsonl")
        listing.write_text("".join(line + "\n" for line in rows[:size]), encoding="utf-8")
        out = tmp_path / f"run_{size}"
        assert preprocess(listing, out, CONFIG, DVAE, workers=1).entries == min(size, len(rows))
        files[size] = {str(p.relative_to(out)): p.read_bytes() for folder in ("codes", "cond_mels")
                       for p in sorted((out / folder).iterdir())}
    assert len(files[64]) == 2 * len(rows) == 12
    for size in (1, 2):
        assert files[size] == {name: files[64][name] for name in files[size]}, size


def test_ljspeech_and_folder_inputs(tmp_path: Path) -> None:
    lj = tmp_path / "LJ"
    (lj / "wavs").mkdir(parents=True)
    for k in range(3):
        sf.write(lj / "wavs" / f"LJ001-{k:04d}.wav", voice(1.0, 22_050, 150, k), 22_050)
    (lj / "metadata.csv").write_text("LJ001-0000|ሰላም 1|ሰላም አንድ\nLJ001-0001|አዲስ አበባ|x\nbroken line\n"
                                     "LJ001-0002|ቋንቋ|y\n", encoding="utf-8")
    items, problems = read_inputs(lj)
    assert [i.id for i in items] == ["LJ001-0000", "LJ001-0001", "LJ001-0002"]
    assert items[0].text == "ሰላም 1" and items[0].speaker == "LJ"  # the raw column; one speaker
    assert [p.where for p in problems] == [f"{lj / 'metadata.csv'}:3"]

    folder = tmp_path / "corpus"
    for speaker in ("hana", "kebede"):
        (folder / speaker).mkdir(parents=True)
        for k in range(2):
            sf.write(folder / speaker / f"u{k}.wav", voice(1.0, 24_000, 150, k), 24_000)
            (folder / speaker / f"u{k}.txt").write_text(f"  ጽሑፍ {k}\n", encoding="utf-8")
    sf.write(folder / "hana" / "orphan.wav", voice(1.0, 24_000, 150, 5), 24_000)
    items, problems = read_inputs(folder, language="am")
    assert [(i.id, i.speaker, i.text) for i in items] == [
        ("hana_u0", "hana", "ጽሑፍ 0"), ("hana_u1", "hana", "ጽሑፍ 1"),
        ("kebede_u0", "kebede", "ጽሑፍ 0"), ("kebede_u1", "kebede", "ጽሑፍ 1")]
    assert len(problems) == 1 and "no transcript" in problems[0].reason
    report = preprocess(folder, tmp_path / "out", CONFIG, DVAE, workers=1, language="am")
    assert report.entries == 4 and not report.own_prompt_speakers
    assert safe_stem("a/b c:ሰላም") == "a_b_c_ሰላም"


def test_cli_errors_are_one_line(audio_list: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["--out-dir", str(tmp_path / "out"), "--config", str(CONFIG), "--dvae", str(DVAE), "--quiet"]
    assert main(["--input", str(tmp_path / "nothing.jsonl"), *base]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"error: {tmp_path / 'nothing.jsonl'}: input not found")
    assert main(["--input", str(audio_list), *base[:4], "--dvae", str(CONFIG), "--quiet"]) == 2
    assert "not a loadable DVAE checkpoint" in capsys.readouterr().err
    assert main(["--input", str(audio_list), "--out-dir", str(tmp_path / "o"), "--config", str(tmp_path / "c.yaml"),
                 "--quiet"]) == 2
    assert "config file not found" in capsys.readouterr().err
    all_bad = tmp_path / "bad.jsonl"
    all_bad.write_text(json.dumps({"audio": "in/audio/silent.wav", "text": "ዝምታ"}) + "\n", encoding="utf-8")
    assert main(["--input", str(all_bad), *base, "--workers", "1"]) == 1
    assert "no item could be prepared" in capsys.readouterr().err
