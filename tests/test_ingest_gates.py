"""Every gate fires on audio (or text) made to fail it, with its named reason; restore brings a clip back."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from data_tools.ingest.gates import GATES, gate_name
from data_tools.ingest.loudness import normalize_loudness
from data_tools.ingest.pipeline import IngestSettings, run_ingest
from data_tools.ingest.store import IngestStore
from tests.ingest_factory import tone_speech

REPO = Path(__file__).resolve().parents[1]
RATE = 24000
GOOD_TEXT = "ሰላም ለዓለም እንዴት ናችሁ ዛሬ"  # 18 letters: about 6 a second over 3 s


def _clip(seconds: float = 3.0, seed: int = 0, silence: float = 0.3) -> np.ndarray:
    pad = np.zeros(int(silence * RATE), dtype=np.float32)
    return np.concatenate([pad, tone_speech(seconds, RATE, seed), pad])


def _made_to_fail() -> dict[str, tuple[np.ndarray, str]]:
    good = _clip()
    noisy = good + np.random.default_rng(1).normal(0, 0.05, len(good)).astype(np.float32)
    return {
        "good": (good, GOOD_TEXT),
        "duration": (_clip(0.4, seed=2, silence=0.1), "ሰላም"),
        "clipping": (np.clip(_clip(seed=3) * 8, -1, 1), "ጤና ይስጥልኝ እንዴት ዋላችሁ ዛሬ"),
        "snr": (noisy, "አዲስ አበባ ትልቅ ከተማ ናት ዛሬ"),
        "silence": (np.concatenate([np.zeros(RATE * 3, np.float32), _clip(1.0, seed=4, silence=0.05)]), "ውሃ ጥሩ ነው"),
        "no_text": (_clip(seed=5), ""),
        "chars_per_second": (_clip(1.0, seed=6), "ሰላም ለዓለም እንዴት ናችሁ ዛሬ ጥሩ ቀን ነው ነገ እንገናኝ ደህና ሁኑ ሰላም ለዓለም እንዴት"),
        "script": (_clip(seed=7), "hello world how are you today"),
        "degenerate": (_clip(seed=8), "ሰሰሰሰሰሰ ሰሰሰሰሰሰ ሰሰሰሰ"),
        "duplicate_audio": (good.copy(), "ሌላ ጽሑፍ ነው ይህ ለሙከራ ብቻ"),
        "duplicate_text": (_clip(seed=9), GOOD_TEXT),
    }


@pytest.fixture
def gated(tmp_path: Path) -> Path:
    folder = tmp_path / "clips" / "spk"
    folder.mkdir(parents=True)
    for k, (name, (audio, text)) in enumerate(_made_to_fail().items()):  # "00_good" is the first of duplicates
        sf.write(str(folder / f"{k:02d}_{name}.wav"), audio, RATE, subtype="FLOAT")
        (folder / f"{k:02d}_{name}.txt").write_text(text, encoding="utf-8")
    out = tmp_path / "out"
    run_ingest(IngestSettings(tmp_path / "clips", out, language="am"))
    return out


def test_every_gate_fires_with_its_reason(gated: Path) -> None:
    store = IngestStore(gated)
    reasons = {clip_id[7:]: [gate_name(r) for r in store.clip(clip_id)["reasons"]]
               for clip_id in (c["id"] for c in store.list_clips(page_size=100).clips)}
    assert reasons.pop("good") == []
    for gate, found in reasons.items():
        assert gate in found, (gate, found)
        assert gate in GATES
    assert set(reasons) | {"too_long_for_model"} == set(GATES)


def test_rejected_clip_stays_on_disk_and_restore_brings_it_back(gated: Path) -> None:
    store = IngestStore(gated)
    assert store.clip("spk_07_script")["status"] == "rejected"
    assert store.audio_path("spk_07_script").is_file()
    ids = [row["id"] for row in store.manifest_rows()]
    assert ids == ["spk_00_good"]
    assert store.restore("spk_07_script")["status"] == "restored"
    assert [row["id"] for row in IngestStore(gated).manifest_rows()] == ["spk_00_good", "spk_07_script"]


def test_too_long_for_the_model(tmp_path: Path) -> None:
    folder = tmp_path / "clips"
    folder.mkdir()
    sf.write(str(folder / "a.wav"), _clip(3.0), RATE)  # 3.6 s: 85 codes, the tiny model takes 48
    (folder / "a.txt").write_text(GOOD_TEXT, encoding="utf-8")
    sf.write(str(folder / "b.wav"), _clip(1.2, seed=3, silence=0.2), RATE)
    (folder / "b.txt").write_text("ሰላም ለዓለም ዛሬ", encoding="utf-8")
    run_ingest(IngestSettings(folder, tmp_path / "out", language="am",
                              config=REPO / "tests" / "fixtures" / "tiny_config.yaml"))
    store = IngestStore(tmp_path / "out")
    assert [gate_name(r) for r in store.clip("a")["reasons"]] == ["too_long_for_model"]
    assert "codes" in store.clip("a")["reasons"][0] and store.clip("b")["reasons"] == []


def test_loudness_is_normalised_under_the_peak_guard() -> None:
    quiet = _clip() * 0.05
    louder, gain = normalize_loudness(quiet, RATE, target_lufs=-20.0)
    assert gain > 10 and np.max(np.abs(louder)) <= 10 ** (-1 / 20) + 1e-6
    spiky = _clip()
    spiky[1000] = 0.99
    _, guarded = normalize_loudness(spiky, RATE, target_lufs=-5.0)
    assert abs(guarded - 20 * np.log10(10 ** (-1 / 20) / 0.99)) < 0.01  # the peak, not the target, set it
