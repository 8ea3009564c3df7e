"""Pre-flight: passes on the demo workspace, and fails with a precise message for each broken input."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections import namedtuple
from pathlib import Path

import pytest
import torch
import yaml

from data_tools.config import load_config
from data_tools.text_tokenizer import TextTokenizer
from tests.checkpoint_factory import make_checkpoint, trained_state
from trainer.checkpoints import CheckpointManager, OutputDirLock, tokenizer_record
from trainer.options import parse_argv
from trainer.preflight import run_preflight

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def demo(tmp_path, demo_workspace):
    """Trainer option values for the demo run, writing into a fresh output dir of this test."""
    values = parse_argv(demo_workspace.train_argv(max_steps=20))
    values["output_dir"] = str(tmp_path / "run")
    return values


def _check(report, name):
    return next(c for c in report.checks if c.name == name)


def _failed(report) -> dict[str, str]:
    return {c.name: c.message for c in report.checks if not c.ok}


def test_preflight_passes_on_the_demo_workspace(demo):
    report = run_preflight(demo)
    assert report.ok, report.lines()
    names = [c.name for c in report.checks]
    for name in ("manifests", "tokenizer", "config", "data", "base checkpoint", "output directory", "resume",
                 "disk space"):
        assert name in names
    assert "296 items" in _check(report, "manifests").message
    assert "grows 1,000 -> 1,916" in _check(report, "base checkpoint").message
    assert report.resume_step is None and "fresh start" in _check(report, "resume").message
    assert not Path(demo["output_dir"]).exists()  # pre-flight writes nothing


def test_preflight_cli_exit_codes_and_json(tmp_path, demo_workspace, capsys):
    out = tmp_path / "run"
    argv = [*demo_workspace.train_argv(max_steps=20), "--output-dir", str(out)]
    report_path = tmp_path / "preflight.json"
    ok = subprocess.run([sys.executable, "-m", "trainer.train", *argv, "--preflight", "--preflight-json",
                         str(report_path)], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "[ok] tokenizer:" in ok.stdout
    payload = json.loads(report_path.read_text())
    assert payload["ok"] is True and {c["name"] for c in payload["checks"]} >= {"manifests", "resume"}
    from trainer.train import main as train_main

    capsys.readouterr()
    code = train_main([*argv, "--tokenizer", str(tmp_path / "none.model"), "--preflight"])
    bad = capsys.readouterr()
    assert code == 2
    assert "[FAIL] tokenizer: tokenizer not found" in bad.out
    assert bad.err.strip().splitlines() == ["error: pre-flight failed: tokenizer"]
    assert not out.exists()


Case = namedtuple("Case", "name check expected")


def _break(case: str, values: dict, tmp_path: Path, demo_workspace) -> None:
    data = tmp_path / "data"
    if case in ("manifest-missing", "manifest-malformed", "codes-missing"):
        shutil.copytree(demo_workspace.train_manifest.parent, data)
        manifest = data / "train.jsonl"
        values["train_manifest"] = [str(manifest)]
        if case == "manifest-missing":
            manifest.unlink()
        elif case == "manifest-malformed":
            lines = manifest.read_text(encoding="utf-8").splitlines()
            lines[2] = '{"id": "broken", "text": '
            manifest.write_text("\n".join(lines) + "\n", encoding="utf-8")
        else:
            first = json.loads(manifest.read_text(encoding="utf-8").splitlines()[0])
            (data / first["codes"]).unlink()
    elif case == "tokenizer-garbage":
        bad = tmp_path / "bad.model"
        bad.write_bytes(b"not a sentencepiece model")
        values["tokenizer"] = str(bad)
    elif case == "config-no-gpt":
        bad = tmp_path / "config.yaml"
        bad.write_text("dataset: {}\n")
        values["config"] = str(bad)
    elif case in ("base-mismatch", "base-random"):
        if case == "base-random":
            bad = tmp_path / "gpt.pth"
            bad.write_bytes(b"\x00\x01garbage" * 50)
            values["base_checkpoint"] = str(bad)
        else:
            config = yaml.safe_load(demo_workspace.config.read_text())
            config["gpt"]["number_text_tokens"] = 1200
            other = tmp_path / "config.yaml"
            other.write_text(yaml.safe_dump(config))
            values["config"] = str(other)
    elif case == "output-is-file":
        target = tmp_path / "file"
        target.write_text("x")
        values["output_dir"] = str(target)
    elif case == "resume-torn":
        out = Path(values["output_dir"])
        out.mkdir()
        for name in ("latest.pth", "model_step20.pth"):
            (out / name).write_bytes(b"")
        values["resume"] = "auto"
    elif case == "existing-run-no-resume":
        out = Path(values["output_dir"])
        out.mkdir()
        (out / "model_step20.pth").write_bytes(b"x")
    elif case == "device-fp16-on-cpu":
        values["amp"] = "fp16"


CASES = [
    Case("manifest-missing", "manifests", "train.jsonl: manifest not found"),
    Case("manifest-malformed", "manifests", "train.jsonl:3: malformed JSON"),
    Case("codes-missing", "manifests", "codes file not found"),
    Case("tokenizer-garbage", "tokenizer", "not a SentencePiece model"),
    Case("config-no-gpt", "config", "no 'gpt:' section"),
    Case("base-mismatch", "base checkpoint", "gpt.number_text_tokens 1200 means 1201 text rows, the checkpoint has 1001"),
    Case("base-random", "base checkpoint", "not a loadable checkpoint: not a PyTorch checkpoint"),
    Case("output-is-file", "output directory", "exists and is not a directory"),
    Case("resume-torn", "resume", "latest.pth: empty file (0 bytes)"),
    Case("existing-run-no-resume", "resume", "already holds checkpoints of a run"),
    Case("device-fp16-on-cpu", "device", "--amp fp16 needs a CUDA device"),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_preflight_fails_precisely_for_each_broken_input(tmp_path, demo, demo_workspace, case):
    if case.name == "device-fp16-on-cpu" and torch.cuda.is_available():
        pytest.skip("this machine has CUDA: fp16 is allowed")
    _break(case.name, demo, tmp_path, demo_workspace)
    report = run_preflight(demo)
    failed = _failed(report)
    assert not report.ok and list(failed) == [case.check], report.lines()
    assert case.expected in failed[case.check]


def _resumable_checkpoint(values: dict, workspace, **overrides) -> dict:
    tokenizer = TextTokenizer(workspace.extended_tokenizer)
    gpt = dict(load_config(workspace.config)["gpt"], number_text_tokens=tokenizer.vocab_size)
    return make_checkpoint(12, gpt=gpt, state=trained_state(gpt, steps=1),
                           tokenizer=tokenizer_record(workspace.extended_tokenizer), base_vocab_size=1000,
                           epoch=1, position=4, **overrides)


def test_preflight_reports_the_resume_point_and_changed_hyperparameters(demo, demo_workspace):
    CheckpointManager(demo["output_dir"], keep=2).save(_resumable_checkpoint(demo, demo_workspace), 12)
    demo["resume"] = "auto"
    report = run_preflight(demo)
    assert report.ok, report.lines()
    assert (report.resume_step, report.resume_epoch, report.resume_position) == (12, 1, 4)
    assert report.resume_path == Path(demo["output_dir"]) / "latest.pth"
    message = _check(report, "resume").message
    assert message.startswith("will resume from step 12, epoch 1, position 4")
    assert "learning_rate 0.001 -> 0.003" in message  # the checkpoint's hparams differ from the demo's flags


def test_preflight_refuses_resume_with_another_tokenizer(demo, demo_workspace):
    CheckpointManager(demo["output_dir"], keep=2).save(_resumable_checkpoint(demo, demo_workspace), 12)
    demo["resume"] = "auto"
    demo["tokenizer"] = str(demo_workspace.base_tokenizer)
    report = run_preflight(demo)
    failed = _failed(report)
    assert list(failed) == ["resume"] and "tokenizer differs" in failed["resume"]
    assert "--init-from" in failed["resume"]


def test_preflight_names_the_pid_holding_the_output_dir(demo):
    with OutputDirLock(demo["output_dir"]):
        report = run_preflight(demo)
    import os

    assert _failed(report) == {"output directory": f"output dir {demo['output_dir']} is in use by PID {os.getpid()} "
                                                   "(a trainer is running there)"}


def test_preflight_needs_room_for_three_checkpoints(demo, monkeypatch):
    from trainer import preflight

    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(preflight.shutil, "disk_usage", lambda _path: usage(10 << 20, 9 << 20, 1 << 20))
    report = run_preflight(demo)
    failed = _failed(report)
    assert list(failed) == ["disk space"]
    assert failed["disk space"].startswith("not enough disk: 1.0 MiB free")
    assert "3 checkpoints need ~" in failed["disk space"] and "1,8" in failed["disk space"]  # 1.8M parameters
