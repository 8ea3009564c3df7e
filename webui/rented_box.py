"""One command on a rented GPU box: check the NVIDIA driver, install the matching torch build and the studio,
say what the card can train, and start the studio for the browser.

    python3 -m webui.rented_box [--share] [--password PW] [--port 7860] [--workspace workspace]

It runs with Python's standard library only (nothing is installed yet when it starts). The studio listens on
0.0.0.0 behind a login (app.py generates the password unless ``--password`` gives one) and, with ``--share``, also
through a public gradio.live link. Installation goes into ``--venv`` (default ``.venv`` in the checkout, as the
README's quick start) and is skipped on the next start while the torch build and requirements.txt are unchanged.
``--dry-run`` prints what it would run and runs nothing.

Exit codes: 0 (the studio ran and stopped), 2 refused (one ``error:`` line: a driver too old for every CUDA build,
a GPU asked for and none found, bad flags), 1 an install step failed (its command is named).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WHEEL_INDEX = "https://download.pytorch.org/whl/{build}"
# The CUDA builds PyTorch publishes for the pinned torch, newest first, with the oldest Linux driver that runs the
# build's CUDA toolkit at full support (NVIDIA's CUDA Toolkit release notes, table of minimum drivers).
CUDA_BUILDS: tuple[tuple[str, tuple[int, ...]], ...] = (
    ("cu130", (580, 65)), ("cu128", (570, 26)), ("cu126", (560, 28)))
QUERY_TIMEOUT_S = 30
INSTALL_TIMEOUT_S = 3600  # a cold pip install of torch + CUDA libraries on a slow mirror
STAMP = "studio-install.json"


class Refusal(Exception):
    """Nothing can be done as asked: one ``error:`` line, exit 2."""


@dataclass(frozen=True)
class Gpu:
    name: str
    memory_gb: int
    driver: str


@dataclass(frozen=True)
class Step:
    what: str
    argv: list[str]


def query_gpus(nvidia_smi: str = "nvidia-smi") -> list[Gpu]:
    """The GPUs the NVIDIA driver reports ([] without a driver)."""
    found = shutil.which(nvidia_smi)
    if found is None:
        return []
    try:
        done = subprocess.run([found, "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader,nounits"],
                              capture_output=True, text=True, timeout=QUERY_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise Refusal(f"{nvidia_smi} did not answer ({exc}): is the NVIDIA driver loaded?") from exc
    if done.returncode != 0:
        first = (done.stderr or done.stdout).strip().splitlines()[:1]
        raise Refusal(f"{nvidia_smi} failed: {first[0] if first else f'exit {done.returncode}'}")
    gpus = []
    for line in done.stdout.strip().splitlines():
        parts = [part.strip() for part in line.split(",")]
        if len(parts) != 3 or not parts[1].isdigit():
            raise Refusal(f"{nvidia_smi} printed a line this launcher cannot read: {line!r}")
        gpus.append(Gpu(name=parts[0], memory_gb=max(round(int(parts[1]) / 1024), 1), driver=parts[2]))
    return gpus


def driver_version(text: str) -> tuple[int, ...]:
    if not re.fullmatch(r"\d+(\.\d+)*", text):
        raise Refusal(f"cannot read the NVIDIA driver version {text!r}")
    return tuple(int(part) for part in text.split("."))


def cuda_build(driver: str) -> str:
    """The newest CUDA build of torch this driver runs, e.g. 'cu128'."""
    version = driver_version(driver)
    for build, oldest in CUDA_BUILDS:
        if version >= oldest:
            return build
    build, oldest = CUDA_BUILDS[-1]
    raise Refusal(f"the NVIDIA driver {driver} is older than any CUDA build of torch needs (the oldest, {build}, "
                  f"needs {'.'.join(map(str, oldest))}): update the driver, or pass --cpu")


def pinned_torch(requirements: Path) -> str:
    """The torch requirement line of requirements.txt, e.g. 'torch==2.13.0' (one source for the version)."""
    for line in requirements.read_text(encoding="utf-8").splitlines():
        if re.match(r"^torch\s*==", line.strip()):
            return line.strip()
    raise Refusal(f"{requirements} pins no torch version (expected a line 'torch==X.Y.Z')")


def install_stamp(torch_line: str, build: str, requirements: Path) -> dict[str, str]:
    digest = hashlib.sha256(requirements.read_bytes()).hexdigest()
    return {"torch": torch_line, "build": build, "requirements_sha256": digest}


def venv_python(venv: Path) -> Path:
    return venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def install_steps(venv: Path, torch_line: str, build: str, index: str | None) -> list[Step]:
    python = str(venv_python(venv))
    steps = [] if venv_python(venv).exists() else [Step("create the virtual environment",
                                                        [sys.executable, "-m", "venv", str(venv)])]
    wheel_index = index or WHEEL_INDEX.format(build=build)
    steps.append(Step(f"install {torch_line} ({build})",
                      [python, "-m", "pip", "install", torch_line, "--index-url", wheel_index]))
    steps.append(Step("install the studio's requirements",
                      [python, "-m", "pip", "install", "-r", str(REPO / "requirements.txt")]))
    return steps


def studio_step(venv: Path, args: argparse.Namespace) -> Step:
    argv = [str(venv_python(venv)), str(REPO / "app.py"), "--host", "0.0.0.0", "--port", str(args.port),
            "--workspace", str(args.workspace)]
    return Step("start the studio", argv + (["--share"] if args.share else []))


def addresses(port: int) -> list[str]:
    """Where a browser on another machine may reach the studio, and the SSH tunnel that always works."""
    hosts = set()
    try:
        for info in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET):
            host = str(info[4][0])
            if not host.startswith("127."):
                hosts.add(host)
    except OSError:
        pass
    lines = [f"http://{host}:{port}/  (if your provider opens port {port})" for host in sorted(hosts)]
    lines.append(f"or from your computer: ssh -L {port}:127.0.0.1:{port} <user>@<this box>, then "
                 f"http://127.0.0.1:{port}/")
    return lines


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python3 -m webui.rented_box", description=__doc__.splitlines()[0])
    parser.add_argument("--share", action="store_true", help="also serve through a public gradio.live link")
    parser.add_argument("--password", default=None, help="the login's password (user 'studio'; default: generated)")
    parser.add_argument("--port", type=int, default=7860)
    parser.add_argument("--workspace", type=Path, default=Path("workspace"))
    parser.add_argument("--venv", type=Path, default=REPO / ".venv", help="where the studio is installed")
    parser.add_argument("--cpu", action="store_true", help="install the CPU build of torch even with a GPU")
    parser.add_argument("--torch-index", default=None, metavar="URL", help="a wheel index instead of PyTorch's")
    parser.add_argument("--no-install", action="store_true", help="start with what --venv has")
    parser.add_argument("--dry-run", action="store_true", help="print what would run (JSON) and run nothing")
    return parser


def plan(args: argparse.Namespace, gpus: list[Gpu]) -> tuple[list[Step], dict[str, str], str]:
    """(steps, the install stamp, one line about the hardware)."""
    requirements = REPO / "requirements.txt"
    torch_line = pinned_torch(requirements)
    if args.cpu or not gpus:
        build = "cpu"
        about = "no NVIDIA GPU found: the CPU build (training will be slow)" if not gpus else "the CPU build, as asked"
    else:
        build = cuda_build(gpus[0].driver)
        about = ", ".join(f"{gpu.name} ({gpu.memory_gb} GB)" for gpu in gpus) + f", driver {gpus[0].driver}: {build}"
    stamp = install_stamp(torch_line, build, requirements)
    installed = _read_stamp(args.venv) == stamp and venv_python(args.venv).exists()
    steps = [] if args.no_install or installed else install_steps(args.venv, torch_line, build, args.torch_index)
    if gpus and not args.cpu:
        steps.append(Step("what this card can train", [str(venv_python(args.venv)), "-m", "webui.training.card_fit",
                                                       "--gpu-gb", str(gpus[0].memory_gb)]))
    steps.append(studio_step(args.venv, args))
    return steps, stamp, about


def _read_stamp(venv: Path) -> dict[str, str] | None:
    try:
        value = json.loads((venv / STAMP).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def _write_stamp(venv: Path, stamp: dict[str, str]) -> None:
    target = venv / STAMP
    partial = target.with_suffix(".partial")
    partial.write_text(json.dumps(stamp, indent=2) + "\n", encoding="utf-8")
    os.replace(partial, target)


def run(args: argparse.Namespace) -> int:
    if args.port < 1 or args.port > 65535:
        raise Refusal(f"--port {args.port} is not a port (1 to 65535)")
    steps, stamp, about = plan(args, query_gpus())
    if args.dry_run:
        print(json.dumps({"hardware": about, "steps": [{"what": s.what, "argv": s.argv} for s in steps]}, indent=2))
        return 0
    print(f"this box: {about}", flush=True)
    *before, studio = steps
    for step in before:
        print(f"-> {step.what}: {' '.join(step.argv)}", flush=True)
        try:
            done = subprocess.run(step.argv, timeout=INSTALL_TIMEOUT_S, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            print(f"error: {step.what} failed: {exc}", file=sys.stderr)
            return 1
        if done.returncode != 0:
            print(f"error: {step.what} failed (exit {done.returncode}): {' '.join(step.argv)}", file=sys.stderr)
            return 1
        if step.what == "install the studio's requirements":
            _write_stamp(args.venv, stamp)
    print("the studio will answer at:\n  " + "\n  ".join(addresses(args.port)), flush=True)
    environ = dict(os.environ)
    if args.password:
        environ["STUDIO_AUTH"] = f"studio:{args.password}"  # not on the command line, where ps shows it
    os.execve(studio.argv[0], studio.argv, environ)  # the studio takes over: Ctrl-C stops it as usual
    return 0  # not reached


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return run(args)
    except Refusal as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
