"""Cached speaker embeddings carry the model that made them: a rerun with another speaker model (another CAM++
file of the same layout, or an x-vector model of another size) embeds every clip again, never clusters
embeddings of two models together, and never crashes."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from data_tools.ingest.clips import read_jsonl
from data_tools.ingest.pipeline import IngestSettings, run_ingest
from tests.ingest_factory import EnergyVad, tiny_campplus, tone_recording
from tests.speech_model_factory import build_xvector_model


def _embeddings(out: Path) -> dict[str, list[float]]:
    return {clip["id"]: clip["speaker_embedding"] for path in sorted((out / "sources").glob("*.json"))
            for clip in json.loads(path.read_text(encoding="utf-8"))["clips"]}


def _models(out: Path) -> set[str]:
    return {json.loads(path.read_text(encoding="utf-8"))["speaker_model"]["source"]
            for path in (out / "sources").glob("*.json")}


def _same(a: dict[str, list[float]], b: dict[str, list[float]]) -> bool:
    return a.keys() == b.keys() and all(np.allclose(a[k], b[k], atol=1e-4) for k in a)


def test_a_rerun_with_another_speaker_model_embeds_every_clip_again(tmp_path: Path) -> None:
    folder, out = tmp_path / "in", tmp_path / "out"
    tone_recording(folder / "a.wav", [2.0, 2.5], [1.0], seed=0)
    first, second = tiny_campplus(tmp_path / "one.bin", seed=0), tiny_campplus(tmp_path / "two.bin", seed=1)
    run_ingest(IngestSettings(folder, out, speaker_model=str(first)), vad_model=EnergyVad())
    by_first = _embeddings(out)
    assert by_first and _models(out) == {str(first)}

    run_ingest(IngestSettings(folder, out, speaker_model=str(second)), vad_model=EnergyVad())  # same layout
    run_ingest(IngestSettings(folder, tmp_path / "fresh2", speaker_model=str(second)), vad_model=EnergyVad())
    assert _same(_embeddings(out), _embeddings(tmp_path / "fresh2")) and not _same(_embeddings(out), by_first)
    assert _models(out) == {str(second)}

    tone_recording(folder / "b.wav", [2.2], [1.0], seed=7)  # a new recording, and a model of another size
    xvector = build_xvector_model(tmp_path / "xvector")
    summary = run_ingest(IngestSettings(folder, out, speaker_model=str(xvector)), vad_model=EnergyVad())
    run_ingest(IngestSettings(folder, tmp_path / "fresh3", speaker_model=str(xvector)), vad_model=EnergyVad())
    assert summary.sources_done_before == 1 and _models(out) == {str(xvector)}
    assert _same(_embeddings(out), _embeddings(tmp_path / "fresh3"))
    assert {len(v) for v in _embeddings(out).values()} == {12}
    rows = read_jsonl(out / "clips.jsonl")
    assert len(rows) == 3 and all(row["speaker"].startswith("spk") for row in rows)
