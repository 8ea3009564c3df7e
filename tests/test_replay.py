"""Replay and the forgetting guard (issue 23 item 6): weighted manifests, per-language validation.

- ``PATH::lang@W`` parses; a bad weight is refused by the plan in one line;
- a seeded epoch draws each manifest's share as its weights say, deterministically from (seed, epoch);
- a SIGKILL and resume of a replay run is bitwise exact (the weighted epoch is sliced, not replayed);
- validation per language is logged, and the forgetting guard stops a run built to forget (exit 2, the line
  names the last checkpoint from before the rise).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from data_tools.manifest import parse_manifest_spec
from tests.test_train_cli import refusal
from tests.trainer_helpers import (
    assert_same_training_state,
    events,
    load,
    run_cli,
    run_main,
    step_losses,
    subset_manifest,
    tiny_args,
)
from trainer.forgetting import ForgettingGuard
from trainer.replay import epoch_quotas, items_by_language, sampling_groups
from trainer.sampler import BucketBatchSampler


def test_manifest_spec_with_language_and_weight():
    spec = parse_manifest_spec("data/en.jsonl::en@0.25")
    assert (spec.path, spec.language, spec.weight) == (Path("data/en.jsonl"), "en", 0.25)
    assert parse_manifest_spec("am.jsonl::am").weight is None
    bad = parse_manifest_spec("en.jsonl::en@-1")
    assert bad.weight is None and bad.weight_text == "-1"


def fake_items(counts: dict[str, int]) -> list:
    return [SimpleNamespace(where=f"{name}:{line + 1}") for name, n in counts.items() for line in range(n)]


def test_weighted_epoch_matches_its_weights_and_is_a_function_of_seed_and_epoch():
    items = fake_items({"am.jsonl": 300, "en.jsonl": 900, "zh.jsonl": 100})
    groups = sampling_groups(items, ["am.jsonl::am@6", "en.jsonl::en@3", "zh.jsonl::zh@1"])
    assert groups is not None
    owner = np.zeros(len(items), dtype=int)
    for g, group in enumerate(groups):
        owner[group.indices] = g
    lengths = [(5 + i % 7, 20 + i % 13) for i in range(len(items))]
    sampler = BucketBatchSampler(lengths, 8, seed=7, groups=groups)
    for epoch in range(3):
        drawn = [i for batch in sampler.batches(epoch) for i in batch]
        assert len(drawn) == len(items)  # the epoch keeps its size
        shares = Counter(owner[drawn].tolist())
        expected = [0.6, 0.3, 0.1]
        for g in range(3):  # exactly the quotas (largest remainder), well within any statistical tolerance
            assert abs(shares[g] / len(drawn) - expected[g]) < 0.01
        # am (780 of 300 items, x2.6) shows every item 2 or 3 times; en (x0.43) never repeats an item
        am = Counter(i for i in drawn if owner[i] == 0)
        assert len(am) == 300 and set(am.values()) == {2, 3}
        assert max(Counter(i for i in drawn if owner[i] == 1).values()) == 1
    again = BucketBatchSampler(lengths, 8, seed=7, groups=groups)
    assert again.batches(2) == sampler.batches(2)
    assert sampler.batches(1) != sampler.batches(2)
    assert BucketBatchSampler(lengths, 8, seed=8, groups=groups).batches(1) != sampler.batches(1)
    plain = BucketBatchSampler(lengths, 8, seed=7)
    assert plain.fingerprint() != sampler.fingerprint()  # a resume notices a change of weights
    assert epoch_quotas([3, 3], [1, 1], 7) == [4, 3]


def test_no_weight_means_the_plain_epoch():
    items = fake_items({"a.jsonl": 10, "b.jsonl": 6})
    assert sampling_groups(items, ["a.jsonl::am", "b.jsonl::en"]) is None
    grouped = items_by_language(items, ["a.jsonl::am", "b.jsonl::EN"])
    assert {k: len(v) for k, v in grouped.items()} == {"am": 10, "en": 6}
    assert items_by_language(items, ["a.jsonl", "b.jsonl"]) == {}


def test_guard_fires_once_per_language_and_keeps_the_last_good_step():
    guard = ForgettingGuard(["en", "zh"], margin=0.1)
    assert guard.observe(10, {"en": 2.0, "zh": 3.0}) == []
    assert guard.observe(20, {"en": 2.05, "zh": 2.9}) == []
    alarms = guard.observe(30, {"en": 2.2, "zh": 3.0})
    assert [(a.language, a.first, a.now, a.last_good_step) for a in alarms] == [("en", 2.0, 2.2, 20)]
    assert guard.observe(40, {"en": 2.3, "zh": 3.0}) == []  # en fired already
    restored = ForgettingGuard(["en", "zh"], margin=0.1)
    restored.load_state_dict(guard.state_dict(), [])
    assert restored.state_dict() == guard.state_dict()


# ----- real runs ---------------------------------------------------------------------------------------------


def split_manifest(source: Path, root: Path) -> dict[str, Path]:
    """Two disjoint training manifests and two validation manifests from the demo data."""
    full = subset_manifest(source, root / "all.jsonl", 24)
    rows = full.read_text(encoding="utf-8").splitlines()
    parts = {"am": rows[:12], "en": rows[12:18], "am_val": rows[18:21], "en_val": rows[21:24]}
    out = {}
    for name, lines in parts.items():
        out[name] = root / f"{name}.jsonl"
        out[name].write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out


@pytest.fixture(scope="module")
def replay_data(demo_workspace, tmp_path_factory):
    return split_manifest(demo_workspace.train_manifest, tmp_path_factory.mktemp("replay"))


def replay_args(ws, files, out, **overrides):
    data = {"train": f"{files['am']}::am@3", "val": f"{files['am_val']}::am"}
    argv = tiny_args(ws, data, out, **{"max_steps": 6, "grad_accumulation": 2, "val_interval": 3, **overrides})
    return [*argv, "--train-manifest", f"{files['en']}::en@1", "--val-manifest", f"{files['en_val']}::en"]


def test_replay_run_resumes_bitwise_and_validates_per_language(demo_workspace, replay_data, tmp_path):
    reference = tmp_path / "reference"
    done = run_cli(replay_args(demo_workspace, replay_data, reference))
    assert done.returncode == 0, done.stderr
    assert "am.jsonl::am@3: 14 of 18 samples per epoch (12 items, x1.17)" in done.stdout  # 18 x 3/4 = 13.5
    assert "en.jsonl::en@1: 4 of 18 samples per epoch (6 items, x0.67)" in done.stdout
    vals = events(reference, "val")
    assert [sorted(v["languages"]) for v in vals] == [["am", "en"], ["am", "en"]]
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(next((reference / "logs").iterdir())))
    acc.Reload()
    assert [s.value for s in acc.Scalars("val/en/loss")] == pytest.approx([v["languages"]["en"]["loss"] for v in vals])
    out = tmp_path / "run"
    argv = replay_args(demo_workspace, replay_data, out)
    killed = run_cli(argv, env={"STUDIO_TEST_KILL_AFTER_STEP": "5"})
    assert killed.returncode == -9
    resumed = run_cli(argv)
    assert resumed.returncode == 0, resumed.stderr
    assert "resumed from" in resumed.stdout and "bitwise exactness" not in resumed.stdout
    assert_same_training_state(load(out / "latest.pth"), load(reference / "latest.pth"))
    assert step_losses(out) == step_losses(reference)


def test_bad_weight_is_refused_in_one_line(demo_workspace, replay_data, tmp_path, capsys):
    argv = replay_args(demo_workspace, replay_data, tmp_path / "run")
    argv[argv.index(f"{replay_data['am']}::am@3")] = f"{replay_data['am']}::am@zero"
    assert run_main(argv) == 2
    assert "sampling weight 'zero' is not a positive number" in refusal(capsys)


def far_language(manifest: Path, out: Path, code: int = 8000) -> Path:
    """A copy of ``manifest`` whose every code is one the demo data never holds (its codes lie below 256): the
    more a model learns the demo's codes, the worse it predicts these, so this language is forgotten for sure."""
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for line in manifest.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        codes = Path(row["codes"]) if Path(row["codes"]).is_absolute() else manifest.parent / row["codes"]
        far = out / f"{row['id']}.npy"
        np.save(far, np.full_like(np.load(codes), code))
        rows.append(json.dumps({**row, "codes": str(far)}, ensure_ascii=False))
    target = out / manifest.name
    target.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return target


