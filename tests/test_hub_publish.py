"""Issue 31 item 2: publishing an export to a Hub repository (a Hub-like server on 127.0.0.1).

The whole flow (a real export of a trained run) is in tests/test_hub_folder_loads.py; these cover the CLI's
refusals and the repository's visibility.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.hub_server import FakeHub, serve
from trainer.models.publish import PublishProblem, export_files

REPO = Path(__file__).resolve().parents[1]


def fake_export(folder: Path) -> Path:
    folder.mkdir(parents=True)
    for name, data in {"gpt.pth": b"weights", "config.yaml": b"version: 2.0\n", "bpe.model": b"bpe",
                       "LICENSE-NOTICE": b"notice", "MODEL_CARD.md": b"# card\n"}.items():
        (folder / name).write_bytes(data)
    return folder


def publish(args: list[str], endpoint: str) -> subprocess.CompletedProcess:
    env = {key: value for key, value in os.environ.items() if not key.startswith("HF_")}
    env.update(HF_ENDPOINT=endpoint, HF_TOKEN="hf_test_token", OMP_NUM_THREADS="1")
    return subprocess.run([sys.executable, "-m", "trainer.models", "publish", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)


def test_publish_public_on_request_and_reports_an_existing_repository(tmp_path):
    export = fake_export(tmp_path / "export")
    hub = FakeHub({"me/old": {"README.md": b"old"}}, private={"me/old": False})
    with serve(hub) as url:
        made = publish([str(export), "--repo", "me/new", "--public", "--json", str(tmp_path / "r.json")], url)
        assert made.returncode == 0, made.stderr
        again = publish([str(export), "--repo", "me/old"], url)
    assert hub.private["me/new"] is False and "(public)" in made.stdout
    assert json.loads((tmp_path / "r.json").read_text())["files"] == ["LICENSE-NOTICE", "MODEL_CARD.md", "bpe.model",
                                                                      "config.yaml", "gpt.pth", "README.md"]
    assert again.returncode == 0 and "note: me/old already existed and is public" in again.stdout
    assert hub.repos["me/old"]["gpt.pth"] == b"weights"


def test_publish_refuses_an_incomplete_export_and_a_bad_name_in_one_line(tmp_path):
    export = fake_export(tmp_path / "export")
    (export / "LICENSE-NOTICE").unlink()
    try:
        export_files(export)
    except PublishProblem as exc:
        assert "lacks LICENSE-NOTICE" in str(exc)
    else:
        raise AssertionError("an export without its licence notice was accepted")
    hub = FakeHub({})
    with serve(hub) as url:
        missing = publish([str(export), "--repo", "me/x"], url)
        bad_name = publish([str(tmp_path / "export"), "--repo", "not a repo"], url)
    for result in (missing, bad_name):
        lines = result.stderr.strip().splitlines()
        assert result.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "lacks LICENSE-NOTICE" in missing.stderr and "expected owner/name" in bad_name.stderr
    assert hub.repos == {}  # nothing was created
