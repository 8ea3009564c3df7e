"""Issue 36 item 1: every Hub call is time-bounded. A Hub on 127.0.0.1 that accepts the connection and never
answers ends ``python -m trainer.models`` (list --hub, download, publish) within the configured timeout with one
line that names the host and the call that timed out (exit 2 for a refusal; ``list`` reports it and goes on).
"""

from __future__ import annotations

import time

from tests.hub_server import serve, silent_hub
from tests.test_hub_download import one_error_line, run_models, toy_hub
from tests.test_hub_publish import fake_export

TIMEOUT_S = 2
# What a run may take besides its one timed-out request: the interpreter and huggingface_hub starting on a busy
# 2-core machine. Without a bound the command would wait forever and the subprocess limit below would end it.
STARTUP_ALLOWANCE_S = 40


def silent_env(url: str, tmp_path) -> dict[str, str]:
    return {"HF_ENDPOINT": url, "HF_HOME": str(tmp_path / "hf"), "HF_HUB_DOWNLOAD_TIMEOUT": str(TIMEOUT_S),
            "HF_TOKEN": "hf_test_token"}


def test_download_from_a_silent_hub_is_refused_in_one_line(tmp_path):
    with silent_hub() as url:
        started = time.monotonic()
        result = run_models(["download", "facebook/mms-1b-all", "--dir", str(tmp_path / "m"), "--no-progress"],
                            silent_env(url, tmp_path), timeout=TIMEOUT_S + STARTUP_ALLOWANCE_S)
        elapsed = time.monotonic() - started
    line = one_error_line(result)
    assert result.returncode == 2, result.stderr
    assert "facebook/mms-1b-all model info: timed out: the Hub at 127.0.0.1" in line
    assert f"longer than {TIMEOUT_S} s to answer" in line and "HF_HUB_DOWNLOAD_TIMEOUT" in line
    assert elapsed >= TIMEOUT_S  # it waited for the Hub as long as it was told to, then gave up


def test_list_hub_with_a_silent_hub_reports_the_timeout_once_and_ends(tmp_path):
    with silent_hub() as url:
        result = run_models(["list", "indextts-2", "facebook/mms-1b-all", "--hub"], silent_env(url, tmp_path),
                            timeout=TIMEOUT_S + STARTUP_ALLOWANCE_S)
    assert result.returncode == 0, result.stderr
    notes = [line.strip() for line in result.stdout.splitlines() if "timed out" in line]
    assert len(notes) == 6, result.stdout  # one per repository of the two sets
    assert notes[0].startswith("IndexTeam/IndexTTS-2 model info: timed out: the Hub at 127.0.0.1"), notes[0]
    assert all(note == f"not asked: {notes[0]}" for note in notes[1:])  # one wait, not one per repository


def test_publish_to_a_silent_hub_is_refused_in_one_line(tmp_path):
    export = fake_export(tmp_path / "export")
    with silent_hub() as url:
        result = run_models(["publish", str(export), "--repo", "me/new"], silent_env(url, tmp_path),
                            timeout=TIMEOUT_S + STARTUP_ALLOWANCE_S)
    line = one_error_line(result)
    assert result.returncode == 2, result.stderr
    assert "me/new create repository: timed out: the Hub at 127.0.0.1" in line


def test_a_file_the_hub_never_sends_ends_the_download_in_one_line(tmp_path):
    hub = toy_hub()
    hub.repos = {"facebook/mms-1b-all": {"config.json": b'{"model_type": "wav2vec2"}', "model.safetensors": b"m" * 999,
                                         "adapter.amh.safetensors": b"a" * 10}}
    hub.stall.add(("facebook/mms-1b-all", "model.safetensors"))
    with serve(hub) as url:
        result = run_models(["download", "facebook/mms-1b-all", "--dir", str(tmp_path / "m"), "--no-progress"],
                            silent_env(url, tmp_path), timeout=TIMEOUT_S + STARTUP_ALLOWANCE_S)
    line = one_error_line(result)
    assert result.returncode == 1, result.stderr  # cut off: the next run continues it
    assert "facebook/mms-1b-all model.safetensors: timed out: the Hub at 127.0.0.1" in line
    assert (tmp_path / "m" / "config.json").is_file()  # what arrived before is kept
