"""data_tools.batch_prep with a model-free Preparer: the generation-agnostic batching, resume and bad items."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import soundfile

from data_tools.batch_prep import ItemProblem, run_batches, write_npy
from data_tools.preprocess_inputs import SourceItem, read_inputs


class SumPreparer:
    """Writes, per item, its length and the sum of its batch's lengths (so a batch's make-up shows in the files)."""

    state_dir = ".fake"

    def __init__(self, fingerprint: str = "v1") -> None:
        self.fingerprint = fingerprint
        self.computed: list[list[str]] = []

    def outputs(self, item: SourceItem) -> list[Path]:
        return [Path("values") / f"{item.stem}.npy"]

    def screen(self, item: SourceItem, seconds: float) -> str | None:
        return "too long: over 3 s" if seconds > 3 else None

    def load(self, item: SourceItem) -> int:
        samples = soundfile.read(str(item.audio))[0]
        if not np.abs(samples).max() > 0:
            raise ItemProblem("silent audio")
        return int(samples.size)

    def compute(self, batch):
        self.computed.append([item.id for item, _ in batch])
        total = sum(length for _, length in batch)
        return [np.array([length, total]) for _, length in batch]

    def write(self, out_dir: Path, item: SourceItem, result) -> dict:
        write_npy(out_dir, self.outputs(item)[0], result)
        return {"length": int(result[0])}


def make_audio(folder: Path, seconds: dict[str, float]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, length in seconds.items():
        wave = np.full(int(1000 * length), 0.1 if name != "quiet" else 0.0, dtype=np.float32)
        soundfile.write(str(folder / f"{name}.wav"), wave, 1000)
        (folder / f"{name}.txt").write_text(f"text of {name}", encoding="utf-8")


@pytest.fixture
def audio(tmp_path: Path) -> Path:
    make_audio(tmp_path / "audio", {"a": 1.0, "b": 1.2, "c": 2.0, "d": 2.1, "e": 0.5})
    return tmp_path / "audio"


def values(out: Path) -> dict[str, list[int]]:
    return {p.stem: np.load(p).tolist() for p in sorted((out / "values").glob("*.npy"))}


def test_batches_by_length_then_a_new_item_recomputes_only_its_batch(audio: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    preparer = SumPreparer()
    items, _ = read_inputs(audio)
    run = run_batches(items, preparer, out, batch_seconds=4.0, max_batch_items=8)
    assert preparer.computed == [["e", "a", "b"], ["c"], ["d"]]
    first = values(out)
    assert first["a"] == [1000, 2700] and run.new == 5 and run.batches == 3

    make_audio(audio, {"f": 1.1})  # joins the first batch (b moves on, to a batch with c: both finished)
    preparer = SumPreparer()
    items, _ = read_inputs(audio)
    run = run_batches(items, preparer, out, batch_seconds=4.0, max_batch_items=8)
    assert preparer.computed == [["e", "a", "f"]]  # only the batch with an unfinished item is computed
    assert run.new == 1 and run.resumed == 5
    assert {k: v for k, v in values(out).items() if k != "f"} == first  # finished files are never rewritten
    assert values(out)["f"] == [1100, 2600]


def test_resume_trusts_only_whole_records_with_their_files_and_settings(audio: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    items, _ = read_inputs(audio)
    run_batches(items, SumPreparer(), out, batch_seconds=4.0, max_batch_items=8)
    log = out / ".fake" / "done.jsonl"
    lines = log.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["id"] for line in lines] == ["e", "a", "b", "c", "d"]
    log.write_text("\n".join(lines[:-1]) + "\n" + lines[-1][:20], encoding="utf-8")  # a torn last line
    (out / "values" / "c.npy").unlink()  # a lost file
    preparer = SumPreparer()
    run = run_batches(items, preparer, out, batch_seconds=4.0, max_batch_items=8)
    assert preparer.computed == [["c"], ["d"]] and run.resumed == 3

    (audio / "a.txt").write_text("another transcript", encoding="utf-8")
    items, _ = read_inputs(audio)
    preparer = SumPreparer()
    run = run_batches(items, preparer, out, batch_seconds=4.0, max_batch_items=8)
    assert preparer.computed == [["e", "a", "b"]] and run.new == 1  # only a's text changed
    preparer = SumPreparer(fingerprint="v2")
    run = run_batches(items, preparer, out, batch_seconds=4.0, max_batch_items=8)
    assert run.redone == 5 and run.new == 5


def test_a_killed_parallel_runs_logs_are_resumed_by_one_process_and_merged(audio: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    items, _ = read_inputs(audio)
    run_batches(items, SumPreparer(), out, batch_seconds=4.0, max_batch_items=8)
    state = out / ".fake"
    lines = (state / "done.jsonl").read_text(encoding="utf-8").splitlines()  # e a b | c | d
    # what two torchrun processes leave when the second is killed while appending its second batch
    (state / "done.jsonl").unlink()
    (state / "done.rank0.jsonl").write_text("\n".join(lines[:3]) + "\n", encoding="utf-8")
    (state / "done.rank1.jsonl").write_text(lines[3] + "\n" + lines[4][:20], encoding="utf-8")
    preparer = SumPreparer()
    run = run_batches(items, preparer, out, batch_seconds=4.0, max_batch_items=8)
    assert preparer.computed == [["d"]] and run.resumed == 4 and run.new == 1
    assert sorted(p.name for p in state.iterdir()) == ["done.jsonl"]  # the processes' logs merged into one
    merged = [json.loads(line)["id"] for line in (state / "done.jsonl").read_text(encoding="utf-8").splitlines()]
    assert merged == ["e", "a", "b", "c", "d"]


def test_bad_items_are_reported_by_file_and_the_rest_go_on(audio: Path, tmp_path: Path) -> None:
    make_audio(audio, {"quiet": 1.0, "long": 5.0})
    (audio / "broken.wav").write_bytes(b"RIFF....WAVE")
    (audio / "broken.txt").write_text("x", encoding="utf-8")
    items, _ = read_inputs(audio)
    seen: list[str] = []
    run = run_batches(items, SumPreparer(), tmp_path / "out", batch_seconds=4.0, max_batch_items=8,
                      on_skip=lambda s: seen.append(f"{s.where}: {s.reason}"))
    assert len(seen) == 3 and seen[0].startswith(f"{audio / 'broken.wav'}: unreadable audio: ")
    assert seen[1:] == [f"{audio / 'long.wav'}: too long: over 3 s", f"{audio / 'quiet.wav'}: silent audio"]
    assert run.new == 5 and len(run.skipped) == 3


def test_an_item_whose_loading_hangs_is_reported_and_the_rest_go_on(audio: Path, tmp_path: Path) -> None:
    import threading

    release = threading.Event()

    class Hanging(SumPreparer):
        def load(self, item: SourceItem) -> int:
            if item.id == "c":
                release.wait(timeout=60)  # hangs until the test releases it
            return super().load(item)

    items, _ = read_inputs(audio)
    try:
        run = run_batches(items, Hanging(), tmp_path / "out", batch_seconds=4.0, max_batch_items=8,
                          load_timeout_s=0.5)
    finally:
        release.set()
    assert [(s.id, s.reason) for s in run.skipped] == [("c", "failed: loading took over 0.5 s")]
    assert run.new == 4
