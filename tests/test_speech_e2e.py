"""Real speech end to end: espeak-ng Amharic -> preprocess -> split -> check (clean) -> a few training steps.

espeak-ng is installed by CI (the test fails there without it) and skipped locally when it is missing.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from data_tools.check_data import check_manifests
from data_tools.preprocess import preprocess
from data_tools.split import split_manifest
from networks.dvae import build_dvae
from tests.conftest import require_tool

REPO = Path(__file__).resolve().parents[1]
CONFIG = REPO / "tests" / "fixtures" / "tiny_config.yaml"
SENTENCES = REPO / "demo" / "assets" / "amharic_sentences.txt"
VOICES = ("am", "am+f2", "am+m3")  # three espeak-ng voice variants stand in for three speakers


def speak(espeak: str, sentences: list[str], folder: Path) -> Path:
    """Speak each sentence to a WAV file; returns the JSONL list preprocessing reads."""
    folder.mkdir(parents=True)
    rows = []
    for k, sentence in enumerate(sentences):
        voice = VOICES[k % len(VOICES)]
        wav = folder / f"utt{k}.wav"
        subprocess.run([espeak, "-v", voice, "-s", "190", "-w", str(wav), sentence], check=True,
                       capture_output=True, timeout=60)
        rows.append({"audio": wav.name, "text": sentence, "speaker": voice.replace("+", "_"), "id": f"utt{k}"})
    listing = folder / "list.jsonl"
    listing.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    return listing


@pytest.mark.slow
def test_espeak_amharic_prepares_checks_clean_and_trains(tmp_path: Path, demo_workspace) -> None:
    espeak = require_tool("espeak-ng", "speaks the Amharic sentences of the end-to-end speech test")
    lines = [s for s in SENTENCES.read_text(encoding="utf-8").splitlines() if s.strip()]
    sentences = sorted(lines, key=len)[:9]  # short ones: they fit the tiny config's 48 codes (2 s)
    listing = speak(espeak, sentences, tmp_path / "speech")

    # A random-init DVAE of the tiny config, saved as a real dvae.pth ({"model": state_dict}).
    torch.manual_seed(0)
    dvae = build_dvae(yaml.safe_load(CONFIG.read_text(encoding="utf-8"))["vqvae"])
    dvae_path = tmp_path / "dvae.pth"
    torch.save({"model": dvae.state_dict()}, dvae_path)

    prepared = preprocess(listing, tmp_path / "prepared", CONFIG, dvae_path, workers=1, language="am")
    assert prepared.entries == len(sentences), prepared.summary()
    assert not prepared.skipped
    split = split_manifest(tmp_path / "prepared" / "manifest.jsonl", tmp_path / "split", val_fraction=0.34, seed=0)
    assert split.val_count == 3 and split.train_count == 6

    report = check_manifests([split.train_path], [split.val_path], tokenizer=demo_workspace.extended_tokenizer,
                             config=CONFIG, language="am", workers=1)
    assert report.verdict == "clean", report.summary_text()
    assert report.train.speaker_count == 3 and report.train.script_shares["ethiopic"] == 1.0

    out = tmp_path / "run"
    argv = [sys.executable, "-m", "trainer.train", "--train-manifest", str(split.train_path),
            "--val-manifest", str(split.val_path), "--tokenizer", str(demo_workspace.extended_tokenizer),
            "--config", str(CONFIG), "--output-dir", str(out), "--max-steps", "3", "--batch-size", "2",
            "--warmup-steps", "1", "--log-interval", "1", "--val-interval", "3", "--save-interval", "3",
            "--num-workers", "0", "--device", "cpu", "--amp", "off"]
    result = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=300,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    events = [json.loads(line) for line in (out / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]
    train = [e for e in events if e["event"] == "train"]
    assert [e["step"] for e in train] == [1, 2, 3]
    assert all(math.isfinite(e["mel_loss"]) and math.isfinite(e["text_loss"]) for e in train)
    assert any(e["event"] == "val" for e in events)
    assert (out / "latest.pth").is_file()
