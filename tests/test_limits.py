"""Limits agree (issue 28 item 3): the model's limits are known before slicing, clips that cannot fit are cut or
flagged at import, preparation of the saved manifest loses nothing to length, an edited transcript has its gates
re-run, and a preparation that left items out says so in its job badge."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import soundfile as sf
import yaml

from data_tools.ingest.gates import gate_name
from data_tools.ingest.pipeline import IngestSettings, run_ingest
from data_tools.ingest.store import IngestStore
from data_tools.job_summary import last_summary
from data_tools.model_limits import clip_limits
from generations.indextts25.data.text_table import DEFAULT_TABLE
from tests.ingest_factory import EnergyVad, FakeAsr, tone_recording, tone_speech, write_srt

FIXTURES = Path(__file__).resolve().parent / "fixtures"
CONFIG_15 = FIXTURES / "tiny_config.yaml"  # gpt.max_mel_tokens 48: 2.048 s at 23.4375 codes/s
CONFIG_2 = FIXTURES / "tiny_config_v2.yaml"  # 48 codes: 0.96 s at 50 codes/s
DVAE = FIXTURES / "tiny_dvae.pth"
RATE = 24000
TEXT = "ሰላም ለዓለም እንዴት ናችሁ"


def v25_folder(root: Path, max_codes: int = 100, max_text: int = 12) -> Path:
    """A 2.5 model folder as far as its limits go: config.yaml and the text table beside it."""
    root.mkdir(parents=True, exist_ok=True)
    config = yaml.safe_load(CONFIG_2.read_text(encoding="utf-8"))
    config["version"] = "2.5"
    config["gpt"].update(max_mel_tokens=max_codes, max_text_tokens=max_text)
    (root / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    (root / DEFAULT_TABLE.name).symlink_to(DEFAULT_TABLE)
    return root


def test_each_generation_gives_its_longest_clip(tmp_path: Path) -> None:
    folder = tmp_path / "v15"
    folder.mkdir()
    (folder / "config.yaml").write_text(CONFIG_15.read_text(encoding="utf-8"), encoding="utf-8")
    found = {"1.5": clip_limits(folder), "2": clip_limits(CONFIG_2), "2.5": clip_limits(v25_folder(tmp_path / "v25"))}
    assert {k: v.generation for k, v in found.items()} == {"1.5": "1.5", "2": "2", "2.5": "2.5"}
    assert found["1.5"].longest_seconds == pytest.approx(48 * 1024 / 24000)
    assert found["2"].longest_seconds == pytest.approx(48 / 50)
    assert found["2.5"].longest_seconds == pytest.approx(100 / 25) and found["2.5"].max_text_tokens == 12
    assert found["2.5"].tokenizer == tmp_path / "v25" / DEFAULT_TABLE.name
    assert all(v.slicing_seconds < v.longest_seconds for v in found.values())


def test_preparation_screens_with_the_same_rule(tmp_path: Path) -> None:
    from data_tools.preprocess import _settings

    settings = _settings(tmp_path, CONFIG_15, DVAE, 0.5, None, "cpu")
    assert settings.max_duration == clip_limits(CONFIG_15).longest_seconds


def _recordings(root: Path) -> Path:
    """One long speech (cut by the slicer) and a subtitled recording whose one cue is longer than the model takes."""
    tone_recording(root / "spk" / "talk.wav", [5.0, 1.4], [0.8], rate=RATE)
    cued = tone_recording(root / "spk" / "story.wav", [1.2, 3.0], [0.8], rate=RATE, seed=5)
    write_srt(root / "spk" / "story.srt", [(s, e, TEXT) for s, e, _ in cued.sentences])
    return root


def test_a_clip_longer_than_the_model_takes_is_cut_or_flagged_and_preparation_keeps_every_kept_clip(
        tmp_path: Path) -> None:
    from data_tools.preprocess import preprocess

    out = tmp_path / "ingest"
    summary = run_ingest(IngestSettings(_recordings(tmp_path / "rec"), out, language="am", config=CONFIG_15),
                         transcriber=FakeAsr(), vad_model=EnergyVad())
    limits = clip_limits(CONFIG_15)
    assert summary.longest_clip <= limits.slicing_seconds and "IndexTTS-1.5" in summary.model
    store = IngestStore(out)
    clips = store.list_clips(page_size=100).clips
    sliced = [c for c in clips if "talk" in c["id"]]
    assert len(sliced) >= 3 and all(c["seconds"] <= limits.slicing_seconds for c in sliced)  # 5 s of speech, cut
    long_cue = [c for c in clips if "story" in c["id"] and c["seconds"] > limits.longest_seconds]
    assert len(long_cue) == 1 and summary.too_long == 1  # a cue cannot be cut (its text is one): flagged
    assert long_cue[0]["status"] == "rejected"
    assert [gate_name(r) for r in long_cue[0]["reasons"]] == ["too_long_for_model"], long_cue[0]["reasons"]
    for clip in clips:  # every clip the gates passed or not, except the flagged one, goes into the manifest
        if clip["id"] != long_cue[0]["id"]:
            store.restore(clip["id"])
    manifest = store.save_manifest()
    assert len(manifest.read_text(encoding="utf-8").splitlines()) == len(clips) - 1

    report = preprocess(manifest, tmp_path / "prepared", CONFIG_15, DVAE, workers=1, min_duration=0.5)
    assert [s.reason for s in report.skipped if "long" in s.reason] == []
    assert report.entries == len(clips) - 1


def test_an_edited_transcript_has_its_gates_rerun(tmp_path: Path) -> None:
    folder = tmp_path / "clips" / "spk"
    folder.mkdir(parents=True)
    pad = np.zeros(int(0.3 * RATE), dtype=np.float32)
    sf.write(str(folder / "a.wav"), np.concatenate([pad, tone_speech(2.4, RATE), pad]), RATE)
    (folder / "a.txt").write_text("", encoding="utf-8")  # no transcript yet
    out = tmp_path / "ingest"
    run_ingest(IngestSettings(tmp_path / "clips", out, language="am", config=v25_folder(tmp_path / "model")))
    store = IngestStore(out)
    assert store.clip("spk_a")["status"] == "rejected"
    assert [gate_name(r) for r in store.clip("spk_a")["reasons"]] == ["no_text"]

    from webui.data.proofread_panel import change_clip

    message, _shown = change_clip("text", str(out), "spk_a", TEXT, tmp_path)  # what the proofread panel's Apply does
    assert "saved: ok (passes the gates)" in message
    typed = store.set_text("spk_a", TEXT)
    assert typed["status"] == "ok" and typed["reasons"] == []
    assert IngestStore(out).clip("spk_a")["status"] == "ok"  # also after a reload
    assert [row["id"] for row in IngestStore(out).manifest_rows()] == ["spk_a"]

    too_long = store.set_text("spk_a", " ".join([TEXT] * 3))  # over the model's 12 text tokens
    assert too_long["status"] == "rejected"
    assert [gate_name(r) for r in too_long["reasons"]] == ["too_long_for_model"]
    assert "text tokens" in too_long["reasons"][0] and IngestStore(out).manifest_rows() == []


def test_the_badge_of_a_preparation_that_left_items_out(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from data_tools.preprocess import main
    from webui.jobs.job_view import job_view

    lines = []
    for k, seconds in enumerate([1.0] * 7 + [3.0] * 3):  # the tiny model takes 2.048 s
        path = tmp_path / "audio" / f"u{k}.wav"
        path.parent.mkdir(exist_ok=True)
        sf.write(str(path), tone_speech(seconds, RATE, seed=k), RATE)
        lines.append(f'{{"audio": "{path}", "text": "{TEXT} {k}", "speaker": "s"}}')
    (tmp_path / "list.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    code = main(["--input", str(tmp_path / "list.jsonl"), "--out-dir", str(tmp_path / "out"), "--config",
                 str(CONFIG_15), "--dvae", str(DVAE), "--workers", "1", "--quiet"])
    log = capsys.readouterr().out
    assert code == 0 and last_summary(log) is not None
    view = job_view(SimpleNamespace(state="finished", summary="finished (exit 0)", running=False), log)
    assert "FINISHED" in view.status and "7 prepared, 3 left out (too long)" in view.status
    assert 'data-tone="warn"' in view.status and "exit 0" not in view.status
    quiet = job_view(SimpleNamespace(state="finished", summary="finished (exit 0)", running=False), "done\n")
    assert "finished (exit 0)" in quiet.status and 'data-tone="ok"' in quiet.status  # no summary line: as before
