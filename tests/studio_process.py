"""Run ``app.py`` as a subprocess for tests: free port, wait until it answers, stop it (no sleeps as sync)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

from webui.jobs.process_tools import wait_until

REPO = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def http_status(url: str, timeout_s: float = 5.0) -> int | None:
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except (urllib.error.URLError, OSError):
        return None


class StudioProcess:
    """``python app.py --workspace W --port P ...`` with stdout+stderr in ``log_path``."""

    def __init__(self, workspace: Path, log_path: Path, *args: str, env: dict[str, str] | None = None,
                 port: int | None = None) -> None:
        self.workspace = workspace
        self.port = port or free_port()
        self.log_path = log_path
        self.url = f"http://127.0.0.1:{self.port}/"
        merged = {k: v for k, v in os.environ.items() if k != "STUDIO_AUTH"}  # only the test's own login
        merged.update({"PYTHONUNBUFFERED": "1", "GRADIO_ANALYTICS_ENABLED": "False", **(env or {})})
        with open(log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, str(REPO / "app.py"), "--workspace", str(workspace), "--port", str(self.port),
                 *args],
                cwd=REPO, env=merged, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            )

    def output(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def wait_ready(self, timeout_s: float = 120.0) -> None:
        ready = wait_until(lambda: self.proc.poll() is not None or "studio running at" in self.output(),
                           timeout_s, interval_s=0.2)
        if self.proc.poll() is not None:
            raise RuntimeError(f"app.py exited with {self.proc.returncode}:\n{self.output()}")
        if not ready or not wait_until(lambda: http_status(self.url) is not None, 30.0, interval_s=0.2):
            raise RuntimeError(f"app.py did not answer within {timeout_s:.0f} s:\n{self.output()}")

    def stop(self, timeout_s: float = 20.0) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=timeout_s)

    def __enter__(self) -> StudioProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
