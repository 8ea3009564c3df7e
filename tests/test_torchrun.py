"""DDP under torchrun on CPU (Gloo): two real processes on the demo workspace.

One uninterrupted 2-process run is shared by the tests of the epoch's sharding, the single writer, the
exact resume and the 2-node run (two torchrun launches on this machine over loopback, as the studio starts
them); a second run is SIGKILLed mid-epoch (every rank, by the test hook) and resumed with 2 and
with 1 process. The loss-curve test compares a 2-process run with a 1-process run of the doubled batch.
Each torchrun start costs seconds on a small machine: the runs are a few steps of the tiny demo model.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

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

TORCHRUN_TIMEOUT_S = 300
STEPS = 6  # 16 items, 2 per rank, 2 ranks: 4 steps per epoch, so step 3 is mid-epoch
KILL_AT = 3
HOOKS = {"STUDIO_TEST_HOOKS": "1", "STUDIO_TEST_RECORD_SAMPLES": "1"}


def torchrun(argv: list[str], env: dict[str, str] | None = None, nproc: int = 2) -> subprocess.CompletedProcess:
    """``python -m torch.distributed.run --standalone --nproc_per_node N -m trainer.train ARGV`` to its end."""
    return torchrun_module("trainer.train", argv, nproc, TORCHRUN_TIMEOUT_S, **(env or {}))


def torchrun_module(module: str, argv: list[str], nproc: int, timeout_s: float, **env: str
                    ) -> subprocess.CompletedProcess:
    """``python -m torch.distributed.run --standalone --nproc_per_node N -m MODULE ARGV`` to its end (at most
    ``timeout_s``); whatever a killed rank's peers left behind is ended with it."""
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(nproc),
               "-m", module, *argv]
    # Its own session, so a hang can be ended as a whole (the ranks included) at the deadline.
    proc = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, env={**os.environ, "OMP_NUM_THREADS": "1", **env})
    try:
        stdout, stderr = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=60)
        pytest.fail(f"torchrun did not finish within {timeout_s} s")
    end_group(proc.pid)
    return subprocess.CompletedProcess(command, proc.returncode, stdout, stderr)


