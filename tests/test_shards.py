"""Shards: a prepared folder packed into WebDataset tars, read back by index (local or by URL), by the trainer's
loader on every rank and worker exactly once per epoch, by the checker and after a split; damage named in a line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from data_tools import item_files, shard_reader
from data_tools.shape_rules import DataLimits, RuleError
from data_tools.shards import main as shards_main
from data_tools.shards import pack, verify
from generations.indextts15.dataset import CodesDataset, DataItem
from tests.media_server import serving
from trainer.batch_loader import make_loader
from trainer.sampler import BucketBatchSampler

ITEMS = 13  # with 3 shards, 2 ranks x 2 workers = 4 readers: fewer shards than readers, an uneven last batch


def prepared_folder(root: Path, count: int = ITEMS) -> Path:
    """``root/prep``: codes/<id>.npy and cond_mels/<id>.npy per item and a codes manifest naming them."""
    prep = root / "prep"
    (prep / "codes").mkdir(parents=True)
    (prep / "cond_mels").mkdir()
    lines = []
    for k in range(count):
        utt = f"utt{k:03d}"
        np.save(prep / "codes" / f"{utt}.npy", (np.arange(4 + k) + k).astype(np.int16))
        np.save(prep / "cond_mels" / f"{utt}.npy", np.full((100, 12 + k % 3), float(k), dtype=np.float32))
        lines.append(json.dumps({"id": utt, "text": f"ሰላም {k}", "codes": f"codes/{utt}.npy",
                                 "cond_mel": f"cond_mels/{utt}.npy", "speaker": f"s{k % 3}"}))
    (prep / "train.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return prep


@pytest.fixture
def packed(tmp_path: Path) -> Path:
    prep = prepared_folder(tmp_path)
    originals = {p.relative_to(prep).as_posix(): p.read_bytes() for p in prep.rglob("*.npy")}
    index = pack(prep, items=5)
    assert len(index.shards) == 3 and len(index.members) == 2 * ITEMS
    assert not list(prep.rglob("*.npy"))  # the per-file copies are gone: every read below comes from a shard
    (prep / "originals.json").write_text(json.dumps({k: v.hex() for k, v in originals.items()}), encoding="utf-8")
    return prep


def items_of(prep: Path) -> list[DataItem]:
    rows = [json.loads(line) for line in (prep / "train.jsonl").read_text(encoding="utf-8").splitlines()]
    return [DataItem(id=r["id"], where=f"train.jsonl:{n + 1}", text_ids=np.arange(3, dtype=np.int32),
                     codes=prep / r["codes"], num_codes=item_files.codes_count(prep / r["codes"]),
                     cond_mel=prep / r["cond_mel"], cond_audio=None, prompt_frames=6) for n, r in enumerate(rows)]


def test_packed_files_read_back_byte_for_byte(packed: Path) -> None:
    originals = json.loads((packed / "originals.json").read_text(encoding="utf-8"))
    for rel, hexed in originals.items():
        expected = np.load(__import__("io").BytesIO(bytes.fromhex(hexed)))
        assert np.array_equal(item_files.array(packed / rel, "x"), expected), rel
    assert verify(packed).members.keys() == originals.keys()


def test_every_sample_is_seen_once_per_epoch_by_2_ranks_x_2_workers_from_3_shards(packed: Path) -> None:
    items = items_of(packed)
    dataset = CodesDataset(items, limits=DataLimits(code_limit=8192))
    for epoch in (0, 1):
        seen: list[str] = []
        for rank in (0, 1):
            sampler = BucketBatchSampler([i.length for i in items], 2, seed=3, rank=rank, world_size=2)
            with make_loader(dataset, sampler.batches(epoch), dataset.collate, num_workers=2, pin_memory=False,
                             seed=3) as loader:
                for batch in loader:
                    assert "error" not in batch, batch.get("error")
                    seen += batch["ids"]
        assert sorted(seen) == sorted(i.id for i in items), epoch  # none twice, none left out


def test_webdatasets_own_reader_iterates_the_shards_as_samples(packed: Path) -> None:
    import webdataset

    shards = sorted(str(p) for p in (packed / "shards").glob("*.tar"))
    samples = list(webdataset.WebDataset(shards, shardshuffle=False, empty_check=False).decode())
    assert [s["__key__"] for s in samples] == [f"utt{k:03d}" for k in range(ITEMS)]
    assert all(set(s) >= {"codes.npy", "cond_mels.npy"} for s in samples)
    assert list(samples[2]["codes.npy"]) == list(np.arange(6) + 2)


def _serve_shards_apart(packed: Path) -> Path:
    """Move the shards to ``bucket/`` beside the folder (served over HTTP); only the index stays local."""
    remote = packed.parent / "bucket"
    (packed / "shards").rename(remote)
    (packed / "shards").mkdir()
    (remote / "index.json").rename(packed / "shards" / "index.json")
    return remote


def test_shards_are_read_by_byte_ranges_from_a_url(packed: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    remote = _serve_shards_apart(packed)
    monkeypatch.delenv(shard_reader.SHARD_URL_ENV, raising=False)
    with serving(remote) as server:
        shard_reader.set_shard_url(server.url)
        try:
            # every item's length comes from the index's array headers: no request per file at start-up
            assert [item_files.codes_count(packed / "codes" / f"utt{k:03d}.npy") for k in range(ITEMS)] == \
                [4 + k for k in range(ITEMS)]
            assert item_files.cond_mel_header_frames(packed / "cond_mels" / "utt004.npy") == 13
            assert server.ranges == []
            codes = item_files.load_codes(packed / "codes" / "utt004.npy", DataLimits())
        finally:
            shard_reader.set_shard_url("")
    assert list(codes) == list(np.arange(8) + 4)
    assert len(server.ranges) == 1 and server.ranges[0].startswith("bytes=")


def test_an_index_without_array_headers_still_reads_a_header_by_its_first_bytes(packed: Path) -> None:
    index_file = packed / "shards" / "index.json"
    body = json.loads(index_file.read_text(encoding="utf-8"))
    body["version"] = 1  # written before the index kept array headers
    body["members"] = {rel: row[:3] for rel, row in body["members"].items()}
    index_file.write_text(json.dumps(body), encoding="utf-8")
    remote = _serve_shards_apart(packed)
    with serving(remote) as server:
        shard_reader.set_shard_url(server.url)
        try:
            assert item_files.cond_mel_header_frames(packed / "cond_mels" / "utt004.npy") == 13
        finally:
            shard_reader.set_shard_url("")
    first, last = (int(n) for n in server.ranges[-1].removeprefix("bytes=").split("-"))
    assert len(server.ranges) == 1 and last - first + 1 == 4096  # the member's head, not its 5 KB array


def test_an_index_with_a_damaged_array_header_is_refused_in_one_line(packed: Path) -> None:
    index_file = packed / "shards" / "index.json"
    body = json.loads(index_file.read_text(encoding="utf-8"))
    body["members"]["codes/utt000.npy"][4] = [-1]
    index_file.write_text(json.dumps(body), encoding="utf-8")
    with pytest.raises(RuleError) as exc:
        item_files.codes_count(packed / "codes" / "utt000.npy")
    assert "bad array header of member 'codes/utt000.npy'" in str(exc.value) and "\n" not in str(exc.value)


def test_an_array_header_claiming_more_than_its_member_holds_is_named(packed: Path) -> None:
    index_file = packed / "shards" / "index.json"
    body = json.loads(index_file.read_text(encoding="utf-8"))
    body["members"]["codes/utt000.npy"][4] = [10**6]
    index_file.write_text(json.dumps(body), encoding="utf-8")
    with pytest.raises(RuleError) as exc:
        item_files.codes_count(packed / "codes" / "utt000.npy")
    assert "codes/utt000.npy" in str(exc.value) and "truncated or corrupt" in str(exc.value)


def test_a_url_that_answers_without_the_range_is_refused_in_one_line(packed: Path) -> None:
    with serving(packed / "shards") as server:
        shard_reader.set_shard_url(server.url + "/missing")
        try:
            with pytest.raises(RuleError) as exc:
                item_files.load_codes(packed / "codes" / "utt001.npy", DataLimits())
        finally:
            shard_reader.set_shard_url("")
    message = str(exc.value)
    assert "\n" not in message and "HTTP 404" in message and "codes/utt001.npy" in message


def test_a_truncated_shard_is_named_with_its_member_in_one_line(packed: Path, capsys) -> None:
    last = sorted((packed / "shards").glob("*.tar"))[-1]
    last.write_bytes(last.read_bytes()[:1500])
    with pytest.raises(RuleError) as exc:
        item_files.load_codes(packed / "codes" / f"utt{ITEMS - 1:03d}.npy", DataLimits())
    message = str(exc.value)
    assert "\n" not in message and last.name in message and f"codes/utt{ITEMS - 1:03d}.npy" in message
    assert shards_main(["verify", "--prepared", str(packed)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and last.name in err


def test_a_member_that_is_not_an_array_is_named_by_shard_and_member(packed: Path) -> None:
    index = json.loads((packed / "shards" / "index.json").read_text(encoding="utf-8"))
    shard_no, offset, _size, *_head = index["members"]["codes/utt000.npy"]
    shard = packed / "shards" / index["shards"][shard_no]["name"]
    data = bytearray(shard.read_bytes())
    data[offset:offset + 6] = b"NOTNPY"
    shard.write_bytes(bytes(data))
    with pytest.raises(RuleError) as exc:  # reading the array parses the member's own header
        item_files.load_codes(packed / "codes" / "utt000.npy", DataLimits())
    assert f"{shard.name}:codes/utt000.npy" in str(exc.value) and "\n" not in str(exc.value)


def test_a_hostile_index_is_refused_in_one_line(packed: Path) -> None:
    (packed / "shards" / "index.json").write_text(json.dumps({"format": "webdataset-tar", "version": 1,
                                                              "shards": [{"name": "../x.tar", "size": 9}],
                                                              "members": {}}), encoding="utf-8")
    with pytest.raises(RuleError) as exc:
        item_files.codes_count(packed / "codes" / "utt000.npy")
    assert "shard index unusable" in str(exc.value) and "\n" not in str(exc.value)


def test_the_checker_and_split_read_a_sharded_folder(packed: Path, tmp_path: Path) -> None:
    from data_tools.check_data import check_manifests
    from data_tools.split import split_manifest

    report = check_manifests([packed / "train.jsonl"], workers=1)
    assert not report.errors, [p.message for p in report.errors]
    split = split_manifest(packed / "train.jsonl", tmp_path / "split", val_fraction=0.3, seed=0)
    assert split is not None
    rows = [json.loads(line) for name in ("train.jsonl", "val.jsonl")
            for line in (tmp_path / "split" / name).read_text(encoding="utf-8").splitlines()]
    assert len(rows) == ITEMS
    for row in rows:  # the rebased paths still resolve into the shards
        assert item_files.codes_count((tmp_path / "split" / row["codes"]).resolve()) >= 4


def test_the_pack_cli_says_what_it_packed(tmp_path: Path, capsys) -> None:
    prep = prepared_folder(tmp_path, count=4)
    assert shards_main(["pack", "--prepared", str(prep), "--shard-size", "3KB"]) == 0
    assert capsys.readouterr().out.startswith("8 files in ") and (prep / "shards" / "index.json").is_file()
    with pytest.raises(SystemExit) as exc:
        shards_main(["pack", "--prepared", str(prep), "--items", "0"])
    assert exc.value.code == 2 and capsys.readouterr().err.count("\n") == 1


def test_preparation_with_shards_packs_its_output_and_refuses_to_prepare_into_it_again(tmp_path: Path,
                                                                                        capsys) -> None:
    from argparse import Namespace
    from types import SimpleNamespace

    from data_tools.prepare_cli import prepare_main

    def prepare(_progress, _on_skip):  # what a preparation leaves: per-file features
        prepared_folder(tmp_path, count=3)
        return SimpleNamespace(utterances=3, pairs=3, skipped_by_reason={}, summary=lambda: "3 prepared")

    args = Namespace(batch_seconds=1.0, max_batch_items=1, loaders=1, quiet=True, out_dir=tmp_path / "prep",
                     shards=1 << 20)
    assert prepare_main(args, prepare, (ValueError,)) == 0
    assert "packed 6 files into 1 shard(s)" in capsys.readouterr().out
    assert not list((tmp_path / "prep").rglob("*.npy"))
    assert item_files.codes_count(tmp_path / "prep" / "codes" / "utt002.npy") == 6
    assert prepare_main(args, prepare, (ValueError,)) == 2
    assert "packed already" in capsys.readouterr().err


def test_a_shard_swapped_for_a_fifo_is_refused_without_waiting(packed: Path) -> None:
    import os

    first = sorted((packed / "shards").glob("*.tar"))[0]
    first.unlink()
    os.mkfifo(first)
    with pytest.raises(RuleError) as exc:
        item_files.load_codes(packed / "codes" / "utt000.npy", DataLimits())
    assert first.name in str(exc.value) and "FIFO" in str(exc.value) and "\n" not in str(exc.value)


def test_a_folder_packed_again_is_read_from_its_new_shards(packed: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert item_files.codes_count(packed / "codes" / "utt000.npy") == 4  # a handle on shard-000000.tar is open
    monkeypatch.setattr(shard_reader, "RECHECK_S", 0.0)
    for tar in (packed / "shards").iterdir():
        tar.unlink()
    np.save(packed / "codes" / "utt012.npy", np.arange(3, dtype=np.int16))
    pack(packed)  # one shard now, under the first one's name, the item at another offset
    assert item_files.codes_count(packed / "codes" / "utt012.npy") == 3
