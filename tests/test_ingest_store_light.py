"""The proofreading store is used inside the studio's page process: importing it must not pull in torch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_store_imports_without_torch():
    code = ("import sys; import data_tools.ingest.store, data_tools.asr; "
            "print('torch' in sys.modules, 'transformers' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120,
                          check=True)
    assert done.stdout.split() == ["False", "False"], done.stdout + done.stderr


def test_clips_still_offers_the_state_file_helpers(tmp_path: Path):
    from data_tools.ingest import clips, jsonfiles

    assert clips.read_jsonl is jsonfiles.read_jsonl and clips.write_json is jsonfiles.write_json
    jsonfiles.write_jsonl(tmp_path / "a.jsonl", [{"t": "ሰላም"}])
    assert jsonfiles.read_jsonl(tmp_path / "a.jsonl") == [{"t": "ሰላም"}]
    (tmp_path / "torn.json").write_text('{"a": ', encoding="utf-8")
    assert jsonfiles.read_json(tmp_path / "torn.json") is None
