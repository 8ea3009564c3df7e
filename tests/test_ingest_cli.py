"""The ingest CLI: a killed run resumes to the same clips and manifest; bad input is one line each."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from data_tools.ingest import pipeline
from data_tools.ingest.__main__ import main
from data_tools.ingest.pipeline import IngestError, IngestSettings, run_ingest
from tests.ingest_factory import EnergyVad, tone_recording, tone_speech, write_srt

REPO = Path(__file__).resolve().parents[1]


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("STUDIO_TEST_")}
    return subprocess.run([sys.executable, "-m", "data_tools.ingest", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=300, env={**environment, **(env or {})})


def _inputs(folder: Path) -> Path:
    tone_recording(folder / "a_spk" / "long.wav", [2.0, 3.0, 2.5, 3.5], [0.8, 1.0], rate=48000)
    subbed = tone_recording(folder / "b_spk" / "talk.wav", [2.5, 3.0], [1.0], rate=44100, seed=5)
    write_srt(folder / "b_spk" / "talk.srt", [(s, e, f"ሰላም ለዓለም ቁጥር {k}") for k, (s, e, _) in
                                              enumerate(subbed.sentences)])
    for k in range(2):
        sf.write(_mk(folder / "c_spk" / f"c{k}.wav"), tone_speech(2.0, 22050, seed=20 + k), 22050)
        (folder / "c_spk" / f"c{k}.txt").write_text(f"ጤና ይስጥልኝ ቁጥር {k}", encoding="utf-8")
    return folder


def _main(capsys, *args: str) -> tuple[int, str, str]:
    """The CLI in this process (the subprocess is kept for what needs one: a kill)."""
    capsys.readouterr()
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _mk(path: Path) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    return str(path)


def _snapshot(out: Path) -> dict[str, bytes]:
    files = {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted((out / "clips").rglob("*.wav"))}
    files["clips.jsonl"] = (out / "clips.jsonl").read_bytes()
    return files


def _manifest(capsys, out: Path) -> str:
    code, stdout, _ = _main(capsys, "save", "--out-dir", str(out), "--json")
    assert code == 0
    return Path(json.loads(stdout)["manifest"]).read_text(encoding="utf-8")


def test_killed_run_resumes_to_the_same_clips_and_manifest(tmp_path: Path, capsys) -> None:
    inputs = _inputs(tmp_path / "in")
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    args = ["run", "--input", str(inputs), "--language", "am", "--quiet"]
    assert _main(capsys, *args, "--out-dir", str(whole))[0] == 0

    hooks = {"STUDIO_TEST_HOOKS": "1", "STUDIO_TEST_INGEST_KILL_AFTER_CLIPS": "2"}
    first = _cli(*args, "--out-dir", str(killed), env=hooks)
    assert first.returncode == -signal.SIGKILL, first.stderr
    assert "test hook" in first.stderr and not (killed / "clips.jsonl").exists()
    assert len(list((killed / "clips").rglob("*.wav"))) == 2
    second = _cli(*args, "--out-dir", str(killed), "--json")
    assert second.returncode == 0, second.stderr
    assert json.loads(second.stdout)["sources_done_before"] == 0  # the kill came inside the first source
    code, stdout, _ = _main(capsys, *args, "--out-dir", str(killed), "--json")
    assert code == 0 and json.loads(stdout)["sources_done_before"] == 4  # all done: nothing redone

    assert _snapshot(killed) == _snapshot(whole)
    assert not [p for p in killed.rglob("*") if p.name.endswith(".tmp")]
    manifest = _manifest(capsys, killed)
    assert manifest == _manifest(capsys, whole) and manifest.count("\n") == 4  # 2 cues + 2 transcribed clips


def test_bad_inputs_are_one_line_each_and_the_others_go_on(tmp_path: Path, capsys) -> None:
    folder = tmp_path / "in"
    tone_recording(folder / "good.wav", [2.0, 2.5], [1.0])
    tone_recording(folder / "odd.wav", [2.0], [1.0], rate=37800)
    sf.write(_mk(folder / "phone.wav"), tone_speech(2.0, 8000), 8000)
    (folder / "empty.wav").write_bytes(b"")
    (folder / "notes.wav").write_text("not audio at all", encoding="utf-8")
    (folder / "song.m4a").write_bytes(b"\x00\x00\x00\x18ftypM4A ")
    tone_recording(folder / "cut.flac", [2.0, 2.0, 2.0], [1.0])
    data = (folder / "cut.flac").read_bytes()
    (folder / "cut.flac").write_bytes(data[: len(data) // 2])
    before = {p.name: p.read_bytes() for p in folder.iterdir()}

    code, stdout, stderr = _main(capsys, "run", "--input", str(folder), "--out-dir", str(tmp_path / "out"),
                                 "--quiet", "--json")
    assert code == 0, stderr
    problems = [line for line in stderr.splitlines() if line.startswith("problem: ")]
    expected = {"phone.wav": "8000 Hz is too low", "empty.wav": "empty file", "notes.wav": "unreadable audio",
                "song.m4a": "cannot decode it"}
    for name, reason in expected.items():
        assert any(name in line and reason in line for line in problems), (name, problems)
    summary = json.loads(stdout)
    rates = {json.loads(line)["source"]: json.loads(line)["sample_rate"]
             for line in (tmp_path / "out" / "clips.jsonl").read_text(encoding="utf-8").splitlines()}
    assert rates["odd"] == 44100 and rates["good"] == 24000  # odd rates resampled, standard ones kept
    assert "cut" in rates or any("cut.flac" in line for line in problems)
    assert summary["clips"] >= 3
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before  # inputs untouched


def test_disk_full_stops_in_one_line_and_keeps_finished_sources(tmp_path: Path, monkeypatch) -> None:
    folder = tmp_path / "in"
    tone_recording(folder / "a.wav", [2.0], [1.0])
    tone_recording(folder / "b.wav", [2.0], [1.0], seed=3)
    real = pipeline.write_clip
    calls = []

    def filling(*args, **kwargs):
        calls.append(1)
        if len(calls) > 1:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(*args, **kwargs)

    monkeypatch.setattr(pipeline, "write_clip", filling)
    with pytest.raises(IngestError, match=r"disk full while writing into .*rerun to continue"):
        run_ingest(IngestSettings(folder, tmp_path / "out"), vad_model=EnergyVad())
    assert (tmp_path / "out" / "sources" / "a.json").is_file() and not (tmp_path / "out" / "sources" / "b.json").exists()
    monkeypatch.setattr(pipeline, "write_clip", real)
    summary = run_ingest(IngestSettings(folder, tmp_path / "out"), vad_model=EnergyVad())
    assert summary.sources_done_before == 1 and summary.clips == 2


def test_changed_slicing_settings_are_refused(tmp_path: Path, capsys) -> None:
    folder = tmp_path / "in"
    tone_recording(folder / "a.wav", [2.0], [1.0])
    run_ingest(IngestSettings(folder, tmp_path / "out"), vad_model=EnergyVad())
    code, _, err = _main(capsys, "run", "--input", str(folder), "--out-dir", str(tmp_path / "out"), "--aim-max", "10",
                         "--quiet")
    assert code == 2 and err.count("\n") == 1 and "other settings (aim_max)" in err


def test_help_and_store_commands(tmp_path: Path, capsys) -> None:
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    assert "--asr-model" in capsys.readouterr().out
    folder = tmp_path / "in"
    folder.mkdir()
    sf.write(str(folder / "x.wav"), np.concatenate([np.zeros(4000, np.float32), tone_speech(2.0, 22050)]), 22050)
    (folder / "x.txt").write_text("ሰላም ለዓለም እንዴት ናችሁ", encoding="utf-8")
    out = str(tmp_path / "out")
    assert _main(capsys, "run", "--input", str(folder), "--out-dir", out, "--quiet")[0] == 0
    assert _main(capsys, "text", "--out-dir", out, "x", "ሰላም ለሁሉም")[0] == 0
    listed = json.loads(_main(capsys, "list", "--out-dir", out, "--json")[1])
    assert listed["clips"][0]["text"] == "ሰላም ለሁሉም" and listed["total"] == 1
    assert "page 1 of 1" in _main(capsys, "list", "--out-dir", out)[1]
    assert "deleted" in _main(capsys, "delete", "--out-dir", out, "x")[1]
    code, _, err = _main(capsys, "restore", "--out-dir", out, "nope")
    assert code == 2 and err.startswith("error: no clip 'nope'") and err.count("\n") == 1
    code, _, err = _main(capsys, "run", "--input", str(tmp_path / "nowhere"), "--out-dir", out)
    assert code == 2 and "input not found" in err
