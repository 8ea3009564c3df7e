"""Preparation under torchrun on CPU (Gloo), issue 41: two real processes on the demo's audio and tiny models.

A 2-process preparation writes every file and manifest byte for byte as one process does; a process killed
mid-way (the test hook, in its second batch), then a rerun, gives the same files again. One uninterrupted
1-process run is the reference of both.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.test_prepare_v2 import cli, prepare_argv, tree_bytes, v2_ws  # noqa: F401  (v2_ws: the fixture)
from tests.test_torchrun import torchrun_module as torchrun_run

pytestmark = pytest.mark.slow

TORCHRUN_TIMEOUT_S = 240
BATCH_SECONDS = ("--batch-seconds", "4")  # the 12 demo clips in several batches, so each process has some


def torchrun_prepare(argv: list[str], nproc: int = 2, **env: str) -> subprocess.CompletedProcess:
    return torchrun_module("data_tools.prepare_v2", argv, nproc, **env)


def torchrun_module(module: str, argv: list[str], nproc: int = 2, **env: str) -> subprocess.CompletedProcess:
    """``python -m torch.distributed.run --standalone --nproc-per-node N -m MODULE ARGV`` to its end."""
    return torchrun_run(module, argv, nproc, TORCHRUN_TIMEOUT_S, **env)


@pytest.fixture(scope="module")
def one_process(v2_ws, tmp_path_factory) -> Path:  # noqa: F811  (v2_ws: the fixture imported above)
    out = tmp_path_factory.mktemp("one-process") / "out"
    done = cli(prepare_argv(v2_ws, v2_ws.audio, out, *BATCH_SECONDS))
    assert done.returncode == 0, done.stderr[-2000:]
    return out


def test_two_processes_write_the_files_of_one_byte_for_byte(v2_ws, one_process, tmp_path):  # noqa: F811
    out = tmp_path / "two"
    done = torchrun_prepare(prepare_argv(v2_ws, v2_ws.audio, out, *BATCH_SECONDS))
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("utterances:") == 1  # one report, from the first process
    assert "batches on cpu (2 processes)" in done.stdout
    expected = tree_bytes(one_process)
    assert {"utterances.jsonl", "pairs.jsonl"} <= set(expected) and len(expected) > 40
    assert tree_bytes(out) == expected
    report = json.loads((out / "prepare_report.json").read_text(encoding="utf-8"))
    whole = json.loads((one_process / "prepare_report.json").read_text(encoding="utf-8"))
    assert (report["utterances"], report["new"], report["batches"]) == (whole["utterances"], whole["new"],
                                                                       whole["batches"])
    state = out / ".prepare_v2"
    assert sorted(p.name for p in state.iterdir()) == ["done.jsonl"]  # the processes' logs merged into one
    assert len(state.joinpath("done.jsonl").read_text(encoding="utf-8").splitlines()) == 12


def test_a_process_killed_mid_way_then_a_rerun_gives_the_same_files(v2_ws, one_process, tmp_path):  # noqa: F811
    out = tmp_path / "killed"
    argv = prepare_argv(v2_ws, v2_ws.audio, out, *BATCH_SECONDS)
    killed = torchrun_prepare(argv, STUDIO_TEST_HOOKS="1", STUDIO_TEST_PREP_KILL_IN_BATCH="2",
                              STUDIO_TEST_PREP_KILL_RANK="1")
    assert killed.returncode != 0, killed.stdout[-2000:]
    assert "STUDIO_TEST_PREP_KILL_RANK=1 is active" in killed.stderr
    assert not (out / "utterances.jsonl").exists() and not (out / "pairs.jsonl").exists()
    logs = {path.name: stems_in(path) for path in (out / ".prepare_v2").glob("done.rank*.jsonl")}
    assert 0 < len(logs["done.rank1.jsonl"]) < 12, logs  # its first batch, not its second
    assert len(set().union(*logs.values())) == sum(map(len, logs.values())), logs  # no item done twice
    finished = sum(map(len, logs.values()))

    resumed = torchrun_prepare(argv)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"{12 - finished} prepared now" in resumed.stdout and f"{finished} from an earlier run" in resumed.stdout
    assert tree_bytes(out) == tree_bytes(one_process)


def stems_in(done_log: Path) -> list[str]:
    return [json.loads(line)["stem"] for line in done_log.read_text(encoding="utf-8").splitlines()]
