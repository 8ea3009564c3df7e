"""The elastic launch (fast, no processes): the form's node range -> torchrun's c10d command and back, its one-line
refusals, the auto-resume it adds, and the trainer's switch to ``--resume auto`` after torchrun restarts it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from torch.distributed.run import get_args_parser

from tests.test_training_form import _launch_values, round_trip
from trainer.elastic import RESTART_COUNT_ENV, resume_after_restart, stopped_before_restart
from trainer.run_options import parse_run_options
from webui.jobs import launcher
from webui.training import training_form as tf

ELASTIC = {"nproc_per_node": 2, "nnodes": 4, "min_nodes": 2, "rdzv_endpoint": "head.example:29500",
           "max_restarts": 5, "resume": "auto"}


def test_a_node_range_runs_the_c10d_rendezvous_and_survives_the_round_trip() -> None:
    values = {**tf.default_values(), **_launch_values(**ELASTIC)}
    assert round_trip(values) == values
    argv = tf.run_argv(values, python="py")
    parsed = get_args_parser().parse_args(argv[3:])  # torch's own parser accepts every flag
    assert (parsed.nnodes, parsed.rdzv_backend, parsed.rdzv_endpoint) == ("2:4", "c10d", "head.example:29500")
    assert (parsed.max_restarts, parsed.rdzv_id) == (5, "studio-demo")  # the output folder /ws/runs/demo
    assert "--node-rank" not in argv and not parsed.standalone  # c10d orders the nodes itself
    assert parsed.training_script_args == tf.trainer_argv(values, python="py")[3:]
    assert tf.preflight_argv(values, Path("/tmp/r.json"), python="py")[-2:] == ["--preflight-processes", "8"]


def test_an_elastic_run_without_a_resume_resumes_auto_and_keeps_an_explicit_path() -> None:
    assert launcher.with_auto_resume(["--max-steps", "3"]) == ["--max-steps", "3", "--resume", "auto"]
    assert launcher.with_auto_resume(["--resume", "", "--seed", "1"]) == ["--resume", "auto", "--seed", "1"]
    assert launcher.with_auto_resume(["--resume=", "--seed", "1"]) == ["--resume=auto", "--seed", "1"]
    assert launcher.with_auto_resume(["--resume", "/ckpt/a.pth"]) == ["--resume", "/ckpt/a.pth"]
    values = {**tf.default_values(), **_launch_values(**{**ELASTIC, "resume": ""})}
    trainer_args = launcher.split_command(tf.run_argv(values, python="py"))[1]
    assert parse_run_options(trainer_args).resume == "auto"


def test_a_hand_written_slurm_line_is_read_back_as_an_elastic_launch() -> None:
    argv = ["python", "-m", "torch.distributed.run", "--nnodes", "1:2", "--nproc-per-node", "8",
            "--rdzv-backend", "c10d", "--rdzv-endpoint", "node7:29500", "--rdzv-id", "4242", "--max-restarts", "3",
            "--rdzv-conf", "join_timeout=900", "-m", "trainer.train", "--output-dir", "/shared/run"]
    launch, trainer_args = launcher.split_command(argv)
    assert launch == launcher.Launch(nproc_per_node=8, nnodes=2, rdzv_endpoint="node7:29500", min_nodes=1,
                                     max_restarts=3)
    assert trainer_args == ["--output-dir", "/shared/run"]
    assert launcher.split_command([*argv[:3], "--nnodes", "1:x", *argv[5:]]) is None


@pytest.mark.parametrize("fields, message", [
    ({"min_nodes": 3, "nnodes": 2, "rdzv_endpoint": "h:1"}, r"^--min-nodes: the elastic range 3:2 has MIN above MAX"),
    ({"min_nodes": 1, "nnodes": 2}, r"^--rdzv-endpoint: 1:2 nodes need the rendezvous address HOST:PORT of the "
                                    r"machine that hosts the rendezvous$"),
    ({"min_nodes": 1, "nnodes": 2, "rdzv_endpoint": "head"}, r"^--rdzv-endpoint: expected HOST:PORT"),
    ({"min_nodes": 1, "nnodes": 2, "rdzv_endpoint": "h:1", "max_restarts": -1},
     r"^--max-restarts: expected 0 or more, got -1$"),
])
def test_an_elastic_range_torchrun_cannot_run_is_refused_in_one_line(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(launcher.LaunchError, match=message):
        launcher.launch_of(fields)


def test_the_node_rank_is_not_checked_in_an_elastic_range() -> None:
    launch = launcher.launch_of({"min_nodes": 1, "nnodes": 2, "rdzv_endpoint": "h:1", "node_rank": 5})
    assert launch.elastic and launch.nodes_text == "1:2"


def test_a_restarted_worker_resumes_auto_once_the_run_has_a_checkpoint(tmp_path, monkeypatch) -> None:
    opts = parse_run_options(["--output-dir", str(tmp_path), "--resume", "/elsewhere/base.pth"])
    monkeypatch.setenv(RESTART_COUNT_ENV, "0")
    assert resume_after_restart(opts) == (opts, None)  # the first attempt starts as asked
    monkeypatch.setenv(RESTART_COUNT_ENV, "2")
    assert resume_after_restart(opts) == (opts, None)  # restarted before any save: still the given start
    (tmp_path / "model_step4.pth").write_bytes(b"")
    restarted, note = resume_after_restart(opts)
    assert restarted.resume == "auto" and restarted.output_dir == opts.output_dir
    assert note and "restart 2" in note and "/elsewhere/base.pth" in note
    monkeypatch.setenv(RESTART_COUNT_ENV, "not a number")
    assert resume_after_restart(opts) == (opts, None)


def test_a_run_that_was_stopped_is_not_trained_again_when_torchrun_restarts_it(tmp_path, monkeypatch, capsys) -> None:
    from trainer.train import main

    metrics = tmp_path / "metrics.jsonl"
    metrics.write_text('{"event": "start", "step": 0}\n{"event": "train", "step": 1}\n'
                       '{"event": "end", "step": 6, "status": "stopped", "signal": "SIGINT"}\n'
                       '{"event": "eval", "step": 6}\n{"event": "train", "step": 7', encoding="utf-8")  # a torn line
    monkeypatch.setenv(RESTART_COUNT_ENV, "1")
    assert main(["--output-dir", str(tmp_path)]) == 130
    assert "of a run stopped at step 6: not training again" in capsys.readouterr().out
    assert not (tmp_path / ".trainer.lock").exists()  # it left before taking the folder
    with open(metrics, "a", encoding="utf-8") as handle:
        handle.write('\n{"event": "resume", "step": 6}\n')  # started again by hand since: an ordinary restart
    assert stopped_before_restart(tmp_path) is None
    monkeypatch.setenv(RESTART_COUNT_ENV, "0")
    metrics.write_text('{"event": "end", "step": 6, "status": "stopped"}\n', encoding="utf-8")
    assert stopped_before_restart(tmp_path) is None  # the first attempt of a new launch trains
