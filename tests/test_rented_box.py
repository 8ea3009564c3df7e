"""The rented-box launcher (python3 -m webui.rented_box), run as a user runs it, with stand-ins: an nvidia-smi that
prints a chosen card and driver, and a virtual environment whose python records what it was asked to run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TIMEOUT_S = 60


def _script(path: Path, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + body, encoding="utf-8")
    path.chmod(0o755)
    return path


def _driver(tmp_path: Path, line: str) -> Path:
    """A bin folder whose nvidia-smi prints one GPU line (name, MiB, driver) as the real query does."""
    _script(tmp_path / "bin" / "nvidia-smi", f"echo '{line}'\n")
    return tmp_path / "bin"


def _launch(tmp_path: Path, bin_dir: Path | None, *flags: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": os.pathsep.join([*([str(bin_dir)] if bin_dir else []), "/usr/bin", "/bin"])}
    env.pop("STUDIO_AUTH", None)
    return subprocess.run([sys.executable, "-m", "webui.rented_box", "--workspace", str(tmp_path / "ws"), *flags],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)


def _dry(tmp_path: Path, bin_dir: Path | None, *flags: str) -> dict:
    done = _launch(tmp_path, bin_dir, "--venv", str(tmp_path / "venv"), "--dry-run", *flags)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _pinned_torch() -> str:
    return next(line.strip() for line in (REPO / "requirements.txt").read_text().splitlines()
                if line.startswith("torch=="))


def test_a_recent_driver_gets_the_newest_cuda_build_it_runs_and_the_studio_on_all_interfaces(tmp_path: Path):
    plan = _dry(tmp_path, _driver(tmp_path, "NVIDIA A100-SXM4-40GB, 40960, 570.86.15"), "--share")
    argvs = [step["argv"] for step in plan["steps"]]
    assert argvs[0][1:4] == ["-m", "venv", str(tmp_path / "venv")]
    torch_install = next(a for a in argvs if _pinned_torch() in a)
    assert torch_install[-2:] == ["--index-url", "https://download.pytorch.org/whl/cu128"]
    assert any(a[-2:] == ["-r", str(REPO / "requirements.txt")] for a in argvs)
    assert argvs[-2][1:] == ["-m", "webui.training.card_fit", "--gpu-gb", "40"]
    studio = argvs[-1]
    assert studio[1] == str(REPO / "app.py") and studio[studio.index("--host") + 1] == "0.0.0.0"
    assert "--share" in studio and "A100" in plan["hardware"] and "cu128" in plan["hardware"]
    newer = _dry(tmp_path, _driver(tmp_path, "NVIDIA H100 80GB HBM3, 81559, 580.95.05"))
    assert any(step["argv"][-1].endswith("/cu130") for step in newer["steps"])
    assert "--share" not in newer["steps"][-1]["argv"]


def test_without_a_driver_the_cpu_build_and_with_an_old_one_a_one_line_refusal(tmp_path: Path):
    plan = _dry(tmp_path, None)
    assert any(step["argv"][-1].endswith("/whl/cpu") for step in plan["steps"])
    assert "no NVIDIA GPU" in plan["hardware"] and not any("card_fit" in step["argv"] for step in plan["steps"])
    old = _launch(tmp_path, _driver(tmp_path, "Tesla T4, 15360, 470.57.02"), "--dry-run")
    assert old.returncode == 2 and old.stdout == ""
    assert old.stderr.count("\n") == 1 and "driver 470.57.02" in old.stderr and "--cpu" in old.stderr
    garbled = _launch(tmp_path, _driver(tmp_path, "NVIDIA-SMI has failed"), "--dry-run")
    assert garbled.returncode == 2 and "cannot read" in garbled.stderr


@pytest.fixture
def recording_venv(tmp_path: Path) -> tuple[Path, Path]:
    """A venv whose python appends its argv (and the login it was given) to a log; 'pip' fails while FAIL exists."""
    venv, log = tmp_path / "venv", tmp_path / "ran.log"
    _script(venv / "bin" / "python",
            f'if [ -e "{tmp_path}/FAIL" ] && [ "$2" = pip ]; then exit 3; fi\n'
            f'echo "$* | auth=$STUDIO_AUTH" >> "{log}"\n')
    return venv, log


def test_it_installs_once_then_starts_the_studio_with_the_password_out_of_sight(tmp_path: Path, recording_venv):
    venv, log = recording_venv
    bin_dir = _driver(tmp_path, "Tesla T4, 15360, 570.172.08")
    done = _launch(tmp_path, bin_dir, "--venv", str(venv), "--password", "s3cret-pw", "--port", "7999")
    assert done.returncode == 0, done.stderr
    ran = log.read_text().splitlines()
    assert [line.split()[1] for line in ran[:2]] == ["pip", "pip"] and _pinned_torch() in ran[0]
    assert "card_fit --gpu-gb 15" in ran[2]
    studio = ran[3]
    assert "app.py --host 0.0.0.0 --port 7999" in studio and "s3cret-pw" not in studio.split("|")[0]
    assert studio.endswith("auth=studio:s3cret-pw")
    assert "ssh -L 7999:127.0.0.1:7999" in done.stdout
    log.unlink()
    again = _launch(tmp_path, bin_dir, "--venv", str(venv))
    assert again.returncode == 0, again.stderr
    assert [line for line in log.read_text().splitlines() if " pip " in f" {line}"] == []  # installed: skipped
    last = log.read_text().splitlines()[-1]
    assert "app.py" in last and last.endswith("auth=")  # no --password: app.py makes one and prints it


def test_a_failing_install_names_its_step_and_starts_nothing(tmp_path: Path, recording_venv):
    venv, log = recording_venv
    (tmp_path / "FAIL").touch()
    done = _launch(tmp_path, _driver(tmp_path, "Tesla T4, 15360, 570.172.08"), "--venv", str(venv))
    assert done.returncode == 1 and done.stderr.count("\n") == 1
    assert "install torch==" in done.stderr and "exit 3" in done.stderr
    assert not log.exists() and not (venv / "studio-install.json").exists()