def end_group(pgid: int) -> None:
    """SIGKILL whatever is left of the job's own process group (nothing, after a normal end)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)


@pytest.fixture(scope="module")
def data(demo_workspace, tmp_path_factory):
    root = tmp_path_factory.mktemp("torchrun-data")
    return {"train": subset_manifest(demo_workspace.train_manifest, root / "train.jsonl", 16),
            "val": subset_manifest(demo_workspace.val_manifest, root / "val.jsonl", 2)}


def manifest_ids(path: Path) -> list[str]:
    return [json.loads(line)["id"] for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.fixture(scope="module")
def full_run(demo_workspace, data, tmp_path_factory):
    """An uninterrupted 2-process run on one node (``--standalone``): its output dir and its stdout."""
    full = tmp_path_factory.mktemp("torchrun") / "full"
    done = torchrun(tiny_args(demo_workspace, data, full, max_steps=STEPS), env=HOOKS)
    assert done.returncode == 0, done.stderr[-3000:]
    return full, done.stdout


@pytest.fixture(scope="module")
def runs(full_run, demo_workspace, data, tmp_path_factory):
    """The uninterrupted 2-process run, and one whose ranks were all SIGKILLed after step KILL_AT."""
    root = tmp_path_factory.mktemp("torchrun")
    full, full_stdout = full_run
    killed = root / "killed"
    cut = torchrun(tiny_args(demo_workspace, data, killed, max_steps=STEPS),
                   env={**HOOKS, "STUDIO_TEST_KILL_AFTER_STEP": str(KILL_AT)})
    assert cut.returncode != 0
    assert load(killed / "latest.pth")["step"] == 2  # the save before the kill; the epoch is half done
    snapshot = root / "killed-snapshot"
    shutil.copytree(killed, snapshot)  # for the 1-process resume, before the 2-process resume continues it
    return {"full": full, "full_stdout": full_stdout, "killed": killed, "snapshot": snapshot}


def test_each_rank_sees_disjoint_samples_covering_the_epoch(runs, data):
    per_step = {e["step"]: e["sample_ids"] for e in events(runs["full"], "train")}
    everything = sorted(manifest_ids(data["train"]))
    for epoch_steps in ((1, 2, 3, 4),):  # the first epoch, whole
        ranks = [[i for step in epoch_steps for i in per_step[step][rank]] for rank in (0, 1)]
        assert all(len(per_step[step][rank]) == 2 for step in epoch_steps for rank in (0, 1))
        assert not set(ranks[0]) & set(ranks[1])
        assert sorted(ranks[0] + ranks[1]) == everything
    assert [e["samples"] for e in events(runs["full"], "train")] == [4 * step for step in range(1, STEPS + 1)]


def test_rank0_alone_writes(runs):
    out, stdout = runs["full"], runs["full_stdout"]
    train_steps = [e["step"] for e in events(out, "train")]
    assert train_steps == list(range(1, STEPS + 1))  # one writer: no duplicate events
    assert [e["step"] for e in events(out, "save")] == [2, 4, 6]
    assert stdout.count("saved checkpoint step 2 ") == 1 and stdout.count("training finished") == 1
    assert "x 2 processes" in stdout
    assert "2 per device x 2 processes x 1 accumulated, global batch 4" in stdout
    start = events(out, "start")[0]
    assert (start["global_batch"], start["world_size"]) == (4, 2)
    assert sorted(p.name for p in out.glob("*.pth")) == ["best.pth", "latest.pth", "model_step2.pth",
                                                        "model_step4.pth", "model_step6.pth"]
    assert not list(out.glob("*.tmp*"))
    ckpt = load(out / "latest.pth")
    ranks = ckpt["rng"]["ranks"]
    assert len(ranks) == 2 and not (ranks[0]["torch_cpu"] == ranks[1]["torch_cpu"]).all()  # each rank's own


def test_sigkill_then_resume_with_2_processes_is_bitwise_exact(runs, demo_workspace, data):
    resumed = torchrun(tiny_args(demo_workspace, data, runs["killed"], max_steps=STEPS), env=HOOKS)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resumed from" in resumed.stdout and "each of 2 ranks its own" in resumed.stdout
    assert "exactness" not in resumed.stdout
    assert_same_training_state(load(runs["killed"] / "latest.pth"), load(runs["full"] / "latest.pth"))
    assert step_losses(runs["killed"]) == step_losses(runs["full"])


def test_resume_with_1_process_continues_at_the_same_sample_count(runs, demo_workspace, data, tmp_path):
    out = tmp_path / "one"
    shutil.copytree(runs["snapshot"], out)
    saved = load(out / "latest.pth")["sampler"]["samples_seen"]
    assert saved == 8
    done = run_cli(tiny_args(demo_workspace, data, out, max_steps=STEPS))
    assert done.returncode == 0, done.stderr[-3000:]
    assert "bitwise exactness with an uninterrupted run is lost" in done.stdout
    assert "RNG re-seeded" in done.stdout
    resume = events(out, "resume")[-1]
    assert (resume["samples"], resume["global_batch"], resume["world_size"]) == (saved, 2, 1)
    after = [e for e in events(out, "train") if e["step"] > 2]
    assert [e["samples"] for e in after] == [saved + 2 * k for k in range(1, len(after) + 1)]  # batch 2, 1 rank


def test_a_dead_rank_ends_the_job_with_one_clear_line(demo_workspace, data, tmp_path):
    out = tmp_path / "dead"
    done = torchrun(tiny_args(demo_workspace, data, out, max_steps=STEPS),
                    env={"STUDIO_TEST_HOOKS": "1", "STUDIO_TEST_KILL_AFTER_STEP": "1", "STUDIO_TEST_KILL_RANK": "1"})
    assert done.returncode != 0
    lines = [line for line in done.stderr.splitlines() if line.startswith("error: rank 0 of 2:")]
    assert len(lines) == 1, done.stderr[-3000:]
    assert "another process died" in lines[0] and "last checkpoint" in lines[0]
    assert "[rank0]: Traceback" not in done.stderr
    assert events(out)[-1]["event"] == "end" and events(out)[-1]["error_type"] == "CollectiveFailure"


# ----- two nodes on this machine: the studio's multi-node command, node 0 and node 1 over loopback ------------


def free_loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def run_together(commands: list[list[str]], logs: list[Path], env: dict[str, str],
                 timeout_s: float = TORCHRUN_TIMEOUT_S) -> list[subprocess.CompletedProcess]:
    """Start every command at once (each in its own session, output to its own files) and wait for all.

    One deadline for all; the moment one fails the others are ended too (a node left alone would wait for its
    peer in a collective), and at the deadline every group is SIGKILLed and the test fails."""
    procs: list[subprocess.Popen] = []
    try:
        for command, log in zip(commands, logs, strict=True):
            with open(log.with_suffix(".out"), "w") as out, open(log.with_suffix(".err"), "w") as err:
                procs.append(subprocess.Popen(command, cwd=REPO, stdout=out, stderr=err, text=True,
                                              start_new_session=True,
                                              env={**os.environ, "OMP_NUM_THREADS": "1", **env}))
        deadline = time.monotonic() + timeout_s
        while any(proc.returncode is None for proc in procs):
            if time.monotonic() > deadline:
                pytest.fail(f"the launches did not finish within {timeout_s} s")
            if any(proc.returncode not in (None, 0) for proc in procs):
                break  # one failed: do not wait for the others' collective timeouts
            for proc in procs:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=0.5)
    finally:
        for proc in procs:
            end_group(proc.pid)  # nothing is left after a normal end; everything after a failure or the deadline
        for proc in procs:
            proc.wait(timeout=60)
    return [subprocess.CompletedProcess(command, proc.returncode, log.with_suffix(".out").read_text(),
                                        log.with_suffix(".err").read_text())
            for command, proc, log in zip(commands, procs, logs, strict=True)]


def two_nodes(outs: list[Path], argv_of: Callable[[Path], list[str]], logs: Path
              ) -> list[subprocess.CompletedProcess]:
    """The studio's 2-node command (``webui.jobs.launcher.command``: static rendezvous at a free loopback port), node 0
    with output dir ``outs[0]`` and node 1 with ``outs[1]``, both started here and run to their ends."""
    endpoint = f"127.0.0.1:{free_loopback_port()}"
    commands = [launcher.command(launcher.Launch(nproc_per_node=1, nnodes=2, rdzv_endpoint=endpoint, node_rank=rank),
                                 argv_of(out), str(out))
                for rank, out in enumerate(outs)]
    assert commands[1][commands[1].index("--node-rank") + 1] == "1" and "--rdzv-backend" in commands[1]
    # Gloo binds where the host name resolves; on a machine where that is not loopback it must still stay here.
    env = {**HOOKS, **({"GLOO_SOCKET_IFNAME": "lo"} if sys.platform.startswith("linux") else {})}
    logs.mkdir(parents=True, exist_ok=True)
    return run_together(commands, [logs / "node0", logs / "node1"], env)


def only_launcher_logs(out: Path) -> bool:
    """Whether ``out`` holds nothing but torchrun's rank logs (no checkpoint, metrics, config or lock)."""
    ranks = out / launcher.RANKS_DIR
    return ([p.name for p in out.iterdir()] == [launcher.RANKS_DIR]
            and all(p.suffix == ".log" for p in ranks.rglob("*") if p.is_file()))


