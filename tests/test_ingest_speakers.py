"""Speakers told apart: two espeak-ng voices alternating in one recording get two labels that match the truth;
the label is shown and edited in the store, and a manifest can keep one speaker only."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from data_tools.ingest.clips import read_jsonl
from data_tools.ingest.pipeline import IngestError, IngestSettings, run_ingest
from data_tools.ingest.speakers import Clip, label_speakers
from data_tools.ingest.store import IngestStore, StoreError
from tests.conftest import require_tool
from tests.ingest_factory import EnergyVad, amharic_sentences, build_recording, tiny_campplus

VOICES = ("am", "am+f3")


@pytest.fixture(scope="module")
def dialogue(tmp_path_factory) -> tuple[Path, dict[str, str], Path]:
    """An ingest folder of two recordings, each alternating two voices; clip id -> the voice that spoke it."""
    espeak = require_tool("espeak-ng", "speaks the two voices")
    root = tmp_path_factory.mktemp("speakers")
    recordings = [build_recording(espeak, root / "in" / f"talk{n}.wav", amharic_sentences(6, 6 * n), [1.0],
                                  voices=VOICES if n == 0 else VOICES[::-1]) for n in range(2)]
    model = tiny_campplus(root / "campplus.bin")
    settings = IngestSettings(root / "in", root / "out", language="am", speaker_model=str(model))
    run_ingest(settings, vad_model=EnergyVad())
    truth = {}
    for row in read_jsonl(root / "out" / "clips.jsonl"):
        recording = recordings[int(row["source"][-1])]
        k = min(range(len(recording.sentences)), key=lambda i: abs(recording.sentences[i][0] - row["speech_start"]))
        truth[row["id"]] = (VOICES if row["source"] == "talk0" else VOICES[::-1])[k % 2]
    return root / "out", truth, model


def test_two_alternating_voices_get_two_labels_that_match_the_truth(dialogue) -> None:
    out, truth, _ = dialogue
    rows = read_jsonl(out / "clips.jsonl")
    assert len(rows) == 12 and {r["speaker_given"] for r in rows} == {"in"}
    labels = {r["id"]: r["speaker"] for r in rows}
    assert sorted(set(labels.values())) == ["spk1", "spk2"], sorted((c, labels[c], truth[c]) for c in labels)
    best = max(np.mean([labels[c] == ("spk1" if truth[c] == voice else "spk2") for c in labels])
               for voice in VOICES)
    assert best >= 0.9, (labels, truth)


def test_keeping_one_speaker_writes_only_that_speakers_clips(dialogue) -> None:
    out, _, _ = dialogue
    store = IngestStore(out)
    for clip in store.list_clips(page_size=100).clips:
        store.set_text(clip["id"], "ሰላም ለዓለም")  # no ASR here: proofread texts make them manifest rows
        store.restore(clip["id"])  # (the gates rejected them for having no text)
    first = store.list_clips(page_size=100, speaker="spk1").clips
    assert first and all(c["speaker"] == "spk1" for c in first), store.speakers()
    moved = store.set_speaker(first[0]["id"], "spk2")
    assert moved["speaker"] == "spk2" and moved["speaker_edited"]
    path = store.save_manifest(speaker="spk2")
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert rows and {r["speaker"] for r in rows} == {"spk2"} and first[0]["id"] in {r["id"] for r in rows}
    assert len(rows) == store.speakers()["spk2"]
    assert {r["source"] for r in rows} <= {"talk0", "talk1"} and all("duration" in r for r in rows)
    with pytest.raises(StoreError, match="no speaker 'nobody'"):
        store.save_manifest(speaker="nobody")


def test_a_new_threshold_reclusters_without_embedding_again(dialogue, tmp_path: Path, monkeypatch) -> None:
    out, _, model = dialogue
    import data_tools.ingest.speakers as speakers

    monkeypatch.setattr(speakers, "embed_clip", lambda *a: pytest.fail("embedded twice"))
    records = {p.name: p.read_bytes() for p in (out / "sources").glob("*.json")}
    summary = run_ingest(IngestSettings(out.parent / "in", out, language="am", speaker_model=str(model),
                                        speaker_threshold=0.999), vad_model=EnergyVad())
    assert summary.sources_done_before == 2
    assert len({r["speaker"] for r in read_jsonl(out / "clips.jsonl")}) > 2  # stricter: more speakers
    assert {p.name: p.read_bytes() for p in (out / "sources").glob("*.json")} == records
    with pytest.raises(IngestError, match="between 0 and 1"):
        run_ingest(IngestSettings(out.parent / "in", out, speaker_model=str(model), speaker_threshold=1.5),
                   vad_model=EnergyVad())
    run_ingest(IngestSettings(out.parent / "in", out, language="am", speaker_model=str(model)),
               vad_model=EnergyVad())  # leave the shared folder as the other tests found it


def test_one_person_in_two_recordings_gets_one_label() -> None:
    rng = np.random.default_rng(0)
    ann, bob = rng.normal(size=16), rng.normal(size=16)
    clips = [Clip(f"{src}_{k}", src, 2.0, (ann if k % 2 else bob) + rng.normal(scale=0.1, size=16))
             for src in ("a", "b") for k in range(4)]
    labels = label_speakers(clips)
    assert labels["a_1"] == labels["b_1"] == labels["a_3"] and labels["a_0"] == labels["b_2"] != labels["a_1"]


def test_a_bad_speaker_model_is_one_line(tmp_path: Path) -> None:
    from tests.ingest_factory import tone_recording

    tone_recording(tmp_path / "in" / "a.wav", [2.0], [1.0])
    (tmp_path / "bad.bin").write_bytes(b"not a state dict")
    with pytest.raises(IngestError, match=r"bad\.bin: not a CAMPPlus state dict"):
        run_ingest(IngestSettings(tmp_path / "in", tmp_path / "out", speaker_model=str(tmp_path / "bad.bin")),
                   vad_model=EnergyVad())


def test_an_xvector_model_folder_labels_the_clips_too(dialogue, tmp_path: Path) -> None:
    from tests.speech_model_factory import build_xvector_model

    out, _, _ = dialogue
    folder = build_xvector_model(tmp_path / "xvector")
    settings = IngestSettings(out.parent / "in", tmp_path / "out", language="am", speaker_model=str(folder))
    summary = run_ingest(settings, vad_model=EnergyVad())
    rows = read_jsonl(tmp_path / "out" / "clips.jsonl")
    assert summary.clips == 12 and all(r["speaker"].startswith("spk") for r in rows)
    record = json.loads((tmp_path / "out" / "sources" / "talk0.json").read_text(encoding="utf-8"))
    sizes = {len(clip["speaker_embedding"]) for clip in record["clips"]}
    assert len(sizes) == 1 and sizes.pop() > 1
