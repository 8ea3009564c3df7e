"""Integrity you can prove: content digests, fault injection, NaN refusal, stale temp files, disk full, metadata."""

from __future__ import annotations

import contextlib
import errno
import io
import os
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import trainer.checkpoints.digest as digest_module
import trainer.checkpoints.metadata as metadata_module
import trainer.checkpoints.store as store_module
from tests.checkpoint_factory import replace_file, toy_checkpoint
from trainer.checkpoints import (
    CheckpointError,
    CheckpointManager,
    CheckpointSaveError,
    OutputDirLock,
    check_file_digest,
    check_file_digest_cached,
    clean_stale_temp_files,
    list_checkpoints,
    load_checkpoint,
    read_metadata,
    select_resume,
    verify_checkpoint,
)
from trainer.checkpoints.digest import ABSENT, ALGORITHM, CHUNK_BYTES, DAMAGED, MISMATCH, OK, TRAILER_BYTES
from trainer.checkpoints.lock import LockHeld
from trainer.checkpoints.verify import INVALID

REPO = Path(__file__).resolve().parents[1]


def _run(tmp_path: Path, steps=(10, 20, 30), keep: int = 3) -> CheckpointManager:
    manager = CheckpointManager(tmp_path, keep=keep)
    for step in steps:
        manager.save(toy_checkpoint(step), step)
    return manager


def _without_trailer(data: bytes) -> bytes:
    """The file as torch wrote it: the digest comment cut off and the comment length set back to 0."""
    body = data[:-TRAILER_BYTES]
    return body[:-2] + b"\0\0"


# ----- the digest ---------------------------------------------------------------------------------------


def test_every_saved_checkpoint_carries_a_digest_of_all_its_bytes(tmp_path):
    manager = _run(tmp_path, steps=(10,))
    path = tmp_path / "model_step10.pth"
    check = check_file_digest(path)
    assert check.status == OK and check.recorded == check.actual and check.bytes_hashed == path.stat().st_size \
        - TRAILER_BYTES
    ckpt = torch.load(path, weights_only=True)  # still a plain weights-only checkpoint, no allow-list
    assert ckpt["integrity"]["scope"] == "file" and ckpt["step"] == 10
    assert check_file_digest(manager.latest_path).status == OK  # the hard link is the same bytes
    from trainer.checkpoints.inspect import inspect_checkpoint, inspect_lines

    info = inspect_checkpoint(path)
    assert info["content_digest"]["recorded"] == check.recorded and info["content_digest"]["declared"]
    assert any(line.startswith("digest:      sha256-1MiB-tree") for line in inspect_lines(info))
    # Every tensor is covered, not just the model: a flip in an optimizer moment and one in the RNG state.
    data = path.read_bytes()
    for needle in (ckpt["optimizer"]["state"][0]["exp_avg_sq"], ckpt["rng"]["torch_cpu"]):
        raw = needle.contiguous().view(torch.uint8).numpy().tobytes()
        at = data.index(raw[:64])
        damaged = bytearray(data)
        damaged[at + 3] ^= 0x01
        replace_file(path, bytes(damaged))
        assert check_file_digest(path).status == MISMATCH
    replace_file(path, data)
    assert check_file_digest(path).status == OK


@pytest.mark.parametrize("length", [CHUNK_BYTES - 1, CHUNK_BYTES, CHUNK_BYTES + 1, CHUNK_BYTES + 2, 3 * CHUNK_BYTES + 1])
def test_file_check_and_writer_agree_at_chunk_edges(tmp_path, length):
    """The comment-length field (the last 2 hashed bytes) may straddle a chunk edge: same digest both ways."""
    data = os.urandom(length - digest_module.EOCD_BYTES) + digest_module.EOCD_SIGNATURE + bytes(18)
    path = tmp_path / "stream.bin"
    with open(path, "wb") as handle:
        writer = digest_module.DigestWriter(handle)
        for start in range(0, length, 700_001):  # uneven slices, like torch's writes
            writer.write(data[start:start + 700_001])
        written = writer.finish()
    trailer = digest_module.read_trailer(path)
    assert trailer.digest == written and trailer.content_length == length
    assert digest_module.compute_file_digest(path, length) == written
    assert digest_module._compute_sequentially(path, length, length - 2) == written  # the Windows path
    assert check_file_digest(path).status == OK