def test_forgetting_guard_stops_a_run_built_to_forget(demo_workspace, replay_data, tmp_path):
    """Only am trains, far too fast: en's validation loss climbs, and the guard stops the run. (en's validation
    codes are ones am never holds: a split of the same demo data would improve with am, not be forgotten.)"""
    out = tmp_path / "run"
    data = {"train": f"{replay_data['am']}::am", "val": f"{replay_data['am_val']}::am"}
    argv = tiny_args(demo_workspace, data, out, max_steps=12, learning_rate=0.05, warmup_steps=0, val_interval=1,
                     save_interval=1, forget_margin=0.05, stop_on_forgetting=True)
    argv += ["--val-manifest", f"{far_language(replay_data['en_val'], tmp_path / 'en_far')}::en"]
    proc = run_cli(argv)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    fired = events(out, "forgetting")
    assert len(fired) == 1 and fired[0]["language"] == "en" and fired[0]["stopping"] is True
    assert fired[0]["loss"] - fired[0]["first"] > 0.05
    good = fired[0]["last_good_step"]
    assert good is not None and good < fired[0]["step"]
    assert fired[0]["checkpoint"] == str(out / f"model_step{good}.pth")
    error = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(error) == 1 and error[0].startswith("error: forgetting en")
    assert f"model_step{good}.pth" in error[0] and "--stop-on-forgetting" in error[0]
    end = events(out)[-1]
    assert end["event"] == "end" and end["status"] == "forgetting"
    assert all(json.dumps(e) for e in events(out))
