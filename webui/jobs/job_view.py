"""A background job as the tabs show it: status line, progress from the log's tqdm bar, and the log tail.

The job itself runs under the studio's supervisor (``ctx.run_background``); this module only reads
what the supervisor reports, so it has no Gradio and no processes of its own. An ended job whose log holds a
summary line (``data_tools.job_summary``: what a preparation prepared and left out) shows it in its badge,
"FINISHED 7 prepared, 3 left out (too long)", in the warning colour when items were left out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from data_tools.job_summary import last_summary
from webui.plots import badge_html

# tqdm's default bar: "desc:  45%|####5     | 45/100 [00:03<00:04, 12.3it/s]" (the percent may be absent
# when the total is unknown: "desc: 45it [00:03, 12.3it/s]").
_TQDM_FRACTION = re.compile(r"(\d+(?:\.\d+)?)([kMG]?)/(\d+(?:\.\d+)?)([kMG]?)\s*\[")
_SCALE = {"": 1, "k": 1_000, "M": 1_000_000, "G": 1_000_000_000}
_ENDED = ("finished", "failed", "stopped", "killed")
_STATE_TONES = {"running": "info", "finished": "ok", "stopped": "warn", "failed": "error", "killed": "error",
                "idle": "info"}


def progress_from_log(tail: str) -> tuple[int, int] | None:
    """(done, total) of the last tqdm bar in the log tail, or None when there is none."""
    found = None
    for match in _TQDM_FRACTION.finditer(tail):
        found = match
    if found is None:
        return None
    done = float(found.group(1)) * _SCALE[found.group(2)]
    total = float(found.group(3)) * _SCALE[found.group(4)]
    if total <= 0:
        return None
    return int(done), int(total)


def progress_html(progress: tuple[int, int] | None, state: str) -> str:
    """A progress bar (HTML) with ``done / total``; full and green when the job finished."""
    if progress is None:
        if state == "finished":
            progress = (1, 1)
        else:
            return ""
    done, total = progress
    percent = max(0.0, min(100.0, 100.0 * done / total)) if total else 0.0
    color = "#1f8f4e" if state == "finished" else ("#c0392b" if state in ("failed", "killed") else "#2e86de")
    return (
        f'<div class="studio-progress" data-done="{done}" data-total="{total}">'
        f'<div style="background:#e5e8eb;border-radius:6px;height:14px;overflow:hidden;">'
        f'<div style="width:{percent:.1f}%;background:{color};height:14px;"></div></div>'
        f'<span style="font-size:0.9em;">{done} / {total} ({percent:.0f}%)</span></div>'
    )


@dataclass(frozen=True)
class JobView:
    status: str  # HTML badge: state + summary line
    progress: str  # HTML progress bar ('' when unknown)
    log: str  # the log tail (bounded)
    running: bool


def job_view(status: object, log_tail: str) -> JobView:
    """Turn a supervisor RunStatus (duck-typed: state, summary, running) and a log tail into what to show."""
    state = str(getattr(status, "state", "idle"))
    summary = str(getattr(status, "summary", state))
    running = bool(getattr(status, "running", False))
    tone = _STATE_TONES.get(state, "info")
    told = last_summary(log_tail) if state in _ENDED else None
    if told is not None:
        summary = told.text() if state == "finished" else f"{told.text()}; {summary}"
        tone = "warn" if state == "finished" and told.left_out_total else tone
    badge = badge_html(state.upper(), summary, tone)
    return JobView(status=badge, progress=progress_html(progress_from_log(log_tail), state), log=log_tail,
                   running=running)
