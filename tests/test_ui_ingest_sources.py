"""The ingest form's links, separation, speaker and prosody options, and the proofreading table's speaker label
and one-speaker manifest (plain callbacks, no browser)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from data_tools.ingest.pipeline import IngestSettings, run_ingest
from tests.ingest_factory import EnergyVad, tone_recording
from webui.data import ingest_panel, proofread_panel
from webui.form_inputs import InputProblem


def test_links_and_options_become_flags(tmp_path: Path) -> None:
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "campplus.bin").write_bytes(b"x")
    extras = ingest_panel.extra_args(tmp_path, links="https://a.example/v\nhttp://127.0.0.1:8000/p.html",
                                     licence=" CC-BY-4.0 ", separate="htdemucs", speaker_model="models/campplus.bin",
                                     speaker_threshold=0.4, long_clips=True, max_inner_pause=0.4,
                                     loudness_scope="dataset")
    assert extras == ["--url", "https://a.example/v", "--url", "http://127.0.0.1:8000/p.html", "--licence",
                      "CC-BY-4.0", "--separate", "htdemucs", "--speaker-model", str(tmp_path / "models" /
                                                                                      "campplus.bin"),
                      "--speaker-threshold", "0.4", "--long-clips", "--max-inner-pause", "0.4", "--loudness-scope",
                      "dataset"]
    assert ingest_panel.extra_args(tmp_path) == []
    with pytest.raises(InputProblem, match="not an http"):
        ingest_panel.extra_args(tmp_path, links="ftp://x")
    argv = ingest_panel.ingest_argv("python", "recordings", "ingest", "am", "", "", "", "auto", "", "", tmp_path,
                                    tmp_path / "r.json", extras)  # no recordings folder: the links are enough
    assert "--input" not in argv and argv[argv.index("--url") + 1] == "https://a.example/v"
    with pytest.raises(InputProblem, match="recordings not found"):
        ingest_panel.ingest_argv("python", "recordings", "ingest", "am", "", "", "", "auto", "", "", tmp_path,
                                 tmp_path / "r.json")


def test_the_speaker_label_is_edited_and_one_speaker_saved(tmp_path: Path) -> None:
    for who in ("ann", "bob"):
        tone_recording(tmp_path / "in" / who / "take.wav", [2.0, 2.5], [1.0], seed=len(who) + ord(who[0]))
    run_ingest(IngestSettings(tmp_path / "in", tmp_path / "ingest"), vad_model=EnergyVad())
    view = proofread_panel.page_view(str(tmp_path / "ingest"), 0, proofread_panel.ALL, 20, tmp_path)
    assert "speakers: ann 2, bob 2" in view.label
    from data_tools.ingest.store import IngestStore

    store = IngestStore(tmp_path / "ingest")
    for clip_id in view.ids:
        store.set_text(clip_id, "ሰላም ለዓለም")
        store.restore(clip_id)
    moved = next(i for i in view.ids if i.startswith("ann"))
    note, clip = proofread_panel.change_clip("speaker", str(tmp_path / "ingest"), moved, " bob ", tmp_path)
    assert "now speaker bob" in note and "speaker bob" in clip.details
    message, path = proofread_panel.save_manifest(str(tmp_path / "ingest"), tmp_path, "bob")
    rows = [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines()]
    assert "of speaker bob" in message and len(rows) == 3 and {r["speaker"] for r in rows} == {"bob"}
    assert {r["source"] for r in rows} == {"ann_take", "bob_take"}
    message, path = proofread_panel.save_manifest(str(tmp_path / "ingest"), tmp_path, "nobody")
    assert path == "" and "no speaker &#x27;nobody&#x27;" in message
