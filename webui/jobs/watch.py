"""Watch a run the studio did not start (Slurm, SkyPilot, a shell): its state, log, curves and progress, read
from the files in its output folder, never written to.

The state comes from the folder alone: the trainer's last ``start``/``resume``/``end`` event in metrics.jsonl
(an elastic restart writes ``end`` for the lost group, then ``resume``), the output-dir lock (held while a trainer
on this machine runs; see ``trainer.checkpoints.lock``) and how long ago metrics.jsonl last grew. The log is
console.log when the studio started the run, else the newest local rank 0 ``stdout.log`` torchrun keeps under
``<output-dir>/ranks`` (``--log-dir <output-dir>/ranks --tee 3``, as README's recipes pass). The curves and the
progress bar are the Training tab's own readers (``MetricsReader``, ``progress_html``). There is no Stop: the
run belongs to whatever started it.
"""

from __future__ import annotations

import html
import time
from dataclasses import dataclass, field
from pathlib import Path

from data_tools.paths import PathError, expand_path
from trainer.checkpoints import lock_holder
from trainer.elastic import last_lifecycle_event
from webui.jobs import launcher, rank_logs
from webui.jobs.logtail import LogTail
from webui.jobs.run_record import CONSOLE_LOG
from webui.training.metrics_view import METRICS_FILE, MetricsReader, progress_html

QUIET_S = 300.0  # metrics.jsonl silent this long, no end event and no lock held here: "quiet", not "running"
_COLORS = {"running": "#2e86de", "finished": "#1f8f4e", "stopped": "#c98a00", "failed": "#c0392b",
           "quiet": "#5b6b7b", "waiting": "#5b6b7b"}


class WatchError(ValueError):
    """A folder that cannot be watched; the message is one line saying what and where."""


@dataclass
class Watch:
    folder: Path
    metrics: MetricsReader
    log: LogTail | None = None
    log_path: Path | None = None
    seen: dict[str, str] = field(default_factory=dict)  # what the page was last sent, per output


@dataclass(frozen=True)
class WatchTick:
    """One poll: each output is None when it did not change since the last tick."""

    status: str | None
    progress: str | None
    log: str | None
    metrics_changed: bool
    running: bool


def open_watch(folder_text: str) -> Watch:
    """A watch of the run folder ``folder_text``; WatchError when it is not one."""
    text = (folder_text or "").strip()
    if not text:
        raise WatchError("watch: enter the output folder of a run")
    try:
        folder = expand_path(text, "run folder").resolve()
    except PathError as exc:
        raise WatchError(str(exc)) from None
    if not folder.is_dir():
        raise WatchError(f"watch: {folder} is not a folder")
    markers = (METRICS_FILE, "train_config.yaml", CONSOLE_LOG, launcher.RANKS_DIR)
    if not any((folder / name).exists() for name in markers):
        raise WatchError(f"watch: {folder} holds no run yet (no {METRICS_FILE}, train_config.yaml or ranks/); "
                         "pass the trainer's --output-dir")
    return Watch(folder=folder, metrics=MetricsReader(folder))


def run_state(folder: Path, now: float | None = None) -> tuple[str, str]:
    """(state, one line) of the run in ``folder``: running, finished, stopped, failed, quiet or waiting."""
    event = last_lifecycle_event(folder)
    holder = lock_holder(folder)
    try:
        written = (folder / METRICS_FILE).stat().st_mtime
    except OSError:
        written = None
    age = None if written is None else (time.time() if now is None else now) - written
    if event is not None and event.get("event") == "end":
        status = str(event.get("status") or "")
        state = {"completed": "finished", "stopped": "stopped"}.get(status, "failed")
        error = f": {event.get('error')}" if event.get("error") else ""
        line = f"ended at step {event.get('step')} ({status or 'no status'}{error})"
        if holder is not None or (age is not None and age < QUIET_S and state == "failed"):
            return "running", f"{line}; a restart may follow (elastic runs resume from the last checkpoint)"
        return state, line
    if holder is not None:
        return "running", f"a trainer holds the folder (pid {holder or 'unknown'} on this machine)"
    if event is None:
        return "waiting", "no training event yet"
    if age is not None and age < QUIET_S:
        # A clock time, not "N s ago": the line then changes only when the run writes, so a tick sends nothing.
        return "running", f"metrics last written at {_clock(written)} (by a trainer on another machine, or this one)"
    return "quiet", (f"no end event and nothing written since {_clock(written)}: still starting, stalled, or ended "
                     "without a word (a killed job)" if written is not None else "no metrics file")


def _clock(stamp: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(stamp))


def status_html(folder: Path, state: str, line: str) -> str:
    color = _COLORS.get(state, "#5b6b7b")
    return (f'<div id="watch-status-line" data-state="{state}">'
            f'<span style="background:{color};color:#fff;padding:2px 10px;border-radius:6px;font-weight:600;">'
            f"{state.upper()}</span> <span>{html.escape(line)}</span></div>"
            f"<div><small>watching <code>{html.escape(str(folder))}</code>, read-only: this studio did not start "
            "the run, so it cannot stop it (stop it where it was started: scancel, sky cancel, Ctrl-C)</small></div>")


def _follow_log(watch: Watch) -> bool:
    """Point the watch's log at the run's current log file; True when it changed files."""
    console = watch.folder / CONSOLE_LOG
    path = console if console.is_file() else rank_logs.newest_rank0_log(watch.folder)
    if path == watch.log_path:
        return False
    watch.log_path = path
    watch.log = LogTail.for_run(path, 0) if path is not None else None
    return True


def log_text(watch: Watch) -> str:
    if watch.log is None:
        return (f"(no log in {watch.folder}: a run started with torchrun's --log-dir {watch.folder}/ranks --tee 3 "
                "shows its rank 0 log here)")
    return f"[{watch.log_path}]\n{watch.log.text()}"


def poll_watch(watch: Watch, now: float | None = None) -> WatchTick:
    """One timer tick: what changed in the folder since the last one."""
    switched = _follow_log(watch)
    log_changed = (watch.log.poll() if watch.log is not None else False) or switched
    metrics_changed = watch.metrics.poll()
    state, line = run_state(watch.folder, now)
    running = state == "running"
    outputs = {"status": status_html(watch.folder, state, line),
               "progress": progress_html(watch.metrics.progress_event, running, watch.metrics.eta_s),
               "log": log_text(watch) if (log_changed or "log" not in watch.seen) else watch.seen["log"]}
    changed = {key: value for key, value in outputs.items() if watch.seen.get(key) != value}
    watch.seen.update(outputs)
    return WatchTick(status=changed.get("status"), progress=changed.get("progress"), log=changed.get("log"),
                     metrics_changed=metrics_changed, running=running)
