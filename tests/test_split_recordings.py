"""Held out by recording (issue 29 item 4): clips of one source recording stay on one side; a frozen test set.

The manifest is an audio list as raw ingest saves it: one row per clip with its ``source`` recording and
``speaker``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from data_tools.split import SplitError, main, split_manifest, verify_test_set

RECORDINGS = {"interview_a.wav": "abebe", "interview_b.wav": "abebe", "lecture.wav": "selam",
              "radio.wav": "selam"}


def write_ingest_manifest(path: Path, recordings: dict[str, str] = RECORDINGS, clips: int = 8) -> Path:
    rows = []
    for r, (source, speaker) in enumerate(recordings.items()):
        for k in range(clips):
            rows.append({"id": f"{Path(source).stem}_{k:03d}", "audio": f"../clips/{Path(source).stem}_{k:03d}.wav",
                         "text": f"sentence {k} of recording {r}", "speaker": speaker, "duration": 2.0,
                         "language": "am", "source": source})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    return path


def read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def sources(rows: list[dict]) -> set[str]:
    return {row["source"] for row in rows}


def test_no_recording_is_on_both_sides_whatever_the_seed(tmp_path):
    three = dict(list(RECORDINGS.items())[:3])
    manifest = write_ingest_manifest(tmp_path / "ingest" / "manifests" / "manifest.jsonl", three)
    val_seen = set()
    for seed in range(12):
        result = split_manifest(manifest, tmp_path / f"s{seed}", val_fraction=0.3, seed=seed)
        train, val = read(result.train_path), read(result.val_path)
        assert len(train) + len(val) == 24
        assert not sources(train) & sources(val)
        assert {row["speaker"] for row in val} <= {row["speaker"] for row in train}  # val speakers stay seen
        val_seen |= sources(val)
    # abebe has two recordings, so one of them can be held out; selam's only one has to stay in train.
    assert val_seen == {"interview_a.wav", "interview_b.wav"}
    assert all(row["audio"].startswith("../ingest/clips/") for row in read(tmp_path / "s0" / "train.jsonl"))


def test_by_speaker_keeps_every_clip_of_a_speaker_on_one_side(tmp_path):
    manifest = write_ingest_manifest(tmp_path / "m.jsonl")
    result = split_manifest(manifest, tmp_path / "out", val_fraction=0.4, seed=3, by_speaker=True)
    train, val = read(result.train_path), read(result.val_path)
    assert val and not {r["speaker"] for r in train} & {r["speaker"] for r in val}


def test_a_frozen_test_set_is_kept_and_a_change_on_disk_is_refused(tmp_path, capsys):
    manifest = write_ingest_manifest(tmp_path / "m.jsonl")
    out = tmp_path / "split"
    first = split_manifest(manifest, out, val_fraction=0.25, seed=1, test_fraction=0.25)
    test = read(out / "test.jsonl")
    assert first.test_count == len(test) == 8 and first.test_digest == verify_test_set(out / "test.jsonl")
    train, val = read(first.train_path), read(first.val_path)
    assert len(train) + len(val) + len(test) == 32
    assert not sources(test) & (sources(train) | sources(val))

    # A later split into the same folder (another seed) keeps the test set byte for byte.
    frozen = (out / "test.jsonl").read_bytes()
    again = split_manifest(manifest, out, val_fraction=0.25, seed=9, test_fraction=0.25)
    assert again.test_frozen_before and (out / "test.jsonl").read_bytes() == frozen
    assert not sources(test) & (sources(read(again.train_path)) | sources(read(again.val_path)))

    # A test set edited on disk is refused by its digest, in one line.
    rows = read(out / "test.jsonl")
    rows[0]["text"] = "an easier sentence"
    (out / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    with pytest.raises(SplitError, match="changed on disk since it was frozen"):
        verify_test_set(out / "test.jsonl")
    assert main(["--manifest", str(manifest), "--out-dir", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "changed on disk" in err and "\n" not in err


def test_a_manifest_clip_from_a_test_recording_is_refused_as_a_leak(tmp_path, capsys):
    manifest = write_ingest_manifest(tmp_path / "m.jsonl")
    out = tmp_path / "split"
    split_manifest(manifest, out, val_fraction=0.0, seed=1, test_fraction=0.25)
    test_source = read(out / "test.jsonl")[0]["source"]
    late = {"id": "late_clip", "audio": "../clips/late.wav", "text": "a new clip", "speaker": "x", "source": test_source}
    grown = [*read(manifest), late]
    manifest.write_text("".join(json.dumps(r) + "\n" for r in grown), encoding="utf-8")
    assert main(["--manifest", str(manifest), "--out-dir", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert "late_clip" in err and test_source in err and "would leak" in err and "\n" not in err


def test_a_test_set_without_its_digest_is_not_taken(tmp_path):
    manifest = write_ingest_manifest(tmp_path / "m.jsonl")
    out = tmp_path / "split"
    out.mkdir()
    (out / "test.jsonl").write_text(manifest.read_text(encoding="utf-8").splitlines()[0] + "\n", encoding="utf-8")
    with pytest.raises(SplitError, match="not a frozen test set"):
        split_manifest(manifest, out, val_fraction=0.2)
