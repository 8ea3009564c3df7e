"""Run the trainer's pre-flight in a subprocess (the UI process never loads models or touches CUDA) and render it."""

from __future__ import annotations

import html
import json
import os
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from webui.jobs.supervisor import REPO_ROOT, child_env
from webui.training.training_form import preflight_argv

PREFLIGHT_TIMEOUT_S = 300.0


@dataclass
class PreflightResult:
    ok: bool
    checks: list[dict[str, Any]] = field(default_factory=list)  # {"name", "ok", "message"}
    resume_step: int | None = None
    resume_epoch: int | None = None
    resume_path: str | None = None
    error: str = ""  # why there is no report (refused flags, crash, timeout)
    exit_code: int | None = None

    @property
    def resume_line(self) -> str:
        if self.resume_step is None:
            return "fresh start (step 0)" if self.ok else ""
        epoch = f", epoch {self.resume_epoch}" if self.resume_epoch is not None else ""
        where = f" ({self.resume_path})" if self.resume_path else ""
        return f"will resume from step {self.resume_step}{epoch}{where}"


def _last_error_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error:")]
    return (errors or lines or [""])[-1]


def parse_report(data: dict[str, Any], exit_code: int | None) -> PreflightResult:
    checks = [
        {"name": str(c.get("name", "")), "ok": bool(c.get("ok")), "message": str(c.get("message", ""))}
        for c in data.get("checks") or []
        if isinstance(c, dict)
    ]
    return PreflightResult(
        ok=bool(data.get("ok")),
        checks=checks,
        resume_step=data.get("resume_step"),
        resume_epoch=data.get("resume_epoch"),
        resume_path=data.get("resume_path"),
        exit_code=exit_code,
    )


def run_preflight(values: dict[str, Any], timeout_s: float = PREFLIGHT_TIMEOUT_S) -> PreflightResult:
    fd, name = tempfile.mkstemp(prefix="preflight-", suffix=".json")
    os.close(fd)
    report = Path(name)
    try:
        report.unlink()
        argv = preflight_argv(values, report)
        try:
            done = subprocess.run(argv, cwd=REPO_ROOT, env=child_env(None), stdin=subprocess.DEVNULL,
                                  capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return PreflightResult(ok=False, error=f"pre-flight did not finish within {timeout_s:.0f} s")
        if report.is_file():
            try:
                return parse_report(json.loads(report.read_text(encoding="utf-8")), done.returncode)
            except ValueError as exc:
                return PreflightResult(ok=False, error=f"unreadable pre-flight report: {exc}",
                                       exit_code=done.returncode)
        message = _last_error_line(done.stderr) or _last_error_line(done.stdout) or "no report written"
        return PreflightResult(ok=False, error=message, exit_code=done.returncode)
    finally:
        report.unlink(missing_ok=True)


def preflight_html(result: PreflightResult) -> str:
    tone, label = ("#1f8f4e", "PRE-FLIGHT OK") if result.ok else ("#c0392b", "PRE-FLIGHT FAILED")
    parts = [
        f'<div id="preflight-verdict" data-ok="{str(result.ok).lower()}">'
        f'<span style="background:{tone};color:#fff;padding:2px 10px;border-radius:6px;font-weight:600;">'
        f"{label}</span> {html.escape(result.resume_line)}</div>"
    ]
    if result.error:
        code = f" (exit {result.exit_code})" if result.exit_code is not None else ""
        parts.append(f'<div class="status-bad">{html.escape(result.error)}{code}</div>')
    if result.checks:
        parts.append('<ul style="margin:4px 0;">')
        for check in result.checks:
            mark, color = ("✓", "#1f8f4e") if check["ok"] else ("✗", "#c0392b")
            parts.append(
                f'<li><span style="color:{color};font-weight:700;">{mark}</span> '
                f"<b>{html.escape(check['name'])}</b>: {html.escape(check['message'])}</li>"
            )
        parts.append("</ul>")
    return "".join(parts)