def test_two_nodes_over_loopback_train_exactly_like_one_node_with_two_processes(full_run, demo_workspace, data,
                                                                                 tmp_path):
    """Both nodes here: the run is the single-node 2-process run bit for bit (node rank R runs global rank R),
    and only node 0 (global rank 0) writes run files."""
    full, _ = full_run
    outs = [tmp_path / "node0", tmp_path / "node1"]  # each node its own output dir, as on machines of their own
    node0, node1 = two_nodes(outs, lambda out: tiny_args(demo_workspace, data, out, max_steps=STEPS),
                             tmp_path / "logs")
    assert node0.returncode == 0, node0.stderr[-3000:]
    assert node1.returncode == 0, node1.stderr[-3000:]

    assert step_losses(outs[0]) == step_losses(full)  # the same global ranks reduce the same gradients: bitwise
    assert [e["sample_ids"] for e in events(outs[0], "train")] == [e["sample_ids"] for e in events(full, "train")]
    start = events(outs[0], "start")[0]
    assert (start["world_size"], start["global_batch"]) == (2, 4)
    assert_same_training_state(load(outs[0] / "latest.pth"), load(full / "latest.pth"))
    assert sorted(p.name for p in outs[0].glob("*.pth")) == sorted(p.name for p in full.glob("*.pth"))
    assert "training finished" in node0.stdout and "training finished" not in node1.stdout
    assert only_launcher_logs(outs[1])
    assert len(list((outs[0] / launcher.RANKS_DIR).rglob("stdout.log"))) == 1  # each node keeps its own rank's