def test_fault_injection_no_damaged_latest_is_ever_trusted(tmp_path):
    """200 single-byte flips and 50 zeroed 4 KiB blocks at seeded random offsets of a valid latest.pth."""
    _run(tmp_path, steps=(10, 20))
    latest = tmp_path / "latest.pth"
    good = latest.read_bytes()
    assert select_resume(tmp_path, "auto").path == latest
    rng = random.Random(20240614)
    mutations: list[tuple[str, int]] = [("flip", rng.randrange(len(good))) for _ in range(200)]
    mutations += [("zero", rng.randrange(len(good))) for _ in range(50)]
    by_digest = 0
    for kind, offset in mutations:
        data = bytearray(good)
        if kind == "flip":
            data[offset] ^= rng.randrange(1, 256)
        else:
            data[offset:offset + 4096] = bytes(len(data[offset:offset + 4096]))
            if data == good:  # the block was zeros already: no damage to detect
                continue
        replace_file(latest, bytes(data))
        choice = select_resume(tmp_path, "auto")
        assert choice.path.name == "model_step20.pth", (kind, offset)
        assert choice.checkpoint["step"] == 20
        note = choice.notes[0]
        assert note.startswith("resuming from model_step20.pth instead of latest.pth (latest.pth: "), note
        by_digest += "latest.pth: content digest" in note
    # The digest is what catches nearly all of them (the rest never load: the zip end itself is gone).
    assert by_digest >= 200


