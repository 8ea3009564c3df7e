"""Train/val split: deterministic by seed, speaker-aware, no id, text or codes file in both halves."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from data_tools.check_data import check_manifests
from data_tools.split import main, split_manifest
from data_tools.split_plan import SplitItem, plan_split
from data_tools.text import normalize_text
from data_tools.text_keys import text_key

WORDS = ("ሰላም", "ዓለም", "አዲስ", "አበባ", "ከተማ", "ቋንቋ", "መማር", "ጥሩ", "ነው", "ዛሬ", "ነገ", "ውሃ", "ቤት", "መጽሐፍ")
SPEAKERS = ("abebe", "selam", "tigist", "kebede", "hana")


def sentence(k: int) -> str:
    return " ".join(WORDS[(k * 7 + j * 3) % len(WORDS)] for j in range(2 + k % 4)) + f" {k}"


def write_manifest(path: Path) -> Path:
    """100 entries, 5 speakers; some texts repeat across speakers or differ only in punctuation/case,
    one codes file is shared, and one id appears twice."""
    lines = []
    for k in range(100):
        speaker = SPEAKERS[k % len(SPEAKERS)]
        text = sentence(k)
        if k % 10 == 3:
            text = sentence(k - 1)  # the same sentence read by the next speaker
        if k % 10 == 7:
            text = sentence(k - 2) + "።"  # only the punctuation differs
        codes = f"codes/{k}.npy" if k != 50 else "codes/49.npy"
        uid = f"utt{k}" if k != 60 else "utt59"
        lines.append(json.dumps({"id": uid, "text": text, "codes": codes, "cond_mel": f"mels/{k}.npy",
                                 "speaker": speaker, "language": "am", "duration": 1.5}, ensure_ascii=False))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def assert_no_leak(train: list[dict], val: list[dict]) -> None:
    def keys(rows: list[dict]) -> set:
        out = set()
        for row in rows:
            out |= {("id", row["id"]), ("codes", row["codes"]), ("text", text_key(row["text"])),
                    ("norm", text_key(normalize_text(row["text"], "am")))}
        return out

    assert not keys(train) & keys(val)


def test_same_seed_same_split_and_no_leak(tmp_path: Path) -> None:
    manifest = write_manifest(tmp_path / "data" / "all.jsonl")
    first = split_manifest(manifest, tmp_path / "a", val_fraction=0.2, seed=7)
    split_manifest(manifest, tmp_path / "b", val_fraction=0.2, seed=7)
    other = split_manifest(manifest, tmp_path / "c", val_fraction=0.2, seed=8)
    assert (tmp_path / "a" / "val.jsonl").read_bytes() == (tmp_path / "b" / "val.jsonl").read_bytes()
    assert (tmp_path / "a" / "train.jsonl").read_bytes() == (tmp_path / "b" / "train.jsonl").read_bytes()
    assert read(tmp_path / "a" / "val.jsonl") != read(tmp_path / "c" / "val.jsonl")
    for result, folder in ((first, "a"), (other, "c")):
        train, val = read(tmp_path / folder / "train.jsonl"), read(tmp_path / folder / "val.jsonl")
        assert len(train) + len(val) == 100 == result.train_count + result.val_count
        assert 15 <= len(val) <= 20  # about val_fraction, never above the target
        assert_no_leak(train, val)
        # Default: every val speaker is also heard in train.
        assert {row["speaker"] for row in val} <= {row["speaker"] for row in train}
        assert len({row["speaker"] for row in val}) >= 3  # spread over speakers, not one speaker's block
    assert first.notes == ["1 duplicate id(s) kept on one side; the data checker reports them"]


def test_paths_are_rebased_to_the_output_folder(tmp_path: Path) -> None:
    manifest = write_manifest(tmp_path / "data" / "all.jsonl")
    split_manifest(manifest, tmp_path / "splits" / "v1", val_fraction=0.1, seed=0)
    row = read(tmp_path / "splits" / "v1" / "train.jsonl")[0]
    resolved = os.path.normpath(tmp_path / "splits" / "v1" / row["codes"])
    assert resolved == str(tmp_path / "data" / "codes" / "0.npy")
    assert row["duration"] == 1.5 and row["language"] == "am"  # other fields kept


def test_held_out_speakers_are_only_in_val(tmp_path: Path) -> None:
    manifest = write_manifest(tmp_path / "all.jsonl")
    result = split_manifest(manifest, tmp_path / "out", val_fraction=0.0, seed=1, held_out_speakers=2)
    train, val = read(tmp_path / "out" / "train.jsonl"), read(tmp_path / "out" / "val.jsonl")
    assert len(result.held_out) == 2
    held = set(result.held_out)
    assert not held & {row["speaker"] for row in train}
    held_texts = {text_key(row["text"]) for row in val if row["speaker"] in held}
    # Seen speakers' utterances come along only when they share a text with a held-out one.
    assert all(text_key(row["text"]) in held_texts for row in val if row["speaker"] not in held)
    assert sum(row["speaker"] in held for row in val) == 40
    assert_no_leak(train, val)
    # Seen speakers also give some val utterances when a fraction is asked for.
    mixed = split_manifest(manifest, tmp_path / "mixed", val_fraction=0.1, seed=1, held_out_speakers=1)
    val = read(tmp_path / "mixed" / "val.jsonl")
    assert {row["speaker"] for row in val} - set(mixed.held_out)


def test_leak_checker_agrees(tmp_path: Path) -> None:
    manifest = write_manifest(tmp_path / "all.jsonl")
    split_manifest(manifest, tmp_path / "out", val_fraction=0.25, seed=3)
    report = check_manifests([tmp_path / "out" / "train.jsonl"], [tmp_path / "out" / "val.jsonl"], workers=1,
                             check_files=False)
    assert report.leakage == {"ids": 0, "texts": 0, "codes": 0}


def test_small_speakers_stay_seen() -> None:
    items = [SplitItem(f"u{k}", f"text number {k}", "solo" if k == 0 else "big", f"/c/{k}.npy") for k in range(3)]
    for seed in range(5):
        plan = plan_split(items, val_fraction=0.6, seed=seed)
        assert 0 in plan.train  # the only utterance of "solo" never goes to val
        assert len(plan.val) == 1  # the target is 2, but "big" must keep one of its two in train


def test_cli_refuses_bad_input_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    manifest = write_manifest(tmp_path / "all.jsonl")
    assert main(["--manifest", str(manifest), "--out-dir", str(tmp_path / "o"), "--val-fraction", "1.5"]) == 2
    assert capsys.readouterr().err == "error: --val-fraction must be in [0, 1), got 1.5\n"
    assert main(["--manifest", str(manifest), "--out-dir", str(tmp_path / "o"), "--held-out-speakers", "5"]) == 2
    assert "at least one must stay in train" in capsys.readouterr().err
    broken = tmp_path / "broken.jsonl"
    broken.write_text(manifest.read_text(encoding="utf-8") + '{"id": 1}\n', encoding="utf-8")
    assert main(["--manifest", str(broken), "--out-dir", str(tmp_path / "o")]) == 2
    assert capsys.readouterr().err.startswith(f"error: {broken}:101: ")
    own = write_manifest(tmp_path / "x" / "train.jsonl")
    assert main(["--manifest", str(own), "--out-dir", str(own.parent)]) == 2
    assert "would overwrite the input manifest" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
    assert main(["--manifest", str(manifest), "--out-dir", str(tmp_path / "o"), "--seed", "2"]) == 0
    assert "val: 5 entries" in capsys.readouterr().out


def test_paired_manifest_split_is_leak_free_by_utterance(tmp_path: Path) -> None:
    """IndexTTS2 pairs: no utterance is a target in train and a prompt or target in val."""
    import random as _random

    from tests.pairs_factory import PairsBuilder

    builder = PairsBuilder(tmp_path / "feats")
    rng = _random.Random(0)
    speakers = {"s1": [f"s1_{k}" for k in range(20)], "s2": [f"s2_{k}" for k in range(12)]}
    for speaker, utterances in speakers.items():
        for name in utterances:
            builder.utterance(name, text_len=5, code_len=12)
        for name in utterances:  # two random prompts per target, as build_gpt_prompt_pairs does
            for prompt in rng.sample([u for u in utterances if u != name], 2):
                builder.pair(name, prompt, speaker=speaker)
    manifest = builder.write()
    result = split_manifest(manifest, tmp_path / "out", val_fraction=0.2, seed=4)
    train, val = read(result.train_path), read(result.val_path)
    train_targets = {row["target_id"] for row in train}
    assert val and train
    assert not train_targets & ({row["target_id"] for row in val} | {row["prompt_id"] for row in val})
    assert {row["speaker"] for row in val} == {"s1", "s2"}
    assert len(train) == 2 * len(train_targets)  # a train target keeps all its pairs
    val_targets = {row["target_id"] for row in val}
    if len(train_targets) + len(val_targets) < 32 or len(val) < 2 * len(val_targets):
        assert any("left out" in note for note in result.notes)  # a val pair without a clean prompt is counted
    assert len({row["id"] for row in val}) == len(val)
    for row in val:  # re-prompted pairs point at real feature files of their speaker
        assert row["prompt_id"].split("_")[0] == row["speaker"] != row["target_id"]
        assert (result.val_path.parent / row["prompt_condition_path"]).resolve().is_file()
        assert row["id"] == f"{row['target_id']}__{row['prompt_id']}"
    report = check_manifests([result.train_path], [result.val_path], workers=1)
    assert report.leakage.get("utterances") == 0 and not report.errors


def test_paired_manifest_split_keeps_each_recording_on_one_side(tmp_path: Path) -> None:
    """Pairs prepared from ingest output carry their target's ``source``: every clip of a recording stays on
    one side, as in the audio list they were prepared from."""
    from tests.pairs_factory import PairsBuilder

    builder = PairsBuilder(tmp_path / "feats")
    names = [f"s1_{k}" for k in range(24)]
    for name in names:
        builder.utterance(name, text_len=5, code_len=12)
    for k, name in enumerate(names):
        builder.pair(name, names[(k + 1) % len(names)], speaker="s1", source=f"recording{k % 4}.wav")
    for seed in range(4):
        result = split_manifest(builder.write(), tmp_path / f"out{seed}", val_fraction=0.25, seed=seed)
        train, val = read(result.train_path), read(result.val_path)
        assert val and train
        assert not {row["source"] for row in train} & {row["source"] for row in val}, seed


def test_preparation_carries_each_clips_recording_into_its_lines(tmp_path: Path) -> None:
    from data_tools.preprocess_inputs import SourceItem
    from generations.indextts2.data.prepare import build_pairs, utterance_entry

    record = {"seconds": 1.0, "text_len": 3, "code_len": 5, "condition_len": 32}
    utterances = [utterance_entry(SourceItem(f"c{k}", f"c{k}", tmp_path / f"c{k}.wav", "hi", "spk", "am", "x",
                                             source=f"rec{k % 2}.wav"), record) for k in range(4)]
    assert [u["source"] for u in utterances] == ["rec0.wav", "rec1.wav", "rec0.wav", "rec1.wav"]
    lines, _lonely = build_pairs(utterances, 1, seed=0)
    assert all(line["source"] == f"rec{int(line['target_id'][1]) % 2}.wav" for line in lines)
