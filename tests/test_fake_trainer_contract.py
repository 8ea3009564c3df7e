"""The stand-in trainer the studio tests use writes the real trainer's events: every field the studio reads,
named and typed as the trainer writes it, so a test that passes on the stand-in speaks of the real thing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.trainer_helpers import events, run_main, subset_manifest, tiny_args

REPO = Path(__file__).resolve().parents[1]
KINDS = ("start", "train", "save", "end")


def _kinds_and_fields(rows: list[dict]) -> dict[str, dict[str, type]]:
    seen: dict[str, dict[str, type]] = {}
    for row in rows:
        fields = seen.setdefault(row["event"], {})
        for key, value in row.items():
            if value is not None:
                fields.setdefault(key, type(value))
    return seen


@pytest.fixture(scope="module")
def real_events(demo_workspace, tmp_path_factory) -> dict[str, dict[str, type]]:
    root = tmp_path_factory.mktemp("contract")
    data = {"train": subset_manifest(demo_workspace.train_manifest, root / "train.jsonl", 6),
            "val": subset_manifest(demo_workspace.val_manifest, root / "val.jsonl", 3)}
    assert run_main(tiny_args(demo_workspace, data, root / "run", max_steps=2, save_interval=2)) == 0
    return _kinds_and_fields(events(root / "run"))


def test_the_stand_in_writes_the_real_trainers_events(real_events, tmp_path):
    out = tmp_path / "fake"
    done = subprocess.run([sys.executable, str(REPO / "tests" / "fake_trainer.py"), "--output-dir", str(out),
                           "--steps", "2", "--save-interval", "2", "--interval", "0"], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    fake = _kinds_and_fields([json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()])
    for kind in KINDS:
        assert kind in fake and kind in real_events, kind
        extra = sorted(set(fake[kind]) - set(real_events[kind]))
        assert extra == [], f"the stand-in's {kind} events have fields the trainer never writes: {extra}"
        wrong = {key: (fake[kind][key].__name__, real_events[kind][key].__name__) for key in fake[kind]
                 if not issubclass(fake[kind][key], real_events[kind][key])
                 and {fake[kind][key], real_events[kind][key]} != {int, float}}
        assert wrong == {}, f"{kind}: field types differ (stand-in, trainer): {wrong}"
    # What the studio reads of a run: the stand-in must write it too.
    for kind, needed in {"start": {"step", "total_steps", "time"}, "train": {"step", "loss", "total_steps", "eta_s"},
                         "save": {"step", "path"}, "end": {"step", "status"}}.items():
        assert needed <= set(fake[kind]) & set(real_events[kind]), (kind, needed - set(fake[kind]))
