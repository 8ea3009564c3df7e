"""Which logs a run has to show: its console.log (rank 0, the default) and, under torchrun, every rank's files.

torchrun (``--log-dir <output-dir>/ranks --tee 3``, see ``webui.jobs.launcher``) writes each local rank's
streams to ``<output-dir>/ranks/<rendezvous id>_<random>/attempt_<k>/<local rank>/{stdout,stderr}.log``
(torch 2.13's layout: one folder per launch, one ``attempt_<k>`` per restart). A source is named by rank
and stream (``"1/stderr"``), not by path, so a choice still means the same rank when a new run starts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from webui.jobs import launcher
from webui.jobs.run_record import CONSOLE_LOG

CONSOLE = "console"
STREAMS = ("stdout", "stderr")
_ATTEMPT = re.compile(r"^attempt_(\d+)$")
_CLOCK_SLACK_S = 2.0  # the launch folder is made a moment after run.json records the start


@dataclass(frozen=True)
class LogSource:
    value: str  # CONSOLE or "<local rank>/<stream>"
    label: str
    path: Path


def _newest_attempt(ranks: Path, since_epoch: float | None) -> Path | None:
    """The newest attempt folder of the newest launch folder made since the run started."""
    try:
        launches = [d for d in ranks.iterdir() if d.is_dir()]
    except OSError:
        return None
    launches = [d for d in launches if since_epoch is None or d.stat().st_mtime >= since_epoch - _CLOCK_SLACK_S]
    if not launches:
        return None
    return _newest_attempt_of(max(launches, key=lambda d: d.stat().st_mtime))


def log_sources(output_dir: Path, argv: tuple[str, ...] | list[str], since_epoch: float | None) -> list[LogSource]:
    """The console first, then each local rank's stdout and stderr of the run started by ``argv``."""
    console = Path(output_dir) / CONSOLE_LOG
    split = launcher.split_command(argv) if launcher.is_launch_command(argv) else None
    if split is None:
        return [LogSource(CONSOLE, "console.log", console)]
    launch = split[0]
    rank = "local rank" if launch.nnodes > 1 else "rank"
    sources = [LogSource(CONSOLE, f"{rank} 0 · console.log", console)]
    attempt = _newest_attempt(Path(output_dir) / launcher.RANKS_DIR, since_epoch)
    if attempt is None:
        return sources
    local_ranks = sorted(int(d.name) for d in attempt.iterdir() if d.is_dir() and d.name.isdigit())
    for local in local_ranks:
        for stream in STREAMS:
            path = attempt / str(local) / f"{stream}.log"
            sources.append(LogSource(f"{local}/{stream}", f"{rank} {local} · {stream}", path))
    return sources


def empty_note(source: LogSource) -> str:
    """What the log box says for a rank file with nothing in it yet."""
    return (f"[{source.label}: {source.path}]\n(nothing written yet: only rank 0 prints the training log; "
            "the other ranks print warnings and errors only)")


def newest_rank0_log(output_dir: Path) -> Path | None:
    """The local rank 0 ``stdout.log`` written most recently under ``<output-dir>/ranks`` (any launch, its newest
    attempt), or None. With several nodes logging into one shared folder, global rank 0 prints every step, so its
    file is the one written last."""
    try:
        launches = [d for d in (Path(output_dir) / launcher.RANKS_DIR).iterdir() if d.is_dir()]
    except OSError:
        return None
    logs: list[tuple[float, Path]] = []
    for launch in launches:
        attempt = _newest_attempt_of(launch)
        if attempt is None:
            continue
        path = attempt / "0" / "stdout.log"
        try:
            logs.append((path.stat().st_mtime, path))
        except OSError:
            continue  # no such file (yet), or removed meanwhile
    return max(logs)[1] if logs else None


def _newest_attempt_of(launch: Path) -> Path | None:
    try:
        attempts = [(int(m.group(1)), d) for d in launch.iterdir() if (m := _ATTEMPT.match(d.name)) and d.is_dir()]
    except OSError:
        return None
    return max(attempts)[1] if attempts else None
