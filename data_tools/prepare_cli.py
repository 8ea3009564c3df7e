"""The command line every generation's batched preparation shares (``python -m data_tools.prepare_v2`` and
``python -m data_tools.prepare_v25``): argument checks, progress, skipped items, exit codes and resumption."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from data_tools.batch_prep import Skipped
from data_tools.cli import progress_bar, run_refusing
from data_tools.job_summary import summary_line
from data_tools.test_hooks import announce_active_hooks

# The options every preparation CLI has, passed to its prepare function by name.
SHARED_OPTIONS = ("codec", "gpt", "w2v_bert", "w2v_stats", "tokenizer", "language", "speaker", "pairs_per_target",
                  "seed", "device", "batch_seconds", "max_batch_items", "loaders", "min_duration", "max_duration")
Prepare = Callable[[Any, Callable[[Skipped], None]], Any]  # (progress, on_skip) -> a report with .summary()


def shared_options(args: argparse.Namespace) -> dict[str, Any]:
    return {name: getattr(args, name) for name in SHARED_OPTIONS}


def prepare_main(args: argparse.Namespace, prepare: Prepare, refused: tuple[type[BaseException], ...]) -> int:
    """Run ``prepare`` for parsed ``args``: 0 done, 1 nothing prepared or no pair drawn, 2 refused (one line), 130
    interrupted. The report ends with the job's summary line (``data_tools.job_summary``: what the badge shows)."""
    announce_active_hooks()

    def run() -> int:
        if args.batch_seconds <= 0 or args.max_batch_items < 1 or args.loaders < 1:
            raise refused[0]("--batch-seconds must be > 0, --max-batch-items and --loaders >= 1")
        with progress_bar(args.quiet, "preparing", unit="item") as progress:
            def on_skip(entry: Skipped) -> None:
                print(f"skipped {entry.where}: {entry.reason}", file=sys.stderr, flush=True)

            report = prepare(progress, on_skip)
        print(report.summary())
        print(summary_line(report.utterances, report.skipped_by_reason), flush=True)
        if report.utterances == 0:
            print("error: no item could be prepared (see the reasons above)", file=sys.stderr)
            return 1
        if report.pairs == 0:
            print(f"error: no pair could be drawn: every speaker has a single utterance; {report.utterances} "
                  "prepared utterance(s) are kept, add a second clip per speaker and rerun to resume", file=sys.stderr)
            return 1
        return 0

    try:
        return run_refusing(run, refused, writing=args.out_dir)
    except KeyboardInterrupt:
        print("interrupted: finished batches are kept; rerun the same command to resume", file=sys.stderr)
        return 130
