"""Hours per epoch on N GPUs: the estimator, the pre-flight's line for large data only, and the bench that feeds it."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from trainer.epoch_estimate import LARGE_DATA_HOURS, add_epoch_estimate, estimate_epoch, estimate_line


def test_the_slower_side_bounds_the_epoch_and_more_gpus_divide_it() -> None:
    compute_bound = estimate_epoch(36_000, 1, gpu_clips_per_s=10, read_clips_per_s=100, workers_per_gpu=2)
    assert compute_bound.hours == pytest.approx(1.0) and compute_bound.bound == "the model's steps"
    reading_bound = estimate_epoch(36_000, 1, gpu_clips_per_s=100, read_clips_per_s=5, workers_per_gpu=2)
    assert reading_bound.hours == pytest.approx(1.0) and reading_bound.bound == "data reading"
    assert estimate_epoch(36_000, 8, 10, 100, 2).hours == pytest.approx(1 / 8)
    in_turn = estimate_epoch(36_000, 1, gpu_clips_per_s=20, read_clips_per_s=20, workers_per_gpu=0)
    assert in_turn.hours == pytest.approx(1.0)  # no workers: reading and training take turns
    with pytest.raises(ValueError):
        estimate_epoch(10, 0, 1, 1, 1)


def fake_plan(clips: int, seconds_each: float) -> SimpleNamespace:
    lines: list[tuple[str, bool, str]] = []
    return SimpleNamespace(
        train=SimpleNamespace(items=[SimpleNamespace(num_codes=int(seconds_each * 25))] * clips),
        generation=SimpleNamespace(codes_per_second=25.0), opts=SimpleNamespace(num_workers=2),
        lines=lines, add=lambda name, ok, message: lines.append((name, ok, message)))


def test_the_preflight_estimates_hours_for_large_data_only() -> None:
    small = fake_plan(100, 5.0)
    add_epoch_estimate(small)
    assert small.lines == []
    clips = int(LARGE_DATA_HOURS * 3600 / 5.0) + 1
    large = fake_plan(clips, 5.0)
    add_epoch_estimate(large)
    [(name, ok, message)] = large.lines
    assert name == "epoch time" and ok
    assert message.startswith(f"estimated hours per epoch of {clips:,} clips")
    assert "1 GPU " in message and "8 GPUs" in message and "assuming" in message
    assert message == estimate_line(clips, clips * 5.0 / 3600, 2)


def test_the_bench_prints_shards_against_per_file_reading(tmp_path, capsys) -> None:
    import time

    from bench import shards_200h

    def in_this_process(folder, clips, workers):
        return shards_200h.read_child(folder, clips, workers, time.time())

    assert shards_200h.main(["--scale", "0.0001", "--workers", "0", "--gpus", "1", "8", "--dir", str(tmp_path)],
                            reader=in_this_process) == 0
    out = capsys.readouterr().out
    per_file = next(line for line in out.splitlines() if line.startswith("per-file"))
    shards = next(line for line in out.splitlines() if line.startswith("shards"))
    # 16 clips x 4 files, one open each, vs the one shard, opened only to read arrays: the shard index keeps every
    # array's header, so learning the clips' lengths opens nothing
    assert "64 files opened reading (+16 for the headers)" in per_file
    assert "1 files opened reading (+0 for the headers)" in shards
    assert "first batch after a resume" in shards and "peak" in shards
    assert "200 h on   8 GPU(s)" in out
    assert "RESULT shards / per-file reading, clips/s:" in out
    assert not list(tmp_path.iterdir())  # the features are removed
