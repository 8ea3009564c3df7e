"""Run every benchmark at a CPU-friendly size and write their headlines into README's results table.

    python bench/run_all.py [--only NAME ...] [--no-readme] [--timeout 300]

Each benchmark runs as its own process (so one that fails or runs out of time costs only its row) with
``BENCH_RESULTS`` pointing at a file where ``bench.report.headline`` records its numbers. The table,
with the machine it ran on, replaces the text between the ``bench:results`` markers in README.md.
A benchmark that needs what this machine lacks (a GPU, Chromium) gets a row saying so.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
START, END = "<!-- bench:results:start -->", "<!-- bench:results:end -->"


@dataclass(frozen=True)
class Bench:
    name: str
    args: list[str] = field(default_factory=list)
    needs: str = ""  # "cuda" or "chromium": skipped with a row saying so where absent


# Sizes chosen so the whole set runs in well under 10 minutes on a 2-core CPU machine.
BENCHES = [
    Bench("train_throughput", ["--steps", "30", "--repeats", "3", "--num-workers", "1"]),
    Bench("batch_padding", ["--epochs", "3"]),
    Bench("model_attention", ["--repeats", "3"]),
    Bench("checkpoint_stall", ["--dim", "256", "--layers", "4", "--steps", "3", "--repeats", "2"]),
    Bench("resume_overhead", ["--repeats", "2", "--steps", "10"]),
    Bench("check_data_speed", ["--lines", "50000"]),
    Bench("shards_200h", ["--scale", "0.02"]),  # 3,000 clips, 0.5 GB a layout; about 40 s on 2 busy cores
    Bench("log_latency", ["--seconds", "6"], needs="chromium"),
    Bench("synthesis_speed", ["--lengths", "32", "128", "256", "--repeats", "3"]),  # 40-80 s on 2 busy cores
    Bench("synthesis_speed_v2", ["--lengths", "32", "128", "256", "--repeats", "3"]),  # about 1 minute on 2 busy cores
    Bench("synthesis_speed_v25", ["--codes", "64", "--steps", "10", "--repeats", "3"]),  # about 30 s on 2 busy cores
    Bench("checkpoint_digest", ["--mb", "128", "--repeats", "2"]),
    Bench("tokens_per_char_v25", ["--merges", "1000", "2000"]),
    Bench("transcription_speed", ["--clips", "96", "--repeats", "2"]),  # about 40 s on 2 busy cores
    Bench("eval_cost", ["--repeats", "1"]),  # about 1 minute on 2 busy cores
    Bench("prepare_v2_speed", ["--utterances", "32", "--width", "128", "--batch-seconds", "20", "--repeats", "2"]),
    Bench("prepare_v25_speed", ["--utterances", "32", "--width", "128", "--batch-seconds", "20", "--repeats", "2"]),
    Bench("stop_time", ["--repeats", "1"]),  # builds its own demo workspace; about 1 minute on 2 cores
    Bench("s2mel_train", ["--sizes", "demo", "--demo-steps", "4"]),  # real size needs several GB: run it alone
    Bench("s2mel_conditioning"),
    Bench("gpu_mfu", [], needs="cuda"),
    Bench("ingest_slicing", ["--minutes", "1", "--repeats", "3"], needs="espeak-ng"),  # about 3 min on 2 busy cores
]


def missing_need(need: str) -> str | None:
    if need == "chromium" and not Path("/usr/bin/chromium").exists():
        return "not run: needs Debian's chromium"
    if need == "espeak-ng" and shutil.which("espeak-ng") is None:
        return "not run: needs espeak-ng"
    if need == "cuda":
        import torch

        if not torch.cuda.is_available():
            return "not run: needs a CUDA GPU (run `python bench/gpu_mfu.py` on one)"
    return None


def run_one(bench: Bench, results: Path, timeout: float) -> tuple[list[dict], str, float]:
    script = REPO / "bench" / f"{bench.name}.py"
    if not script.exists():
        return [], f"not run: {script.name} is missing", 0.0
    reason = missing_need(bench.needs)
    if reason:
        return [], reason, 0.0
    results.write_text("", encoding="utf-8")
    started = time.monotonic()
    try:
        proc = subprocess.run([sys.executable, str(script), *bench.args], cwd=REPO, capture_output=True, text=True,
                              timeout=timeout, env={**os.environ, "BENCH_RESULTS": str(results)})
    except subprocess.TimeoutExpired:
        return [], f"failed: ran past {timeout:.0f} s", time.monotonic() - started
    seconds = time.monotonic() - started
    rows = [json.loads(line) for line in results.read_text(encoding="utf-8").splitlines() if line.strip()]
    if proc.returncode != 0:
        tail = (proc.stderr.strip() or proc.stdout.strip()).splitlines()[-1:] or ["no output"]
        return rows, f"failed (exit {proc.returncode}): {tail[0][:160]}", seconds
    return rows, "" if rows else "failed: printed no headline", seconds


def machine() -> str:
    import torch

    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
    return (f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, {gpu}; "
            f"torch {torch.__version__}, Python {platform.python_version()}")


def table(outcomes: list[tuple[Bench, list[dict], str, float]]) -> str:
    lines = [f"Last run: {time.strftime('%Y-%m-%d')} on {machine()} (`python bench/run_all.py`).", "",
             "| benchmark | measures | result | goal | met |", "| --- | --- | --- | --- | --- |"]
    for bench, rows, problem, _seconds in outcomes:
        for row in rows:
            met = {True: "yes", False: "**no**", None: "-"}[row["met"]]
            note = f" ({row['note']})" if row.get("note") else ""
            lines.append(f"| {bench.name} | {row['measure']} | {row['value']:.3g} {row['unit']}{note} | "
                         f"{row['goal'] or '-'} | {met} |")
        if problem:
            lines.append(f"| {bench.name} | - | {problem} | - | - |")
    return "\n".join(lines)


def write_readme(text: str) -> None:
    readme = README.read_text(encoding="utf-8")
    if START not in readme or END not in readme:
        raise SystemExit(f"error: README.md has no {START} ... {END} markers")
    head, rest = readme.split(START, 1)
    _, tail = rest.split(END, 1)
    README.write_text(f"{head}{START}\n{text}\n{END}{tail}", encoding="utf-8")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", help="run only these benchmarks (the table then holds only them)")
    parser.add_argument("--no-readme", action="store_true", help="print the table, leave README.md alone")
    parser.add_argument("--timeout", type=float, default=300, help="seconds each benchmark may take")
    args = parser.parse_args()
    chosen = [b for b in BENCHES if not args.only or b.name in args.only]
    unknown = set(args.only or []) - {b.name for b in BENCHES}
    if unknown:
        parser.error(f"unknown benchmark(s): {', '.join(sorted(unknown))}")
    outcomes = []
    with tempfile.TemporaryDirectory(prefix="bench-all-") as tmp:
        results = Path(tmp) / "results.jsonl"
        for bench in chosen:
            print(f"== {bench.name} {' '.join(bench.args)}", flush=True)
            rows, problem, seconds = run_one(bench, results, args.timeout)
            for row in rows:
                print(f"   {row['measure']}: {row['value']:.4g} {row['unit']} (goal {row['goal'] or '-'})")
            print(f"   {problem or 'ok'} ({seconds:.0f} s)", flush=True)
            outcomes.append((bench, rows, problem, seconds))
    text = table(outcomes)
    print("\n" + text)
    if not args.no_readme:
        write_readme(text)
        print(f"\nwrote the table into {README}")
    total = sum(o[3] for o in outcomes)
    print(f"total {total:.0f} s")
    return 1 if any(problem.startswith("failed") for _, _, problem, _ in outcomes) else 0


if __name__ == "__main__":
    raise SystemExit(main())
