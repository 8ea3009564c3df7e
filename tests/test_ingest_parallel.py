"""Ingest's transcription under torchrun on CPU (Gloo), issue 41: two processes transcribe their shares of the
sources with a tiny CTC model and the folder ends byte for byte as one process leaves it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import soundfile as sf

from tests.ingest_factory import tone_speech
from tests.speech_model_factory import build_ctc_model
from tests.test_prepare_parallel import torchrun_module
from tests.trainer_helpers import REPO

pytestmark = pytest.mark.slow
pytest.importorskip("transformers")


def ingested_bytes(out: Path) -> dict[str, bytes]:
    """The records (with the transcripts), the clip index and the clips."""
    paths = [*sorted((out / "sources").glob("*.json")), out / "clips.jsonl", *sorted((out / "clips").rglob("*.wav"))]
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in paths}


def transcribed_recordings(folder: Path, count: int = 4) -> Path:
    """Short recordings with their transcripts (kept whole: no voice detection), one source each."""
    speaker = folder / "spk"
    speaker.mkdir(parents=True)
    for k in range(count):
        sf.write(speaker / f"c{k}.wav", tone_speech(1.5, 16000, seed=30 + k), 16000)
        (speaker / f"c{k}.txt").write_text(f"ጤና ይስጥልኝ ቁጥር {k}", encoding="utf-8")
    return folder


def test_two_processes_transcribe_their_shares_into_the_records_of_one(tmp_path: Path) -> None:
    inputs = transcribed_recordings(tmp_path / "in")
    args = ["run", "--input", str(inputs), "--language", "am", "--quiet", "--json", "--device", "cpu",
            "--asr-model", str(build_ctc_model(tmp_path / "ctc"))]
    one = subprocess.run([sys.executable, "-m", "data_tools.ingest", *args, "--out-dir", str(tmp_path / "one")],
                         cwd=REPO, capture_output=True, text=True, timeout=300)
    assert one.returncode == 0, one.stderr[-2000:]
    two = torchrun_module("data_tools.ingest", [*args, "--out-dir", str(tmp_path / "two")])
    assert two.returncode == 0, two.stderr[-3000:]
    # one summary, from the first process, counting every process's clips (each clip transcribed once)
    assert json.loads(two.stdout)["transcribed"] == json.loads(one.stdout)["transcribed"] == 4

    expected = ingested_bytes(tmp_path / "one")
    records = [json.loads(data) for name, data in expected.items() if name.startswith("sources/")]
    assert len(records) == 4  # two for each process
    assert all(clip["asr_text"] for record in records for clip in record["clips"])
    assert ingested_bytes(tmp_path / "two") == expected
