"""The proofreading store: edits on disk at once, worst first, manifests never over an earlier one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import soundfile as sf

from data_tools.ingest.pipeline import IngestSettings, run_ingest
from data_tools.ingest.store import IngestStore, StoreError
from data_tools.preprocess_inputs import read_inputs
from tests.ingest_factory import EnergyVad, FakeAsr, tone_recording, tone_speech


@pytest.fixture
def ingested(tmp_path: Path) -> Path:
    folder = tmp_path / "in"
    tone_recording(folder / "spk1" / "long.wav", [2.0, 3.0, 2.5, 4.0], [0.8, 1.0])
    clips = folder / "spk2"
    clips.mkdir()
    for k in range(3):
        sf.write(str(clips / f"c{k}.wav"), tone_speech(2.5, 22050, seed=10 + k), 22050)
        (clips / f"c{k}.txt").write_text(f"ሰላም ለዓለም ቁጥር {['አንድ', 'ሁለት', 'ሶስት'][k]}", encoding="utf-8")
    out = tmp_path / "out"
    run_ingest(IngestSettings(folder, out, language="am"), transcriber=FakeAsr(confidence=0.7), vad_model=EnergyVad())
    return out


def test_list_is_worst_first_and_paginated(ingested: Path) -> None:
    store = IngestStore(ingested)
    first = store.list_clips(page=0, page_size=3)
    assert first.total == 7 and first.pages == 3 and len(first.clips) == 3
    everything = [clip for page in range(3) for clip in store.list_clips(page, 3).clips]
    assert len({c["id"] for c in everything}) == 7
    keys = [(c["status"] != "rejected", 1.0 if c["confidence"] is None else c["confidence"]) for c in everything]
    assert keys == sorted(keys)
    asr = [c for c in everything if c["asr_text"]]
    assert asr and all(c["confidence"] == 0.7 for c in asr)
    given = [c for c in everything if c["given_kind"] == "transcript"]
    assert len(given) == 3 and all(c["asr_text"] for c in given)  # transcribed clips get the ASR text beside


def test_edit_delete_restore_save_and_reopen(ingested: Path) -> None:
    store = IngestStore(ingested)
    ids = [c["id"] for c in store.list_clips(page_size=100).clips if c["status"] == "ok"]
    edited, deleted = ids[0], ids[1]
    store.set_text(edited, "  የተስተካከለ   ጽሑፍ ")
    store.delete(deleted)
    first = store.save_manifest()
    rows = [json.loads(line) for line in first.read_text(encoding="utf-8").splitlines()]
    by_id = {row["id"]: row for row in rows}
    assert by_id[edited]["text"] == "የተስተካከለ ጽሑፍ" and deleted not in by_id
    assert all((first.parent / row["audio"]).is_file() and row["language"] == "am" for row in rows)

    reopened = IngestStore(ingested)  # a page reload or a studio restart
    assert reopened.clip(edited)["text"] == "የተስተካከለ ጽሑፍ" and reopened.clip(edited)["edited"]
    assert reopened.clip(deleted)["status"] == "deleted"
    reopened.restore(deleted)
    second = reopened.save_manifest()
    assert second != first and first.read_text(encoding="utf-8") == first.read_text(encoding="utf-8")
    assert deleted in second.read_text(encoding="utf-8") and deleted not in first.read_text(encoding="utf-8")
    third = reopened.save_manifest()
    assert len({first, second, third}) == 3

    items, problems = read_inputs(second, language="am")  # what data_tools.preprocess reads
    assert not problems and {item.id for item in items} == {row["id"] for row in map(json.loads, second.read_text(
        encoding="utf-8").splitlines())}


def test_edits_survive_a_rerun_of_the_pipeline(ingested: Path, tmp_path: Path) -> None:
    store = IngestStore(ingested)
    clip = store.list_clips(page_size=1).clips[0]["id"]
    store.set_text(clip, "አዲስ ጽሑፍ")
    run_ingest(IngestSettings(tmp_path / "in", ingested, language="am"), vad_model=EnergyVad())
    assert IngestStore(ingested).clip(clip)["text"] == "አዲስ ጽሑፍ"


def test_refusals_are_one_line(ingested: Path, tmp_path: Path) -> None:
    store = IngestStore(ingested)
    with pytest.raises(StoreError, match="no clip 'nope'"):
        store.set_text("nope", "x")
    some = store.list_clips().clips[0]["id"]
    with pytest.raises(StoreError, match="empty transcript"):
        store.set_text(some, "   ")
    with pytest.raises(StoreError, match="no clips yet"):
        IngestStore(tmp_path / "empty")


def test_a_full_disk_while_saving_loses_nothing(ingested: Path, monkeypatch) -> None:
    import errno
    import os as os_module

    store = IngestStore(ingested)
    first = store.save_manifest()
    before = first.read_bytes()
    real_fsync = os_module.fsync

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os_module, "fsync", full)
    with pytest.raises(StoreError, match=r"No space left on device.*untouched"):
        store.save_manifest()
    monkeypatch.setattr(os_module, "fsync", real_fsync)
    assert sorted(p.name for p in first.parent.iterdir()) == [first.name] and first.read_bytes() == before


def test_edits_from_two_stores_are_both_kept(ingested: Path) -> None:
    one, two = IngestStore(ingested), IngestStore(ingested)  # the studio and the CLI
    a, b = (c["id"] for c in one.list_clips(page_size=2).clips)
    one.set_text(a, "አንድ")
    two.set_text(b, "ሁለት")
    again = IngestStore(ingested)
    assert (again.clip(a)["text"], again.clip(b)["text"]) == ("አንድ", "ሁለት")
