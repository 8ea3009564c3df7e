"""Data loading: manifest -> items (drops counted), length-bucketed epoch order, O(1) position, padding."""

from __future__ import annotations

import hashlib
import json
import multiprocessing

import numpy as np
import pytest
import torch

import trainer.batch_loader
import trainer.data
from data_tools.manifest import ManifestError
from data_tools.text_tokenizer import TextTokenizer
from generations.indextts15.dataset import CodesDataset, Collator
from trainer.batch_loader import make_loader
from trainer.data import BucketBatchSampler, load_items, read_npy
from trainer.sampler import resume_position


@pytest.fixture(scope="module")
def tokenizer(demo_workspace):
    return TextTokenizer(demo_workspace.extended_tokenizer)


def write_manifest(folder, rows, name="m.jsonl"):
    """rows: (id, text, n_codes, cond_frames); writes .npy files next to the manifest."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = []
    for utt, text, n_codes, frames in rows:
        np.save(folder / f"{utt}.codes.npy", (np.arange(n_codes) % 256).astype(np.int16))
        np.save(folder / f"{utt}.mel.npy", np.full((100, frames), -4.0, dtype=np.float32))
        lines.append(json.dumps({"id": utt, "text": text, "codes": f"{utt}.codes.npy", "cond_mel": f"{utt}.mel.npy"}))
    path = folder / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_load_items_tokenizes_and_counts_drops(tmp_path, tokenizer):
    manifest = write_manifest(tmp_path, [
        ("ok1", "ሰላም ለዓለም", 20, 30),
        ("ok2", "hello world", 25, 40),
        ("long_codes", "ሰላም", 200, 30),
        ("long_text", "ሰላም ለዓለም " * 40, 20, 30),
    ])
    items, report = load_items([manifest], tokenizer, max_text_tokens=32, max_codes=128)
    assert [item.id for item in items] == ["ok1", "ok2"]
    assert report.kept == 2 and report.dropped == 2
    assert report.too_many_codes == [f"{manifest}:3"]
    assert report.too_many_text_tokens == [f"{manifest}:4"]
    lines = report.lines("train", 32, 128)
    assert "2 items kept, 2 dropped" in lines[0]
    assert any("more than max_mel_tokens=128 codes" in line and f"{manifest}:3" in line for line in lines)
    assert list(items[0].text_ids) == tokenizer.encode("ሰላም ለዓለም")
    assert items[0].num_codes == 20 and items[0].length == 20 + len(items[0].text_ids)


@pytest.mark.parametrize("problem, expected", [
    ("missing_codes", "codes file not found"),
    ("bad_mel_shape", "must be a float array [100, frames]"),
    ("float_codes", "codes must be integers"),
    ("malformed_line", ":2: malformed JSON"),
])
def test_bad_entries_name_file_and_line(tmp_path, tokenizer, problem, expected):
    manifest = write_manifest(tmp_path, [("a", "ሰላም", 10, 20), ("b", "ለዓለም", 10, 20)])
    if problem == "missing_codes":
        (tmp_path / "b.codes.npy").unlink()
    elif problem == "bad_mel_shape":
        np.save(tmp_path / "b.mel.npy", np.zeros((80, 20), dtype=np.float32))
    elif problem == "float_codes":
        np.save(tmp_path / "b.codes.npy", np.zeros(10, dtype=np.float32))
    else:
        lines = manifest.read_text(encoding="utf-8").splitlines()
        manifest.write_text(lines[0] + "\n{not json\n", encoding="utf-8")
    with pytest.raises(ManifestError) as exc:
        load_items([manifest], tokenizer, 64, 128)
    assert str(exc.value).startswith(f"{manifest}:2: ")
    assert expected in str(exc.value)


def test_duplicate_ids_across_manifests_refused(tmp_path, tokenizer):
    first = write_manifest(tmp_path / "a", [("same", "ሰላም", 10, 20)])
    second = write_manifest(tmp_path / "b", [("same", "ለዓለም", 10, 20)])
    with pytest.raises(ManifestError, match="duplicate id 'same'"):
        load_items([first, second], tokenizer, 64, 128)


def lengths_for(n, seed=0):
    return np.random.default_rng(seed).integers(5, 300, size=n).tolist()


def test_epoch_order_is_a_pure_function_of_seed_and_epoch():
    lengths = lengths_for(500)
    a = BucketBatchSampler(lengths, 8, seed=7)
    b = BucketBatchSampler(lengths, 8, seed=7)
    assert a.batches(3) == b.batches(3)
    assert a.batches(3) != a.batches(4)
    assert a.batches(0) != BucketBatchSampler(lengths, 8, seed=8).batches(0)
    for epoch in (0, 1):
        flat = sorted(i for batch in a.batches(epoch) for i in batch)
        assert flat == list(range(500))  # every item exactly once per epoch
    assert len(a) == len(a.batches(0)) == len(a.batches(5)) == 63


def test_bucketing_keeps_padding_low():
    lengths = np.asarray(lengths_for(1000))

    def padding(batches):
        return sum(int(lengths[b].max()) * len(b) - int(lengths[b].sum()) for b in batches) / lengths.sum()

    bucketed = BucketBatchSampler(lengths, 8, seed=1).batches(0)
    shuffled = np.random.default_rng(1).permutation(1000)
    random_batches = [shuffled[i:i + 8] for i in range(0, 1000, 8)]
    assert padding(bucketed) < 0.1 < padding(random_batches)


def test_bucketing_by_prompt_length_too_when_prompts_differ():
    rng = np.random.default_rng(4)
    targets, prompts = rng.integers(20, 400, 1000), rng.integers(50, 600, 1000)

    def padding(batches, lengths):
        return sum(int(lengths[b].max()) * len(b) - int(lengths[b].sum()) for b in batches) / lengths.sum()

    by_target = BucketBatchSampler(targets, 8, seed=1).batches(0)
    by_both = BucketBatchSampler(targets, 8, seed=1, prompt_lengths=prompts).batches(0)
    assert sorted(i for b in by_both for i in b) == list(range(1000))  # a reordering, nothing lost
    assert padding(by_both, prompts) < 0.5 * padding(by_target, prompts)
    # The split minimises the padded positions of target and prompt together: the target gives up a little.
    assert padding(by_both, targets) < 0.2
    both = np.concatenate([targets, prompts])

    def padded_share(batches):
        positions = sum((int(targets[b].max()) + int(prompts[b].max())) * len(b) for b in batches)
        return 1 - both.sum() / positions

    assert padded_share(by_both) < 0.12 < 0.25 < padded_share(by_target)
    constant = BucketBatchSampler(targets, 8, seed=1, prompt_lengths=[32] * 1000)  # IndexTTS2's fixed latents
    assert constant.batches(0) == by_target and constant.fingerprint() == BucketBatchSampler(targets, 8, 1).fingerprint()
    assert BucketBatchSampler(targets, 8, seed=1, prompt_lengths=prompts).fingerprint() != constant.fingerprint()


def previous_order(targets, prompts, size, seed, epoch):
    """The ordering before the parts were split on their own: chunks of 32 batches sorted by target length,
    re-sorted by prompt length in runs of 4 batches (kept here as the reference the new one must beat)."""
    rng = np.random.default_rng([seed, epoch])
    order = rng.permutation(len(targets))
    batches = []
    for start in range(0, len(order), size * 32):
        part = order[start:start + size * 32]
        part = part[np.argsort(targets[part], kind="stable")]
        part = np.concatenate([run[np.argsort(prompts[run], kind="stable")]
                               for run in (part[i:i + size * 4] for i in range(0, len(part), size * 4))])
        batches += [part[i:i + size].tolist() for i in range(0, len(part), size)]
    return batches


def test_demo_batches_pad_under_a_tenth_and_beat_the_previous_order(demo_workspace, tokenizer):
    """bench/batch_padding.py's measure: text, codes and prompt each padded to the batch's longest."""
    items, _ = load_items([demo_workspace.train_manifest], tokenizer, 64, 128)  # the demo config's limits
    parts = np.asarray([(item.text_ids.size, item.num_codes, item.prompt_frames) for item in items])

    def padded_share(batches):
        positions = sum(int(parts[b].max(axis=0).sum()) * len(b) for b in batches)
        return 1 - sum(int(parts[b].sum()) for b in batches) / positions

    sampler = trainer.data.train_sampler(items, 8, seed=1234)
    epochs = [sampler.batches(epoch) for epoch in range(3)]
    ours = padded_share([b for batches in epochs for b in batches])
    before = padded_share([b for epoch in range(3) for b in previous_order(
        parts[:, :2].sum(axis=1), parts[:, 2], 8, 1234, epoch)])
    assert ours <= 0.09 and ours < before - 0.015
    full, tail = divmod(len(items), 8)
    assert all(sorted(len(b) for b in batches) == [tail] * (tail > 0) + [8] * full for batches in epochs)
    shared = {frozenset(b) for b in epochs[0]} & {frozenset(b) for b in epochs[1]}
    assert len(shared) < 0.1 * len(epochs[0])  # the batches themselves change from epoch to epoch


def test_part_lengths_keep_the_rank_slices_and_the_tail_rule():
    rng = np.random.default_rng(2)
    parts, prompts = rng.integers(2, 300, (203, 2)), rng.integers(40, 500, 203)
    single = BucketBatchSampler(parts, 12, seed=5, prompt_lengths=prompts)
    world = [BucketBatchSampler(parts, 4, seed=5, rank=r, world_size=3, prompt_lengths=prompts) for r in range(3)]
    assert sorted(len(b) for b in single.batches(1)) == [11] + [12] * 16
    for index, batch in enumerate(single.batches(1)):
        assert [i for share in world for i in share.batches(1)[index]] == batch
    tail = [BucketBatchSampler(parts[:13], 4, seed=0, rank=r, world_size=3, prompt_lengths=prompts[:13])
            for r in range(3)]
    assert sorted(len(t.batches(0)[0]) for t in tail) == [4, 4, 5]


def test_checkpoints_of_the_previous_order_resume_inexactly_at_the_same_sample_count():
    """A checkpoint saved under the previous ordering (its fingerprint hashed the target lengths, batching
    and prompt lengths only) continues at the same number of samples and says that exactness is lost."""
    rng = np.random.default_rng(3)
    parts, prompts = rng.integers(2, 300, (100, 2)), rng.integers(40, 500, 100)
    sampler = BucketBatchSampler(parts, 4, seed=3, prompt_lengths=prompts)
    digest = hashlib.sha256(parts.sum(axis=1).astype(np.int64).tobytes())
    digest.update(b"4/1/32")
    digest.update(b"/prompt" + prompts.astype(np.int64).tobytes())
    saved = {**sampler.state_dict(1, 5), "fingerprint": digest.hexdigest()[:16], "samples_in_epoch": 20}
    point = resume_position(sampler, 1, 5, 30, saved, "old.pth")
    assert (point.epoch, point.position) == (1, 5) and point.change is not None
    assert "fingerprint" in point.change and point.change.endswith("bitwise exactness with an uninterrupted run is lost")
    assert resume_position(sampler, 1, 5, 30, sampler.state_dict(1, 5), "new.pth").change is None
    constant = BucketBatchSampler(parts, 4, seed=3, prompt_lengths=[32] * 100)  # IndexTTS2: target-only before
    old_v2 = hashlib.sha256(parts.sum(axis=1).astype(np.int64).tobytes())
    old_v2.update(b"4/1/32")
    assert constant.fingerprint() != old_v2.hexdigest()[:16]


def test_resume_position_is_a_slice_and_state_is_small():
    sampler = BucketBatchSampler(lengths_for(200), 4, seed=3)
    state = sampler.state_dict(epoch=2, position=17)
    assert state["epoch"] == 2 and state["position"] == 17
    assert len(json.dumps(state)) < 300  # O(1): no index lists in the state
    fresh = BucketBatchSampler(lengths_for(200), 4, seed=3)
    assert fresh.describe_change(state) is None
    assert fresh.batches(2)[17:] == sampler.batches(2)[17:]
    changed = BucketBatchSampler(lengths_for(201), 4, seed=3)
    assert "num_items 200 -> 201" in changed.describe_change(state)


def test_ranks_get_disjoint_slices_covering_the_epoch():
    lengths = lengths_for(203)
    world = [BucketBatchSampler(lengths, 4, seed=5, rank=r, world_size=3) for r in range(3)]
    shares = [w.batches(1) for w in world]
    assert len({len(s) for s in shares}) == 1  # the same number of micro-batches on every rank: no DDP wait
    assert all(batch for share in shares for batch in share)  # every rank has an item in every global batch
    seen = [i for share in shares for batch in share for i in batch]
    assert sorted(seen) == list(range(203))  # disjoint and nothing left out (203 is not a multiple of 12)
    assert world[0].samples_after(1)[-1] == 203 and len(world[0]) == 17


def test_rank_slices_are_the_single_process_batch_with_the_global_batch_size():
    lengths = lengths_for(203)
    single = BucketBatchSampler(lengths, 12, seed=5).batches(2)
    world = [BucketBatchSampler(lengths, 4, seed=5, rank=r, world_size=3).batches(2) for r in range(3)]
    for index, batch in enumerate(single):
        assert [i for share in world for i in share[index]] == batch
        assert max(len(share[index]) for share in world) - min(len(share[index]) for share in world) <= 1


def test_a_tail_shorter_than_the_world_joins_the_batch_before_it():
    # 13 items, global batch 4 x 3 = 12: the 1 left over cannot give each of 3 ranks an item.
    world = [BucketBatchSampler(lengths_for(13), 4, seed=0, rank=r, world_size=3) for r in range(3)]
    assert [len(w.batches(0)) for w in world] == [1, 1, 1]
    assert sorted(len(w.batches(0)[0]) for w in world) == [4, 4, 5]
    assert sorted(i for w in world for i in w.batches(0)[0]) == list(range(13))
    assert len(BucketBatchSampler(lengths_for(2), 1, seed=0, rank=0, world_size=3)) == 0  # fewer items than ranks


def test_collate_pads_and_counts(tmp_path, tokenizer):
    manifest = write_manifest(tmp_path, [("a", "ሰላም", 7, 20), ("b", "ሰላም ለዓለም", 12, 33)])
    items, _ = load_items([manifest], tokenizer, 64, 128)
    dataset = CodesDataset(items, num_codes_valid=8192)
    batch = Collator(text_pad=1, code_pad=8193)([dataset[0], dataset[1]])
    assert batch["ids"] == ["a", "b"]
    assert batch["code_lengths"].tolist() == [7, 12]
    assert batch["codes"].shape == (2, 12) and batch["codes"][0, 7:].eq(8193).all()
    assert batch["cond_mels"].shape == (2, 100, 33) and batch["cond_mel_lengths"].tolist() == [20, 33]
    assert batch["text_ids"].dtype == torch.long
    assert batch["num_tokens"] == int(batch["text_lengths"].sum()) + 19


def test_bad_codes_become_an_error_entry_not_an_exception(tmp_path, tokenizer):
    manifest = write_manifest(tmp_path, [("a", "ሰላም", 7, 20)])
    np.save(tmp_path / "a.codes.npy", np.array([1, 2, 9000], dtype=np.int64))
    items, _ = load_items([manifest], tokenizer, 64, 128)
    batch = Collator()([CodesDataset(items, num_codes_valid=8192)[0]])
    assert batch["error"].startswith(f"{manifest}:1 (id a): codes must lie in 0..8191")


@pytest.mark.parametrize("workers", [0, 1])
def test_loader_yields_the_given_batches_and_leaves_global_rng_alone(tmp_path, tokenizer, workers):
    manifest = write_manifest(tmp_path, [(f"u{i}", "ሰላም " * (1 + i % 3), 5 + i, 20) for i in range(10)])
    items, _ = load_items([manifest], tokenizer, 64, 128)
    batches = BucketBatchSampler([item.length for item in items], 3, seed=0).batches(0)[1:]
    torch.manual_seed(123)
    before = torch.get_rng_state()
    loader = make_loader(CodesDataset(items, 8192), batches, Collator(), workers, False, seed=0)
    got = [batch["ids"] for batch in loader]
    assert torch.equal(torch.get_rng_state(), before)
    assert got == [[items[i].id for i in batch] for batch in batches]


def test_cond_audio_prompt_becomes_a_log_mel(tmp_path, tokenizer):
    import soundfile

    np.save(tmp_path / "a.codes.npy", np.arange(9, dtype=np.int16))
    wave = 0.1 * np.sin(np.linspace(0, 2000, 16000)).astype(np.float32)
    soundfile.write(tmp_path / "prompt.wav", wave, 16000)  # 1 s at 16 kHz: resampled to 24 kHz
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(json.dumps({"id": "a", "text": "ሰላም", "codes": "a.codes.npy",
                                    "cond_audio": "prompt.wav"}) + "\n", encoding="utf-8")
    items, _ = load_items([manifest], tokenizer, 64, 128)
    item = CodesDataset(items, 8192)[0]
    assert item["cond_mel"].shape == (100, 1 + 24000 // 256)
    assert torch.isfinite(item["cond_mel"]).all()


@pytest.mark.parametrize("array", [
    np.arange(7, dtype=np.int16), np.arange(5, dtype=np.uint8), np.arange(6, dtype=">i4"), np.zeros(0, np.int64),
    np.random.default_rng(0).random((3, 4)), np.random.default_rng(1).random((1, 100, 5)).astype(np.float32),
    np.array(3.5), np.asfortranarray(np.random.default_rng(2).random((3, 4))),  # the last: numpy's own reader
], ids=["int16", "uint8", "big-endian", "empty", "float64-2d", "float32-3d", "scalar", "fortran"])
def test_read_npy_matches_np_load(tmp_path, array):
    np.save(tmp_path / "a.npy", array)
    got = read_npy(tmp_path / "a.npy")
    assert got.dtype == array.dtype and got.shape == array.shape and np.array_equal(got, array)
    assert got.flags.writeable


def test_read_npy_refuses_a_truncated_file(tmp_path):
    np.save(tmp_path / "a.npy", np.arange(10, dtype=np.int16))
    (tmp_path / "a.npy").write_bytes((tmp_path / "a.npy").read_bytes()[:-4])
    with pytest.raises(ValueError, match=r"a\.npy: header claims shape \[10\] int16 \(20 bytes\) but the file holds 16"):
        read_npy(tmp_path / "a.npy")


@pytest.mark.parametrize("by_value_max_bytes", [trainer.batch_loader.BY_VALUE_MAX_BYTES, 0])  # 0: all via shared memory
def test_worker_batches_equal_in_process_batches(tmp_path, tokenizer, monkeypatch, by_value_max_bytes):
    monkeypatch.setattr(trainer.batch_loader, "BY_VALUE_MAX_BYTES", by_value_max_bytes)  # before the workers fork
    manifest = write_manifest(tmp_path, [(f"u{i}", "ሰላም " * (1 + i % 3), 5 + i, 20 + i) for i in range(6)])
    items, _ = load_items([manifest], tokenizer, 64, 128)
    dataset, batches = CodesDataset(items, 8192), [[0, 3], [5, 1, 2], [4]]
    expected = [Collator()([dataset[i] for i in batch]) for batch in batches]
    with make_loader(dataset, batches, Collator(), 1, False, seed=0) as loader:
        got = list(loader)
    for mine, theirs in zip(got, expected, strict=True):
        assert mine.keys() == theirs.keys()
        for key, value in theirs.items():
            if isinstance(value, torch.Tensor):
                assert mine[key].dtype == value.dtype and torch.equal(mine[key], value), key
            else:
                assert mine[key] == value, key


def test_persistent_loader_walks_new_batches_each_pass_and_close_ends_its_workers(tmp_path, tokenizer):
    manifest = write_manifest(tmp_path, [(f"u{i}", "ሰላም", 5 + i, 20) for i in range(12)])
    items, _ = load_items([manifest], tokenizer, 64, 128)
    sampler = BucketBatchSampler([item.length for item in items], 2, seed=0)
    torch.manual_seed(123)
    before = torch.get_rng_state()
    loader = make_loader(CodesDataset(items, 8192), [], Collator(), 1, False, seed=0, persistent=True)
    workers_seen = set()
    for epoch, position in ((0, 0), (1, 2), (2, 5)):  # like an epoch resumed mid-way, and a pass left early
        loader.batches = sampler.batches(epoch)[position:]
        got = []
        for batch in loader:
            got.append(batch["ids"])
            workers_seen.update(child.pid for child in multiprocessing.active_children())
            if epoch == 1 and len(got) == 2:
                break
        expected = sampler.batches(epoch)[position:][: 2 if epoch == 1 else None]
        assert got == [[items[i].id for i in batch] for batch in expected]
    assert len(workers_seen) == 1  # one worker process for all passes
    assert torch.equal(torch.get_rng_state(), before)
    loader.close()
    assert not workers_seen & {child.pid for child in multiprocessing.active_children()}
    with pytest.raises(RuntimeError, match="closed"):
        iter(loader)


HOSTILE_LINES = [
    ('{"id": ' + "1" * 5000 + ', "text": "x", "codes": "a.codes.npy", "cond_mel": "a.mel.npy"}', "malformed JSON"),
    ("[" * 100_000 + "]" * 100_000, "malformed JSON (nested too deep)"),
    ('{"id": "b", "text": "ሰላም", "codes": "a.codes.npy", "cond_mel": "a.mel.npy", "duration": 1e19}',
     "field 'duration' must be a number of seconds"),
    ('{"id": "b", "text": "ሰላም", "codes": "a.codes.npy", "cond_mel": "a.mel.npy", "duration": NaN}',
     "field 'duration' must be a number of seconds"),
    ('{"id": "b", "text": "ሰላም", "codes": "~nosuchuser_t/a.npy", "cond_mel": "a.mel.npy"}',
     "no home folder for user 'nosuchuser_t'"),
    ('{"id": "b", "text": "ሰላም", "codes": "fifo.npy", "cond_mel": "a.mel.npy"}', "is a FIFO (named pipe)"),
    ('{"id": "b", "text": "ሰላም", "codes": "huge.npy", "cond_mel": "a.mel.npy"}', "header claims shape [999999999999]"),
    ('{"id": "b", "text": "ሰላም", "codes": "a.codes.npy", "cond_mel": "nan.mel.npy"}', "cond_mel holds 1 NaN"),
]


@pytest.mark.parametrize("line, expected", HOSTILE_LINES, ids=["5000-digits", "nested", "1e19", "nan", "nosuchuser",
                                                                "fifo", "huge-header", "nan-mel"])
def test_hostile_input_is_refused_in_one_line_by_trainer_and_checker(tmp_path, tokenizer, line, expected):
    import os

    from data_tools.check_data import check_manifests

    manifest = write_manifest(tmp_path, [("a", "ሰላም", 10, 20)])
    os.mkfifo(tmp_path / "fifo.npy")
    np.save(tmp_path / "huge.npy", np.arange(4, dtype=np.int16))
    (tmp_path / "huge.npy").write_bytes((tmp_path / "huge.npy").read_bytes().replace(b"(4,)", b"(999999999999,)"))
    mel = np.zeros((100, 20), np.float32)
    mel[3, 4] = np.nan
    np.save(tmp_path / "nan.mel.npy", mel)
    manifest.write_text(manifest.read_text(encoding="utf-8") + line + "\n", encoding="utf-8")
    try:
        items, _ = load_items([manifest], tokenizer, 64, 128)
        dataset = CodesDataset(items, 8192)
        refusal = Collator()([dataset[i] for i in range(len(dataset))])["error"]
    except ManifestError as exc:
        refusal = str(exc)
    assert refusal.startswith(f"{manifest}:2") and expected in refusal and "\n" not in refusal
    report = check_manifests([manifest], workers=1)
    assert [p.where for p in report.errors] == [f"{manifest}:2"]
    assert expected.split(" (")[0] in report.errors[0].message
