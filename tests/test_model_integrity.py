"""Issue 36 item 2: a downloaded model folder whose recorded file no longer matches is named before training.

One rule (``trainer.models.integrity``) serves the pre-flight (and so the trainer), the offline check and the
studio's model lists. It is cheap: size and modification time as recorded mean intact; a file whose time changed
is hashed again.
"""

from __future__ import annotations

import os
from pathlib import Path

from tests.test_hub_download import TOY, run_models
from trainer.models.fetch import OfflineMissing, check_offline
from trainer.models.integrity import damage_line, file_digest, verify_folder
from trainer.models.record import MODELS_DIR, downloaded_model_dirs, read_record, write_record
from trainer.options import default_values
from trainer.preflight import run_preflight
from webui.models.models_panel import downloaded_note

FILES = {"config.json": b'{"model_type": "toy"}', "model.safetensors": b"w" * 4096,
         "bigvgan/bigvgan_generator.pt": b"v" * 3000}


def recorded_folder(folder: Path, kind: str = "asr") -> Path:
    """A tiny model folder with the record a download writes (size, time and digest of every file)."""
    entries = {}
    for local, data in FILES.items():
        path = folder / local
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        algorithm = "sha256" if local.endswith((".safetensors", ".pt")) else "git-sha1"
        entries[local] = {"path": local, "size": len(data), "mtime_ns": path.stat().st_mtime_ns,
                          "digest": file_digest(path, algorithm)}
    write_record(folder, {"set": "toy", "title": "Toy", "kind": kind, "complete": True,
                          "sources": {"org/toy": {"repo_id": "org/toy", "revision": "abc", "files": entries}}})
    return folder


def damage(path: Path) -> None:
    """Change one byte, keeping the size (what a size check alone cannot see)."""
    data = path.read_bytes()
    path.write_bytes(bytes([data[0] ^ 0xFF]) + data[1:])
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))  # a later time, on any filesystem


def test_damage_line_names_the_damaged_file_and_its_folder(tmp_path):
    folder = recorded_folder(tmp_path / "toy")
    assert damage_line(folder) is None
    damage(folder / "bigvgan" / "bigvgan_generator.pt")
    line = damage_line(folder)
    assert line is not None and "\n" not in line
    assert line.startswith(f"model folder {folder} is damaged: {folder / 'bigvgan' / 'bigvgan_generator.pt'}: sha256:")
    assert "does not match the recorded sha256:" in line


def test_a_touched_but_intact_file_is_hashed_and_passes_and_verify_re_records_its_time(tmp_path):
    folder = recorded_folder(tmp_path / "toy")
    weights = folder / "model.safetensors"
    later = weights.stat().st_mtime_ns + 5_000_000_000
    os.utime(weights, ns=(later, later))  # a copy without kept times: same bytes, new time
    assert damage_line(folder) is None
    assert verify_folder(folder) == []
    entry = read_record(folder)["sources"]["org/toy"]["files"]["model.safetensors"]
    assert entry["mtime_ns"] == later  # the next cheap check trusts it without hashing


def test_preflight_fails_first_on_a_damaged_model_folder(tmp_path):
    folder = recorded_folder(tmp_path / "IndexTTS-2", kind="generation")
    damage(folder / "model.safetensors")
    values = {**default_values(), "base_checkpoint": str(folder / "model.safetensors"),
              "output_dir": str(tmp_path / "run")}
    report = run_preflight(values)
    first = report.checks[0]
    assert (first.name, first.ok) == ("model files", False)
    assert report.refusal == damage_line(folder) and str(folder / "model.safetensors") in report.refusal


def test_preflight_passes_the_model_files_check_on_an_intact_folder(tmp_path):
    folder = recorded_folder(tmp_path / "IndexTTS-2", kind="generation")
    values = {**default_values(), "model_dir": str(folder), "output_dir": str(tmp_path / "run")}
    first = run_preflight(values).checks[0]
    assert (first.name, first.ok) == ("model files", True) and str(folder) in first.message


def test_the_offline_check_names_a_damaged_file(tmp_path):
    folder = recorded_folder(tmp_path / "toy")
    damage(folder / "config.json")
    try:
        check_offline(TOY, folder)
    except OfflineMissing as exc:
        assert f"{folder / 'config.json'}: git-sha1:" in str(exc) and str(exc).startswith("offline (HF_HUB_OFFLINE")
    else:
        raise AssertionError("the offline check passed a damaged folder")
    result = run_models(["verify", str(folder)], {"HF_HUB_OFFLINE": "1"}, timeout=60)
    assert result.returncode == 1 and f"{folder / 'config.json'}: git-sha1:" in result.stdout


def test_model_lists_flag_a_damaged_folder_and_pickers_leave_it_out(tmp_path):
    workspace = tmp_path / "ws"
    intact = recorded_folder(workspace / MODELS_DIR / "IndexTTS-2", kind="generation")
    damaged = recorded_folder(workspace / MODELS_DIR / "IndexTTS-2.5", kind="generation")
    damage(damaged / "model.safetensors")
    found = {model.path: model for model in downloaded_model_dirs(workspace, "generation")}
    assert found[intact].complete and found[intact].damage is None
    assert not found[damaged].complete and str(damaged / "model.safetensors") in (found[damaged].damage or "")
    note = downloaded_note(workspace)
    assert "damaged" in note and str(damaged / "model.safetensors") in note


def test_the_s2mel_preflight_fails_first_on_a_damaged_model_folder(tmp_path):
    from trainer.s2mel.run_plan import make_s2mel_plan

    folder = recorded_folder(tmp_path / "IndexTTS-2", kind="generation")
    damage(folder / "model.safetensors")
    values = {**default_values(), "train": "s2mel", "model_dir": str(folder), "output_dir": str(tmp_path / "run")}
    first = make_s2mel_plan(values).plan.checks[0]
    assert (first.name, first.ok) == ("model files", False) and str(folder / "model.safetensors") in first.message