def test_a_mismatch_names_the_digest_and_verify_calls_it_invalid(tmp_path):
    _run(tmp_path, steps=(10, 20))
    latest = tmp_path / "latest.pth"
    data = bytearray(latest.read_bytes())
    data[len(data) // 2] ^= 0xFF
    replace_file(latest, bytes(data))
    choice = select_resume(tmp_path, "auto")
    assert choice.path.name == "model_step20.pth"
    assert f"latest.pth: content digest mismatch ({ALGORITHM}: the file hashes to" in choice.notes[0]
    report = verify_checkpoint(latest)
    assert report.verdict == INVALID and report.exit_code == 2 and "content digest mismatch" in report.reason
    with pytest.raises(CheckpointError, match="content digest mismatch"):
        select_resume(tmp_path, str(latest))
    assert verify_checkpoint(tmp_path / "model_step20.pth").component("content digest").status == "ok"


def test_a_lost_or_damaged_digest_record_is_torn_not_legacy(tmp_path):
    _run(tmp_path, steps=(10, 20))
    latest = tmp_path / "latest.pth"
    good = latest.read_bytes()
    replace_file(latest, _without_trailer(good))  # loads fine, but it says its saver wrote a digest
    assert load_checkpoint(latest)["step"] == 20
    assert check_file_digest(latest).status == ABSENT
    choice = select_resume(tmp_path, "auto")
    assert choice.path.name == "model_step20.pth" and "none is at the end of the file" in choice.notes[0]
    assert verify_checkpoint(latest).verdict == INVALID
    damaged = bytearray(good)
    damaged[-TRAILER_BYTES - 1] ^= 0x04  # the comment length field
    replace_file(latest, bytes(damaged))
    assert check_file_digest(latest).status == DAMAGED
    assert select_resume(tmp_path, "auto").path.name == "model_step20.pth"


def test_checkpoints_from_before_digests_still_load_with_a_note(tmp_path):
    path = tmp_path / "latest.pth"
    ckpt = toy_checkpoint(5)
    torch.save(ckpt, path)  # what the saver wrote before this change: no trailer, no integrity record
    choice = select_resume(tmp_path, "auto")
    assert choice.path == path and choice.checkpoint["step"] == 5
    assert any("no content digest (written before digests existed)" in note for note in choice.notes)
    report = verify_checkpoint(path)
    assert report.component("content digest").status == "missing"
    assert "written before content digests" in report.component("content digest").detail


# ----- non-finite tensors ------------------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["weight", "moment"])
def test_nan_weights_or_moments_are_refused_by_name(tmp_path, where):
    _run(tmp_path, steps=(10, 20))
    ckpt = toy_checkpoint(20)
    if where == "weight":
        ckpt["model"]["1.weight"] = torch.full_like(ckpt["model"]["1.weight"], float("nan"))
        name = "model weight 1.weight"
    else:
        ckpt["optimizer"]["state"][1]["exp_avg_sq"][0] = float("inf")
        name = "optimizer exp_avg_sq of 1.weight"
    with pytest.raises(CheckpointSaveError) as info:  # the saver never writes it
        CheckpointManager(tmp_path, keep=3).save(ckpt, 30)
    assert f"non-finite values (NaN/Inf) in {name}" in str(info.value)
    assert not (tmp_path / "model_step30.pth").exists()
    assert select_resume(tmp_path, "auto").checkpoint["step"] == 20  # latest.pth untouched
    # A file written some other way is refused at resume, naming the tensor, and auto falls back.
    buffer = io.BytesIO()
    torch.save(ckpt, buffer)
    replace_file(tmp_path / "latest.pth", buffer.getvalue())
    choice = select_resume(tmp_path, "auto")
    assert choice.path.name == "model_step20.pth"
    assert f"latest.pth: non-finite values (NaN/Inf) in {name}" in choice.notes[0]
    report = verify_checkpoint(tmp_path / "latest.pth")
    component = "model weights" if where == "weight" else "optimizer"
    assert report.component(component).status == "wrong" and "1.weight" in report.component(component).detail


# ----- stale temp files of a killed save --------------------------------------------------------------------

KILL_MID_SAVE = textwrap.dedent("""
    import os, signal, sys
    sys.path.insert(0, sys.argv[2])
    from tests.checkpoint_factory import toy_checkpoint
    import trainer.checkpoints.store as store
    from trainer.checkpoints import CheckpointManager, OutputDirLock

    original = store.DigestWriter.write
    def write(self, data):
        if self.length > 8000:
            os.kill(os.getpid(), signal.SIGKILL)
        return original(self, data)
    store.DigestWriter.write = write
    lock = OutputDirLock(sys.argv[1]).acquire()
    CheckpointManager(sys.argv[1], keep=3).save(toy_checkpoint(20), 20)
""")


def test_sigkill_mid_save_leaves_a_temp_file_that_the_next_start_removes(tmp_path):
    _run(tmp_path, steps=(10,))
    before = {p.name: p.read_bytes() for p in tmp_path.glob("*.pth")}
    result = subprocess.run([sys.executable, "-c", KILL_MID_SAVE, str(tmp_path), str(REPO)], timeout=120,
                            capture_output=True, text=True)
    assert result.returncode == -9, result.stderr
    leftovers = sorted(p.name for p in tmp_path.glob(".model_step20.pth.*.tmp"))
    assert len(leftovers) == 1  # killed between creating the temp file and renaming it
    with OutputDirLock(tmp_path):  # the trainer at its next start: holds the lock, then cleans
        removed = CheckpointManager(tmp_path, keep=3).clean_stale_temp_files()
    assert [p.name for p in removed] == leftovers
    assert not list(tmp_path.glob(".*.tmp"))
    assert {p.name: p.read_bytes() for p in tmp_path.glob("*.pth")} == before
    assert clean_stale_temp_files(tmp_path) == []  # without holding the lock: takes it briefly itself


HOLD_LOCK = textwrap.dedent("""
    import sys
    sys.path.insert(0, sys.argv[2])
    from trainer.checkpoints import OutputDirLock
    with OutputDirLock(sys.argv[1]):
        print("held", flush=True)
        sys.stdin.readline()
""")


def test_temp_files_of_a_live_writer_are_never_touched(tmp_path):
    temp = tmp_path / ".model_step20.pth.abc123.tmp"
    temp.write_bytes(b"a live writer's half-written checkpoint")
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(tmp_path), str(REPO)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(LockHeld) as info:
            clean_stale_temp_files(tmp_path)
        assert info.value.pid == holder.pid
        assert temp.exists()
    finally:
        holder.communicate("\n", timeout=60)
    assert [p.name for p in clean_stale_temp_files(tmp_path)] == [temp.name]
    other = tmp_path / ".metrics.jsonl.x.tmp"  # not a checkpoint temp file: never this module's business
    other.write_text("x")
    assert clean_stale_temp_files(tmp_path) == [] and other.exists()


# ----- a full disk -------------------------------------------------------------------------------------------


def test_disk_full_mid_write_says_disk_full(tmp_path, monkeypatch):
    _run(tmp_path, steps=(10,))
    real_atomic_open = store_module.atomic_open

    class FillsUp:
        def __init__(self, handle, room):
            self.handle, self.room = handle, room

        def write(self, data):
            if len(data) > self.room:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            self.room -= len(data)
            return self.handle.write(data)

        def flush(self):
            self.handle.flush()

    @contextlib.contextmanager
    def atomic_open(path, mode="wb"):
        with real_atomic_open(path, mode) as handle:
            yield FillsUp(handle, room=6000)

    monkeypatch.setattr(store_module, "atomic_open", atomic_open)
    with pytest.raises(CheckpointSaveError) as info:
        CheckpointManager(tmp_path, keep=3).save(toy_checkpoint(20), 20)
    message = str(info.value)
    assert "disk full (No space left on device)" in message and "enforce fail" not in message
    assert "unexpected pos" not in message and "\n" not in message and "intact" in message
    assert not list(tmp_path.glob(".*.tmp")) and not (tmp_path / "model_step20.pth").exists()


FILE_SIZE_LIMIT = textwrap.dedent("""
    import resource, signal, sys
    sys.path.insert(0, sys.argv[2])
    from tests.checkpoint_factory import toy_checkpoint
    from trainer.checkpoints import CheckpointManager, CheckpointSaveError
    ckpt = toy_checkpoint(20)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (8192, 8192))  # the kernel refuses writes past 8 KiB
    try:
        CheckpointManager(sys.argv[1], keep=3).save(ckpt, 20)
    except CheckpointSaveError as exc:
        print(exc)
""")


@pytest.mark.skipif(sys.platform == "win32", reason="RLIMIT_FSIZE is POSIX")
def test_a_real_failed_write_from_the_kernel_says_disk_full(tmp_path):
    result = subprocess.run([sys.executable, "-c", FILE_SIZE_LIMIT, str(tmp_path), str(REPO)], timeout=120,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "checkpoint for step 20 not saved" in result.stdout and "disk full" in result.stdout, result.stdout
    assert "enforce fail" not in result.stdout


# ----- metadata without tensor data, and the cached digest check -------------------------------------------


class CountingReader(io.RawIOBase):
    def __init__(self, handle):
        self.handle, self.bytes_read = handle, 0

    def readinto(self, buffer):
        count = self.handle.readinto(buffer)
        self.bytes_read += count or 0
        return count

    def seek(self, *args):
        return self.handle.seek(*args)

    def tell(self):
        return self.handle.tell()

    def readable(self):
        return True

    def seekable(self):
        return True

    def close(self):
        self.handle.close()
        super().close()


def test_metadata_reads_no_tensor_bytes(tmp_path, monkeypatch):
    ckpt = toy_checkpoint(7)
    ckpt["model"]["big"] = torch.randn(4 << 20)  # 16 MiB of tensor data
    path = tmp_path / "model_step7.pth"
    store_module.write_checkpoint_file(ckpt, path)
    readers: list[CountingReader] = []

    def counting_open(p):
        readers.append(CountingReader(open(p, "rb")))  # noqa: SIM115 (read_metadata closes it)
        return readers[-1]

    monkeypatch.setattr(metadata_module, "_open", counting_open)
    meta = read_metadata(path)
    assert sum(r.bytes_read for r in readers) < 64 << 10  # the pickle and zip headers, not 16 MiB
    assert (meta.kind, meta.step, meta.epoch, meta.position) == ("studio", 7, 0, 7)
    assert meta.last_val_loss == 2.5 and meta.last_losses["mel_loss"] == 2.0
    assert meta.tokenizer["vocab_size"] == 40 and meta.base_vocab_size == 20
    assert meta.has_digest and meta.declares_digest and meta.digest == check_file_digest(path).recorded
    assert meta.tensor_bytes > 16 << 20 and meta.has_optimizer and meta.has_rng


def test_metadata_of_a_file_with_zeroed_tensor_records_is_unchanged(tmp_path):
    import zipfile

    path = tmp_path / "latest.pth"
    store_module.write_checkpoint_file(toy_checkpoint(9), path)
    data = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as archive:
        for info in archive.infolist():
            if "/data/" in info.filename and not info.filename.endswith(".pkl"):
                header = info.header_offset
                name_len = int.from_bytes(data[header + 26:header + 28], "little")
                extra_len = int.from_bytes(data[header + 28:header + 30], "little")
                start = header + 30 + name_len + extra_len
                data[start:start + info.file_size] = bytes(info.file_size)
    damaged = tmp_path / "zeroed.pth"
    damaged.write_bytes(bytes(data))
    assert read_metadata(damaged).step == read_metadata(path).step == 9
    assert check_file_digest(damaged).status == MISMATCH  # the digest check is what reads the bytes


def test_list_without_verify_uses_metadata_and_digest_check_is_cached(tmp_path, monkeypatch):
    _run(tmp_path, steps=(10, 20))
    (tmp_path / "model_step5.pth").write_bytes(b"")
    summaries = {s.path.name: s for s in list_checkpoints(tmp_path, verify=False)}
    assert summaries["latest.pth"].step == 20 and summaries["latest.pth"].val_loss == 2.5
    assert summaries["latest.pth"].has_digest is True and summaries["latest.pth"].verdict == ""
    assert summaries["model_step5.pth"].has_digest is None and "empty file" in summaries["model_step5.pth"].reason
    from trainer.checkpoints.listing import listing_lines

    lines = listing_lines(list_checkpoints(tmp_path, verify=False))
    assert lines[0].endswith("digest") and lines[1].startswith("latest.pth") and lines[1].endswith("yes")
    calls: list[Path] = []
    real = digest_module.compute_file_digest

    def counted(path, length):
        calls.append(Path(path))
        return real(path, length)

    monkeypatch.setattr(digest_module, "compute_file_digest", counted)
    path = tmp_path / "model_step10.pth"
    first = check_file_digest_cached(path)
    assert check_file_digest_cached(path) is first and first.status == OK and len(calls) == 1
    data = bytearray(path.read_bytes())
    data[100] ^= 1
    replace_file(path, bytes(data))  # a new version of the file: checked again
    assert check_file_digest_cached(path).status == MISMATCH and len(calls) == 2


def test_verify_of_a_fresh_checkpoint_is_complete_with_its_digest(tmp_path):
    _run(tmp_path, steps=(10,))
    report = verify_checkpoint(tmp_path / "latest.pth")
    digest = report.component("content digest")
    assert digest.status == "ok" and "matches" in digest.detail and "MB/s" in digest.detail


@pytest.mark.parametrize("name", [".model_step20.pth.ab12cd34.tmp", ".latest.pth.ab12cd34.tmp",
                                  "..latest.pth.ab12cd34.tmp.ef56ab78.tmp", "..best.pth.ab12cd34.tmp.ef56ab78.tmp"])
def test_every_kind_of_checkpoint_temp_file_is_cleaned_at_the_next_start(tmp_path, name):
    """Also the copy fallback's temp (no hard links): atomic_open of a link temp, so two leading dots."""
    (tmp_path / name).write_bytes(b"half a checkpoint")
    (tmp_path / "notes.tmp").write_bytes(b"not ours")
    assert [p.name for p in clean_stale_temp_files(tmp_path)] == [name]
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != ".trainer.lock") == ["notes.tmp"]
