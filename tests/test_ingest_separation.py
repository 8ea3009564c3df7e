"""Voice separated from music: a tiny demucs model (the library's own file format) splits a mix of a voice and a
tone into two stems that sum to the input; the voice stem is what gets sliced; a rerun never separates twice."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import soxr

from data_tools.ingest.clips import read_jsonl
from data_tools.ingest.pipeline import IngestError, IngestSettings, run_ingest
from tests.ingest_factory import EnergyVad, tiny_demucs, tone_speech


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    return tiny_demucs(tmp_path_factory.mktemp("demucs") / "tiny.th")


def _mix(path: Path) -> np.ndarray:
    rate = 24000
    voice = np.concatenate([np.zeros(12000, np.float32), tone_speech(2.0, rate, 1), np.zeros(24000, np.float32),
                            tone_speech(2.5, rate, 2), np.zeros(12000, np.float32)])
    tone = 0.05 * np.sin(2 * np.pi * 330 * np.arange(len(voice)) / rate).astype(np.float32)
    path.parent.mkdir(parents=True, exist_ok=True)
    sf.write(str(path), voice + tone, rate, subtype="FLOAT")
    return voice + tone


def test_stems_sum_to_the_mix_and_the_voice_is_sliced(tmp_path: Path, model: Path, monkeypatch) -> None:
    mix = _mix(tmp_path / "in" / "radio.wav")
    settings = IngestSettings(tmp_path / "in", tmp_path / "out", separate=str(model))
    summary = run_ingest(settings, vad_model=EnergyVad(level=0.001))
    assert summary.problems == []
    voice, rate = sf.read(str(tmp_path / "out" / "separated" / "radio.voice.flac"), dtype="float32")
    rest, _ = sf.read(str(tmp_path / "out" / "separated" / "radio.rest.flac"), dtype="float32")
    assert rate == 16000
    expected = soxr.resample(mix, 24000, 16000)
    assert np.max(np.abs(voice + rest - expected)) < 1e-4  # 24-bit FLAC's rounding, twice
    assert np.max(np.abs(voice)) > 0  # the (untrained) model let something through as voice
    assert (tmp_path / "in" / "radio.wav").is_file()  # the original is kept
    rows = read_jsonl(tmp_path / "out" / "clips.jsonl")
    record = json.loads((tmp_path / "out" / "sources" / "radio.json").read_text(encoding="utf-8"))
    assert record["sliced_from"] == "separated/radio.voice.flac" and rows
    first = rows[0]  # the clip is the voice stem's samples, not the mix's
    clip, clip_rate = sf.read(str(tmp_path / "out" / first["audio"]), dtype="float32")
    cut = voice[round(first["start"] * 16000):round(first["end"] * 16000)]
    cut = soxr.resample(cut, 16000, clip_rate, quality="HQ")
    scale = np.dot(clip, cut[: len(clip)]) / max(np.dot(cut[: len(clip)], cut[: len(clip)]), 1e-12)
    assert np.allclose(clip, scale * cut[: len(clip)], atol=2e-3 * np.max(np.abs(clip)) + 1e-4)

    import demucs.apply

    monkeypatch.setattr(demucs.apply, "apply_model", lambda *a, **k: pytest.fail("separated twice"))
    (tmp_path / "out" / "sources" / "radio.json").unlink()  # as if a kill came after the stems, before the clips
    again = run_ingest(settings, vad_model=EnergyVad(level=0.001))
    assert again.clips == summary.clips


def test_a_bad_separation_model_and_a_changed_choice_are_refused(tmp_path: Path, model: Path) -> None:
    _mix(tmp_path / "in" / "radio.wav")
    (tmp_path / "junk.th").write_bytes(b"junk")
    with pytest.raises(IngestError, match=r"junk\.th: not a demucs model file"):
        run_ingest(IngestSettings(tmp_path / "in", tmp_path / "a", separate=str(tmp_path / "junk.th")),
                   vad_model=EnergyVad())
    run_ingest(IngestSettings(tmp_path / "in", tmp_path / "b"), vad_model=EnergyVad())
    with pytest.raises(IngestError, match="other settings"):
        run_ingest(IngestSettings(tmp_path / "in", tmp_path / "b", separate=str(model)), vad_model=EnergyVad())


def _closed_port_root() -> str:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}/"


@pytest.mark.parametrize("offline", [True, False], ids=["HF_HUB_OFFLINE", "closed-port"])
def test_a_released_model_that_cannot_be_downloaded_is_named_in_one_line(tmp_path: Path, monkeypatch,
                                                                          offline: bool) -> None:
    import demucs.pretrained

    _mix(tmp_path / "in" / "radio.wav")
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))  # an empty cache: the weights must be fetched
    monkeypatch.setattr(demucs.pretrained, "ROOT_URL", _closed_port_root())  # nothing answers there
    if offline:
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    else:
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    with pytest.raises(IngestError) as error:
        run_ingest(IngestSettings(tmp_path / "in", tmp_path / "out", separate="htdemucs"), vad_model=EnergyVad())
    message = str(error.value)
    assert "\n" not in message and message.startswith("--separate htdemucs: the separation model ")
    assert ("HF_HUB_OFFLINE" if offline else "could not be downloaded") in message
    assert "--separate path/to/model.th" in message and str(tmp_path / "out") not in message
    assert not (tmp_path / "out").exists()  # nothing half-made
    assert not [p for p in (tmp_path / "torch").rglob("*") if p.is_file()]  # no partial download left


def test_a_refused_separation_model_leaves_the_folder_usable(tmp_path: Path, model: Path) -> None:
    _mix(tmp_path / "in" / "radio.wav")
    (tmp_path / "junk.th").write_bytes(b"junk")
    out = tmp_path / "out"
    with pytest.raises(IngestError, match=r"junk\.th: not a demucs model file"):
        run_ingest(IngestSettings(tmp_path / "in", out, separate=str(tmp_path / "junk.th")), vad_model=EnergyVad())
    summary = run_ingest(IngestSettings(tmp_path / "in", out, separate=str(model)),  # the same command, a good model
                         vad_model=EnergyVad(level=0.001))
    assert summary.clips > 0 and summary.problems == []
    with pytest.raises(IngestError, match=r"other settings \(--separate \(the separation model\): .*tiny\.th"):
        run_ingest(IngestSettings(tmp_path / "in", out), vad_model=EnergyVad())
