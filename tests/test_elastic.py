"""Elastic multi-node: torchrun's c10d rendezvous with ``--nnodes 1:2``, two nodes on 127.0.0.1 sharing one folder.

Node B's trainer stops working after step KILL_AT (a test hook, so the loss happens at a known step), the test
SIGKILLs B's agent and its worker, and node A's torchrun restarts its worker alone: the run goes on from the last
checkpoint and must end exactly as a 1-node run resumed from that checkpoint does.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from tests.test_torchrun import free_loopback_port
from tests.trainer_helpers import (
    REPO,
    assert_same_training_state,
    events,
    load,
    run_cli,
    step_losses,
    subset_manifest,
    tiny_args,
)
from webui.jobs import launcher

pytestmark = pytest.mark.slow

STEPS = 8
KILL_AT = 4  # a save step (--save-interval 2), mid-run
DEADLINE_S = 240
# Small rendezvous timeouts: the survivor's new round closes 2 s after it joins alone, and the lost node's
# heartbeat counts as expired after 2 s; A hosts the c10d store (B must not: killing B would take the store along).
RDZV = "join_timeout=60,last_call_timeout=2,close_timeout=5,keep_alive_interval=1,keep_alive_max_attempt=2"


def agent(out: Path, argv: list[str], endpoint: str, is_host: bool, env: dict[str, str], log: Path
          ) -> subprocess.Popen:
    launch = launcher.Launch(nproc_per_node=1, nnodes=2, min_nodes=1, rdzv_endpoint=endpoint, max_restarts=1)
    command = launcher.command(launch, argv, str(out), rdzv_conf=f"{RDZV},is_host={str(is_host).lower()}")
    assert command[command.index("--nnodes") + 1] == "1:2" and "c10d" in command and "--node-rank" not in command
    with open(log, "w") as sink:
        return subprocess.Popen(command, cwd=REPO, stdout=sink, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True,
                                env={**os.environ, "OMP_NUM_THREADS": "1", "GLOO_SOCKET_IFNAME": "lo", **env})


def kill_node(proc: subprocess.Popen) -> None:
    """SIGKILL an agent and every process under it (torchrun starts each worker in a session of its own)."""
    with contextlib.suppress(psutil.NoSuchProcess):
        for child in psutil.Process(proc.pid).children(recursive=True):
            with contextlib.suppress(psutil.NoSuchProcess):
                child.kill()
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)


def wait_until(condition, what: str, procs: list[subprocess.Popen], deadline: float) -> None:
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        if any(proc.poll() not in (None, 0) for proc in procs):
            pytest.fail(f"a node ended with {[proc.poll() for proc in procs]} while waiting for {what}")
        time.sleep(0.2)


def committed(out: Path, step: int) -> bool:
    """Whether ``latest.pth`` (replaced atomically, after model_step<step>.pth) holds ``step``."""
    return (out / "latest.pth").exists() and load(out / "latest.pth")["step"] == step


def test_a_lost_node_restarts_the_run_on_the_other_from_the_last_checkpoint(demo_workspace, tmp_path):
    data = {"train": subset_manifest(demo_workspace.train_manifest, tmp_path / "train.jsonl", 16),
            "val": subset_manifest(demo_workspace.val_manifest, tmp_path / "val.jsonl", 2)}
    out = tmp_path / "shared"  # both nodes' output folder, as on a shared filesystem
    argv = tiny_args(demo_workspace, data, out, max_steps=STEPS, resume=None, collective_timeout=30)
    endpoint = f"127.0.0.1:{free_loopback_port()}"
    logs = {name: tmp_path / f"node_{name}.log" for name in ("a", "b")}
    hang = {"STUDIO_TEST_HOOKS": "1", "STUDIO_TEST_HANG_AFTER_STEP": str(KILL_AT)}
    deadline = time.monotonic() + DEADLINE_S
    procs: list[subprocess.Popen] = []
    try:
        # B first: its store client waits for A's store, so both are there when A's first round opens.
        procs.append(node_b := agent(out, argv, endpoint, False, hang, logs["b"]))
        procs.append(node_a := agent(out, argv, endpoint, True, {}, logs["a"]))
        wait_until(lambda: f"test hook: not working after step {KILL_AT}" in logs["b"].read_text()
                   and committed(out, KILL_AT), f"step {KILL_AT}'s checkpoint with node B stalled", procs, deadline)
        started = (events(out, "start") or events(out, "resume"))[-1]
        assert started["world_size"] == 2, "the run did not start on both nodes"
        snapshot = tmp_path / "snapshot"
        shutil.copytree(out, snapshot)  # the group is stalled at step KILL_AT: nothing writes now
        kill_node(node_b)
        node_a.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        for proc in procs:
            if proc.poll() is None:
                kill_node(proc)
    a_log = logs["a"].read_text()
    assert node_a.returncode == 0, a_log[-3000:]
    resumed = events(out, "resume")[-1]
    assert (resumed["step"], resumed["world_size"]) == (KILL_AT, 1)
    assert load(out / "latest.pth")["step"] == STEPS

    reference = tmp_path / "reference"
    shutil.copytree(snapshot, reference)
    done = run_cli(tiny_args(demo_workspace, data, reference, max_steps=STEPS))
    assert done.returncode == 0, done.stderr[-3000:]
    assert_same_training_state(load(out / "latest.pth"), load(reference / "latest.pth"))
    after = {step: loss for step, loss in step_losses(out).items() if step > KILL_AT}
    assert after == {step: loss for step, loss in step_losses(reference).items() if step > KILL_AT}


def test_a_stopped_elastic_run_stays_stopped_when_torchrun_restarts_its_workers(demo_workspace, tmp_path):
    """Stop SIGINTs the trainers (they save and exit 130); torchrun restarts workers whatever their exit code, and
    the restarted ones must not train on."""
    data = {"train": subset_manifest(demo_workspace.train_manifest, tmp_path / "train.jsonl", 8),
            "val": subset_manifest(demo_workspace.val_manifest, tmp_path / "val.jsonl", 2)}
    out = tmp_path / "run"
    launch = launcher.Launch(nproc_per_node=1, nnodes=1, min_nodes=1, max_restarts=1,
                             rdzv_endpoint=f"127.0.0.1:{free_loopback_port()}")
    command = launcher.command(launch, tiny_args(demo_workspace, data, out, max_steps=STEPS, resume=None), str(out),
                               rdzv_conf=f"{RDZV},is_host=true")
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=DEADLINE_S,
                          env={**os.environ, "OMP_NUM_THREADS": "1", "GLOO_SOCKET_IFNAME": "lo",
                               "STUDIO_TEST_HOOKS": "1", "STUDIO_TEST_STOP_AFTER_STEP": "2"})
    assert done.returncode != 0  # torchrun ran out of restarts (the studio records it as stopped: its end event)
    assert done.stdout.count("of a run stopped at step 2: not training again") == 1, done.stdout[-3000:]
    assert "resumed from" not in done.stdout
    assert [e["status"] for e in events(out, "end")] == ["stopped"] and load(out / "latest.pth")["step"] == 2
