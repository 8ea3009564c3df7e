"""Stop to STOPPED on the demo, with samples at every save against the same run without samples.

    python bench/stop_time.py [--generation 1.5|2|2.5] [--repeats 3] [--workspace DIR]

The demo's training command runs under the studio's supervisor (its own session, SIGINT on Stop, as the
Training tab does), with ``--save-interval 5``. Each round waits for a committed save (metrics.jsonl's ``save``
event): with samples on, that is the moment its samples start to be spoken, the worst moment to press Stop.
It then calls ``RunSupervisor.stop()`` and times until the run is STOPPED (every process gone, exit 130).
The baseline is the same command without samples, stopped at the same point; rounds alternate, so both
see the same machine. Before issue 28 the stopping save spoke its samples first (42 s on a CPU); now the
stop is committed and the samples are owed. Headline: the median with samples (goal < 10 s), and its
ratio to the baseline's.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.report import headline  # noqa: E402
from demo.data import demo_train_argv  # noqa: E402
from webui.jobs.process_tools import wait_until  # noqa: E402
from webui.jobs.supervisor import RunSupervisor  # noqa: E402

GOAL_S = 10.0
SAVE_WAIT_S = 600.0


def demo_command(workspace: Path, generation: str, out: Path, samples: bool) -> list[str]:
    """The demo's training argv for ``generation`` into ``out``, with or without samples at saves."""
    from generations.indextts2.demo.build import DemoPaths as DemoV2Paths
    from generations.indextts15.demo.build import DemoPaths
    from generations.indextts25.demo.build import DemoPaths as DemoV25Paths

    if generation == "1.5":
        paths = DemoPaths.under(workspace)
        extra: tuple[str, ...] = ("--vocoder", str(paths.vocoder)) if samples else ()
        flags = demo_train_argv(paths.train_manifest, paths.val_manifest, paths.extended_tokenizer, paths.config,
                                paths.base_checkpoint, out, 1000, extra)
    else:
        paired = DemoV2Paths.under(workspace) if generation == "2" else DemoV25Paths.under(workspace)
        tokenizer = paired.extended_tokenizer if generation == "2" else paired.tokenizer
        extra = paired.sample_args() if samples else ()
        if generation == "2.5":
            extra = ("--text-scheme", "merges", *extra)
        flags = demo_train_argv(paired.train_manifest, paired.val_manifest, tokenizer, paired.config,
                                paired.base_checkpoint, out, 1000, extra)
    flags += ["--save-interval", "5", "--val-interval", "1000", "--log-interval", "1"]
    return [sys.executable, "-m", "trainer.train", *flags]


def _saved(out: Path) -> bool:
    try:
        lines = (out / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
    except OSError:
        return False
    for line in lines:
        try:
            if json.loads(line).get("event") == "save":
                return True
        except ValueError:
            continue
    return False


def one_stop(workspace: Path, generation: str, samples: bool, scratch: Path, index: int) -> float:
    """Seconds from Stop to STOPPED for one run stopped right after its first committed save."""
    out = scratch / f"{'samples' if samples else 'plain'}_{index}"
    supervisor = RunSupervisor(out)
    supervisor.start(demo_command(workspace, generation, out, samples), cwd=REPO,
                     env={**os.environ, "OMP_NUM_THREADS": "2"}, label="bench stop")
    try:
        if not wait_until(lambda: _saved(out) or not supervisor.poll().running, SAVE_WAIT_S, interval_s=0.05):
            raise RuntimeError(f"no save within {SAVE_WAIT_S:.0f} s: see {out / 'console.log'}")
        if not supervisor.poll().running:
            raise RuntimeError(f"the run ended before it was stopped: see {out / 'console.log'}")
        started = time.perf_counter()
        status = supervisor.stop(grace_s=120.0)
        seconds = time.perf_counter() - started
    finally:
        if supervisor.poll().running:
            supervisor.stop(grace_s=5.0, term_s=5.0, kill_s=5.0)
    if status.state != "stopped":
        raise RuntimeError(f"the run ended {status.state} ({status.summary}): see {out / 'console.log'}")
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--generation", choices=("1.5", "2", "2.5"), default="2")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workspace", type=Path, help="a demo workspace (default: one built in a scratch folder)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="stop_time_") as tmp:
        scratch = Path(tmp)
        workspace = args.workspace
        if workspace is None:
            from demo.workspace import build_demo

            workspace = scratch / "demo"
            build_demo(workspace)
        timings: dict[bool, list[float]] = {True: [], False: []}
        for index in range(args.repeats):
            for samples in (True, False):
                seconds = one_stop(workspace, args.generation, samples, scratch, index)
                timings[samples].append(seconds)
                print(f"round {index + 1}: {'samples on ' if samples else 'no samples'} stop -> STOPPED "
                      f"{seconds:.2f} s", flush=True)
    voiced, plain = statistics.median(timings[True]), statistics.median(timings[False])
    print(f"IndexTTS {args.generation} demo, stop right after a committed save (median of {args.repeats}):")
    print(f"  {'samples on':<12} {voiced:8.2f} s")
    print(f"  {'no samples':<12} {plain:8.2f} s   (baseline)")
    headline("stop_time", f"Stop to STOPPED with samples on (IndexTTS {args.generation} demo)", voiced, "s",
             goal=f"< {GOAL_S:.0f} s", met=voiced < GOAL_S, note=f"baseline without samples {plain:.2f} s")
    headline("stop_time", "Stop time with samples / without", voiced / plain if plain > 0 else float("nan"), "x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
