"""The command line every generation's batched preparation shares (``python -m data_tools.prepare_v2`` and
``python -m data_tools.prepare_v25``): argument checks, progress, skipped items, exit codes and resumption."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from data_tools.batch_prep import Skipped
from data_tools.cli import OneLineErrorParser, progress_bar, run_refusing
from data_tools.job_summary import summary_line
from data_tools.paired_prep import DEFAULT_PAIRS_PER_TARGET, DEFAULT_SEED, DEFAULT_W2V_BERT, PrepareError
from data_tools.ranks import ranks_from_env
from data_tools.shard_index import SHARDS_DIR, ShardError, index_path
from data_tools.shards import pack, parse_size
from data_tools.test_hooks import announce_active_hooks

# The options every preparation CLI has, passed to its prepare function by name.
SHARED_OPTIONS = ("codec", "gpt", "w2v_bert", "w2v_stats", "tokenizer", "language", "speaker", "pairs_per_target",
                  "seed", "device", "batch_seconds", "max_batch_items", "loaders", "min_duration", "max_duration")
Prepare = Callable[[Any, Callable[[Skipped], None]], Any]  # (progress, on_skip) -> a report with .summary()


def shared_options(args: argparse.Namespace) -> dict[str, Any]:
    return {name: getattr(args, name) for name in SHARED_OPTIONS}


def paired_parser(module: str, description: str, *, input_help: str, config_help: str) -> argparse.ArgumentParser:
    """``python -m <module>``'s parser with ``--input`` and ``--config``; the generation adds its files and
    text flags, then ``add_run_arguments``."""
    parser = OneLineErrorParser(prog=f"python -m {module}", description=description)
    parser.add_argument("--input", required=True, type=Path, help=input_help)
    parser.add_argument("--config", required=True, type=Path, help=config_help)
    return parser


def run_cli(parser: argparse.ArgumentParser, prepare: Callable[..., Any], argv: list[str] | None,
            own: tuple[str, ...] = ()) -> int:
    """Parse ``argv`` and run ``prepare(input, out_dir, config, **shared options, **own options, progress=,
    on_skip=)`` as ``prepare_main`` does (``own``: the generation's flags, by destination name)."""
    args = parser.parse_args(argv)

    def run(progress: Any, on_skip: Callable[[Skipped], None]) -> Any:
        return prepare(args.input, args.out_dir, args.config, **shared_options(args),
                       **{name: getattr(args, name) for name in own}, progress=progress, on_skip=on_skip)

    return prepare_main(args, run, (PrepareError,))


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags every generation's preparation has alike (the files and the text are the generation's)."""
    parser.add_argument("--out-dir", required=True, type=Path, help="output folder (resumable)")
    parser.add_argument("--gpt", type=Path, help="base gpt.pth (default: the config's gpt_checkpoint beside it)")
    parser.add_argument("--w2v-bert", default=DEFAULT_W2V_BERT,
                        help=f"w2v-BERT 2.0: a local folder or a model id ({DEFAULT_W2V_BERT})")
    parser.add_argument("--w2v-stats", type=Path,
                        help="wav2vec2bert_stats.pt (default: the config's w2v_stat beside it)")
    parser.add_argument("--speaker", help="speaker name for entries that name none (default: the input's name)")
    parser.add_argument("--pairs-per-target", type=int, default=DEFAULT_PAIRS_PER_TARGET,
                        help=f"prompts per target utterance ({DEFAULT_PAIRS_PER_TARGET})")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help=f"seed of the pairing ({DEFAULT_SEED})")
    parser.add_argument("--device", default="auto", help="auto (a GPU when there is one), cpu, cuda, cuda:1")
    parser.add_argument("--batch-seconds", type=float, default=240.0,
                        help="padded audio seconds per batch (items x longest; 240)")
    parser.add_argument("--max-batch-items", type=int, default=64, help="items per batch at most (64)")
    parser.add_argument("--loaders", type=int, default=2, help="threads that decode and featurise audio (2)")
    parser.add_argument("--min-duration", type=float, default=0.5, help="skip shorter audio (seconds, 0.5)")
    parser.add_argument("--max-duration", type=float, default=None,
                        help="skip longer audio (seconds; default and upper bound: what gpt.max_mel_tokens fits)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument("--shards", type=parse_size, metavar="SIZE",
                        help="then pack the features into WebDataset shards of SIZE (e.g. 1GB): for large data sets")


def prepare_main(args: argparse.Namespace, prepare: Prepare, refused: tuple[type[BaseException], ...]) -> int:
    """Run ``prepare`` for parsed ``args``: 0 done, 1 nothing prepared or no pair drawn, 2 refused (one line), 130
    interrupted. The report ends with the job's summary line (``data_tools.job_summary``: what the badge shows).
    Under torchrun every process exits alike and only the first one shows progress and the report."""
    announce_active_hooks()
    main_process = ranks_from_env().is_main

    def run() -> int:
        if args.batch_seconds <= 0 or args.max_batch_items < 1 or args.loaders < 1:
            raise refused[0]("--batch-seconds must be > 0, --max-batch-items and --loaders >= 1")
        if getattr(args, "shards", None) and index_path(args.out_dir).exists():  # its files are in the shards
            raise refused[0](f"--shards: {args.out_dir} is packed already ({index_path(args.out_dir)}); prepare "
                             "into a new folder")
        with progress_bar(args.quiet or not main_process, "preparing", unit="item") as progress:
            def on_skip(entry: Skipped) -> None:
                print(f"skipped {entry.where}: {entry.reason}", file=sys.stderr, flush=True)

            report = prepare(progress, on_skip)
        error = ("no item could be prepared (see the reasons above)" if report.utterances == 0 else
                 f"no pair could be drawn: every speaker has a single utterance; {report.utterances} prepared "
                 "utterance(s) are kept, add a second clip per speaker and rerun to resume" if report.pairs == 0
                 else "")
        if main_process:
            print(report.summary())
            print(summary_line(report.utterances, report.skipped_by_reason), flush=True)
            if error:
                print(f"error: {error}", file=sys.stderr)
            elif getattr(args, "shards", None):  # the first process packs, once every process has written
                index = pack(args.out_dir, shard_bytes=args.shards)
                print(f"packed {len(index.members):,} files into {len(index.shards)} shard(s) under "
                      f"{index.folder / SHARDS_DIR}", flush=True)
        return 1 if error else 0

    try:
        return run_refusing(run, (*refused, ShardError), writing=args.out_dir)
    except KeyboardInterrupt:
        print("interrupted: finished batches are kept; rerun the same command to resume", file=sys.stderr)
        return 130
