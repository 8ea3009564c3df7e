"""Training state as components (issue 13): a new piece of state registered in one place round-trips through
save, verify and an exact resume, with no other file changed."""

from __future__ import annotations

from typing import ClassVar

import pytest

from tests.trainer_helpers import assert_same_training_state, load, run_main, subset_manifest, tiny_args
from trainer.checkpoints import COMPLETE, verify_checkpoint
from trainer.signals import STOP_AFTER_ENV
from trainer.state import CORE_COMPONENTS, register_component, unregister_component


class StepCounter:
    """A dummy piece of state: counts optimizer steps by reading the run's step at every save."""

    name, core = "step counter", False
    restored: ClassVar[list[int]] = []  # every value handed back on a resume (class-level: one per process)

    def __init__(self, run) -> None:
        self.run = run
        self.start = 0

    def state_dict(self):
        return {"saved_at": int(self.run.state.step), "resumed_from": self.start}

    def load_state_dict(self, state, notes):
        self.start = int(state["saved_at"])
        StepCounter.restored.append(self.start)
        notes.append(f"step counter at {self.start}")


@pytest.fixture
def counter():
    StepCounter.restored = []
    register_component(StepCounter.name, StepCounter)
    yield StepCounter
    unregister_component(StepCounter.name)


@pytest.fixture(scope="module")
def data(demo_workspace, tmp_path_factory):
    root = tmp_path_factory.mktemp("components")
    return {"train": subset_manifest(demo_workspace.train_manifest, root / "train.jsonl", 8),
            "val": subset_manifest(demo_workspace.val_manifest, root / "val.jsonl", 2)}


def test_a_registered_component_round_trips_through_save_verify_and_exact_resume(
        demo_workspace, data, tmp_path, counter, monkeypatch, capsys):
    reference = tmp_path / "reference"
    assert run_main(tiny_args(demo_workspace, data, reference, max_steps=6)) == 0

    out = tmp_path / "run"
    monkeypatch.setenv(STOP_AFTER_ENV, "3")
    assert run_main(tiny_args(demo_workspace, data, out, max_steps=6)) == 130
    stopped = load(out / "latest.pth")
    assert stopped["extra"]["state"]["step counter"] == {"saved_at": 3, "resumed_from": 0}
    assert verify_checkpoint(out / "latest.pth").verdict == COMPLETE

    monkeypatch.delenv(STOP_AFTER_ENV)
    capsys.readouterr()
    assert run_main(tiny_args(demo_workspace, data, out, max_steps=6)) == 0
    assert "step counter at 3" in capsys.readouterr().out
    assert counter.restored == [3]
    final = load(out / "latest.pth")
    assert final["extra"]["state"]["step counter"] == {"saved_at": 6, "resumed_from": 3}
    assert_same_training_state(final, load(reference / "latest.pth"))  # the extra state changed nothing else


def test_every_core_component_says_what_it_saves():
    names = [factory.name for factory in CORE_COMPONENTS]
    assert names == ["weights", "optimisation", "position", "rng", "run record", "metrics window", "frozen rows"]
    for factory in CORE_COMPONENTS:
        assert factory.__doc__, factory  # what it saves, or why it saves nothing
