"""Helpers for the trainer tests: small slices of the demo workspace and ways to run the trainer.

In-process runs (``run_main``) are fast (torch is already imported) and are used wherever the test does
not need a separate process; SIGKILL and two-trainer tests use ``run_cli`` (a real ``python -m``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

REPO = Path(__file__).resolve().parents[1]
CLI_TIMEOUT_S = 300


def subset_manifest(source: Path, target: Path, count: int, shortest: bool = True) -> Path:
    """``count`` entries of ``source`` (the shortest by codes when asked), paths made absolute."""
    import numpy as np

    rows = []
    for line in source.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        obj = json.loads(line)
        for key in ("codes", "cond_mel"):
            obj[key] = str((source.parent / obj[key]).resolve())
        rows.append(obj)
    if shortest:
        rows.sort(key=lambda o: (len(np.load(o["codes"])), o["id"]))
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("".join(json.dumps(o, ensure_ascii=False) + "\n" for o in rows[:count]), encoding="utf-8")
    return target


def tiny_args(ws: Any, data: Mapping[str, Path], out: Path, **overrides: Any) -> list[str]:
    """Trainer argv for a fast CPU run on slices of the demo workspace; overrides use option names."""
    values: dict[str, Any] = {
        "train_manifest": str(data["train"]), "val_manifest": str(data["val"]),
        "tokenizer": str(ws.extended_tokenizer), "config": str(ws.config),
        "base_checkpoint": str(ws.base_checkpoint), "output_dir": str(out),
        "max_steps": 8, "batch_size": 2, "grad_accumulation": 1, "learning_rate": 3e-3, "warmup_steps": 3,
        "log_interval": 1, "val_interval": 1000, "save_interval": 2, "max_val_batches": 2,
        "num_workers": 0, "device": "cpu", "amp": "off", "resume": "auto", "keep_checkpoints": 10,
    }
    values.update(overrides)
    argv: list[str] = []
    for name, value in values.items():
        if value is None:
            continue
        flag = "--" + name.replace("_", "-")
        if isinstance(value, bool):
            argv.append(flag if value else "--no-" + flag[2:])
        else:
            argv += [flag, str(value)]
    return argv


def run_main(argv: list[str]) -> int:
    """Run the trainer in this process on one thread; returns its exit code."""
    from trainer.train import main

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return main(argv)
    finally:
        torch.set_num_threads(threads)


def run_cli(argv: list[str], env: Mapping[str, str] | None = None, timeout: float = CLI_TIMEOUT_S
            ) -> subprocess.CompletedProcess:
    # One thread per trainer: tiny models gain nothing from more, and on a busy 2-core CI machine
    # contended intra-op threads make every step many times slower.
    full_env = {**os.environ, "OMP_NUM_THREADS": "1", **(env or {})}
    if any(key.startswith("STUDIO_TEST_") for key in env or {}):
        full_env["STUDIO_TEST_HOOKS"] = "1"  # the trainer's second guard on its fault-injection hooks
    return subprocess.run([sys.executable, "-m", "trainer.train", *argv], cwd=REPO, env=full_env,
                          capture_output=True, text=True, timeout=timeout)


def events(out: Path, kind: str | None = None) -> list[dict[str, Any]]:
    path = out / "metrics.jsonl"
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [row for row in rows if kind is None or row["event"] == kind]


def step_losses(out: Path) -> dict[int, float]:
    """Full-precision training loss of every step recorded in metrics.jsonl."""
    losses: dict[int, float] = {}
    for row in events(out, "train"):
        losses.update({int(step): loss for step, loss in row["losses"].items()})
    return losses


def load(path: Path) -> dict[str, Any]:
    return torch.load(path, weights_only=True, map_location="cpu")


def assert_same_training_state(a: dict[str, Any], b: dict[str, Any]) -> None:
    """Bitwise-equal model and optimizer tensors, and the same step/epoch/position."""
    assert (a["step"], a["epoch"], a["position"]) == (b["step"], b["epoch"], b["position"])
    assert a["model"].keys() == b["model"].keys()
    for key in a["model"]:
        assert torch.equal(a["model"][key], b["model"][key]), key
    sa, sb = a["optimizer"]["state"], b["optimizer"]["state"]
    assert sa.keys() == sb.keys()
    for index in sa:
        for name, value in sa[index].items():
            other = sb[index][name]
            assert torch.equal(value, other) if isinstance(value, torch.Tensor) else value == other, (index, name)
    assert a["optimizer"]["param_groups"] == b["optimizer"]["param_groups"]
    assert a["scheduler"] == b["scheduler"]