def test_a_node_without_node_0s_checkpoint_is_refused_and_with_a_copy_resumes_exactly(runs, demo_workspace, data,
                                                                                       tmp_path):
    """Each rank reads the checkpoint in its own node's --output-dir: one that finds none (or another) must not
    train out of step with node 0 (it did, silently, until a collective timed out); with a copy it resumes."""
    outs = [tmp_path / "node0", tmp_path / "node1"]
    shutil.copytree(runs["snapshot"], outs[0])  # saved at step 2, mid-epoch
    outs[1].mkdir()
    before = (outs[0] / "metrics.jsonl").read_text(encoding="utf-8")
    argv_of = lambda out: tiny_args(demo_workspace, data, out, max_steps=STEPS)  # noqa: E731
    refused = two_nodes(outs, argv_of, tmp_path / "refused")
    assert refused[0].returncode != 0 and refused[1].returncode != 0
    lines = [line for line in refused[0].stderr.splitlines()
             if "error: rank 1 would start fresh at step 0 but rank 0 would resume at step 2 " in line]
    assert len(lines) == 1, refused[0].stderr[-3000:]
    assert "same checkpoint in its --output-dir" in lines[0]
    rank_lines = [line for node in refused for line in node.stderr.splitlines() if line.startswith("[default")]
    assert not [line for line in rank_lines if "Traceback" in line]  # the trainers refused; torchrun's is its own
    assert (outs[0] / "metrics.jsonl").read_text(encoding="utf-8") == before  # nothing trained, nothing recorded
    assert only_launcher_logs(outs[1])

    shutil.rmtree(outs[1])
    shutil.copytree(runs["snapshot"], outs[1])
    node0, node1 = two_nodes(outs, argv_of, tmp_path / "resumed")
    assert node0.returncode == 0, node0.stderr[-3000:]
    assert node1.returncode == 0, node1.stderr[-3000:]
    assert "each of 2 ranks its own" in node0.stdout
    assert_same_training_state(load(outs[0] / "latest.pth"), load(runs["full"] / "latest.pth"))
    assert step_losses(outs[0]) == step_losses(runs["full"])
    assert (outs[1] / "metrics.jsonl").read_text(encoding="utf-8") == before  # node 1 only read its copy


# ----- the loss curve: 2 processes x batch 2 == 1 process x batch 4 ----------------------------------------


@pytest.fixture(scope="module")
def uniform(demo_workspace, tmp_path_factory):
    """8 items of one text and 40 prompt frames, 24 codes each but one with 16, and a config without dropout.

    The model has no padding mask, so an item's numbers depend on its batch's padded width: here every rank's
    micro-batch has the width of the whole global batch (the short item sorts first and shares rank 0's slice
    with a full one), yet the ranks count different numbers of tokens, so a mean of the ranks' means would
    differ from the token mean of the global batch. Without dropout no random stream is involved."""
    root = tmp_path_factory.mktemp("uniform")
    source = demo_workspace.train_manifest
    rows = [json.loads(line) for line in source.read_text(encoding="utf-8").splitlines() if line.strip()]
    lines = []
    for index, row in enumerate(rows[:8]):
        codes = np.load(source.parent / row["codes"])[:24 if index else 16]
        cond = np.load(source.parent / row["cond_mel"])[:, :40]
        np.save(root / f"{row['id']}_codes.npy", codes)
        np.save(root / f"{row['id']}_cond.npy", cond)
        assert codes.shape == ((24,) if index else (16,)) and cond.shape[1] == 40
        lines.append(json.dumps({**row, "text": "ሰላም ለዓለም", "codes": str(root / f"{row['id']}_codes.npy"),
                                 "cond_mel": str(root / f"{row['id']}_cond.npy")}, ensure_ascii=False))
    (root / "train.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    config: dict[str, Any] = yaml.safe_load(Path(demo_workspace.config).read_text(encoding="utf-8"))
    config["gpt"]["gpt_dropout"] = 0.0
    (root / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    return root


def test_two_process_loss_curve_matches_one_process_with_the_doubled_batch(demo_workspace, uniform, tmp_path):
    data = {"train": uniform / "train.jsonl", "val": uniform / "train.jsonl"}
    common = {"max_steps": 4, "config": str(uniform / "config.yaml"), "val_manifest": None}
    two = torchrun(tiny_args(demo_workspace, data, tmp_path / "two", batch_size=2, **common))
    assert two.returncode == 0, two.stderr[-3000:]
    one = run_cli(tiny_args(demo_workspace, data, tmp_path / "one", batch_size=4, **common))
    assert one.returncode == 0, one.stderr[-3000:]
    assert "global batch 4" in two.stdout and "global batch 4" in one.stdout
    curve_two, curve_one = step_losses(tmp_path / "two"), step_losses(tmp_path / "one")
    assert sorted(curve_two) == sorted(curve_one) == [1, 2, 3, 4]
    for step in curve_one:
        assert curve_two[step] == pytest.approx(curve_one[step], abs=1e-5), step
